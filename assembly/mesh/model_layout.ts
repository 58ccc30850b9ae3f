// The mesh model's vocabulary: its enums (TlsMode, Scope, LbMode, RefTarget), the shared
// reference (Ref), the bit and word layout of its packed columns (workload flags, a workload's
// and a membership's words side by side, VIP words) and the bounds helpers every accessor uses.
import { Address } from "./ip";
import { OBJECT_OVERHEAD } from "./table";

export enum TlsMode {
  Disabled = 0,
  Istio = 1,
}

/** A load-balancing scope of `loadBalancing.routingPreference`. */
export enum Scope {
  Network = 1,
  Region = 2,
  Zone = 3,
  Subzone = 4,
}

export enum LbMode {
  Failover = 0,
  Standard = 1,
}

/** What a waypoint / network-gateway reference points at. */
export enum RefTarget {
  /** Not a reference (no waypoint / gateway, or an unknown reference id). */
  None = 0,
  /** A valid reference that names nothing in this configuration (a runtime outcome). */
  Unresolved = 1,
  Workload = 2,
  Service = 3,
}

/** A waypoint or network-gateway reference; identical references are shared. */
export class Ref {
  /** The referenced hostname, or "" for an address reference. */
  hostname: string = "";
  /** The referenced address (family NONE for a hostname reference); `port` is unused. */
  address: Address = new Address();
  /** waypoint `port` / gateway `hboneMtlsPort`. */
  port: i32 = 15008;
  /** Network an address reference is looked up on first: the referrer's (0 for services). */
  network: i32 = 0;
  target: RefTarget = RefTarget.Unresolved;
  /** Workload or service index when resolved, else -1. */
  index: i32 = -1;
  /** Mesh.generation this resolution was made in; resolved again lazily after a change. */
  generation: u32 = 0;
}

// A workload's identity id and flags share one u32 (`wIdentityFlags`), so the fields a
// connection decision reads first come from one cache line: bits 0..23 identity id (ids are
// at most the number of workloads, < 2^24), bits 24..31 flags.
export const IDENTITY_MASK: u32 = 0xffffff;
export const W_ISTIO: u32 = 1 << 24;
export const W_HEALTHY: u32 = 2 << 24;
/** The id holds a workload (ids are reused; a removed one reads as absent). */
export const W_LIVE: u32 = 4 << 24;
/** The first IPv4 address is in the W_IP4 word. */
export const W_V4: u32 = 8 << 24;
/** More addresses are in the wExtra chunk ([n4, v4 x n4, v6 as 4 words each]). */
export const W_EXTRA: u32 = 16 << 24;
// Service flag bits.
export const S_HEADLESS: u8 = 1;
export const S_LB_STANDARD: u8 = 2;
export const S_LIVE: u8 = 4;
// A workload's words (Mesh.wCols).
export const W_INFO: i32 = 0;
export const W_PLACE: i32 = 1;
export const W_IP4: i32 = 2;
export const W_CHAIN: i32 = 3;
// A membership's words (Mesh.mem).
export const MEM_SERVICE: i32 = 0;
export const MEM_POS: i32 = 1;
export const MEM_NEXT: i32 = 2;
export const MEM_WORKLOAD: i32 = 3;
export const MEM_STRIDE: i32 = 4;
/** MEM_POS bit: the membership has port overrides (a memOverrides chunk). */
export const M_OVERRIDES: u32 = 0x80000000;
export const M_POS_MASK: u32 = 0x7fffffff;
/** Words per VIP in a service's sVips chunk: [network << 8 | family, v4 or hi/lo as 4 words]. */
export const VIP_WORDS: i32 = 5;

/** Default routing preference: network, region, zone, subzone (one scope per byte). */
export const DEFAULT_LB_PREFS: u32 = 0x04030201;

const EMPTY_BYTES = new ArrayBuffer(0);

/**
 * A port slot's cluster name before it is first asked for: "outbound|<port>||<hostname>" is
 * built on first use, not stored per port at load (a service may carry 65,535 ports: ~80 bytes
 * each, most never dialled). An explicit `cluster` is one buffer shared by the service's slots.
 */
export const DEFAULT_CLUSTER: ArrayBuffer = new ArrayBuffer(0);

/**
 * Services with at most this many ports find a port by scanning their own slots (one cache
 * line, no index entry to add or remove); longer lists go through `portIndex`.
 */
export const PORTS_SCANNED: i32 = 8;

// @ts-ignore: decorator
@inline export function inRange(i: i32, n: i32): bool {
  return <u32>i < <u32>n;
}

// @ts-ignore: decorator
@inline export function portKey(index: i32, port: i32): u64 {
  return (<u64>index << 16) | <u64>port;
}

// @ts-ignore: decorator
@inline export function validPort(port: i32): bool {
  return port >= 1 && port <= 65535;
}

export function arrayBytes<T>(a: StaticArray<T>): i64 {
  return <i64>a.length * sizeof<T>() + OBJECT_OVERHEAD;
}

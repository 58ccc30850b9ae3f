// The mesh model: workloads, services and the references between them. Built from the JSON
// configuration (parse.ts) or a binary full message (wire_apply.ts), and changed in place by
// binary delta messages (edit.ts: workload / service upsert and remove).
//
// Layout is struct-of-arrays: one flat column per field, indexed by workload or service id
// (the JSON build numbers them in configuration order; the feed assigns them), so a pod costs a
// few bytes per column and no object of its own (see README.md for the per-pod budget). The
// columns have a capacity and grow by doubling; variable-length lists (a workload's extra
// addresses, a service's ports, VIPs, SANs and members, a membership's port overrides) live in
// ChunkPools (pool.ts). A workload's first IPv4 address is inline. Repeated texts (identities,
// networks, localities) are interned ids. Lookups are O(1) hash probes over flat arrays and
// allocate nothing; every accessor answers a neutral value (-1, "", false, an empty buffer)
// for an id out of range or not live instead of trapping.
//
// The columns are public so parse.ts and edit.ts can fill them; filters only read.
import { Address, FAMILY_V4, FAMILY_V6 } from "./ip";
import { StringTable } from "./intern";
import { ChunkPool } from "./pool";
import { AddrTable4, AddrTable6, OBJECT_OVERHEAD, SparseColumn, U64Table } from "./table";

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
export const MEM_STRIDE: i32 = 3;
/** MEM_POS bit: the membership has port overrides (a memOverrides chunk). */
export const M_OVERRIDES: u32 = 0x80000000;
export const M_POS_MASK: u32 = 0x7fffffff;
/** Words per VIP in a service's sVips chunk: [network << 8 | family, v4 or hi/lo as 4 words]. */
export const VIP_WORDS: i32 = 5;

/** Default routing preference: network, region, zone, subzone (one scope per byte). */
export const DEFAULT_LB_PREFS: u32 = 0x04030201;

const EMPTY_BYTES = new ArrayBuffer(0);

// @ts-ignore: decorator
@inline function inRange(i: i32, n: i32): bool {
  return <u32>i < <u32>n;
}

// @ts-ignore: decorator
@inline export function portKey(index: i32, port: i32): u64 {
  return (<u64>index << 16) | <u64>port;
}

// @ts-ignore: decorator
@inline function validPort(port: i32): bool {
  return port >= 1 && port <= 65535;
}

function arrayBytes<T>(a: StaticArray<T>): i64 {
  return <i64>a.length * sizeof<T>() + OBJECT_OVERHEAD;
}

export class Mesh {
  // ---- Interned texts ----
  networks: StringTable = new StringTable();
  identities: StringTable = new StringTable();
  /** Whole locality strings, "region/zone/subzone". */
  localities: StringTable = new StringTable();
  /**
   * Locality prefixes "r", "r/z", "r/z/s": equal zone ids mean same region AND zone, so scope
   * comparisons are one integer compare.
   */
  localityPrefixes: StringTable = new StringTable();
  /** Per locality id: region, zone and subzone prefix ids. */
  localityParts: Array<i32> = [0, 0, 0];

  /** Bumped by every applied change: references resolve again lazily (Ref.generation). */
  generation: u32 = 0;
  /**
   * The service ids the last applied delta named (upserted or removed), for what a filter
   * derives per service (texts): refreshed for these alone, so a change costs O(its records),
   * not O(services). Emptied at the start of every delta; a full load makes a new Mesh (the
   * filter derives everything for it once).
   */
  changedServices: Array<i32> = new Array<i32>();
  /** The feed's epoch and version this model is at (0, 0: built from JSON, or empty). */
  epoch: u64 = 0;
  version: u64 = 0;

  // ---- Workloads (ids < workloadTotal; capacity = workloadCapacity()) ----
  workloadTotal: i32 = 0;
  liveWorkloads: i32 = 0;
  /**
   * Per workload id, four words side by side (W_INFO: identity id in bits 0..23 and the W_*
   * flags, 0 = no workload at this id; W_PLACE: network id | locality id << 16; W_IP4: the
   * first IPv4 address when W_V4; W_CHAIN: first membership id + 1 of its chain, 0 = none):
   * a lookup or an update of one workload touches one cache line rather than five arrays.
   */
  wCols: StaticArray<u32> = new StaticArray<u32>(0);
  /**
   * Bit w (word w >> 5): w may be an endpoint of a headless service. Set whenever w has a
   * membership in a service that is headless (edit.ts: addMembership, markHeadlessMembers);
   * cleared only when all of w's memberships go, so it can be stale-true (a walk for nothing),
   * never stale-false. headlessMatch reads it first: the ~98% of pods in no headless service
   * then skip the membership walk, whose membership loads miss the cache at 1M pods
   * (+0.5 us of guest code per passthrough_mtls connection measured against the configure-time
   * index this replaced, bench/scale/README.md). 1 bit per pod.
   */
  wHeadless: StaticArray<u32> = new StaticArray<u32>(0);
  /**
   * Reference id + 1; 0 = none. Dense only when many workloads have one (a service waypoint is
   * the common case; a workload's own waypoint or gateway is rare), so a mesh without them pays
   * nothing per pod, and one with a few gateway-fronted workloads pays only for those.
   */
  wWaypoint: SparseColumn = new SparseColumn();
  wGateway: SparseColumn = new SparseColumn();
  /** Addresses beyond the inline IPv4 one: [n4, v4 x n4, (hi hi, hi lo, lo hi, lo lo) x n6]. */
  wExtra: ChunkPool = new ChunkPool();
  v4Table: AddrTable4 = new AddrTable4(0);
  v6Table: AddrTable6 = new AddrTable6(0);

  // ---- Memberships (a workload in a service: one "endpoint"; ids < memTotal) ----
  memTotal: i32 = 0;
  memLive: i32 = 0;
  /** Free membership ids, chained through memNext (head + 1; 0 = none). */
  memFree: i32 = 0;
  /**
   * Per membership, three words side by side (MEM_SERVICE: service id + 1, 0 = a free id;
   * MEM_POS: position in the service's member list | M_OVERRIDES when it has port overrides;
   * MEM_NEXT: next membership of the same workload + 1, 0 ends the chain), so an update that
   * touches a membership touches one cache line rather than three arrays.
   */
  mem: StaticArray<u32> = new StaticArray<u32>(0);
  /** Per-membership target-port overrides: words (service port << 16 | target port). */
  memOverrides: ChunkPool = new ChunkPool();

  /** Workload ids the columns have room for. */
  // @ts-ignore: decorator
  @inline workloadCapacity(): i32 {
    return this.wCols.length >> 2;
  }

  // Workload w's words (w within capacity: callers check).
  // @ts-ignore: decorator
  @inline wInfo(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_INFO]);
  }

  // @ts-ignore: decorator
  @inline setWInfo(w: i32, v: u32): void {
    unchecked((this.wCols[(w << 2) + W_INFO] = v));
  }

  // @ts-ignore: decorator
  @inline wNet(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_PLACE]) & 0xffff;
  }

  // @ts-ignore: decorator
  @inline setWNet(w: i32, v: u32): void {
    const at = (w << 2) + W_PLACE;
    unchecked((this.wCols[at] = (unchecked(this.wCols[at]) & 0xffff0000) | (v & 0xffff)));
  }

  // @ts-ignore: decorator
  @inline wLoc(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_PLACE]) >>> 16;
  }

  // @ts-ignore: decorator
  @inline setWLoc(w: i32, v: u32): void {
    const at = (w << 2) + W_PLACE;
    unchecked((this.wCols[at] = (unchecked(this.wCols[at]) & 0xffff) | (v << 16)));
  }

  /** Network and locality in one store. */
  // @ts-ignore: decorator
  @inline setWPlace(w: i32, network: u32, locality: u32): void {
    unchecked((this.wCols[(w << 2) + W_PLACE] = (network & 0xffff) | (locality << 16)));
  }

  // @ts-ignore: decorator
  @inline wIp4(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_IP4]);
  }

  // @ts-ignore: decorator
  @inline setWIp4(w: i32, v: u32): void {
    unchecked((this.wCols[(w << 2) + W_IP4] = v));
  }

  // @ts-ignore: decorator
  @inline wChain(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_CHAIN]);
  }

  // @ts-ignore: decorator
  @inline setWChain(w: i32, v: u32): void {
    unchecked((this.wCols[(w << 2) + W_CHAIN] = v));
  }

  /** Membership g's word `field` (g within capacity: callers check). */
  // @ts-ignore: decorator
  @inline mem3(g: i32, field: i32): u32 {
    return unchecked(this.mem[g * MEM_STRIDE + field]);
  }

  // @ts-ignore: decorator
  @inline setMem(g: i32, field: i32, value: u32): void {
    unchecked((this.mem[g * MEM_STRIDE + field] = value));
  }

  /** Membership ids the columns have room for. */
  memCapacity(): i32 {
    return this.mem.length / MEM_STRIDE;
  }

  // ---- Services (ids < serviceTotal; capacity = sFlags.length) ----
  serviceTotal: i32 = 0;
  liveServices: i32 = 0;
  sHostname: Array<string> = new Array<string>();
  hostnames: Map<string, i32> = new Map<string, i32>();
  sFlags: StaticArray<u8> = new StaticArray<u8>(0);
  sWaypoint: StaticArray<u32> = new StaticArray<u32>(0);
  /** Routing preference, one Scope per byte from the lowest, 0 ends the list. */
  sLbPrefs: StaticArray<u32> = new StaticArray<u32>(0);
  /** Per service: its port slot ids, in configuration order. */
  sPorts: ChunkPool = new ChunkPool();
  slotPort: StaticArray<u16> = new StaticArray<u16>(0);
  slotTarget: StaticArray<u16> = new StaticArray<u16>(0);
  slotCluster: Array<ArrayBuffer> = new Array<ArrayBuffer>();
  slotTotal: i32 = 0;
  slotFree: Array<i32> = new Array<i32>();
  /** (service, service port) → port slot. */
  portIndex: U64Table = new U64Table();
  /** Per service: [count, workload id x count] (swap-remove order after a change). */
  sMembers: ChunkPool = new ChunkPool();
  /** Per service: SAN slot ids into `sans`. */
  sSans: ChunkPool = new ChunkPool();
  sans: Array<string> = new Array<string>();
  sanFree: Array<i32> = new Array<i32>();
  /** Per service: VIP_WORDS words per VIP. */
  sVips: ChunkPool = new ChunkPool();
  /** VIP → service id (owner), per network. */
  vipTable4: AddrTable4 = new AddrTable4(0);
  vipTable6: AddrTable6 = new AddrTable6(0);

  // ---- References ----
  refs: Array<Ref> = new Array<Ref>();

  // ================================================================ networks

  networkCount(): i32 {
    return this.networks.size;
  }

  /** The id of a network name ("" is 0), or -1 when no workload or VIP uses it. */
  networkId(name: string): i32 {
    return this.networks.find(name);
  }

  networkName(id: i32): string {
    return this.networks.text(id);
  }

  // ================================================================ workloads

  /** Workload ids are below this (some ids may be free after changes: workloadLive). */
  workloadCount(): i32 {
    return this.workloadTotal;
  }

  /** Whether id w holds a workload. */
  workloadLive(w: i32): bool {
    return this.flag(w, W_LIVE);
  }

  /** The workload holding `addr`'s IP on `network`, or -1. No allocation. */
  workloadByAddress(network: i32, addr: Address): i32 {
    if (addr.family == FAMILY_V4) return this.workloadByV4(network, addr.v4);
    if (addr.family == FAMILY_V6) return this.workloadByV6(network, addr.hi, addr.lo);
    return -1;
  }

  workloadByV4(network: i32, ip: u32): i32 {
    return this.v4Table.find(ip, network);
  }

  workloadByV6(network: i32, hi: u64, lo: u64): i32 {
    return this.v6Table.find(hi, lo, network);
  }

  workloadNetwork(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>this.wNet(w) : -1;
  }

  workloadTlsMode(w: i32): TlsMode {
    return this.flag(w, W_ISTIO) ? TlsMode.Istio : TlsMode.Disabled;
  }

  /** tlsMode is "istio". */
  workloadIstio(w: i32): bool {
    return this.flag(w, W_ISTIO);
  }

  workloadHealthy(w: i32): bool {
    return this.flag(w, W_HEALTHY);
  }

  /** Interned identity id (0 = none). */
  workloadIdentityId(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>(this.wInfo(w) & IDENTITY_MASK) : 0;
  }

  /** SPIFFE identity, "" when none. */
  workloadIdentity(w: i32): string {
    return this.identities.text(this.workloadIdentityId(w));
  }

  /** The identity as UTF-8 (shared, do not modify); empty when none. */
  workloadIdentityUtf8(w: i32): ArrayBuffer {
    return this.identities.utf8(this.workloadIdentityId(w));
  }

  /** Interned locality id (0 = ""). */
  workloadLocalityId(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>this.wLoc(w) : 0;
  }

  /** "region/zone/subzone" as configured. */
  workloadLocality(w: i32): string {
    return this.localities.text(this.workloadLocalityId(w));
  }

  /** Region id (0 = none); equal ids mean the same region. */
  workloadRegion(w: i32): i32 {
    return this.localityPart(w, 0);
  }

  /** Zone id (0 = none); equal ids mean the same region and zone. */
  workloadZone(w: i32): i32 {
    return this.localityPart(w, 1);
  }

  /** Subzone id (0 = none); equal ids mean the same region, zone and subzone. */
  workloadSubzone(w: i32): i32 {
    return this.localityPart(w, 2);
  }

  /** The text of a region/zone/subzone id: "r", "r/z", "r/z/s". */
  localityPrefix(id: i32): string {
    return this.localityPrefixes.text(id);
  }

  /** Waypoint reference id, or -1. */
  workloadWaypoint(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>this.wWaypoint.get(w) - 1 : -1;
  }

  /** Network-gateway reference id, or -1. */
  workloadGateway(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>this.wGateway.get(w) - 1 : -1;
  }

  /** IPv4 addresses first, then IPv6, each in configuration order. */
  workloadAddressCount(w: i32): i32 {
    if (!inRange(w, this.workloadTotal)) return 0;
    const info = this.wInfo(w);
    let n = (info & W_V4) != 0 ? 1 : 0;
    if ((info & W_EXTRA) != 0) {
      const at = this.wExtra.offset(w);
      if (at >= 0) {
        const n4 = <i32>this.wExtra.word(at);
        n += n4 + ((this.wExtra.capacityOf(w) - 1 - n4) >> 2);
      }
    }
    return n;
  }

  /** Writes address i of workload w into `out` (port -1); false when there is none. */
  workloadAddress(w: i32, i: i32, out: Address): bool {
    out.clear();
    if (!inRange(w, this.workloadTotal) || i < 0) return false;
    const info = this.wInfo(w);
    if ((info & W_V4) != 0) {
      if (i == 0) {
        out.setV4(this.wIp4(w));
        return true;
      }
      i--;
    }
    if ((info & W_EXTRA) == 0) return false;
    const pool = this.wExtra;
    const at = pool.offset(w);
    if (at < 0) return false;
    const n4 = <i32>pool.word(at);
    if (i < n4) {
      out.setV4(pool.word(at + 1 + i));
      return true;
    }
    const k = at + 1 + n4 + ((i - n4) << 2);
    if (k + 4 > at + pool.capacityOf(w)) return false;
    const hi = (<u64>pool.word(k) << 32) | <u64>pool.word(k + 1);
    const lo = (<u64>pool.word(k + 2) << 32) | <u64>pool.word(k + 3);
    out.setV6(hi, lo);
    return true;
  }

  // ================================================================ memberships

  /** The workload's first membership id (its chain, newest first), or -1. */
  firstMembership(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>this.wChain(w) - 1 : -1;
  }

  /** The next membership of the same workload, or -1. */
  nextMembership(g: i32): i32 {
    return inRange(g, this.memTotal) && this.mem3(g, MEM_SERVICE) != 0 ? <i32>this.mem3(g, MEM_NEXT) - 1 : -1;
  }

  /** The service of membership g, or -1. */
  membershipService(g: i32): i32 {
    return inRange(g, this.memTotal) ? <i32>this.mem3(g, MEM_SERVICE) - 1 : -1;
  }

  /** g's position among its service's endpoints (endpointWorkload(s, e)), or -1. */
  membershipIndex(g: i32): i32 {
    if (!inRange(g, this.memTotal) || this.mem3(g, MEM_SERVICE) == 0) return -1;
    return <i32>(this.mem3(g, MEM_POS) & M_POS_MASK);
  }

  /** The membership of workload w in service s, or -1 (walks w's chain: a pod has few). */
  membershipOf(w: i32, s: i32): i32 {
    if (!inRange(w, this.workloadTotal)) return -1;
    const want = <u32>s + 1;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      if (this.mem3(g, MEM_SERVICE) == want) return g;
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return -1;
  }

  // ================================================================ services

  /** Service ids are below this (some may be free after changes: serviceLive). */
  serviceCount(): i32 {
    return this.serviceTotal;
  }

  serviceLive(s: i32): bool {
    return inRange(s, this.serviceTotal) && (unchecked(this.sFlags[s]) & S_LIVE) != 0;
  }

  /** The service with VIP `addr` on `network`, or -1. No allocation. */
  serviceByVip(network: i32, addr: Address): i32 {
    if (addr.family == FAMILY_V4) return this.vipTable4.find(addr.v4, network);
    if (addr.family == FAMILY_V6) return this.vipTable6.find(addr.hi, addr.lo, network);
    return -1;
  }

  /** The service with this hostname, or -1. */
  serviceByHostname(hostname: string): i32 {
    return this.hostnames.has(hostname) ? this.hostnames.get(hostname) : -1;
  }

  serviceHostname(s: i32): string {
    return inRange(s, this.sHostname.length) ? unchecked(this.sHostname[s]) : "";
  }

  serviceHeadless(s: i32): bool {
    return inRange(s, this.serviceTotal) && (unchecked(this.sFlags[s]) & S_HEADLESS) != 0;
  }

  serviceWaypoint(s: i32): i32 {
    return inRange(s, this.serviceTotal) ? <i32>unchecked(this.sWaypoint[s]) - 1 : -1;
  }

  servicePortCount(s: i32): i32 {
    return inRange(s, this.serviceTotal) ? this.sPorts.capacityOf(s) : 0;
  }

  /** Service port number i of s (configuration order), or -1. */
  servicePortAt(s: i32, i: i32): i32 {
    const slot = this.slotAt(s, i);
    return inRange(slot, this.slotPort.length) ? <i32>unchecked(this.slotPort[slot]) : -1;
  }

  /** The service's default target port for `servicePort`, or -1 when not exposed. */
  serviceTargetPort(s: i32, servicePort: i32): i32 {
    const slot = this.portSlot(s, servicePort);
    return inRange(slot, this.slotTarget.length) ? <i32>unchecked(this.slotTarget[slot]) : -1;
  }

  exposesPort(s: i32, servicePort: i32): bool {
    return this.portSlot(s, servicePort) >= 0;
  }

  /**
   * UTF-8 Envoy cluster name for (s, servicePort): `cluster` when configured, else
   * "outbound|<port>||<hostname>". Precomputed and shared (do not modify); null when s does
   * not expose the port.
   */
  clusterName(s: i32, servicePort: i32): ArrayBuffer | null {
    const slot = this.portSlot(s, servicePort);
    return inRange(slot, this.slotCluster.length) ? unchecked(this.slotCluster[slot]) : null;
  }

  endpointCount(s: i32): i32 {
    if (!inRange(s, this.serviceTotal)) return 0;
    const at = this.sMembers.offset(s);
    return at < 0 ? 0 : <i32>this.sMembers.word(at);
  }

  /**
   * Membership ids ("global endpoint ids") are below this; free ids answer -1 below. The JSON
   * build numbers them service after service, in configuration order.
   */
  endpointTotal(): i32 {
    return this.memTotal;
  }

  /** Workload of membership (global endpoint) g, or -1. */
  globalEndpointWorkload(g: i32): i32 {
    const s = this.membershipService(g);
    if (s < 0) return -1;
    return this.endpointWorkload(s, <i32>(this.mem3(g, MEM_POS) & M_POS_MASK));
  }

  /** The service global endpoint g belongs to, or -1 (O(1)). */
  endpointService(g: i32): i32 {
    return this.membershipService(g);
  }

  /** g's position within its service `s` (= endpointService(g)), or -1. */
  globalEndpointIndex(s: i32, g: i32): i32 {
    if (s < 0 || this.membershipService(g) != s) return -1;
    return <i32>(this.mem3(g, MEM_POS) & M_POS_MASK);
  }

  /** Workload index of endpoint e (0-based within s), or -1. */
  endpointWorkload(s: i32, e: i32): i32 {
    if (!inRange(s, this.serviceTotal)) return -1;
    const pool = this.sMembers;
    const at = pool.offset(s);
    if (at < 0 || !inRange(e, <i32>pool.word(at))) return -1;
    return <i32>pool.word(at + 1 + e);
  }

  /**
   * The target port endpoint e of service s serves `servicePort` on: the endpoint's own
   * override first, then the service default; -1 when s does not expose `servicePort` or e is
   * not an endpoint of s.
   */
  targetPort(s: i32, e: i32, servicePort: i32): i32 {
    const slot = this.portSlot(s, servicePort);
    if (!inRange(slot, this.slotTarget.length)) return -1;
    const w = this.endpointWorkload(s, e);
    if (w < 0) return -1;
    const g = this.membershipOf(w, s);
    const t = this.overrideOf(g, servicePort);
    return t >= 0 ? t : <i32>unchecked(this.slotTarget[slot]);
  }

  sanCount(s: i32): i32 {
    return inRange(s, this.serviceTotal) ? this.sSans.capacityOf(s) : 0;
  }

  san(s: i32, i: i32): string {
    if (!inRange(i, this.sanCount(s))) return "";
    const at = <i32>this.sSans.word(this.sSans.offset(s) + i);
    return inRange(at, this.sans.length) ? unchecked(this.sans[at]) : "";
  }

  vipCount(s: i32): i32 {
    return inRange(s, this.serviceTotal) ? this.sVips.capacityOf(s) / VIP_WORDS : 0;
  }

  /** Writes VIP i of service s into `out`; false when there is none. */
  vipAddress(s: i32, i: i32, out: Address): bool {
    out.clear();
    if (!inRange(i, this.vipCount(s))) return false;
    const pool = this.sVips;
    const at = pool.offset(s) + i * VIP_WORDS;
    const family = <i32>(pool.word(at) & 0xff);
    if (family == FAMILY_V4) {
      out.setV4(pool.word(at + 1));
    } else {
      const hi = (<u64>pool.word(at + 1) << 32) | <u64>pool.word(at + 2);
      const lo = (<u64>pool.word(at + 3) << 32) | <u64>pool.word(at + 4);
      out.setV6(hi, lo);
    }
    return true;
  }

  /** Network id of VIP i of service s, or -1. */
  vipNetworkId(s: i32, i: i32): i32 {
    if (!inRange(i, this.vipCount(s))) return -1;
    return <i32>(this.sVips.word(this.sVips.offset(s) + i * VIP_WORDS) >> 8);
  }

  lbMode(s: i32): LbMode {
    return inRange(s, this.serviceTotal) && (unchecked(this.sFlags[s]) & S_LB_STANDARD) != 0
      ? LbMode.Standard
      : LbMode.Failover;
  }

  lbPreferenceCount(s: i32): i32 {
    if (!inRange(s, this.serviceTotal)) return 0;
    const prefs = unchecked(this.sLbPrefs[s]);
    let n = 0;
    while (n < 4 && ((prefs >> (<u32>n * 8)) & 0xff) != 0) n++;
    return n;
  }

  /** Scope i of the routing preference, or 0. */
  lbPreference(s: i32, i: i32): i32 {
    if (!inRange(s, this.serviceTotal) || !inRange(i, 4)) return 0;
    return <i32>((unchecked(this.sLbPrefs[s]) >> (<u32>i * 8)) & 0xff);
  }

  /** Whether workloads a and b share `scope` (equal values, "" included, as Istio compares). */
  sameScope(scope: i32, a: i32, b: i32): bool {
    if (!inRange(a, this.workloadTotal) || !inRange(b, this.workloadTotal)) return false;
    if (scope == Scope.Network) return this.wNet(a) == this.wNet(b);
    if (scope == Scope.Region) return this.workloadRegion(a) == this.workloadRegion(b);
    if (scope == Scope.Zone) return this.workloadZone(a) == this.workloadZone(b);
    if (scope == Scope.Subzone) return this.workloadSubzone(a) == this.workloadSubzone(b);
    return false;
  }

  /**
   * How many leading scopes of s's routing preference `source` and `candidate` share (0 ..
   * lbPreferenceCount(s)). Failover picks among the candidates with the highest rank.
   */
  localityRank(s: i32, source: i32, candidate: i32): i32 {
    const n = this.lbPreferenceCount(s);
    let rank = 0;
    while (rank < n && this.sameScope(this.lbPreference(s, rank), source, candidate)) rank++;
    return rank;
  }

  // ================================================================ headless services

  /**
   * The headless service that has workload w as an endpoint and serves on TARGET port `port`
   * for it (the effective target port: the endpoint's override, else the service default),
   * or -1. A direct pod connection dials the pod's target port. When several headless
   * services match, the lowest service id (configuration order) wins; within one, its first
   * matching port. Walks w's memberships and their ports: no index to keep up to date.
   */
  headlessServiceOf(w: i32, port: i32): i32 {
    const found = this.headlessMatch(w, port);
    return found < 0 ? -1 : <i32>(found >> 32);
  }

  /** The SERVICE port of that match (for clusterName), or -1. */
  headlessServicePort(w: i32, port: i32): i32 {
    const found = this.headlessMatch(w, port);
    if (found < 0) return -1;
    const slot = <i32>(found & 0xffffffff);
    return inRange(slot, this.slotPort.length) ? <i32>unchecked(this.slotPort[slot]) : -1;
  }

  /** Cluster name of that match (UTF-8, shared), or null. */
  headlessCluster(w: i32, port: i32): ArrayBuffer | null {
    const found = this.headlessMatch(w, port);
    if (found < 0) return null;
    return this.portSlotCluster(<i32>(found & 0xffffffff));
  }

  /**
   * The match as one value, (service id << 32) | port slot, or -1: for a caller that needs the
   * service and its cluster of one connection, so the membership walk runs once, not per field
   * (passthrough_mtls's decision; portSlotCluster turns the slot into the cluster name).
   */
  headlessMatchOf(w: i32, port: i32): i64 {
    return this.headlessMatch(w, port);
  }

  /** The cluster name (UTF-8, shared) of port slot `slot`, or null; slots come from headlessMatchOf. */
  portSlotCluster(slot: i32): ArrayBuffer | null {
    return inRange(slot, this.slotCluster.length) ? unchecked(this.slotCluster[slot]) : null;
  }

  /**
   * The service port of the lowest-id service (configuration order for JSON) listing w whose
   * port maps to TARGET port `target` for w (its override, else the default); -1 if none.
   * What tunnel_port's client needs for a connection dialled to a pod IP; walks w's
   * memberships, so it stays right under changes (an index built at configure would not).
   */
  servicePortForTarget(w: i32, target: i32): i32 {
    if (!inRange(w, this.workloadTotal) || !validPort(target)) return -1;
    let bestService = -1;
    let bestPort = -1;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      const s = <i32>this.mem3(g, MEM_SERVICE) - 1;
      if (s >= 0 && (bestService < 0 || s < bestService)) {
        const n = this.servicePortCount(s);
        for (let i = 0; i < n; i++) {
          const slot = this.slotAt(s, i);
          if (!inRange(slot, this.slotPort.length)) continue;
          const port = <i32>unchecked(this.slotPort[slot]);
          let t = this.overrideOf(g, port);
          if (t < 0) t = <i32>unchecked(this.slotTarget[slot]);
          if (t == target) {
            bestService = s;
            bestPort = port;
            break;
          }
        }
      }
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return bestPort;
  }

  /** Whether some service listing w maps `servicePort` to TARGET port `target` for it. */
  mapsPort(w: i32, servicePort: i32, target: i32): bool {
    if (!inRange(w, this.workloadTotal) || !validPort(target)) return false;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      const s = <i32>this.mem3(g, MEM_SERVICE) - 1;
      const slot = this.portSlot(s, servicePort);
      if (inRange(slot, this.slotTarget.length)) {
        let t = this.overrideOf(g, servicePort);
        if (t < 0) t = <i32>unchecked(this.slotTarget[slot]);
        if (t == target) return true;
      }
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return false;
  }

  /** Whether some service listing w maps one of its ports to a target port for it. */
  servesAnyPort(w: i32): bool {
    if (!inRange(w, this.workloadTotal)) return false;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      const s = <i32>this.mem3(g, MEM_SERVICE) - 1;
      for (let i = 0, n = this.servicePortCount(s); i < n; i++) {
        const slot = this.slotAt(s, i);
        if (!inRange(slot, this.slotPort.length)) continue;
        let t = this.overrideOf(g, <i32>unchecked(this.slotPort[slot]));
        if (t < 0) t = <i32>unchecked(this.slotTarget[slot]);
        if (validPort(t)) return true;
      }
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return false;
  }

  /**
   * Every (service, endpoint index) pair that has workload w, flattened [s0, e0, s1, e1, ...],
   * in service order. Allocates: for configure-time use, not per connection.
   */
  endpointsOfWorkload(w: i32): Array<i32> {
    const out = new Array<i32>();
    for (let s = 0; s < this.serviceTotal; s++) {
      const g = this.membershipOf(w, s);
      if (g < 0) continue;
      out.push(s);
      out.push(this.membershipIndex(g));
    }
    return out;
  }

  // ================================================================ references

  refCount(): i32 {
    return this.refs.length;
  }

  /** RefTarget of reference r (None for r = -1, i.e. "no waypoint"). */
  refTarget(r: i32): RefTarget {
    if (!inRange(r, this.refs.length)) return RefTarget.None;
    return this.resolved(unchecked(this.refs[r])).target;
  }

  /** Workload or service index r resolved to, or -1. */
  refIndex(r: i32): i32 {
    if (!inRange(r, this.refs.length)) return -1;
    return this.resolved(unchecked(this.refs[r])).index;
  }

  /** Waypoint port / gateway HBONE port, or -1. */
  refPort(r: i32): i32 {
    return inRange(r, this.refs.length) ? unchecked(this.refs[r]).port : -1;
  }

  /** The configured hostname ("" for an address reference). */
  refHostname(r: i32): string {
    return inRange(r, this.refs.length) ? unchecked(this.refs[r]).hostname : "";
  }

  /** Writes the configured address into `out` (port = refPort); false for a hostname ref. */
  refAddress(r: i32, out: Address): bool {
    out.clear();
    if (!inRange(r, this.refs.length)) return false;
    const ref = unchecked(this.refs[r]);
    if (ref.hostname.length > 0) return false;
    out.copyFrom(ref.address);
    out.port = ref.port;
    return true;
  }

  /**
   * Resolves `ref` as of now. A hostname names a service. An address is looked up on the
   * referrer's network first (the workload's own; the default network for a service), then
   * on every other network in id order; on each network a workload address wins over a
   * service VIP (as ztunnel resolves addresses). No match is Unresolved, not an error. Done
   * once per reference and model generation: the first lookup after a change pays for it.
   */
  resolveRef(ref: Ref): void {
    ref.generation = this.generation;
    ref.target = RefTarget.Unresolved;
    ref.index = -1;
    if (ref.hostname.length > 0) {
      const s = this.serviceByHostname(ref.hostname);
      if (s >= 0) {
        ref.target = RefTarget.Service;
        ref.index = s;
      }
      return;
    }
    const networks = this.networkCount();
    for (let k = -1; k < networks; k++) {
      if (k == ref.network) continue;
      const net = k < 0 ? ref.network : k;
      const w = this.workloadByAddress(net, ref.address);
      if (w >= 0) {
        ref.target = RefTarget.Workload;
        ref.index = w;
        return;
      }
      const s = this.serviceByVip(net, ref.address);
      if (s >= 0) {
        ref.target = RefTarget.Service;
        ref.index = s;
        return;
      }
    }
  }

  // ================================================================ accounting

  /**
   * Approximate bytes the model keeps: every column, table, pool, interned text and
   * per-service string. An estimate (object headers counted at 20 bytes), used to document
   * and regress the per-pod budget.
   */
  retainedBytes(): i64 {
    let t: i64 = 0;
    t += this.networks.byteSize() + this.identities.byteSize();
    t += this.localities.byteSize() + this.localityPrefixes.byteSize();
    t += <i64>this.localityParts.length * 4 + OBJECT_OVERHEAD;
    t += arrayBytes(this.wCols) + arrayBytes(this.wHeadless);
    t += this.wWaypoint.byteSize() + this.wGateway.byteSize() + this.wExtra.byteSize();
    t += this.v4Table.byteSize() + this.v6Table.byteSize();
    t += arrayBytes(this.mem);
    t += this.memOverrides.byteSize();
    for (let s = 0; s < this.sHostname.length; s++) {
      t += <i64>unchecked(this.sHostname[s]).length * 2 + OBJECT_OVERHEAD + 4 + 24;
    }
    t += arrayBytes(this.sFlags) + arrayBytes(this.sWaypoint) + arrayBytes(this.sLbPrefs);
    t += this.sPorts.byteSize() + arrayBytes(this.slotPort) + arrayBytes(this.slotTarget);
    t += this.portIndex.byteSize() + <i64>this.slotFree.length * 4;
    for (let i = 0; i < this.slotCluster.length; i++) {
      t += <i64>unchecked(this.slotCluster[i]).byteLength + OBJECT_OVERHEAD + 4;
    }
    t += this.sMembers.byteSize() + this.sSans.byteSize() + this.sVips.byteSize();
    for (let i = 0; i < this.sans.length; i++) {
      t += <i64>unchecked(this.sans[i]).length * 2 + OBJECT_OVERHEAD + 4;
    }
    t += this.vipTable4.byteSize() + this.vipTable6.byteSize();
    t += <i64>this.refs.length * (64 + OBJECT_OVERHEAD * 3);
    return t;
  }

  // ================================================================ internals

  private resolved(ref: Ref): Ref {
    if (ref.generation != this.generation) this.resolveRef(ref);
    return ref;
  }

  private flag(w: i32, bit: u32): bool {
    return inRange(w, this.workloadTotal) && (this.wInfo(w) & bit) != 0;
  }

  private localityPart(w: i32, part: i32): i32 {
    const at = this.workloadLocalityId(w) * 3 + part;
    return inRange(at, this.localityParts.length) ? unchecked(this.localityParts[at]) : 0;
  }

  /** Port slot i of service s, or -1. */
  private slotAt(s: i32, i: i32): i32 {
    if (!inRange(s, this.serviceTotal)) return -1;
    const pool = this.sPorts;
    const at = pool.offset(s);
    if (at < 0 || !inRange(i, pool.capacityOf(s))) return -1;
    return <i32>pool.word(at + i);
  }

  private portSlot(s: i32, port: i32): i32 {
    if (!inRange(s, this.serviceTotal) || !validPort(port)) return -1;
    return this.portIndex.get(portKey(s, port));
  }

  /** Membership g's override for `servicePort`, or -1. */
  overrideOf(g: i32, servicePort: i32): i32 {
    if (!inRange(g, this.memTotal) || (this.mem3(g, MEM_POS) & M_OVERRIDES) == 0) return -1;
    const pool = this.memOverrides;
    const at = pool.offset(g);
    if (at < 0) return -1;
    const n = pool.capacityOf(g);
    for (let i = 0; i < n; i++) {
      const entry = pool.word(at + i);
      if (<i32>(entry >> 16) == servicePort) return <i32>(entry & 0xffff);
    }
    return -1;
  }

  /** Whether w may be an endpoint of a headless service (wHeadless). */
  mayBeHeadlessMember(w: i32): bool {
    const word = <i32>(<u32>w >> 5);
    return w >= 0 && word < this.wHeadless.length && (unchecked(this.wHeadless[word]) & (<u32>1 << (<u32>w & 31))) != 0;
  }

  /** (service << 32 | port slot) of the headless match for (w, target port), or -1. */
  private headlessMatch(w: i32, port: i32): i64 {
    if (!inRange(w, this.workloadTotal) || !validPort(port) || !this.mayBeHeadlessMember(w)) return -1;
    let best: i64 = -1;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      const s = <i32>this.mem3(g, MEM_SERVICE) - 1;
      if (this.serviceHeadless(s) && (best < 0 || s < <i32>(best >> 32))) {
        const n = this.servicePortCount(s);
        for (let i = 0; i < n; i++) {
          const slot = this.slotAt(s, i);
          if (!inRange(slot, this.slotPort.length)) continue;
          let target = this.overrideOf(g, <i32>unchecked(this.slotPort[slot]));
          if (target < 0) target = <i32>unchecked(this.slotTarget[slot]);
          if (target == port) {
            best = (<i64>s << 32) | <i64><u32>slot;
            break;
          }
        }
      }
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return best;
  }
}

// The mesh feed's binary message, format 3 (and the previous format 2, still read): what its fields are and where they go (the
// header offsets, record types and flags, the records and tables as read). wire.ts reads it.
import { Address } from "./ip";

export const WIRE_MAGIC: u32 = 0x3148534d; // "MSH1"
/** The format this build writes its polls for; the previous one (2) is still read. */
export const WIRE_VERSION: u16 = 3;
export const WIRE_PREVIOUS_VERSION: u16 = 2;
export const HEADER_BYTES: i32 = 56;
// Header offsets.
export const H_MAGIC: i32 = 0;
export const H_FORMAT: i32 = 4;
export const H_KIND: i32 = 6;
export const H_EPOCH: i32 = 8;
export const H_BASE: i32 = 16;
export const H_VERSION: i32 = 24;
export const H_WORKLOAD_LIMIT: i32 = 32;
export const H_SERVICE_LIMIT: i32 = 36;
export const H_RECORDS: i32 = 40;
export const H_BODY: i32 = 44;
/** Format 3: the content digest of the model after this message; format 2: reserved, 0. */
export const H_RESERVED: i32 = 48;
export const H_DIGEST: i32 = 48;

export const KIND_FULL: i32 = 1;
export const KIND_DELTA: i32 = 2;
export const KIND_NO_CHANGE: i32 = 3;
/**
 * Format 3: "the buckets the trailer lists are exactly these records" (upserts only; the model's
 * other objects in those buckets go). The answer to a poll that sent the model's bucket digests.
 */
export const KIND_REPAIR: i32 = 4;
/** Format 3: the feed cannot send a delta from this model's version and asks for its bucket digests. */
export const KIND_ASK_BUCKETS: i32 = 5;

/**
 * Buckets of the model (format 3): ranges of RANGE consecutive ids, (id >> RANGE_SHIFT) mod
 * BUCKETS for workloads, BUCKETS + the same for services. A format-3 full, delta or repair message ends with a trailer after its body:
 * u32 count, then count × (u32 bucket, u64 digest), buckets strictly increasing: a full
 * message lists every non-empty bucket, a delta the buckets it touches, a repair the buckets it
 * states. A bucket's digest is the sum mod 2^64 of its records' hashes (the feed computes them;
 * the filter keeps what the feed said and sends it back when asked).
 */
export const BUCKETS: i32 = 4096;
export const RANGE_SHIFT: i32 = 2;
export const RANGE: i32 = 1 << RANGE_SHIFT;
export const BUCKET_COUNT: i32 = 2 * BUCKETS;
export const BUCKET_ENTRY_BYTES: i32 = 12;

export const REC_WORKLOAD_UPSERT: i32 = 1;
export const REC_WORKLOAD_REMOVE: i32 = 2;
export const REC_SERVICE_UPSERT: i32 = 3;
export const REC_SERVICE_REMOVE: i32 = 4;
/**
 * A workload upsert whose network, identity, locality and references are indexes into the
 * message's tables (full messages only): a million pods sharing a thousand identities carry
 * each text once, so a full message of 1M pods stays well inside Envoy's 32 MB response buffer.
 */
export const REC_WORKLOAD_COMPACT: i32 = 5;
/** The smallest record: type + id. */
export const MIN_RECORD_BYTES: i32 = 5;

// Workload upsert flags.
export const WF_ISTIO: u8 = 1;
export const WF_HEALTHY: u8 = 2;
export const WF_WAYPOINT: u8 = 4;
export const WF_GATEWAY: u8 = 8;
// Service upsert flags.
export const SF_HEADLESS: u8 = 1;
export const SF_LB_STANDARD: u8 = 2;
export const SF_WAYPOINT: u8 = 4;
export const SF_CLUSTER: u8 = 8;
// Reference kinds.
export const REF_ADDRESS: u8 = 1;
export const REF_HOSTNAME: u8 = 2;

export function recordName(type: i32): string {
  if (type == REC_WORKLOAD_UPSERT) return "workload upsert";
  if (type == REC_WORKLOAD_REMOVE) return "workload remove";
  if (type == REC_SERVICE_UPSERT) return "service upsert";
  if (type == REC_SERVICE_REMOVE) return "service remove";
  if (type == REC_WORKLOAD_COMPACT) return "workload upsert";
  return "type " + type.toString();
}

/** A waypoint / gateway reference as read (texts point into the message). */
export class WireRef {
  present: bool = false;
  kind: u8 = 0;
  address: Address = new Address();
  hostPtr: usize = 0;
  hostLen: i32 = 0;
  port: i32 = 0;
}

/** One workload upsert as read; lists are re-read from their offsets (already checked). */
export class WireWorkload {
  id: i32 = 0;
  flags: u8 = 0;
  netPtr: usize = 0;
  netLen: i32 = 0;
  identityPtr: usize = 0;
  identityLen: i32 = 0;
  localityPtr: usize = 0;
  localityLen: i32 = 0;
  /** Compact records: the table indexes of the texts and references (-1: inline / absent). */
  netText: i32 = -1;
  identityText: i32 = -1;
  localityText: i32 = -1;
  waypointIndex: i32 = -1;
  gatewayIndex: i32 = -1;
  waypoint: WireRef = new WireRef();
  gateway: WireRef = new WireRef();
  addressCount: i32 = 0;
  addressAt: i32 = 0;
  /** How many of the addresses are IPv4 (the rest IPv6), and the first IPv4 one. */
  v4Count: i32 = 0;
  firstV4: u32 = 0;
  memberCount: i32 = 0;
  memberAt: i32 = 0;
}

export class WireService {
  id: i32 = 0;
  hostPtr: usize = 0;
  hostLen: i32 = 0;
  flags: u8 = 0;
  clusterPtr: usize = 0;
  clusterLen: i32 = 0;
  lbPrefs: u32 = 0;
  portCount: i32 = 0;
  portAt: i32 = 0;
  vipCount: i32 = 0;
  vipAt: i32 = 0;
  waypoint: WireRef = new WireRef();
  sanCount: i32 = 0;
  sanAt: i32 = 0;
}

/** At most this many texts / references in a full message's tables (the feed writes inline records past them). */
export const MAX_TABLE_TEXTS: i32 = 1 << 20;
export const MAX_TABLE_REFS: i32 = 1 << 16;
// Per text: where it is, its length, and its ids in the model being built (-1: not met yet as
// that kind). Per reference: where it is, its id and the network it was resolved for.
export const T_AT: i32 = 0;
export const T_LEN: i32 = 1;
export const T_IDENTITY: i32 = 2;
export const T_LOCALITY: i32 = 3;
export const T_NETWORK: i32 = 4;
const TEXT_STRIDE: i32 = 5;
export const R_AT: i32 = 0;
export const R_ID: i32 = 1;
export const R_NETWORK: i32 = 2;
const REF_STRIDE: i32 = 3;

/**
 * A full message's tables as read (wire_tables.ts): where each text and reference is in the
 * message, and what the loader has learnt about each, so each distinct text is checked and
 * interned once per message rather than once per pod. One flat array per table (a text's
 * entries share a cache line); kept across messages, so their size is bounded by the limits.
 */
export class WireTables {
  count: i32 = 0;
  refCount: i32 = 0;
  private texts: StaticArray<i32> = new StaticArray<i32>(0);
  private refs: StaticArray<i32> = new StaticArray<i32>(0);

  clear(): void {
    this.count = 0;
    this.refCount = 0;
  }

  /** Room for `n` texts and `r` references (both within the limits). */
  reserve(n: i32, r: i32): void {
    if (this.texts.length < n * TEXT_STRIDE) this.texts = new StaticArray<i32>(n * TEXT_STRIDE);
    if (this.refs.length < r * REF_STRIDE) this.refs = new StaticArray<i32>(r * REF_STRIDE);
  }

  /** Text i's field (i < count, checked by the caller). */
  // @ts-ignore: decorator
  @inline text(i: i32, field: i32): i32 {
    return unchecked(this.texts[i * TEXT_STRIDE + field]);
  }

  // @ts-ignore: decorator
  @inline setText(i: i32, field: i32, value: i32): void {
    unchecked((this.texts[i * TEXT_STRIDE + field] = value));
  }

  // @ts-ignore: decorator
  @inline ref(i: i32, field: i32): i32 {
    return unchecked(this.refs[i * REF_STRIDE + field]);
  }

  // @ts-ignore: decorator
  @inline setRef(i: i32, field: i32, value: i32): void {
    unchecked((this.refs[i * REF_STRIDE + field] = value));
  }
}

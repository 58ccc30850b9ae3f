// The mesh feed's binary message, format v2 (docs: README.md "Update path"): a 56-byte header
// and records, little-endian; a full message also carries a text table and a reference table
// (wire_tables.ts) that its compact workload records name by index. This file knows the layout and reads one record at a time with
// every read bounds-checked and every per-record rule checked (wire_apply.ts adds the rules
// that span records and applies). Nothing here allocates per record on the success path
// except the decoding of texts the model does not know yet.
import { findInvalidUtf8At } from "../json/utf8";
import { Address, FAMILY_NONE, FAMILY_V4, FAMILY_V6 } from "./ip";
import { isHostname, isLocality, isSanText, isSpiffeIdentity, LOCALITY_SHAPE, SAN_COMMA, SPIFFE_SHAPE } from "./validate";

export const WIRE_MAGIC: u32 = 0x3148534d; // "MSH1"
export const WIRE_VERSION: u16 = 2;
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
export const H_RESERVED: i32 = 48;

export const KIND_FULL: i32 = 1;
export const KIND_DELTA: i32 = 2;
export const KIND_NO_CHANGE: i32 = 3;

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

/**
 * Reads records. `fail` records the first problem as "record N (kind id I).field: reason";
 * after it every read answers 0 and `failed()` is true.
 */
export class WireReader {
  base: usize = 0;
  end: i32 = 0;
  pos: i32 = 0;
  error: string = "";
  /** The current record, for messages. */
  record: i32 = -1;
  recordType: i32 = 0;
  recordId: i32 = -1;
  private bad: bool = false;
  /**
   * Set when re-reading records this reader already checked (a full load's store pass, a
   * delta's apply): the text, duplicate and shape checks are skipped; bounds stay checked.
   */
  trusted: bool = false;
  private scratch: Address = new Address();
  private other: Address = new Address();
  /** The tables of the message being read (empty outside a full message). */
  tables: WireTables = new WireTables();
  /** Set while the tables are read: failures are named `tables.<field>`. */
  inTables: bool = false;

  reset(data: ArrayBuffer): void {
    this.tables.clear();
    this.inTables = false;
    this.base = changetype<usize>(data);
    this.end = data.byteLength;
    this.pos = 0;
    this.error = "";
    this.bad = false;
    this.record = -1;
    this.trusted = false;
  }

  failed(): bool {
    return this.bad;
  }

  /** Records `field: reason` for the current record (or the header when record < 0). */
  fail(field: string, reason: string): bool {
    if (this.bad) return false;
    this.bad = true;
    let where: string;
    if (this.inTables) where = "tables";
    else if (this.record < 0) where = "header";
    else {
      where = "record " + this.record.toString() + " (" + recordName(this.recordType);
      where += this.recordId >= 0 ? " id " + this.recordId.toString() + ")" : ")";
    }
    this.error = field.length > 0 ? where + "." + field + ": " + reason : where + ": " + reason;
    return false;
  }

  /** The message ends inside `field`. */
  truncated(field: string): bool {
    return this.fail(field, "truncated (the message ends at byte " + this.end.toString() + ")");
  }

  // @ts-ignore: decorator
  @inline has(n: i32): bool {
    return !this.bad && n >= 0 && this.pos <= this.end - n;
  }

  // The reads below answer 0 past the end (callers check has() or failed() per field).
  // @ts-ignore: decorator
  @inline u8(): u32 {
    if (!this.has(1)) return this.stop();
    const v = <u32>load<u8>(this.base + <usize>this.pos);
    this.pos += 1;
    return v;
  }

  // @ts-ignore: decorator
  @inline u16(): u32 {
    if (!this.has(2)) return this.stop();
    const v = <u32>load<u16>(this.base + <usize>this.pos);
    this.pos += 2;
    return v;
  }

  // @ts-ignore: decorator
  @inline u32(): u32 {
    if (!this.has(4)) return this.stop();
    const v = load<u32>(this.base + <usize>this.pos);
    this.pos += 4;
    return v;
  }

  /**
   * An unsigned LEB128 integer of at most 31 bits (at most 5 bytes, no overlong form):
   * -1 (failed, naming `field`) when truncated or out of range.
   */
  // @ts-ignore: decorator
  @inline varint(field: string): i32 {
    let v: u32 = 0;
    for (let i = 0; i < 5; i++) {
      if (!this.has(1)) {
        this.stop();
        this.truncated(field);
        return -1;
      }
      const b = <u32>load<u8>(this.base + <usize>this.pos);
      this.pos += 1;
      v |= (b & 0x7f) << (<u32>i * 7);
      if ((b & 0x80) == 0) {
        if (i > 0 && b == 0) {
          this.fail(field, "overlong varint");
          return -1;
        }
        if (i == 4 && b > 7) break;
        return <i32>v;
      }
    }
    this.fail(field, "varint out of range (at most 2^31 - 1)");
    return -1;
  }

  u64At(at: i32): u64 {
    return at >= 0 && at <= this.end - 8 ? load<u64>(this.base + <usize>at) : 0;
  }

  // @ts-ignore: decorator
  @inline u32At(at: i32): u32 {
    return at >= 0 && at <= this.end - 4 ? load<u32>(this.base + <usize>at) : 0;
  }

  // @ts-ignore: decorator
  @inline u8At(at: i32): u32 {
    return at >= 0 && at < this.end ? <u32>load<u8>(this.base + <usize>at) : 0;
  }

  // @ts-ignore: decorator
  @inline u16At(at: i32): u32 {
    return at >= 0 && at <= this.end - 2 ? <u32>load<u16>(this.base + <usize>at) : 0;
  }

  /** Marks the reader as out of bytes (the caller names the field). */
  // @ts-ignore: decorator
  @inline private stop(): u32 {
    this.pos = this.end + 1;
    return 0;
  }

  /** Whether the last reads ran past the end (then the caller reports `truncated`). */
  // @ts-ignore: decorator
  @inline over(): bool {
    return this.pos > this.end;
  }

  /** A u16-length string: sets strPtr/strLen; false (failed) when truncated or not UTF-8. */
  strPtr: usize = 0;
  strLen: i32 = 0;

  // Field names are passed as (static name, list index, static sub-name) and joined only when
  // a message is written: nothing is built per record on the success path.
  string(field: string, index: i32 = -1, sub: string = ""): bool {
    const n = <i32>this.u16();
    if (this.over() || !this.has(n)) return this.truncated(compose(field, index, sub));
    this.strPtr = this.base + <usize>this.pos;
    this.strLen = n;
    this.pos += n;
    if (!this.trusted && findInvalidUtf8At(this.strPtr, n) >= 0) return this.fail(compose(field, index, sub), "not valid UTF-8");
    return true;
  }

  /** An address (u8 family + 4 or 16 bytes, network order) into `out`, IPv4-mapped → IPv4. */
  address(field: string, out: Address, index: i32 = -1, sub: string = ""): bool {
    const family = <i32>this.u8();
    if (this.over()) return this.truncated(compose(field, index, sub));
    if (family != 4 && family != 6) return this.fail(compose(field, index, sub), "address family " + family.toString() + " is not 4 or 6");
    const n = family == 4 ? 4 : 16;
    if (!this.has(n)) return this.truncated(compose(field, index, sub));
    const p = this.base + <usize>this.pos;
    this.pos += n;
    if (family == 4) {
      out.setV4(bswap<u32>(load<u32>(p)));
      return true;
    }
    const hi = bswap<u64>(load<u64>(p));
    const lo = bswap<u64>(load<u64>(p + 8));
    if (hi == 0 && (lo >> 32) == 0xffff) out.setV4(<u32>lo);
    else out.setV6(hi, lo);
    return true;
  }

  /** A reference: kind, address or hostname, port 1..65535. */
  ref(field: string, out: WireRef): bool {
    out.present = true;
    const kind = <u8>this.u8();
    if (this.over()) return this.truncated(field + ".kind");
    out.kind = kind;
    out.address.clear();
    out.hostLen = 0;
    if (kind == REF_ADDRESS) {
      if (!this.address(field, out.address, -1, "address")) return false;
    } else if (kind == REF_HOSTNAME) {
      if (!this.string(field, -1, "hostname")) return false;
      out.hostPtr = this.strPtr;
      out.hostLen = this.strLen;
      if (!this.trusted && !isHostname(String.UTF8.decodeUnsafe(out.hostPtr, <usize>out.hostLen))) {
        return this.fail(field + ".hostname", "not a hostname: " + quoted(out.hostPtr, out.hostLen));
      }
    } else {
      return this.fail(field + ".kind", kind.toString() + " is not 1 (address) or 2 (hostname)");
    }
    const port = <i32>this.u16();
    if (this.over()) return this.truncated(field + ".port");
    if (port == 0) return this.fail(field + ".port", "not a port number (1..65535): 0");
    out.port = port;
    return true;
  }

  // ================================================================ records

  /**
   * A workload upsert's body (after type and id) into `w`, with every per-record rule
   * checked. Identity and locality shapes are checked by the caller only for texts the model
   * does not know (`knownIdentity` / `knownLocality` tell), so a million pods sharing a
   * thousand identities validate a thousand texts.
   */
  workload(w: WireWorkload, workloadLimit: u32, serviceLimit: u32): bool {
    w.id = this.recordId;
    if (<u32>w.id >= workloadLimit) return this.fail("id", "not below the workload id limit " + workloadLimit.toString());
    const flags = <u8>this.u8();
    if (this.over()) return this.truncated("flags");
    if ((flags & 0xf0) != 0) return this.fail("flags", "unknown bits 0x" + (<u32>flags).toString(16));
    w.flags = flags;
    w.waypoint.present = false;
    w.gateway.present = false;
    if (this.recordType == REC_WORKLOAD_COMPACT) {
      if (!this.compactHead(w, flags)) return false;
    } else {
      w.netText = -1;
      w.identityText = -1;
      w.localityText = -1;
      w.waypointIndex = -1;
      w.gatewayIndex = -1;
      if (!this.string("network")) return false;
      w.netPtr = this.strPtr;
      w.netLen = this.strLen;
      if (!this.string("identity")) return false;
      w.identityPtr = this.strPtr;
      w.identityLen = this.strLen;
      if (!this.string("locality")) return false;
      w.localityPtr = this.strPtr;
      w.localityLen = this.strLen;
      if ((flags & WF_WAYPOINT) != 0 && !this.ref("waypoint", w.waypoint)) return false;
      if ((flags & WF_GATEWAY) != 0 && !this.ref("networkGateway", w.gateway)) return false;
    }
    if ((flags & WF_ISTIO) != 0 && w.identityLen == 0) return this.fail("identity", "required when tlsMode is istio");
    const count = <i32>this.u8();
    if (this.over()) return this.truncated("addresses");
    if (count == 0 && (flags & WF_GATEWAY) == 0) return this.fail("addresses", "must not be empty unless networkGateway is set");
    w.addressCount = count;
    w.addressAt = this.pos;
    const a = this.scratch;
    let v4 = 0;
    for (let i = 0; i < count; i++) {
      if (!this.address("addresses", a, i)) return false;
      if (a.family == FAMILY_V4 && v4++ == 0) w.firstV4 = a.v4;
      // Duplicates within the workload (the message is small per workload: pairwise).
      if (i > 0 && !this.trusted && this.addressRepeats(w.addressAt, i, a)) return this.fail(indexed("addresses", i), "duplicate address");
    }
    w.v4Count = v4;
    const members = <i32>this.u16();
    if (this.over()) return this.truncated("memberships");
    w.memberCount = members;
    w.memberAt = this.pos;
    if (this.trusted) {
      // Checked before: step over the memberships.
      for (let i = 0; i < members && !this.over(); i++) {
        this.pos += 4;
        const overrides = <i32>this.u8(); // read first: it moves pos
        this.pos += overrides * 4;
      }
      if (this.over()) return this.truncated("memberships");
      return true;
    }
    for (let i = 0; i < members; i++) {
      const s = this.u32();
      const overrides = <i32>this.u8();
      if (this.over()) return this.truncated(indexed("memberships", i));
      if (s >= serviceLimit) {
        return this.fail(indexed("memberships", i) + ".service", s.toString() + " is not below the service id limit " + serviceLimit.toString());
      }
      if (!this.has(overrides * 4)) return this.truncated(indexed("memberships", i) + ".overrides");
      for (let k = 0; k < overrides; k++) {
        const port = this.u16();
        const target = this.u16();
        if (port == 0 || target == 0) {
          return this.fail(indexed(indexed("memberships", i) + ".overrides", k), "not a port number (1..65535): 0");
        }
        for (let j = 0; j < k; j++) {
          if (this.u16At(this.pos - 4 - (k - j) * 4) == port) {
            return this.fail(indexed(indexed("memberships", i) + ".overrides", k), "duplicate service port " + port.toString());
          }
        }
      }
    }
    // Each service once: pairwise over the (few) memberships of one pod.
    let at = w.memberAt;
    for (let i = 0; i < members; i++) {
      const s = this.u32At(at);
      let other = w.memberAt;
      for (let j = 0; j < i; j++) {
        if (this.u32At(other) == s) return this.fail(indexed("memberships", i) + ".service", "service " + s.toString() + " is listed twice");
        other += 5 + <i32>load<u8>(this.base + <usize>other + 4) * 4;
      }
      at += 5 + <i32>load<u8>(this.base + <usize>at + 4) * 4;
    }
    return true;
  }

  /** A compact record's texts and references: table indexes, each resolved to where it is. */
  private compactHead(w: WireWorkload, flags: u8): bool {
    const t = this.tables;
    const net = this.textIndex("network");
    if (net < 0) return false;
    w.netText = net;
    w.netPtr = this.base + <usize>t.text(net, T_AT);
    w.netLen = t.text(net, T_LEN);
    const identity = this.textIndex("identity");
    if (identity < 0) return false;
    w.identityText = identity;
    w.identityPtr = this.base + <usize>t.text(identity, T_AT);
    w.identityLen = t.text(identity, T_LEN);
    const locality = this.textIndex("locality");
    if (locality < 0) return false;
    w.localityText = locality;
    w.localityPtr = this.base + <usize>t.text(locality, T_AT);
    w.localityLen = t.text(locality, T_LEN);
    w.waypointIndex = -1;
    w.gatewayIndex = -1;
    if ((flags & WF_WAYPOINT) != 0) {
      w.waypointIndex = this.refIndex("waypoint", w.waypoint);
      if (w.waypointIndex < 0) return false;
    }
    if ((flags & WF_GATEWAY) != 0) {
      w.gatewayIndex = this.refIndex("networkGateway", w.gateway);
      if (w.gatewayIndex < 0) return false;
    }
    return true;
  }

  // @ts-ignore: decorator
  @inline private textIndex(field: string): i32 {
    const i = this.varint(field);
    if (i < 0) return -1;
    if (i >= this.tables.count) {
      this.fail(field, "text " + i.toString() + " is not in the table of " + this.tables.count.toString());
      return -1;
    }
    return i;
  }

  /** A reference by table index, re-read into `out` (checked when the table was read). */
  private refIndex(field: string, out: WireRef): i32 {
    const i = this.varint(field);
    if (i < 0) return -1;
    if (i >= this.tables.refCount) {
      this.fail(field, "reference " + i.toString() + " is not in the table of " + this.tables.refCount.toString());
      return -1;
    }
    const save = this.pos;
    const trusted = this.trusted;
    this.trusted = true;
    this.pos = this.tables.ref(i, R_AT);
    this.ref(field, out);
    this.trusted = trusted;
    this.pos = save;
    return i;
  }

  /**
   * Pass 2 of a full load: re-reads compact workload record `w.id` (type and id already read)
   * that `workload()` checked in pass 1, with plain loads: every offset was bounds-checked
   * then, so nothing is checked again (the bytes are the same).
   */
  rereadCompact(w: WireWorkload): void {
    const t = this.tables;
    w.id = this.recordId;
    let p = this.base + <usize>this.pos;
    const flags = load<u8>(p);
    p++;
    w.flags = flags;
    p = varintAt(p);
    const net = <i32>varintValue;
    w.netText = net;
    w.netPtr = this.base + <usize>t.text(net, T_AT);
    w.netLen = t.text(net, T_LEN);
    p = varintAt(p);
    const identity = <i32>varintValue;
    w.identityText = identity;
    w.identityPtr = this.base + <usize>t.text(identity, T_AT);
    w.identityLen = t.text(identity, T_LEN);
    p = varintAt(p);
    const locality = <i32>varintValue;
    w.localityText = locality;
    w.localityPtr = this.base + <usize>t.text(locality, T_AT);
    w.localityLen = t.text(locality, T_LEN);
    w.waypoint.present = false;
    w.gateway.present = false;
    w.waypointIndex = -1;
    w.gatewayIndex = -1;
    if ((flags & (WF_WAYPOINT | WF_GATEWAY)) != 0) {
      this.pos = <i32>(p - this.base);
      if ((flags & WF_WAYPOINT) != 0) w.waypointIndex = this.refIndex("waypoint", w.waypoint);
      if ((flags & WF_GATEWAY) != 0) w.gatewayIndex = this.refIndex("networkGateway", w.gateway);
      p = this.base + <usize>this.pos;
    }
    const count = <i32>load<u8>(p);
    p++;
    w.addressCount = count;
    w.addressAt = <i32>(p - this.base);
    let v4 = 0;
    for (let i = 0; i < count; i++) {
      if (load<u8>(p) == 4) {
        if (v4++ == 0) w.firstV4 = bswap<u32>(load<u32>(p + 1));
        p += 5;
      } else {
        // IPv4-mapped IPv6 is stored as IPv4 (address() above): count it as such.
        const hi = load<u64>(p + 1);
        const lo = bswap<u64>(load<u64>(p + 9));
        if (hi == 0 && (lo >> 32) == 0xffff && v4++ == 0) w.firstV4 = <u32>lo;
        p += 17;
      }
    }
    w.v4Count = v4;
    const members = <i32>load<u16>(p);
    p += 2;
    w.memberCount = members;
    w.memberAt = <i32>(p - this.base);
    for (let i = 0; i < members; i++) p += 5 + <usize>load<u8>(p + 4) * 4;
    this.pos = <i32>(p - this.base);
  }

  /** Whether address i (just read into `a`) equals an earlier one of the same workload. */
  private addressRepeats(first: i32, i: i32, a: Address): bool {
    let at = first;
    const b = this.other;
    const save = this.pos;
    for (let j = 0; j < i; j++) {
      this.pos = at;
      this.address("", b);
      at = this.pos;
      if (b.sameIp(a)) {
        this.pos = save;
        return true;
      }
    }
    this.pos = save;
    return false;
  }

  /** A service upsert's body into `s`, every per-record rule checked. */
  service(s: WireService, serviceLimit: u32): bool {
    s.id = this.recordId;
    if (<u32>s.id >= serviceLimit) return this.fail("id", "not below the service id limit " + serviceLimit.toString());
    if (!this.string("hostname")) return false;
    s.hostPtr = this.strPtr;
    s.hostLen = this.strLen;
    if (!this.trusted && !isHostname(String.UTF8.decodeUnsafe(s.hostPtr, <usize>s.hostLen))) {
      return this.fail("hostname", "not a hostname: " + quoted(s.hostPtr, s.hostLen));
    }
    const flags = <u8>this.u8();
    if (this.over()) return this.truncated("flags");
    if ((flags & 0xf0) != 0) return this.fail("flags", "unknown bits 0x" + (<u32>flags).toString(16));
    s.flags = flags;
    s.clusterLen = 0;
    if ((flags & SF_CLUSTER) != 0) {
      if (!this.string("cluster")) return false;
      if (this.strLen == 0) return this.fail("cluster", "must not be empty");
      s.clusterPtr = this.strPtr;
      s.clusterLen = this.strLen;
    }
    const prefs = this.u32();
    if (this.over()) return this.truncated("lbPrefs");
    let ended = false;
    for (let i = 0; i < 4; i++) {
      const scope = (prefs >> (<u32>i * 8)) & 0xff;
      if (scope == 0) {
        ended = true;
        continue;
      }
      if (ended || scope > 4) return this.fail("lbPrefs", "byte " + i.toString() + " is not a scope (1..4) in order");
      for (let j = 0; j < i; j++) {
        if (((prefs >> (<u32>j * 8)) & 0xff) == scope) return this.fail("lbPrefs", "duplicate scope " + scope.toString());
      }
    }
    s.lbPrefs = prefs;
    const ports = <i32>this.u16();
    if (this.over() || !this.has(ports * 4)) return this.truncated("ports");
    s.portCount = ports;
    s.portAt = this.pos;
    for (let i = 0; i < ports; i++) {
      const port = this.u16();
      const target = this.u16();
      if (port == 0 || target == 0) return this.fail(indexed("ports", i), "not a port number (1..65535): 0");
      for (let j = 0; j < i; j++) {
        if (this.u16At(s.portAt + j * 4) == port) return this.fail(indexed("ports", i), "duplicate service port " + port.toString());
      }
    }
    const vips = <i32>this.u16();
    if (this.over()) return this.truncated("vips");
    s.vipCount = vips;
    s.vipAt = this.pos;
    const a = this.scratch;
    for (let i = 0; i < vips; i++) {
      if (!this.string("vips", i, "network")) return false;
      if (!this.address("vips", a, i, "address")) return false;
    }
    s.waypoint.present = false;
    if ((flags & SF_WAYPOINT) != 0 && !this.ref("waypoint", s.waypoint)) return false;
    const sans = <i32>this.u16();
    if (this.over()) return this.truncated("subjectAltNames");
    s.sanCount = sans;
    s.sanAt = this.pos;
    for (let i = 0; i < sans; i++) {
      if (!this.string("subjectAltNames", i)) return false;
      if (this.strLen == 0) return this.fail(indexed("subjectAltNames", i), "must not be empty");
      if (!this.trusted && !isSanText(String.UTF8.decodeUnsafe(this.strPtr, <usize>this.strLen))) return this.fail(indexed("subjectAltNames", i), SAN_COMMA);
    }
    return true;
  }

  /** Checks a text the model does not know yet as an identity; false (failed) when bad. */
  checkIdentity(ptr: usize, len: i32): bool {
    const text = String.UTF8.decodeUnsafe(ptr, <usize>len);
    if (isSpiffeIdentity(text)) return true;
    return this.fail("identity", "not a SPIFFE identity (expected " + SPIFFE_SHAPE + "): " + quoted(ptr, len));
  }

  checkLocality(ptr: usize, len: i32): bool {
    const text = String.UTF8.decodeUnsafe(ptr, <usize>len);
    if (isLocality(text)) return true;
    return this.fail("locality", "not a locality (expected " + LOCALITY_SHAPE + "): " + quoted(ptr, len));
  }
}

/** The value of the last varintAt (a wasm global: no memory traffic). */
let varintValue: u32 = 0;

/** Decodes a LEB128 integer already checked by WireReader.varint; its end. */
// @ts-ignore: decorator
@inline function varintAt(p: usize): usize {
  let v: u32 = 0;
  let shift: u32 = 0;
  while (true) {
    const b = <u32>load<u8>(p);
    p++;
    v |= (b & 0x7f) << shift;
    if ((b & 0x80) == 0) break;
    shift += 7;
  }
  varintValue = v;
  return p;
}

/** `field[index].sub` (index < 0 and sub "" left out); failure paths only. */
function compose(field: string, index: i32, sub: string): string {
  let path = index >= 0 ? field + "[" + index.toString() + "]" : field;
  if (sub.length > 0) path = path.length > 0 ? path + "." + sub : sub;
  return path;
}

/** `name[i]` (built on failure paths only). */
export function indexed(name: string, i: i32): string {
  return name + "[" + i.toString() + "]";
}

/** The text at ptr as a quoted message fragment (at most 64 characters). */
export function quoted(ptr: usize, len: i32): string {
  const text = String.UTF8.decodeUnsafe(ptr, <usize>min(len, 64));
  return '"' + text + (len > 64 ? '..."' : '"');
}

export { FAMILY_NONE, FAMILY_V4, FAMILY_V6 };

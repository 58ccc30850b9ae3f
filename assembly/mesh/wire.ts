// Reads the mesh feed's binary message, format v2 (docs: UPDATE_PATH.md; the layout
// is in wire_layout.ts, the full message's tables in wire_tables.ts): one record at a time,
// every read bounds-checked and every per-record rule checked (wire_apply.ts adds the rules
// that span records and applies). Nothing here allocates per record on the success path
// except the decoding of texts the model does not know yet.
import { findInvalidUtf8At } from "../json/utf8";
import { Address, FAMILY_NONE, FAMILY_V4, FAMILY_V6 } from "./ip";
import { AddrTable4, AddrTable6, ADDED } from "./table";
import { portMarks, serviceMarks } from "./wire_marks";
import { isHostname, isLocality, isSanText, isSpiffeIdentity, LOCALITY_SHAPE, SAN_COMMA, SPIFFE_SHAPE } from "./validate";

export * from "./wire_layout";
import {
  REC_WORKLOAD_COMPACT,
  REF_ADDRESS,
  REF_HOSTNAME,
  T_AT,
  T_LEN,
  R_AT,
  WF_GATEWAY,
  WF_ISTIO,
  WF_WAYPOINT,
  WireRef,
  WireService,
  WireTables,
  WireWorkload,
  recordName,
} from "./wire_layout";

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
    // Duplicates within the workload: each address marked in a scratch table as it is read,
    // the marks taken back before returning (O(1) per address).
    let marked = 0;
    let repeated = -1;
    for (let i = 0; i < count; i++) {
      if (!this.address("addresses", a, i)) break;
      if (a.family == FAMILY_V4 && v4++ == 0) w.firstV4 = a.v4;
      if (this.trusted) continue;
      if (!markAddress(a)) {
        repeated = i;
        break;
      }
      marked++;
    }
    if (marked > 0) unmarkAddresses(this.base + <usize>w.addressAt, marked);
    if (this.bad) return false;
    if (repeated >= 0) return this.fail(indexed("addresses", repeated), "duplicate address");
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
      if (overrides == 0) continue; // most memberships: no port calls for an empty list
      const first = this.pos;
      const bad = this.overridePorts(overrides);
      unmarkPorts(this.base + <usize>first, bad < 0 ? overrides : bad);
      if (bad >= 0) {
        const port = this.u16At(first + bad * 4);
        const reason = port == 0 || this.u16At(first + bad * 4 + 2) == 0 ? "not a port number (1..65535): 0" : "duplicate service port " + port.toString();
        return this.fail(indexed(indexed("memberships", i) + ".overrides", bad), reason);
      }
    }
    // Each service once: the services marked in a bit set as they are walked, then unmarked.
    let at = w.memberAt;
    let repeatedService = -1;
    for (let i = 0; i < members; i++) {
      if (!serviceMarks.mark(this.u32At(at))) {
        repeatedService = i;
        break;
      }
      at += 5 + <i32>load<u8>(this.base + <usize>at + 4) * 4;
    }
    at = w.memberAt;
    for (let i = 0, n = repeatedService < 0 ? members : repeatedService; i < n; i++) {
      serviceMarks.unmark(this.u32At(at));
      at += 5 + <i32>load<u8>(this.base + <usize>at + 4) * 4;
    }
    if (repeatedService >= 0) {
      const s = this.u32At(at);
      return this.fail(indexed("memberships", repeatedService) + ".service", "service " + s.toString() + " is listed twice");
    }
    return true;
  }

  /**
   * Reads `n` (service port, target) pairs (bounds already checked), marking each service port
   * in portMarks: the index of the first zero or repeated port, or -1. The caller unmarks the
   * pairs before it (unmarkPorts), so the marks never outlive the list.
   */
  private overridePorts(n: i32): i32 {
    for (let k = 0; k < n; k++) {
      const port = this.u16();
      const target = this.u16();
      if (port == 0 || target == 0 || !portMarks.mark(port)) return k;
    }
    return -1;
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
  refIndex(field: string, out: WireRef): i32 {
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
    if (this.trusted) this.pos += ports * 4;
    else {
      // Each port once: marked in a bit set of every port number as read, then unmarked.
      const bad = this.overridePorts(ports);
      unmarkPorts(this.base + <usize>s.portAt, bad < 0 ? ports : bad);
      if (bad >= 0) {
        const port = this.u16At(s.portAt + bad * 4);
        if (port == 0 || this.u16At(s.portAt + bad * 4 + 2) == 0) return this.fail(indexed("ports", bad), "not a port number (1..65535): 0");
        return this.fail(indexed("ports", bad), "duplicate service port " + port.toString());
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

// One workload's addresses (at most 255), marked while its record is checked.
const addressMarks4 = new AddrTable4(255);
const addressMarks6 = new AddrTable6(255);

/** Marks address `a`; false when this record already listed it. */
function markAddress(a: Address): bool {
  const added = a.family == FAMILY_V4 ? addressMarks4.insert(a.v4, 0, 0) : addressMarks6.insert(a.hi, a.lo, 0, 0);
  return added == ADDED;
}

/** Takes back the marks of the first `n` addresses at `p` (read and checked before). */
function unmarkAddresses(p: usize, n: i32): void {
  for (let i = 0; i < n; i++) {
    if (load<u8>(p) == 4) {
      addressMarks4.remove(bswap<u32>(load<u32>(p + 1)), 0, 0);
      p += 5;
      continue;
    }
    const hi = bswap<u64>(load<u64>(p + 1));
    const lo = bswap<u64>(load<u64>(p + 9));
    // IPv4-mapped IPv6 was marked as IPv4 (address()).
    if (hi == 0 && (lo >> 32) == 0xffff) addressMarks4.remove(<u32>lo, 0, 0);
    else addressMarks6.remove(hi, lo, 0, 0);
    p += 17;
  }
}

/** Takes back the port marks of the first `n` (port, target) pairs at `p`. */
function unmarkPorts(p: usize, n: i32): void {
  for (let i = 0; i < n; i++) portMarks.unmark(<u32>load<u16>(p + <usize>i * 4));
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

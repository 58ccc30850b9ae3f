// A full message's tables (format v2), between the header and the records:
//   u32 text count, then each text as a string (u16 length + UTF-8);
//   u32 reference count, then each reference as in a record (kind, address or hostname, port).
// Compact workload records (REC_WORKLOAD_COMPACT) name texts and references by index. Each
// text is checked here for UTF-8 only: what it must look like depends on where a record uses
// it (an identity, a locality, a network), so the loader checks that at first use and keeps
// the answer per index (WireTables). References are checked whole here. rereadCompact is the
// full load's second pass over a compact record, after the first checked it.
import { indexed, WireReader } from "./wire";
import { MAX_TABLE_REFS, MAX_TABLE_TEXTS, R_AT, R_ID, R_NETWORK, T_AT, T_IDENTITY, T_LEN, T_LOCALITY, T_NETWORK, WF_GATEWAY, WF_WAYPOINT, WireRef, WireWorkload } from "./wire_layout";

const scratchRef = new WireRef();

/** Reads the tables at r.pos into r.tables; false (failed, naming the entry) on a problem. */
export function readTables(r: WireReader): bool {
  const t = r.tables;
  t.clear();
  r.inTables = true;
  const count = <i32>r.u32();
  if (r.over()) return r.truncated("textCount");
  if (<u32>count > <u32>MAX_TABLE_TEXTS) return r.fail("textCount", (<u32>count).toString() + " texts exceed the limit of " + MAX_TABLE_TEXTS.toString());
  // Each text takes at least its 2-byte length: a count that cannot fit is refused before
  // anything is allocated for it.
  if (<i64>count * 2 > <i64>(r.end - r.pos)) return r.fail("textCount", count.toString() + " texts cannot fit in the message");
  t.reserve(count, 0);
  for (let i = 0; i < count; i++) {
    if (!r.string("texts", i)) return false;
    t.setText(i, T_AT, <i32>(r.strPtr - r.base));
    t.setText(i, T_LEN, r.strLen);
    t.setText(i, T_IDENTITY, -1);
    t.setText(i, T_LOCALITY, -1);
    t.setText(i, T_NETWORK, -1);
  }
  t.count = count;
  const refs = <i32>r.u32();
  if (r.over()) return r.truncated("refCount");
  if (<u32>refs > <u32>MAX_TABLE_REFS) return r.fail("refCount", (<u32>refs).toString() + " references exceed the limit of " + MAX_TABLE_REFS.toString());
  if (<i64>refs * 4 > <i64>(r.end - r.pos)) return r.fail("refCount", refs.toString() + " references cannot fit in the message");
  t.reserve(count, refs);
  for (let i = 0; i < refs; i++) {
    t.setRef(i, R_AT, r.pos);
    if (!r.ref(indexed("refs", i), scratchRef)) return false;
    t.setRef(i, R_ID, -1);
    t.setRef(i, R_NETWORK, -1);
  }
  t.refCount = refs;
  r.inTables = false;
  return true;
}

/**
 * Pass 2 of a full load: re-reads compact workload record `w.id` (type and id already read)
 * that `workload()` checked in pass 1, with plain loads: every offset was bounds-checked
 * then, so nothing is checked again (the bytes are the same).
 */
export function rereadCompact(r: WireReader, w: WireWorkload): void {
  const t = r.tables;
  w.id = r.recordId;
  let p = r.base + <usize>r.pos;
  const flags = load<u8>(p);
  p++;
  w.flags = flags;
  p = varintAt(p);
  const net = <i32>varintValue;
  w.netText = net;
  w.netPtr = r.base + <usize>t.text(net, T_AT);
  w.netLen = t.text(net, T_LEN);
  p = varintAt(p);
  const identity = <i32>varintValue;
  w.identityText = identity;
  w.identityPtr = r.base + <usize>t.text(identity, T_AT);
  w.identityLen = t.text(identity, T_LEN);
  p = varintAt(p);
  const locality = <i32>varintValue;
  w.localityText = locality;
  w.localityPtr = r.base + <usize>t.text(locality, T_AT);
  w.localityLen = t.text(locality, T_LEN);
  w.waypoint.present = false;
  w.gateway.present = false;
  w.waypointIndex = -1;
  w.gatewayIndex = -1;
  if ((flags & (WF_WAYPOINT | WF_GATEWAY)) != 0) {
    r.pos = <i32>(p - r.base);
    if ((flags & WF_WAYPOINT) != 0) w.waypointIndex = r.refIndex("waypoint", w.waypoint);
    if ((flags & WF_GATEWAY) != 0) w.gatewayIndex = r.refIndex("networkGateway", w.gateway);
    p = r.base + <usize>r.pos;
  }
  const count = <i32>load<u8>(p);
  p++;
  w.addressCount = count;
  w.addressAt = <i32>(p - r.base);
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
  w.memberAt = <i32>(p - r.base);
  for (let i = 0; i < members; i++) p += 5 + <usize>load<u8>(p + 4) * 4;
  r.pos = <i32>(p - r.base);
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

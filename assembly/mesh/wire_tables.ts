// A full message's tables (format v2), between the header and the records:
//   u32 text count, then each text as a string (u16 length + UTF-8);
//   u32 reference count, then each reference as in a record (kind, address or hostname, port).
// Compact workload records (REC_WORKLOAD_COMPACT) name texts and references by index. Each
// text is checked here for UTF-8 only: what it must look like depends on where a record uses
// it (an identity, a locality, a network), so the loader checks that at first use and keeps
// the answer per index (WireTables). References are checked whole here.
import { indexed, MAX_TABLE_REFS, MAX_TABLE_TEXTS, R_AT, R_ID, R_NETWORK, T_AT, T_IDENTITY, T_LEN, T_LOCALITY, T_NETWORK, WireReader, WireRef } from "./wire";

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

// A repair message (format 3, kind 4): "each bucket the trailer lists is exactly these records".
// The answer to a poll that sent the model's bucket digests after the feed could not send a
// delta (a feed restart or another replica, with changes this model missed): only the buckets
// that differ travel, so k missed changes cost O(k) records, not a full message.
//
// Applied as the delta it stands for: a removal of every live object of a listed bucket that
// the message does not upsert, then the message's upserts, all through applyDelta (wire_delta.ts)
// with every check a delta has (each record, then the state after it), so a repair is refused
// whole or applied whole, like any message. Cost: the message, plus the ids of the listed
// buckets in the model (the ranges r ≡ b mod BUCKETS, ids r·RANGE..r·RANGE+RANGE-1, below the
// model's id count): at most the model's
// size when every bucket is listed, as a full message would cost.
import { Mesh } from "./model";
import { MAX_SERVICES, MAX_WORKLOADS } from "./parse";
import { U64Table } from "./table";
import {
  BUCKET_COUNT,
  BUCKET_ENTRY_BYTES,
  BUCKETS,
  HEADER_BYTES,
  RANGE,
  RANGE_SHIFT,
  REC_SERVICE_REMOVE,
  REC_SERVICE_UPSERT,
  REC_WORKLOAD_REMOVE,
  REC_WORKLOAD_UPSERT,
  WireReader,
} from "./wire";
import { checkRecord, Header, recordHead } from "./wire_store";
import { applyDelta } from "./wire_delta";

/** The trailer's buckets, as read (reused; one message at a time). */
const listed = new Array<i32>();
/** Marks of the listed buckets while a repair is read. */
const marks = new StaticArray<bool>(BUCKET_COUNT);

/**
 * Reads the bucket trailer at [at, end) into `listed` (buckets only; digests are the feed
 * client's business): count, then count strictly increasing buckets below BUCKET_COUNT, and
 * nothing after them. False (failed, naming `trailer`) otherwise.
 */
export function readBucketList(r: WireReader, data: ArrayBuffer, at: i32, end: i32): bool {
  listed.length = 0;
  r.record = -1;
  if (at < 0 || end > data.byteLength || end - at < 4) return r.fail("trailer", "missing (a format-3 repair message ends with its bucket list)");
  const base = changetype<usize>(data);
  const count = <i64>load<u32>(base + <usize>at);
  if (count > <i64>BUCKET_COUNT) return r.fail("trailer.count", count.toString() + " buckets (at most " + BUCKET_COUNT.toString() + ")");
  if (<i64>(end - at - 4) != count * BUCKET_ENTRY_BYTES) {
    return r.fail("trailer", "length " + (end - at).toString() + " is not 4 + 12 × " + count.toString());
  }
  let previous: i64 = -1;
  for (let i = 0; i < <i32>count; i++) {
    const b = <i64>load<u32>(base + <usize>(at + 4 + i * BUCKET_ENTRY_BYTES));
    if (b >= <i64>BUCKET_COUNT || b <= previous) {
      return r.fail("trailer.buckets[" + i.toString() + "]", b.toString() + " is not a bucket (0.." + (BUCKET_COUNT - 1).toString() + ") above the one before");
    }
    previous = b;
    listed.push(<i32>b);
  }
  return true;
}

/** Key of an id: workloads and services apart. */
// @ts-ignore: decorator
@inline function idKey(service: bool, id: i32): u64 {
  return (service ? (<u64>1 << 32) : 0) | <u64><u32>id;
}

/**
 * Applies the repair in `data` (header read into h, records in [56, bodyEnd), trailer after) to
 * m, or refuses it whole (false, r.error says why) leaving m untouched.
 */
export function applyRepair(m: Mesh, r: WireReader, h: Header, data: ArrayBuffer, bodyEnd: i32, end: i32): bool {
  if (!readBucketList(r, data, bodyEnd, end)) return false;
  for (let i = 0; i < listed.length; i++) unchecked((marks[unchecked(listed[i])] = true));
  const ok = readAndApply(m, r, h, data, bodyEnd);
  for (let i = 0; i < listed.length; i++) unchecked((marks[unchecked(listed[i])] = false));
  return ok;
}

function readAndApply(m: Mesh, r: WireReader, h: Header, data: ArrayBuffer, bodyEnd: i32): bool {
  // Every record: an upsert, checked on its own, in a listed bucket.
  r.pos = HEADER_BYTES;
  const upserted = new U64Table(h.records);
  for (let i = 0; i < h.records; i++) {
    const type = recordHead(r, i);
    if (type == 0) return false;
    if (type != REC_WORKLOAD_UPSERT && type != REC_SERVICE_UPSERT) return r.fail("type", type.toString() + " (a repair carries workload and service upserts only)");
    if (!checkRecord(r, m, type, h, false)) return false;
    const service = type == REC_SERVICE_UPSERT;
    const bucket = (service ? BUCKETS : 0) + (r.recordId >> RANGE_SHIFT) % BUCKETS;
    if (!unchecked(marks[bucket])) return r.fail("id", r.recordId.toString() + " is in bucket " + bucket.toString() + ", which the trailer does not list");
    upserted.add(idKey(service, r.recordId), 0);
  }
  if (r.pos != bodyEnd) {
    r.record = -1;
    return r.fail("recordCount", (bodyEnd - r.pos).toString() + " bytes follow the last of " + h.records.toString() + " records");
  }
  // The model's objects in the listed buckets that the message does not keep.
  const removes = new Array<u64>();
  const workloads = m.workloadCount();
  const services = m.serviceCount();
  for (let i = 0; i < listed.length; i++) {
    const b = unchecked(listed[i]);
    const service = b >= BUCKETS;
    const first = service ? b - BUCKETS : b;
    const total = service ? services : workloads;
    for (let range = first; range < (total + RANGE - 1) >> RANGE_SHIFT; range += BUCKETS) {
      const end = min(total, (range + 1) << RANGE_SHIFT);
      for (let id = range << RANGE_SHIFT; id < end; id++) {
        const live = service ? m.serviceLive(id) : m.workloadLive(id);
        if (live && upserted.get(idKey(service, id)) < 0) removes.push(idKey(service, id));
      }
    }
  }
  // The delta it stands for: the removals, then the message's records as they are.
  const recordsBytes = bodyEnd - HEADER_BYTES;
  const delta = new ArrayBuffer(HEADER_BYTES + removes.length * 5 + recordsBytes);
  const out = changetype<usize>(delta);
  let at: usize = HEADER_BYTES;
  for (let i = 0; i < removes.length; i++) {
    const key = unchecked(removes[i]);
    store<u8>(out + at, (key >> 32) != 0 ? <u8>REC_SERVICE_REMOVE : <u8>REC_WORKLOAD_REMOVE);
    store<u32>(out + at + 1, <u32>key);
    at += 5;
  }
  memory.copy(out + at, changetype<usize>(data) + <usize>HEADER_BYTES, <usize>recordsBytes);
  const d = new Header();
  d.format = h.format;
  d.digest = h.digest;
  d.kind = 2;
  d.epoch = h.epoch;
  d.base = m.version;
  d.version = h.version;
  d.workloadLimit = <u32>min(<i64>MAX_WORKLOADS, max(<i64>h.workloadLimit, <i64>workloads));
  d.serviceLimit = <u32>min(<i64>MAX_SERVICES, max(<i64>h.serviceLimit, <i64>services));
  d.records = removes.length + h.records;
  const inner = new WireReader();
  inner.reset(delta);
  inner.pos = HEADER_BYTES;
  if (!applyDelta(m, inner, d)) {
    // Name the message's own record (the removals come first in the delta it stands for).
    const shifted = inner.record - removes.length;
    r.fail("", "");
    r.error = inner.record >= removes.length ? inner.error.replace("record " + inner.record.toString(), "record " + shifted.toString()) : "repair (implied removal): " + inner.error;
    return false;
  }
  m.epoch = h.epoch;
  return true;
}

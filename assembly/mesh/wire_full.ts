// A full message ("the model is exactly these records") into a new Mesh: every record checked
// first (texts interned into the new model as they are met, sizes counted), then every record
// stored in message order; refused whole on any problem (the caller keeps its old model).
import { reserveMembers, ensureMemberships, ensureServices, ensureWorkloads } from "./edit";
import { Mesh } from "./model";
import { ChunkPool } from "./pool";
import { AddrTable4, AddrTable6, U64Table } from "./table";
import {
  indexed,
  REC_SERVICE_REMOVE,
  REC_SERVICE_UPSERT,
  REC_WORKLOAD_COMPACT,
  REC_WORKLOAD_REMOVE,
  REC_WORKLOAD_UPSERT,
  WireReader,
} from "./wire";
import { readTables, rereadCompact } from "./wire_tables";
import {
  checkRecord,
  Header,
  recordHead,
  resetRefTable,
  serviceRec,
  storeService,
  storeWorkload,
  workloadRec,
} from "./wire_store";

// ==================================================================== full

/** Marks bit i; false when it was already set. */
function mark(bits: StaticArray<u32>, i: i32): bool {
  const word = i >>> 5;
  if (word >= bits.length) return false;
  const bit: u32 = 1 << (<u32>i & 31);
  if ((unchecked(bits[word]) & bit) != 0) return false;
  unchecked((bits[word] |= bit));
  return true;
}

export function loadFull(r: WireReader, h: Header): Mesh | null {
  const m = new Mesh();
  m.epoch = h.epoch;
  m.version = h.version;
  const nw = <i32>h.workloadLimit;
  const ns = <i32>h.serviceLimit;
  const seenW = new StaticArray<u32>((nw >>> 5) + 1);
  const seenS = new StaticArray<u32>((ns >>> 5) + 1);
  // Pass 1: every record checked; texts interned; sizes counted.
  let v4 = 0;
  let v6 = 0;
  let memberships = 0;
  let overrideWords: i64 = 0;
  let overridden = 0;
  let extraWords: i64 = 0;
  let extraWorkloads = 0;
  let ports = 0;
  let vips = 0;
  const perService = new StaticArray<u32>(ns);
  if (!readTables(r)) return null;
  const start = r.pos;
  // The workload columns first: the check pass leaves each pod's interned text ids in them.
  ensureWorkloads(m, nw, true);
  for (let i = 0; i < h.records; i++) {
    const type = recordHead(r, i);
    if (type == 0 || !checkRecord(r, m, type, h, true)) return null;
    if (type == REC_WORKLOAD_REMOVE || type == REC_SERVICE_REMOVE) return failNull(r, "", "a full message holds upserts only");
    if (type == REC_WORKLOAD_UPSERT || type == REC_WORKLOAD_COMPACT) {
      if (!mark(seenW, r.recordId)) return failNull(r, "id", "workload " + r.recordId.toString() + " appears twice");
      const w = workloadRec;
      const n4 = w.v4Count;
      const n6 = w.addressCount - n4;
      v4 += n4;
      v6 += n6;
      if (n4 > 1 || n6 > 0) {
        extraWorkloads++;
        extraWords += 1 + max(n4 - 1, 0) + n6 * 4;
      }
      memberships += w.memberCount;
      let at = w.memberAt;
      for (let k = 0; k < w.memberCount; k++) {
        const service = r.u32At(at);
        if (service < <u32>ns) unchecked(perService[service]++);
        const n = <i32>load<u8>(r.base + <usize>at + 4);
        if (n > 0) {
          overridden++;
          overrideWords += n;
        }
        at += 5 + n * 4;
      }
    } else {
      if (!mark(seenS, r.recordId)) return failNull(r, "id", "service " + r.recordId.toString() + " appears twice");
      ports += serviceRec.portCount;
      vips += serviceRec.vipCount;
    }
  }
  if (r.pos != r.end) return trailing(r);
  // The columns at their final size (the header's limits; pools from the counts).
  ensureWorkloads(m, nw, true);
  ensureServices(m, ns, true);
  ensureMemberships(m, memberships, true);
  m.v4Table = new AddrTable4(v4);
  m.v6Table = new AddrTable6(v6);
  m.vipTable4 = new AddrTable4(vips);
  m.vipTable6 = new AddrTable6(0);
  m.wExtra = new ChunkPool(<i32>extraWords, extraWorkloads, nw);
  m.memOverrides = new ChunkPool(<i32>overrideWords, overridden, memberships);
  m.sMembers = new ChunkPool(memberships + ns * 3, ns, ns);
  for (let s = 0; s < ns; s++) reserveMembers(m, s, <i32>unchecked(perService[s]));
  m.portIndex = new U64Table(ports);
  resetRefTable();
  // Pass 2: every record stored in message order (memberships may name a service that comes
  // later; whether each named service is in the message is checked once all are stored).
  r.pos = start;
  r.trusted = true;
  for (let i = 0; i < h.records; i++) {
    const type = recordHead(r, i);
    if (type == REC_SERVICE_UPSERT) {
      if (!r.service(serviceRec, h.serviceLimit)) return null;
      const end = r.pos;
      if (!storeService(r, m, serviceRec)) return null;
      r.pos = end;
    } else {
      if (type == REC_WORKLOAD_COMPACT) rereadCompact(r, workloadRec);
      else if (!r.workload(workloadRec, h.workloadLimit, h.serviceLimit)) return null;
      const end = r.pos;
      if (!storeWorkload(r, m, workloadRec, true)) return null;
      r.pos = end;
    }
  }
  r.trusted = false;
  for (let s = 0; s < ns; s++) {
    if (!m.serviceLive(s) && m.endpointCount(s) > 0) return failMembership(r, h, start, s);
  }
  m.generation = 1;
  return m;
}

/**
 * The refusal for service s, named by a membership but not in the full message: finds the
 * first workload record naming it (failure path: a scan of the message).
 */
function failMembership(r: WireReader, h: Header, start: i32, s: i32): Mesh | null {
  r.pos = start;
  r.trusted = true;
  for (let i = 0; i < h.records; i++) {
    const type = recordHead(r, i);
    if (type == REC_SERVICE_UPSERT) {
      r.service(serviceRec, h.serviceLimit);
      continue;
    }
    if ((type != REC_WORKLOAD_UPSERT && type != REC_WORKLOAD_COMPACT) || !r.workload(workloadRec, h.workloadLimit, h.serviceLimit)) break;
    let at = workloadRec.memberAt;
    for (let k = 0; k < workloadRec.memberCount; k++) {
      if (<i32>r.u32At(at) == s) {
        r.trusted = false;
        return failNull(r, indexed("memberships", k) + ".service", "service " + s.toString() + " is not in this full message");
      }
      at += 5 + <i32>r.u8At(at + 4) * 4;
    }
  }
  r.trusted = false;
  r.record = -1;
  return failNull(r, "", "a membership names service " + s.toString() + ", which is not in this full message");
}

export function trailing(r: WireReader): Mesh | null {
  const after = r.record + 1;
  r.record = -1;
  return failNull(r, "recordCount", (r.end - r.pos).toString() + " bytes follow the last of " + after.toString() + " records");
}

export function failNull(r: WireReader, field: string, reason: string): Mesh | null {
  r.fail(field, reason);
  return null;
}

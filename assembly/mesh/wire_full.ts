// A full message ("the model is exactly these records") into a new Mesh: every record checked
// first (texts interned into the new model as they are met, sizes counted), then every record
// stored in message order; refused whole on any problem (the caller keeps its old model).
import { reserveMembers, ensureMemberships, ensureServices, ensureWorkloads } from "./edit";
import { Mesh, PORTS_SCANNED } from "./model";
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
import { IdCounts, IdMarks } from "./wire_marks";
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

// What pass 1 learns, reused across messages (one VM applies one message at a time).
/** Workload and service ids met (each at most once in a full message). */
const seenW = new IdMarks();
const seenS = new IdMarks();
/** Memberships per service id the message names. */
const perService = new IdCounts();

/**
 * Nothing here is sized from the header's id limits, which a message only claims: a 64-byte
 * message declaring 2,000,000 / 2,000,000 once took 161 MB before any record was checked (and
 * linear memory never shrinks). Columns are sized from the records that fit in the body and
 * grown to the largest id a record actually carries; the members per service are counted in a
 * table of the services named; duplicates are marked in bit sets grown to the ids met.
 */
export function loadFull(r: WireReader, h: Header): Mesh | null {
  const m = new Mesh();
  m.epoch = h.epoch;
  m.version = h.version;
  const nw = <i32>h.workloadLimit;
  seenW.clear();
  seenS.clear();
  perService.clear();
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
  let workloadIds = 0; // the largest workload id + 1
  let serviceIds = 0;
  if (!readTables(r)) return null;
  const start = r.pos;
  // The workload columns first: the check pass leaves each pod's interned text ids in them.
  // At most one record per 5 bytes of body (readHeader checked the count against it).
  ensureWorkloads(m, min(nw, h.records), true);
  for (let i = 0; i < h.records; i++) {
    const type = recordHead(r, i);
    if (type == REC_WORKLOAD_UPSERT || type == REC_WORKLOAD_COMPACT) growColumns(m, r.recordId, nw);
    if (type == 0 || !checkRecord(r, m, type, h, true)) return null;
    if (type == REC_WORKLOAD_REMOVE || type == REC_SERVICE_REMOVE) return failNull(r, "", "a full message holds upserts only");
    if (type == REC_WORKLOAD_UPSERT || type == REC_WORKLOAD_COMPACT) {
      if (!seenW.mark(<u32>r.recordId)) return failNull(r, "id", "workload " + r.recordId.toString() + " appears twice");
      workloadIds = max(workloadIds, r.recordId + 1);
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
        perService.bump(r.u32At(at));
        const n = <i32>load<u8>(r.base + <usize>at + 4);
        if (n > 0) {
          overridden++;
          overrideWords += n;
        }
        at += 5 + n * 4;
      }
    } else {
      if (!seenS.mark(<u32>r.recordId)) return failNull(r, "id", "service " + r.recordId.toString() + " appears twice");
      serviceIds = max(serviceIds, r.recordId + 1);
      // Only long port lists are indexed (short ones are scanned: setPorts).
      if (serviceRec.portCount > PORTS_SCANNED) ports += serviceRec.portCount;
      vips += serviceRec.vipCount;
    }
  }
  if (r.pos != r.end) return trailing(r);
  // Every membership names a service of this message: refused whole before anything is
  // allocated for the services (a membership of an absent service used to be kept, dangling,
  // and joined the service when a later delta upserted it).
  for (let slot = 0; slot < perService.capacity; slot++) {
    const s = perService.idAt(slot);
    if (s >= 0 && !seenS.has(<u32>s)) return failMembership(r, h, start);
  }
  // The columns at their final size (the ids the records carry; pools from the counts).
  ensureWorkloads(m, workloadIds, true);
  ensureServices(m, serviceIds, true);
  ensureMemberships(m, memberships, true);
  m.v4Table = new AddrTable4(v4);
  m.v6Table = new AddrTable6(v6);
  m.vipTable4 = new AddrTable4(vips);
  m.vipTable6 = new AddrTable6(0);
  m.wExtra = new ChunkPool(<i32>extraWords, extraWorkloads, m.workloadCapacity());
  m.memOverrides = new ChunkPool(<i32>overrideWords, overridden, memberships);
  m.sMembers = new ChunkPool(memberships + serviceIds * 3, serviceIds, serviceIds);
  for (let s = 0; s < serviceIds; s++) {
    if (seenS.has(<u32>s)) reserveMembers(m, s, perService.get(<u32>s));
  }
  m.portIndex = new U64Table(ports);
  resetRefTable();
  // Pass 2: every record stored in message order (memberships may name a service that comes
  // later: each was checked above to be in the message).
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
  m.generation = 1;
  return m;
}

/**
 * Grows the workload columns to hold id (below the header's limit; the record check refuses
 * the rest), doubling so that rising ids cost amortised O(1), never past the limit.
 */
function growColumns(m: Mesh, id: i32, limit: i32): void {
  const have = m.workloadCapacity();
  if (id < have || id >= limit) return;
  ensureWorkloads(m, min(limit, max(id + 1, have * 2)), true);
}

/**
 * The refusal for a membership naming a service that is not in the full message: finds the
 * first such membership in message order (failure path: a scan of the message).
 */
function failMembership(r: WireReader, h: Header, start: i32): Mesh | null {
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
      const s = r.u32At(at);
      if (!seenS.has(s)) {
        r.trusted = false;
        return failNull(r, indexed("memberships", k) + ".service", "service " + s.toString() + " is not in this full message");
      }
      at += 5 + <i32>r.u8At(at + 4) * 4;
    }
  }
  r.trusted = false;
  r.record = -1;
  return failNull(r, "", "a membership names a service that is not in this full message");
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

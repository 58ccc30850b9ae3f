// A delta message: checked whole against the state after it, then applied in place
// (wire_apply.ts describes the rules).
import { FAMILY_V4, formatIp } from "./ip";
import {
  clearServiceContent,
  dropMembersOfServices,
  ensureServices,
  ensureWorkloads,
  reclaimRetiredServices,
  removeServicesWithoutMembers,
  removeWorkload,
} from "./edit";
import { IDENTITY_MASK, MEM_SERVICE, Mesh, W_V4 } from "./model";
import { MAX_LOCALITIES, MAX_NETWORKS } from "./parse";
import { ADDED, AddrTable4, AddrTable6 } from "./table";
import { IdSlots } from "./wire_marks";
import {
  indexed,
  quoted,
  REC_SERVICE_REMOVE,
  REC_SERVICE_UPSERT,
  REC_WORKLOAD_COMPACT,
  REC_WORKLOAD_UPSERT,
  WireReader,
} from "./wire";
import {
  checkRecord,
  Header,
  recordHead,
  scratchAddress,
  serviceRec,
  storeService,
  storeWorkload,
  workloadRec,
} from "./wire_store";
import { trailing } from "./wire_full";

// ==================================================================== delta

// The message's records, REC_WORDS words each: type (with REC_LAST when it is its id's last
// record in the message: its state after it), id, offset, and a workload upsert's first IPv4
// address (0: none, for warmLines). One flat array, sized once per message from its record
// count (which the header check bounds by the body: at most one record per 5 bytes) and read
// with plain loads: the per-record bookkeeping of a delta of 65,535 removes (5 bytes each) was
// a fifth of its time when it was five growing arrays.
const REC_WORDS = 4;
const REC_LAST: u32 = 0x100;
/** On a service's last record: the id is removed somewhere in the message (its members go). */
const REC_REMOVED: u32 = 0x200;
let recs = new StaticArray<u32>(0);

// @ts-ignore: decorator
@inline function recWord(i: i32, k: i32): u32 {
  return load<u32>(changetype<usize>(recs) + ((<usize>i * REC_WORDS + <usize>k) << 2));
}
// @ts-ignore: decorator
@inline function setRecWord(i: i32, k: i32, v: u32): void {
  store<u32>(changetype<usize>(recs) + ((<usize>i * REC_WORDS + <usize>k) << 2), v);
}
// @ts-ignore: decorator
@inline function recType(i: i32): i32 {
  return <i32>(recWord(i, 0) & 0xff);
}
// @ts-ignore: decorator
@inline function recLast(i: i32): bool {
  return (recWord(i, 0) & REC_LAST) != 0;
}
// @ts-ignore: decorator
@inline function recId(i: i32): i32 {
  return <i32>recWord(i, 1);
}
// @ts-ignore: decorator
@inline function recAt(i: i32): i32 {
  return <i32>recWord(i, 2);
}
// @ts-ignore: decorator
@inline function recV4(i: i32): u32 {
  return recWord(i, 3);
}

/** Room for n records (every access is below the n of the message being read). */
function reserveRecords(n: i32): void {
  if (n * REC_WORDS <= recs.length) return;
  recs = new StaticArray<u32>(max(n, recs.length / REC_WORDS * 2) * REC_WORDS);
}

/** Retired hostname entries any delta may reclaim, beside its per-record share. */
const RECLAIM_BASE = 64;

/** Whether the message has service records at all (else no membership needs the index). */
let lastHasServices = false;
/** The service ids whose memberships the apply drops (a remove anywhere in the message). */
let removedIds = new StaticArray<i32>(0);
/** Where warmLines puts what it loads, so the loads are kept. */
let warmSink: u32 = 0;

/**
 * Brings the model's lines this delta will touch into the cache, in loops of independent loads:
 * a model of a million pods is far bigger than the caches, and the apply's misses, taken one
 * after another (each waits for the one before), are most of a delta's cost at that size.
 * Issued side by side, they overlap. Reads only; the result is discarded.
 */
function warmLines(m: Mesh, n: i32): void {
  const capacity = m.workloadCapacity();
  let sink: u32 = 0;
  // The workloads' own lines, and the address slots new addresses will probe.
  for (let i = 0; i < n; i++) {
    const id = recId(i);
    const type = recType(i);
    if (type >= REC_SERVICE_UPSERT || id >= capacity) continue;
    sink += m.wInfo(id);
    const v4 = recV4(i);
    if (v4 != 0) sink += m.v4Table.touch(v4);
  }
  // What those lines point at: the first membership, the current address's slot.
  const mems = m.memCapacity();
  for (let i = 0; i < n; i++) {
    const id = recId(i);
    if (recType(i) >= REC_SERVICE_UPSERT || id >= capacity) continue;
    const g = <i32>m.wChain(id) - 1;
    if (g >= 0 && g < mems) sink += m.mem3(g, MEM_SERVICE);
    if ((m.wInfo(id) & W_V4) != 0) sink += m.v4Table.touch(m.wIp4(id));
  }
  warmSink += sink;
}

/** The last record of each workload id and service id in the message; the removed services. */
const lastWorkload = new IdSlots();
const lastService = new IdSlots();
const removedServices = new IdSlots();

/** The index of the message's last record for the id, or -1. */
// @ts-ignore: decorator
@inline function lastOf(service: bool, id: i32): i32 {
  return service ? lastService.get(<u32>id) : lastWorkload.get(<u32>id);
}

export function applyDelta(m: Mesh, r: WireReader, h: Header): bool {
  // Pass 1: every record checked on its own; where each one is.
  reserveRecords(h.records);
  // The columns grow to the ids the records carry, not to the header's limits (which a
  // message only claims: 2,000,000 of each would cost ~40 MB of columns for a 64-byte delta).
  let workloadIds = 0;
  let serviceIds = 0;
  for (let i = 0; i < h.records; i++) {
    const type = recordHead(r, i);
    if (type == 0) return false;
    // A delta has no tables, so nothing a compact record names exists.
    if (type == REC_WORKLOAD_COMPACT) return r.fail("type", "5 (compact workload upsert) is only valid in a full message");
    const at = r.pos;
    if (!checkRecord(r, m, type, h, false)) return false;
    setRecWord(i, 0, <u32>type);
    setRecWord(i, 1, <u32>r.recordId);
    setRecWord(i, 2, <u32>at);
    setRecWord(i, 3, type == REC_WORKLOAD_UPSERT && workloadRec.v4Count > 0 ? workloadRec.firstV4 : 0);
    if (type >= REC_SERVICE_UPSERT) serviceIds = max(serviceIds, r.recordId + 1);
    else workloadIds = max(workloadIds, r.recordId + 1);
  }
  if (r.pos != r.end) return trailing(r) !== null;
  const n = h.records;
  warmLines(m, n);
  // The last record of each id, and which service ids are removed somewhere in the message.
  lastWorkload.begin();
  lastService.begin();
  removedServices.begin();
  let serviceRecords = 0;
  let removes = 0;
  for (let i = 0; i < n; i++) {
    const type = recType(i);
    const id = <u32>recId(i);
    if (type >= REC_SERVICE_UPSERT) {
      lastService.set(id, i);
      serviceRecords++;
    } else lastWorkload.set(id, i);
    if (type == REC_SERVICE_REMOVE) {
      removedServices.set(id, i);
      removes++;
    }
  }
  lastHasServices = serviceRecords > 0;
  // Whether each record is its id's last, looked up once (every loop below asks); the service
  // ids whose last record is here (Mesh.changedServices, sized after); and the removed ones,
  // whose memberships the apply drops: at most one per remove record (a remove last, or an
  // upsert last after a remove, which loses its members too). Scratch only: nothing in m.
  if (removes > removedIds.length) removedIds = new StaticArray<i32>(max(removes, removedIds.length * 2));
  let removed = 0;
  let changedCount = 0;
  for (let i = 0; i < n; i++) {
    const type = recType(i);
    const id = recId(i);
    const service = type >= REC_SERVICE_UPSERT;
    if (lastOf(service, id) != i) continue;
    let word = <u32>type | REC_LAST;
    if (service) {
      changedCount++;
      if (type == REC_SERVICE_REMOVE || removedServices.get(<u32>id) >= 0) {
        word |= REC_REMOVED;
        if (removed < removedIds.length) unchecked((removedIds[removed++] = id));
      }
    }
    setRecWord(i, 0, word);
  }
  if (!checkFinalState(m, r, h)) return false;

  // Apply. First, index entries of services removed by earlier messages, at most about one per
  // two records of this one (HostnameIndex: each is a cache miss, about a record's cost), so
  // no message pays for more than its own size; then 1: clear every id the message names.
  m.hostnames.reclaim(RECLAIM_BASE + (n >> 1), m.sHostname);
  reclaimRetiredServices(m, RECLAIM_BASE + (n >> 1));
  ensureWorkloads(m, workloadIds);
  ensureServices(m, serviceIds);
  // Every service id whose last record is here, in record order: sized once, then stored.
  const changed = m.changedServices;
  changed.length = changedCount;
  const changedLength = changedCount;
  changedCount = 0;
  // The removed services first, all together: their memberships (one walk per affected pod),
  // then the rest of each (removedIds is in record order).
  if (removed > 0) {
    dropMembersOfServices(m, removedIds, removed);
    removeServicesWithoutMembers(m, removedIds, removed);
  }
  for (let i = 0; i < n; i++) {
    const type = recType(i);
    const id = recId(i);
    const service = type >= REC_SERVICE_UPSERT;
    if (!recLast(i)) continue;
    // A raw store (changedCount is below the length set above): an indexed store is a call.
    if (service && changedCount < changedLength) store<i32>(changed.dataStart + (<usize>(changedCount++) << 2), id);
    if (!service) removeWorkload(m, id);
    else if ((recWord(i, 0) & REC_REMOVED) == 0) clearServiceContent(m, id);
  }
  // 2: the services' last upserts; 3: the workloads'.
  r.trusted = true;
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < n; i++) {
      const type = recType(i);
      if (type != (pass == 0 ? REC_SERVICE_UPSERT : REC_WORKLOAD_UPSERT)) continue;
      const id = recId(i);
      if (!recLast(i)) continue;
      r.record = i;
      r.recordType = type;
      r.recordId = id;
      r.pos = recAt(i);
      if (pass == 0) {
        r.service(serviceRec, h.serviceLimit);
        storeService(r, m, serviceRec);
      } else {
        r.workload(workloadRec, h.workloadLimit, h.serviceLimit);
        storeWorkload(r, m, workloadRec);
      }
    }
  }
  r.trusted = false;
  m.version = h.version;
  m.generation++;
  // Checked before: a failure here would be a bug in checkFinalState, reported, not trapped.
  return !r.failed();
}

/**
 * The rules that span records, on the state after the message: hostnames, VIPs and workload
 * addresses unique (an existing holder counts unless the message names it), memberships
 * naming services live after the message. Touches nothing in m.
 */
function checkFinalState(m: Mesh, r: WireReader, h: Header): bool {
  const n = h.records;
  const hostnames = new Map<string, i32>();
  const vip4 = new AddrTable4(0);
  const vip6 = new AddrTable6(0);
  const addr4 = new AddrTable4(0);
  const addr6 = new AddrTable6(0);
  const newNetworks = new Map<string, i32>();
  let newTexts = 0;
  const a = scratchAddress;
  for (let i = 0; i < n; i++) {
    const type = recType(i);
    const id = recId(i);
    const service = type >= REC_SERVICE_UPSERT;
    if (!recLast(i)) continue;
    if (type != REC_SERVICE_UPSERT && type != REC_WORKLOAD_UPSERT) continue;
    r.record = i;
    r.recordType = type;
    r.recordId = id;
    r.pos = recAt(i);
    if (type == REC_SERVICE_UPSERT) {
      const s = serviceRec;
      r.service(s, h.serviceLimit);
      const hostname = String.UTF8.decodeUnsafe(s.hostPtr, <usize>s.hostLen);
      if (hostnames.has(hostname)) return r.fail("hostname", "duplicate hostname " + quoted(s.hostPtr, s.hostLen) + " (record " + hostnames.get(hostname).toString() + ")");
      hostnames.set(hostname, i);
      const owner = m.serviceByHostname(hostname);
      if (owner >= 0 && owner != id && lastOf(true, owner) < 0) {
        return r.fail("hostname", "duplicate hostname " + quoted(s.hostPtr, s.hostLen) + " (service " + owner.toString() + ")");
      }
      r.pos = s.vipAt;
      vip4.ensureRoom(s.vipCount);
      vip6.ensureRoom(s.vipCount);
      for (let k = 0; k < s.vipCount; k++) {
        r.string("");
        const net = networkKey(m, r.strPtr, r.strLen, newNetworks);
        if (net >= MAX_NETWORKS) return r.fail(indexed("vips", k) + ".network", "more than " + MAX_NETWORKS.toString() + " distinct networks");
        r.address("", a);
        const clash = a.family == FAMILY_V4 ? vip4.insert(a.v4, id, net) : vip6.insert(a.hi, a.lo, id, net);
        if (clash != ADDED) return r.fail(indexed("vips", k) + ".address", "VIP " + formatIp(a) + (clash == id ? " listed twice" : " is also in service " + clash.toString()));
        const owner = net < m.networkCount() ? m.serviceByVip(net, a) : -1;
        if (owner >= 0 && owner != id && lastOf(true, owner) < 0) {
          return r.fail(indexed("vips", k) + ".address", "VIP " + formatIp(a) + " is already used by service " + owner.toString());
        }
      }
    } else {
      const w = workloadRec;
      r.workload(w, h.workloadLimit, h.serviceLimit);
      // Interned texts are kept until the next full load: refuse (rather than fail half-way)
      // a message that could overflow their ids. Counted per record: an upper bound.
      if (w.identityLen > 0 && m.identities.findUtf8(w.identityPtr, w.identityLen) < 0 && <u32>(m.identities.size + newTexts++) > IDENTITY_MASK) {
        return r.fail("identity", "the interned identities are full (" + IDENTITY_MASK.toString() + "): a full load compacts them");
      }
      if (w.localityLen > 0 && m.localities.findUtf8(w.localityPtr, w.localityLen) < 0 && m.localities.size + newTexts++ > MAX_LOCALITIES) {
        return r.fail("locality", "the interned localities are full (" + MAX_LOCALITIES.toString() + "): a full load compacts them");
      }
      const net = networkKey(m, w.netPtr, w.netLen, newNetworks);
      if (net >= MAX_NETWORKS) return r.fail("network", "more than " + MAX_NETWORKS.toString() + " distinct networks");
      r.pos = w.addressAt;
      addr4.ensureRoom(w.addressCount);
      addr6.ensureRoom(w.addressCount);
      for (let k = 0; k < w.addressCount; k++) {
        r.address("", a);
        const clash = a.family == FAMILY_V4 ? addr4.insert(a.v4, id, net) : addr6.insert(a.hi, a.lo, id, net);
        if (clash != ADDED && clash != id) {
          return r.fail(indexed("addresses", k), "address " + formatIp(a) + " is also in workload " + clash.toString() + " of this message");
        }
        const owner = net < m.networkCount() ? m.workloadByAddress(net, a) : -1;
        if (owner >= 0 && owner != id && lastOf(false, owner) < 0) {
          return r.fail(indexed("addresses", k), "address " + formatIp(a) + " on network " + quoted(w.netPtr, w.netLen) + " is already used by workload " + owner.toString());
        }
      }
      let at = w.memberAt;
      for (let k = 0; k < w.memberCount; k++) {
        const s = <i32>r.u32At(at);
        const nov = <i32>r.u8At(at + 4);
        // A message without service records leaves every service as the model has it.
        const final = lastHasServices ? lastOf(true, s) : -1;
        const live = final >= 0 ? recType(final) == REC_SERVICE_UPSERT : m.serviceLive(s);
        if (!live) return r.fail(indexed("memberships", k) + ".service", "service " + s.toString() + " is not live after this message");
        at += 5 + nov * 4;
      }
    }
    if (r.failed()) return false;
  }
  return true;
}

/**
 * The network's id in m, or m's count + its index among the message's new networks (a hash
 * lookup either way: a list scan here cost O(new networks) per workload and VIP).
 */
function networkKey(m: Mesh, ptr: usize, len: i32, fresh: Map<string, i32>): i32 {
  const id = m.networks.findUtf8(ptr, len);
  if (id >= 0) return id;
  const text = String.UTF8.decodeUnsafe(ptr, <usize>len);
  let k = fresh.size;
  if (fresh.has(text)) k = fresh.get(text);
  else fresh.set(text, k);
  return m.networkCount() + k;
}


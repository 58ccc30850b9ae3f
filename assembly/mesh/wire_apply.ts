// applyMeshMessage: the feed's binary messages (wire.ts) applied to the Mesh.
//
// - full: "the model is exactly these records". Built into a new Mesh sized from the header's
//   id limits, in three passes over the message: every record checked (and the texts it
//   names interned into the new model), then the services stored, then the workloads (whose
//   addresses and memberships are checked against what is stored). Any problem refuses the
//   message and the new model is dropped: the caller keeps its old one.
// - delta: checked whole before the model is touched: every record (as for a full load), then
//   what spans records, on the state after the message (the last record of each id wins): an
//   address on one live workload per network, a VIP on one service per network, a hostname on
//   one service, memberships naming services that are live after it. Then applied in place:
//   every id the message names is cleared (a service id with a remove anywhere in the message
//   loses every membership), then the services' last upserts, then the workloads'. Cost is
//   O(records + their lists), whatever the mesh size.
// - no-change: checked against the model's epoch and version.
// Nothing here traps on any input: reads are bounds-checked (wire.ts), ids are checked
// against the header's limits, which are checked against the model's own limits.
import { Address, FAMILY_V4, formatIp } from "./ip";
import {
  addMembership,
  reserveMembers,
  clearServiceContent,
  ensureMemberships,
  ensureServices,
  ensureWorkloads,
  internLocality,
  removeService,
  removeWorkload,
  setAddresses,
  setHostname,
  setPorts,
  setSans,
  setService,
  setVips,
  setWorkload,
  setWorkloadRefs,
} from "./edit";
import { DEFAULT_LB_PREFS, IDENTITY_MASK, Mesh, S_HEADLESS, S_LB_STANDARD, VIP_WORDS, W_HEALTHY, W_ISTIO } from "./model";
import { defaultClusterName, MAX_LOCALITIES, MAX_NETWORKS, MAX_SERVICES, MAX_WORKLOADS } from "./parse";
import { ChunkPool } from "./pool";
import { RefTable } from "./refs";
import { ADDED, AddrTable4, AddrTable6, U64Table } from "./table";
import {
  H_BASE,
  H_BODY,
  H_EPOCH,
  H_FORMAT,
  H_KIND,
  H_MAGIC,
  H_RECORDS,
  H_RESERVED,
  H_SERVICE_LIMIT,
  H_VERSION,
  H_WORKLOAD_LIMIT,
  HEADER_BYTES,
  indexed,
  KIND_DELTA,
  KIND_FULL,
  KIND_NO_CHANGE,
  quoted,
  REC_SERVICE_REMOVE,
  REC_SERVICE_UPSERT,
  REC_WORKLOAD_REMOVE,
  REC_WORKLOAD_UPSERT,
  SF_CLUSTER,
  SF_HEADLESS,
  SF_LB_STANDARD,
  WF_HEALTHY,
  WF_ISTIO,
  WIRE_MAGIC,
  WIRE_VERSION,
  WireReader,
  WireRef,
  WireService,
  WireWorkload,
} from "./wire";

/** What applyMeshMessage did. */
export class MeshApplyResult {
  /** The model to use from now on: the input one when refused (or changed in place). */
  mesh: Mesh | null = null;
  /** "" when applied, else one line naming the record and field. */
  error: string = "";
  /** KIND_FULL, KIND_DELTA, KIND_NO_CHANGE; 0 when the header could not be read. */
  kind: i32 = 0;
  epoch: u64 = 0;
  version: u64 = 0;

  ok(): bool {
    return this.error.length == 0;
  }
}

class Header {
  kind: i32 = 0;
  epoch: u64 = 0;
  base: u64 = 0;
  version: u64 = 0;
  workloadLimit: u32 = 0;
  serviceLimit: u32 = 0;
  records: i32 = 0;
}

// Reused across messages (one VM applies one message at a time).
const reader = new WireReader();
const workloadRec = new WireWorkload();
const serviceRec = new WireService();
const scratchAddress = new Address();
const v4s = new Array<u32>();
const v6s = new Array<u64>();
const words = new Array<u32>();
const clusters = new Array<ArrayBuffer>();
const names = new Array<string>();
const overrides = new Array<u32>();
let refTable: RefTable | null = null;
let refTableMesh: Mesh | null = null;

/**
 * Applies one feed message to `mesh` (null: nothing loaded yet). Never traps. On success
 * `result.mesh` is the model to use (a new one after a full load, `mesh` itself after a delta
 * or no-change); on failure `result.error` says why and `result.mesh` is `mesh`, untouched.
 */
export function applyMeshMessage(mesh: Mesh | null, data: ArrayBuffer): MeshApplyResult {
  const result = new MeshApplyResult();
  result.mesh = mesh;
  const r = reader;
  r.reset(data);
  const h = new Header();
  if (!readHeader(r, h)) {
    result.error = r.error;
    return result;
  }
  result.kind = h.kind;
  result.epoch = h.epoch;
  result.version = h.version;
  if (h.kind == KIND_NO_CHANGE) {
    if (mesh === null) result.error = "header.kind: no-change, but no model is loaded";
    else if (mesh.epoch != h.epoch || mesh.version != h.version) {
      result.error = "header.version: no-change at epoch " + h.epoch.toString() + " version " + h.version.toString() +
        ", but the model is at epoch " + mesh.epoch.toString() + " version " + mesh.version.toString();
    }
    return result;
  }
  if (h.kind == KIND_FULL) {
    const fresh = loadFull(r, h);
    if (fresh === null) {
      result.error = r.error;
      return result;
    }
    result.mesh = fresh;
    return result;
  }
  if (mesh === null) {
    result.error = "header.kind: a delta, but no model is loaded";
    return result;
  }
  if (mesh.epoch != h.epoch) {
    result.error = "header.epoch: delta for epoch " + h.epoch.toString() + ", but the model is at epoch " + mesh.epoch.toString();
    return result;
  }
  if (mesh.version != h.base) {
    result.error = "header.baseVersion: delta from version " + h.base.toString() + ", but the model is at version " + mesh.version.toString();
    return result;
  }
  if (!applyDelta(mesh, r, h)) result.error = r.error;
  return result;
}

function readHeader(r: WireReader, h: Header): bool {
  if (r.end < HEADER_BYTES) return r.fail("", "message of " + r.end.toString() + " bytes is shorter than the 56-byte header");
  if (r.u32At(H_MAGIC) != WIRE_MAGIC) return r.fail("magic", "not 0x3148534d (\"MSH1\")");
  const format = r.u16At(H_FORMAT);
  if (format != WIRE_VERSION) return r.fail("formatVersion", format.toString() + " is not 1");
  const kind = <i32>r.u16At(H_KIND);
  if (kind != KIND_FULL && kind != KIND_DELTA && kind != KIND_NO_CHANGE) return r.fail("kind", kind.toString() + " is not 1 (full), 2 (delta) or 3 (no-change)");
  h.kind = kind;
  h.epoch = r.u64At(H_EPOCH);
  h.base = r.u64At(H_BASE);
  h.version = r.u64At(H_VERSION);
  if (h.epoch == 0) return r.fail("epoch", "must not be 0");
  if (kind == KIND_DELTA && h.version <= h.base) return r.fail("version", "a delta must move forward (version " + h.version.toString() + " <= base " + h.base.toString() + ")");
  if (kind != KIND_DELTA && h.base != 0) return r.fail("baseVersion", "must be 0 outside a delta");
  if (r.u64At(H_RESERVED) != 0) return r.fail("reserved", "must be 0");
  h.workloadLimit = r.u32At(H_WORKLOAD_LIMIT);
  h.serviceLimit = r.u32At(H_SERVICE_LIMIT);
  if (h.workloadLimit > <u32>MAX_WORKLOADS) return r.fail("workloadIdLimit", h.workloadLimit.toString() + " exceeds the limit of " + MAX_WORKLOADS.toString());
  if (h.serviceLimit > <u32>MAX_SERVICES) return r.fail("serviceIdLimit", h.serviceLimit.toString() + " exceeds the limit of " + MAX_SERVICES.toString());
  const body = r.u32At(H_BODY);
  if (<i64>body != <i64>r.end - HEADER_BYTES) return r.fail("bodyLength", body.toString() + " is not the message length - 56 (" + (r.end - HEADER_BYTES).toString() + ")");
  const records = r.u32At(H_RECORDS);
  if (kind == KIND_NO_CHANGE && records != 0) return r.fail("recordCount", "a no-change message has no records");
  if (<i64>records * 5 > <i64>body) return r.fail("recordCount", records.toString() + " records cannot fit in " + body.toString() + " bytes");
  h.records = <i32>records;
  r.pos = HEADER_BYTES;
  return true;
}

/** Reads record i's type and id; the body follows at r.pos. */
function recordHead(r: WireReader, i: i32): i32 {
  r.record = i;
  r.recordId = -1;
  const type = <i32>r.u8();
  r.recordType = type;
  if (r.over()) {
    r.truncated("");
    return 0;
  }
  if (type < REC_WORKLOAD_UPSERT || type > REC_SERVICE_REMOVE) {
    r.fail("type", type.toString() + " is not a record type (1..4)");
    return 0;
  }
  const id = r.u32();
  if (r.over()) {
    r.truncated("id");
    return 0;
  }
  if (id > 0x7fffffff) {
    r.fail("id", id.toString() + " is too large");
    return 0;
  }
  r.recordId = <i32>id;
  return type;
}

/** Checks a record's body (type already read); false (failed) on a problem. */
function checkRecord(r: WireReader, m: Mesh, type: i32, h: Header, internTexts: bool): bool {
  if (type == REC_WORKLOAD_UPSERT) {
    const w = workloadRec;
    if (!r.workload(w, h.workloadLimit, h.serviceLimit)) return false;
    return checkWorkloadTexts(r, m, w, internTexts);
  }
  if (type == REC_SERVICE_UPSERT) return r.service(serviceRec, h.serviceLimit);
  if (type == REC_WORKLOAD_REMOVE) {
    if (<u32>r.recordId >= h.workloadLimit) return r.fail("id", "not below the workload id limit " + h.workloadLimit.toString());
    return true;
  }
  if (<u32>r.recordId >= h.serviceLimit) return r.fail("id", "not below the service id limit " + h.serviceLimit.toString());
  return true;
}

/**
 * Identity and locality shapes, checked once per text the model does not know (a full load
 * interns them into its new model as it goes, so each distinct text is checked once).
 */
function checkWorkloadTexts(r: WireReader, m: Mesh, w: WireWorkload, intern: bool): bool {
  if (w.identityLen > 0 && m.identities.findUtf8(w.identityPtr, w.identityLen) < 0) {
    if (!r.checkIdentity(w.identityPtr, w.identityLen)) return false;
    if (intern) {
      const id = m.identities.internUtf8(w.identityPtr, w.identityLen);
      if (<u32>id > IDENTITY_MASK) return r.fail("identity", "more than " + IDENTITY_MASK.toString() + " distinct identities");
    }
  }
  if (w.localityLen > 0 && m.localities.findUtf8(w.localityPtr, w.localityLen) < 0) {
    if (!r.checkLocality(w.localityPtr, w.localityLen)) return false;
    if (intern) {
      const id = internLocality(m, String.UTF8.decodeUnsafe(w.localityPtr, <usize>w.localityLen));
      if (id > MAX_LOCALITIES) return r.fail("locality", "more than " + MAX_LOCALITIES.toString() + " distinct localities");
    }
  }
  if (intern && m.networks.findUtf8(w.netPtr, w.netLen) < 0) {
    const id = m.networks.internUtf8(w.netPtr, w.netLen);
    if (id >= MAX_NETWORKS) return r.fail("network", "more than " + MAX_NETWORKS.toString() + " distinct networks");
  }
  return true;
}

function refsOf(m: Mesh): RefTable {
  let table = refTable;
  if (table === null || refTableMesh !== m) {
    table = new RefTable(m);
    refTable = table;
    refTableMesh = m;
  }
  return table;
}

/** The reference id of `ref` (added when new); -1 when absent. */
function refId(m: Mesh, ref: WireRef, network: i32): i32 {
  if (!ref.present) return -1;
  const hostname = ref.kind == 2 ? String.UTF8.decodeUnsafe(ref.hostPtr, <usize>ref.hostLen) : "";
  return refsOf(m).findOrAdd(hostname, ref.address, ref.port, network);
}

// ==================================================================== storing records

/** Stores service record `s` (checked) into m. False (failed) on a clash (full loads only check here). */
function storeService(r: WireReader, m: Mesh, s: WireService): bool {
  const id = s.id;
  let flags: u8 = 0;
  if ((s.flags & SF_HEADLESS) != 0) flags |= S_HEADLESS;
  if ((s.flags & SF_LB_STANDARD) != 0) flags |= S_LB_STANDARD;
  const hostname = String.UTF8.decodeUnsafe(s.hostPtr, <usize>s.hostLen);
  const owner = m.serviceByHostname(hostname);
  if (owner >= 0 && owner != id) return r.fail("hostname", "duplicate hostname " + quoted(s.hostPtr, s.hostLen) + " (service " + owner.toString() + ")");
  setService(m, id, flags, refId(m, s.waypoint, 0), s.lbPrefs);
  setHostname(m, id, hostname);
  // Ports, with a cluster name each.
  words.length = 0;
  clusters.length = 0;
  const explicit = (s.flags & SF_CLUSTER) != 0 ? String.UTF8.encode(String.UTF8.decodeUnsafe(s.clusterPtr, <usize>s.clusterLen)) : null;
  for (let i = 0; i < s.portCount; i++) {
    const port = r.u16At(s.portAt + i * 4);
    const target = r.u16At(s.portAt + i * 4 + 2);
    words.push((port << 16) | target);
    clusters.push(explicit !== null ? explicit : defaultClusterName(<i32>port, hostname));
  }
  setPorts(m, id, words, clusters);
  // VIPs.
  words.length = 0;
  r.pos = s.vipAt;
  const a = scratchAddress;
  m.vipTable4.ensureRoom(s.vipCount);
  m.vipTable6.ensureRoom(s.vipCount);
  for (let i = 0; i < s.vipCount; i++) {
    r.string("");
    const net = m.networks.internUtf8(r.strPtr, r.strLen);
    if (net >= MAX_NETWORKS) return r.fail(indexed("vips", i) + ".network", "more than " + MAX_NETWORKS.toString() + " distinct networks");
    r.address("", a);
    const clash = m.serviceByVip(net, a);
    if (clash >= 0) {
      const what = clash == id ? "duplicate VIP " : "VIP ";
      return r.fail(indexed("vips", i) + ".address", what + formatIp(a) + (clash == id ? "" : " is already used by service " + clash.toString()));
    }
    words.push((<u32>net << 8) | <u32>a.family);
    words.push(a.family == FAMILY_V4 ? a.v4 : <u32>(a.hi >> 32));
    words.push(a.family == FAMILY_V4 ? 0 : <u32>a.hi);
    words.push(a.family == FAMILY_V4 ? 0 : <u32>(a.lo >> 32));
    words.push(a.family == FAMILY_V4 ? 0 : <u32>a.lo);
    // Visible to the next VIP's duplicate check.
    if (a.family == FAMILY_V4) m.vipTable4.insert(a.v4, id, net);
    else m.vipTable6.insert(a.hi, a.lo, id, net);
  }
  setVips(m, id, words, false);
  // SANs.
  names.length = 0;
  r.pos = s.sanAt;
  for (let i = 0; i < s.sanCount; i++) {
    r.string("");
    names.push(String.UTF8.decodeUnsafe(r.strPtr, <usize>r.strLen));
  }
  setSans(m, id, names);
  return !r.failed();
}

/**
 * Stores workload record `w` (checked) into m: columns, addresses (checked against the
 * tables), references, memberships (each must name a live service). False (failed) on a clash.
 */
function storeWorkload(r: WireReader, m: Mesh, w: WireWorkload, checkServices: bool = true): bool {
  const id = w.id;
  const net = m.networks.internUtf8(w.netPtr, w.netLen);
  if (net >= MAX_NETWORKS) return r.fail("network", "more than " + MAX_NETWORKS.toString() + " distinct networks");
  const identity = w.identityLen > 0 ? m.identities.internUtf8(w.identityPtr, w.identityLen) : 0;
  if (<u32>identity > IDENTITY_MASK) return r.fail("identity", "more than " + IDENTITY_MASK.toString() + " distinct identities");
  let loc = 0;
  if (w.localityLen > 0) {
    loc = m.localities.findUtf8(w.localityPtr, w.localityLen);
    if (loc < 0) loc = internLocality(m, String.UTF8.decodeUnsafe(w.localityPtr, <usize>w.localityLen));
    if (loc > MAX_LOCALITIES) return r.fail("locality", "more than " + MAX_LOCALITIES.toString() + " distinct localities");
  }
  let info = <u32>identity;
  if ((w.flags & WF_ISTIO) != 0) info |= W_ISTIO;
  if ((w.flags & WF_HEALTHY) != 0) info |= W_HEALTHY;
  setWorkload(m, id, info, net, loc);
  // Addresses: each must be free on this network.
  v4s.length = 0;
  v6s.length = 0;
  r.pos = w.addressAt;
  const a = scratchAddress;
  m.v4Table.ensureRoom(w.addressCount);
  m.v6Table.ensureRoom(w.addressCount);
  for (let i = 0; i < w.addressCount; i++) {
    r.address("", a);
    const clash = a.family == FAMILY_V4 ? m.v4Table.insert(a.v4, id, net) : m.v6Table.insert(a.hi, a.lo, id, net);
    if (clash >= 0 && clash != id) {
      return r.fail(indexed("addresses", i), "address " + formatIp(a) + " on network " + quoted(w.netPtr, w.netLen) + " is already used by workload " + clash.toString());
    }
    if (a.family == FAMILY_V4) v4s.push(a.v4);
    else {
      v6s.push(a.hi);
      v6s.push(a.lo);
    }
  }
  setAddresses(m, id, v4s, v6s);
  setWorkloadRefs(m, id, refId(m, w.waypoint, net), refId(m, w.gateway, net));
  // Memberships.
  let at = w.memberAt;
  for (let i = 0; i < w.memberCount; i++) {
    const s = <i32>r.u32At(at);
    const n = <i32>r.u8At(at + 4);
    if (checkServices && !m.serviceLive(s)) return r.fail(indexed("memberships", i) + ".service", "service " + s.toString() + " is not live after this message");
    overrides.length = 0;
    for (let k = 0; k < n; k++) {
      overrides.push((r.u16At(at + 5 + k * 4) << 16) | r.u16At(at + 7 + k * 4));
    }
    addMembership(m, id, s, n > 0 ? overrides : null);
    at += 5 + n * 4;
  }
  return !r.failed();
}

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

function loadFull(r: WireReader, h: Header): Mesh | null {
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
  const start = r.pos;
  for (let i = 0; i < h.records; i++) {
    const type = recordHead(r, i);
    if (type == 0 || !checkRecord(r, m, type, h, true)) return null;
    if (type == REC_WORKLOAD_REMOVE || type == REC_SERVICE_REMOVE) return failNull(r, "", "a full message holds upserts only");
    if (type == REC_WORKLOAD_UPSERT) {
      if (!mark(seenW, r.recordId)) return failNull(r, "id", "workload " + r.recordId.toString() + " appears twice");
      const w = workloadRec;
      const save = r.pos;
      r.pos = w.addressAt;
      let n4 = 0;
      let n6 = 0;
      for (let k = 0; k < w.addressCount; k++) {
        r.address("", scratchAddress);
        if (scratchAddress.family == FAMILY_V4) n4++;
        else n6++;
      }
      r.pos = save;
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
  refTable = null;
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
      if (!r.workload(workloadRec, h.workloadLimit, h.serviceLimit)) return null;
      const end = r.pos;
      if (!storeWorkload(r, m, workloadRec, false)) return null;
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
    if (type != REC_WORKLOAD_UPSERT || !r.workload(workloadRec, h.workloadLimit, h.serviceLimit)) break;
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

function trailing(r: WireReader): Mesh | null {
  const after = r.record + 1;
  r.record = -1;
  return failNull(r, "recordCount", (r.end - r.pos).toString() + " bytes follow the last of " + after.toString() + " records");
}

function failNull(r: WireReader, field: string, reason: string): Mesh | null {
  r.fail(field, reason);
  return null;
}

// ==================================================================== delta

const recType = new Array<i32>();
const recId = new Array<i32>();
const recAt = new Array<i32>();

/** Key of an id in the "last record" index: workloads and services apart. */
// @ts-ignore: decorator
@inline function idKey(service: bool, id: i32): u64 {
  return (service ? (<u64>1 << 32) : 0) | <u64><u32>id;
}

function applyDelta(m: Mesh, r: WireReader, h: Header): bool {
  // Pass 1: every record checked on its own; where each one is.
  recType.length = 0;
  recId.length = 0;
  recAt.length = 0;
  for (let i = 0; i < h.records; i++) {
    const type = recordHead(r, i);
    if (type == 0) return false;
    const at = r.pos;
    if (!checkRecord(r, m, type, h, false)) return false;
    recType.push(type);
    recId.push(r.recordId);
    recAt.push(at);
  }
  if (r.pos != r.end) return trailing(r) !== null;
  const n = h.records;
  // The last record of each id, and which service ids are removed somewhere in the message.
  const last = new U64Table(n);
  const removedServices = new U64Table(0);
  for (let i = 0; i < n; i++) {
    const type = unchecked(recType[i]);
    const key = idKey(type >= REC_SERVICE_UPSERT, unchecked(recId[i]));
    last.remove(key);
    last.add(key, i);
    if (type == REC_SERVICE_REMOVE) removedServices.add(key, i);
  }
  if (!checkFinalState(m, r, h, last)) return false;

  // Apply. 1: clear every id the message names.
  ensureWorkloads(m, <i32>h.workloadLimit);
  ensureServices(m, <i32>h.serviceLimit);
  for (let i = 0; i < n; i++) {
    const type = unchecked(recType[i]);
    const id = unchecked(recId[i]);
    const service = type >= REC_SERVICE_UPSERT;
    if (last.get(idKey(service, id)) != i) continue;
    if (!service) removeWorkload(m, id);
    else if (removedServices.get(idKey(true, id)) >= 0) removeService(m, id);
    else clearServiceContent(m, id);
  }
  // 2: the services' last upserts; 3: the workloads'.
  r.trusted = true;
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < n; i++) {
      const type = unchecked(recType[i]);
      if (type != (pass == 0 ? REC_SERVICE_UPSERT : REC_WORKLOAD_UPSERT)) continue;
      const id = unchecked(recId[i]);
      if (last.get(idKey(pass == 0, id)) != i) continue;
      r.record = i;
      r.recordType = type;
      r.recordId = id;
      r.pos = unchecked(recAt[i]);
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
function checkFinalState(m: Mesh, r: WireReader, h: Header, last: U64Table): bool {
  const n = h.records;
  const hostnames = new Map<string, i32>();
  const vip4 = new AddrTable4(0);
  const vip6 = new AddrTable6(0);
  const addr4 = new AddrTable4(0);
  const addr6 = new AddrTable6(0);
  const newNetworks = new Array<string>();
  let newTexts = 0;
  const a = scratchAddress;
  for (let i = 0; i < n; i++) {
    const type = unchecked(recType[i]);
    const id = unchecked(recId[i]);
    const service = type >= REC_SERVICE_UPSERT;
    if (last.get(idKey(service, id)) != i) continue;
    if (type != REC_SERVICE_UPSERT && type != REC_WORKLOAD_UPSERT) continue;
    r.record = i;
    r.recordType = type;
    r.recordId = id;
    r.pos = unchecked(recAt[i]);
    if (type == REC_SERVICE_UPSERT) {
      const s = serviceRec;
      r.service(s, h.serviceLimit);
      const hostname = String.UTF8.decodeUnsafe(s.hostPtr, <usize>s.hostLen);
      if (hostnames.has(hostname)) return r.fail("hostname", "duplicate hostname " + quoted(s.hostPtr, s.hostLen) + " (record " + hostnames.get(hostname).toString() + ")");
      hostnames.set(hostname, i);
      const owner = m.serviceByHostname(hostname);
      if (owner >= 0 && owner != id && last.get(idKey(true, owner)) < 0) {
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
        if (owner >= 0 && owner != id && last.get(idKey(true, owner)) < 0) {
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
        if (owner >= 0 && owner != id && last.get(idKey(false, owner)) < 0) {
          return r.fail(indexed("addresses", k), "address " + formatIp(a) + " on network " + quoted(w.netPtr, w.netLen) + " is already used by workload " + owner.toString());
        }
      }
      let at = w.memberAt;
      for (let k = 0; k < w.memberCount; k++) {
        const s = <i32>r.u32At(at);
        const nov = <i32>r.u8At(at + 4);
        const final = last.get(idKey(true, s));
        const live = final >= 0 ? unchecked(recType[final]) == REC_SERVICE_UPSERT : m.serviceLive(s);
        if (!live) return r.fail(indexed("memberships", k) + ".service", "service " + s.toString() + " is not live after this message");
        at += 5 + nov * 4;
      }
    }
    if (r.failed()) return false;
  }
  return true;
}

/** The network's id in m, or m's count + its index among the message's new networks. */
function networkKey(m: Mesh, ptr: usize, len: i32, fresh: Array<string>): i32 {
  const id = m.networks.findUtf8(ptr, len);
  if (id >= 0) return id;
  const text = String.UTF8.decodeUnsafe(ptr, <usize>len);
  let k = fresh.indexOf(text);
  if (k < 0) {
    k = fresh.length;
    fresh.push(text);
  }
  return m.networkCount() + k;
}


// What a full load and a delta share (wire_apply.ts): the header, reading a record's head,
// checking a record on its own, and storing a checked record into the model.
import { Address, FAMILY_V4, formatIp } from "./ip";
import {
  addMembership,
  internLocality,
  setAddresses,
  setHostname,
  setPorts,
  setSingleV4,
  setSans,
  releaseRetired,
  setService,
  setVips,
  setWorkload,
  setWorkloadRefs,
} from "./edit";
import { DEFAULT_CLUSTER, IDENTITY_MASK, Mesh, S_HEADLESS, S_LB_STANDARD, W_HEALTHY, W_ISTIO } from "./model";
import { MAX_LOCALITIES, MAX_NETWORKS } from "./parse";
import { RefTable } from "./refs";
import {
  indexed,
  quoted,
  REC_SERVICE_REMOVE,
  REC_SERVICE_UPSERT,
  REC_WORKLOAD_COMPACT,
  REC_WORKLOAD_REMOVE,
  REC_WORKLOAD_UPSERT,
  SF_CLUSTER,
  SF_HEADLESS,
  SF_LB_STANDARD,
  WF_HEALTHY,
  WF_ISTIO,
  R_ID,
  R_NETWORK,
  T_IDENTITY,
  T_LOCALITY,
  T_NETWORK,
  WireReader,
  WireRef,
  WireService,
  WireWorkload,
} from "./wire";

export class Header {
  format: u16 = 0;
  /** Format 3: the content digest after the message. */
  digest: u64 = 0;
  kind: i32 = 0;
  epoch: u64 = 0;
  base: u64 = 0;
  version: u64 = 0;
  workloadLimit: u32 = 0;
  serviceLimit: u32 = 0;
  records: i32 = 0;
  /** The body's length (records and, in a full message, tables); a format-3 trailer follows it. */
  body: i32 = 0;
}

// Reused across messages (one VM applies one message at a time).
export const workloadRec = new WireWorkload();
export const serviceRec = new WireService();
export const scratchAddress = new Address();
const v4s = new Array<u32>();
const v6s = new Array<u64>();
const words = new Array<u32>();
const names = new Array<string>();
const overrides = new Array<u32>();
let refTable: RefTable | null = null;
let refTableMesh: Mesh | null = null;

/** Forgets the reference index (a full load builds a new model). */
export function resetRefTable(): void {
  refTable = null;
  refTableMesh = null;
}

/** Reads record i's type and id; the body follows at r.pos. */
export function recordHead(r: WireReader, i: i32): i32 {
  r.record = i;
  r.recordId = -1;
  const type = <i32>r.u8();
  r.recordType = type;
  if (r.over()) {
    r.truncated("");
    return 0;
  }
  if (type < REC_WORKLOAD_UPSERT || type > REC_WORKLOAD_COMPACT) {
    r.fail("type", type.toString() + " is not a record type (1..5)");
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
export function checkRecord(r: WireReader, m: Mesh, type: i32, h: Header, internTexts: bool): bool {
  if (type == REC_WORKLOAD_UPSERT || type == REC_WORKLOAD_COMPACT) {
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
export function checkWorkloadTexts(r: WireReader, m: Mesh, w: WireWorkload, intern: bool): bool {
  if (intern && w.identityText >= 0) return checkTableTexts(r, m, w);
  let identity = w.identityLen > 0 ? m.identities.findUtf8(w.identityPtr, w.identityLen) : 0;
  if (identity < 0) {
    if (!r.checkIdentity(w.identityPtr, w.identityLen)) return false;
    if (intern) {
      identity = m.identities.internUtf8(w.identityPtr, w.identityLen);
      if (<u32>identity > IDENTITY_MASK) return r.fail("identity", "more than " + IDENTITY_MASK.toString() + " distinct identities");
    }
  }
  let loc = w.localityLen > 0 ? m.localities.findUtf8(w.localityPtr, w.localityLen) : 0;
  if (loc < 0) {
    if (!r.checkLocality(w.localityPtr, w.localityLen)) return false;
    if (intern) {
      loc = internLocality(m, String.UTF8.decodeUnsafe(w.localityPtr, <usize>w.localityLen));
      if (loc > MAX_LOCALITIES) return r.fail("locality", "more than " + MAX_LOCALITIES.toString() + " distinct localities");
    }
  }
  if (!intern) return true;
  let net = m.networks.findUtf8(w.netPtr, w.netLen);
  if (net < 0) {
    net = m.networks.internUtf8(w.netPtr, w.netLen);
    if (net >= MAX_NETWORKS) return r.fail("network", "more than " + MAX_NETWORKS.toString() + " distinct networks");
  }
  // A full load's new model has its columns already: keep the ids for the store pass, so it
  // does not look the texts up again.
  const id = w.id;
  if (id >= 0 && id < m.workloadCapacity()) {
    m.setWInfo(id, <u32>identity);
    m.setWPlace(id, <u32>net, <u32>loc);
  }
  return true;
}

/**
 * A compact record's texts, in a full load: each table index is checked and interned the first
 * time it is met as an identity / locality / network; later pods read the id from the table.
 */
function checkTableTexts(r: WireReader, m: Mesh, w: WireWorkload): bool {
  const t = r.tables;
  let identity = t.text(w.identityText, T_IDENTITY);
  if (identity < 0) {
    identity = 0;
    if (w.identityLen > 0) {
      identity = m.identities.findUtf8(w.identityPtr, w.identityLen);
      if (identity < 0) {
        if (!r.checkIdentity(w.identityPtr, w.identityLen)) return false;
        identity = m.identities.internUtf8(w.identityPtr, w.identityLen);
        if (<u32>identity > IDENTITY_MASK) return r.fail("identity", "more than " + IDENTITY_MASK.toString() + " distinct identities");
      }
    }
    t.setText(w.identityText, T_IDENTITY, identity);
  }
  let loc = t.text(w.localityText, T_LOCALITY);
  if (loc < 0) {
    loc = 0;
    if (w.localityLen > 0) {
      loc = m.localities.findUtf8(w.localityPtr, w.localityLen);
      if (loc < 0) {
        if (!r.checkLocality(w.localityPtr, w.localityLen)) return false;
        loc = internLocality(m, String.UTF8.decodeUnsafe(w.localityPtr, <usize>w.localityLen));
        if (loc > MAX_LOCALITIES) return r.fail("locality", "more than " + MAX_LOCALITIES.toString() + " distinct localities");
      }
    }
    t.setText(w.localityText, T_LOCALITY, loc);
  }
  let net = t.text(w.netText, T_NETWORK);
  if (net < 0) {
    net = m.networks.internUtf8(w.netPtr, w.netLen);
    if (net >= MAX_NETWORKS) return r.fail("network", "more than " + MAX_NETWORKS.toString() + " distinct networks");
    t.setText(w.netText, T_NETWORK, net);
  }
  const id = w.id;
  if (id >= 0 && id < m.workloadCapacity()) {
    m.setWInfo(id, <u32>identity);
    m.setWPlace(id, <u32>net, <u32>loc);
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

/**
 * The reference id of `ref` (added when new); -1 when absent. A compact record's reference
 * (`index` in the message's table) is resolved once per network and message.
 */
function refId(r: WireReader, m: Mesh, ref: WireRef, index: i32, network: i32): i32 {
  if (!ref.present) return -1;
  const t = r.tables;
  if (index >= 0 && index < t.refCount && t.ref(index, R_NETWORK) == network) return t.ref(index, R_ID);
  const id = resolveRef(m, ref, network);
  if (index >= 0 && index < t.refCount) {
    t.setRef(index, R_ID, id);
    t.setRef(index, R_NETWORK, network);
  }
  return id;
}

function resolveRef(m: Mesh, ref: WireRef, network: i32): i32 {
  const hostname = ref.kind == 2 ? String.UTF8.decodeUnsafe(ref.hostPtr, <usize>ref.hostLen) : "";
  return refsOf(m).findOrAdd(hostname, ref.address, ref.port, network);
}

// ==================================================================== storing records

/** Stores service record `s` (checked) into m. False (failed) on a clash (full loads only check here). */
export function storeService(r: WireReader, m: Mesh, s: WireService): bool {
  const id = s.id;
  let flags: u8 = 0;
  if ((s.flags & SF_HEADLESS) != 0) flags |= S_HEADLESS;
  if ((s.flags & SF_LB_STANDARD) != 0) flags |= S_LB_STANDARD;
  const hostname = String.UTF8.decodeUnsafe(s.hostPtr, <usize>s.hostLen);
  const owner = m.serviceByHostname(hostname);
  if (owner >= 0 && owner != id) return r.fail("hostname", "duplicate hostname " + quoted(s.hostPtr, s.hostLen) + " (service " + owner.toString() + ")");
  // A removed id kept its VIPs and SANs for later release: they go before it is live again.
  releaseRetired(m, id);
  setService(m, id, flags, refId(r, m, s.waypoint, -1, 0), s.lbPrefs);
  setHostname(m, id, hostname);
  // Ports, with a cluster name each.
  words.length = 0;
  const cluster = (s.flags & SF_CLUSTER) != 0 ? String.UTF8.encode(String.UTF8.decodeUnsafe(s.clusterPtr, <usize>s.clusterLen)) : DEFAULT_CLUSTER;
  for (let i = 0; i < s.portCount; i++) {
    const port = r.u16At(s.portAt + i * 4);
    const target = r.u16At(s.portAt + i * 4 + 2);
    words.push((port << 16) | target);
  }
  setPorts(m, id, words, cluster);
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
    // Visible to the next VIP's duplicate check; taken over from a removed service that
    // still holds it (serviceByVip found no live holder).
    if (a.family == FAMILY_V4) m.vipTable4.take(a.v4, id, net);
    else m.vipTable6.take(a.hi, a.lo, id, net);
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
export function storeWorkload(r: WireReader, m: Mesh, w: WireWorkload, fullLoad: bool = false): bool {
  const id = w.id;
  let net = 0;
  let identity = 0;
  let loc = 0;
  if (fullLoad && id >= 0 && id < m.workloadCapacity()) {
    // Interned by the check pass (checkWorkloadTexts), which left the ids in the columns.
    identity = <i32>(m.wInfo(id) & IDENTITY_MASK);
    net = <i32>m.wNet(id);
    loc = <i32>m.wLoc(id);
  } else {
    net = m.networks.internUtf8(w.netPtr, w.netLen);
    if (net >= MAX_NETWORKS) return r.fail("network", "more than " + MAX_NETWORKS.toString() + " distinct networks");
    identity = w.identityLen > 0 ? m.identities.internUtf8(w.identityPtr, w.identityLen) : 0;
    if (<u32>identity > IDENTITY_MASK) return r.fail("identity", "more than " + IDENTITY_MASK.toString() + " distinct identities");
    if (w.localityLen > 0) {
      loc = m.localities.findUtf8(w.localityPtr, w.localityLen);
      if (loc < 0) loc = internLocality(m, String.UTF8.decodeUnsafe(w.localityPtr, <usize>w.localityLen));
      if (loc > MAX_LOCALITIES) return r.fail("locality", "more than " + MAX_LOCALITIES.toString() + " distinct localities");
    }
  }
  let info = <u32>identity;
  if ((w.flags & WF_ISTIO) != 0) info |= W_ISTIO;
  if ((w.flags & WF_HEALTHY) != 0) info |= W_HEALTHY;
  setWorkload(m, id, info, net, loc);
  // Addresses: each must be free on this network.
  const a = scratchAddress;
  if (w.addressCount == 1 && w.v4Count == 1) {
    // The common case, without lists: one IPv4 address.
    m.v4Table.ensureRoom(1);
    const clash = m.v4Table.insert(w.firstV4, id, net);
    if (clash >= 0 && clash != id) {
      a.setV4(w.firstV4);
      return r.fail(indexed("addresses", 0), "address " + formatIp(a) + " on network " + quoted(w.netPtr, w.netLen) + " is already used by workload " + clash.toString());
    }
    setSingleV4(m, id, w.firstV4);
  } else if (!storeAddresses(r, m, w, net)) return false;
  setWorkloadRefs(m, id, refId(r, m, w.waypoint, w.waypointIndex, net), refId(r, m, w.gateway, w.gatewayIndex, net));
  return storeMemberships(r, m, w, fullLoad);
}

/** A workload's addresses, any number and family: each must be free on its network. */
function storeAddresses(r: WireReader, m: Mesh, w: WireWorkload, net: i32): bool {
  const id = w.id;
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
  return true;
}

/** A workload's memberships (a delta's must name a live service: checked before, checked again). */
function storeMemberships(r: WireReader, m: Mesh, w: WireWorkload, fullLoad: bool): bool {
  const id = w.id;
  let at = w.memberAt;
  for (let i = 0; i < w.memberCount; i++) {
    const s = <i32>r.u32At(at);
    const n = <i32>r.u8At(at + 4);
    if (!fullLoad && !m.serviceLive(s)) return r.fail(indexed("memberships", i) + ".service", "service " + s.toString() + " is not live after this message");
    if (n > 0) {
      overrides.length = 0;
      for (let k = 0; k < n; k++) overrides.push((r.u16At(at + 5 + k * 4) << 16) | r.u16At(at + 7 + k * 4));
    }
    addMembership(m, id, s, n > 0 ? overrides : null);
    at += 5 + n * 4;
  }
  return !r.failed();
}

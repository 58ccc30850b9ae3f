// The JSON mesh build's `workloads`: the limits, each workload's fields in their fixed order
// (uid, network, tlsMode, identity, healthy, locality, waypoint, networkGateway, addresses), and
// the IPv4 table filled once the services are read, with the message for a clash.
import { ConfigReader, JsonToken } from "../json";
import { FAMILY_V4 } from "./ip";
import { ensureWorkloads, setAddresses } from "./edit";
import { FieldReader } from "./fields";
import { IDENTITY_MASK, W_EXTRA, W_HEALTHY, W_ISTIO, W_LIVE, W_V4 } from "./model";
import { MAX_LOCALITIES, TLS_DISABLED, TLS_ISTIO, TLS_MODES, WF_ADDRESSES, WF_GATEWAY, WF_HEALTHY, WF_IDENTITY, WF_LOCALITY, WF_NETWORK, WF_TLS_MODE, WF_UID, WF_WAYPOINT, WORKLOAD_FIELDS } from "./parse";
import { MeshParser } from "./parse_context";
import { UidIndex } from "./parse_lookup";
import { MeshScan } from "./parse_scan";
import { ipFamily, onNetwork, q } from "./parse_text";
import { ChunkPool } from "./pool";
import { ADDED, AddrTable4, AddrTable6, SparseColumn } from "./table";
import { isSpiffeIdentity, LOCALITY_SHAPE, SPIFFE_SHAPE } from "./validate";

export function readWorkloads(p: MeshParser, scan: MeshScan): void {
  const r = p.reader;
  const m = p.mesh;
  const path = p.workloadsPath;
  if (!p.withinLimit(path, scan.workloads, p.limits.workloads, "workloads")) return;
  if (!p.withinLimit(path, scan.addresses, p.limits.addresses, "addresses")) return;
  const n = <i32>scan.workloads;
  ensureWorkloads(m, n, true);
  m.workloadTotal = n;
  m.wWaypoint = new SparseColumn(n, scan.workloadWaypoints);
  m.wGateway = new SparseColumn(n, scan.workloadGateways);
  m.wExtra = new ChunkPool(<i32>min(scan.extraWords, 0x10000000), scan.extraWorkloads, n);
  if (scan.count6 > 0) m.v6Table = new AddrTable6(scan.count6);
  // One block for the uid index now and the IPv4 table after the services (fillV4Table).
  p.count4 = scan.count4;
  p.workloadsOffset = scan.workloadsAt;
  p.shared = new StaticArray<u32>(<i32>max<i64>(<i64>AddrTable4.wordsFor(scan.count4), UidIndex.wordsFor(n)));
  p.uids.init(n, p.shared);
  if (!p.enter(scan.workloadsAt)) return r.fail(path, "invalid JSON");
  const outer = p.outer;
  for (let i = 0; i < n; i++) {
    readWorkload(p, i, outer.next());
    // The failed one too: fillV4Table checks the addresses it got before failing.
    p.workloadsRead = i + 1;
    m.liveWorkloads = i + 1;
    if (r.failed()) return;
  }
}

/**
 * Fills the IPv4 table from the address pool, in the block the uid index used until the
 * services were read: the two are never needed at once, so the index costs nothing at the
 * peak. Addresses go in the order the workload pass read them, so the first clash is the one
 * an insert-as-you-read table would have hit; it is a workload error, which comes before a
 * service error and before whatever stopped the workload pass later on (a failing workload's
 * addresses are all in the pool up to the one that failed, and addresses are its last field).
 */
export function fillV4Table(p: MeshParser): void {
  const m = p.mesh;
  const read = p.workloadsRead;
  m.v4Table = AddrTable4.over(p.shared, p.count4);
  const table = m.v4Table;
  const extra = m.wExtra;
  for (let w = 0; w < read && w < m.workloadCapacity(); w++) {
    const net = <i32>m.wNet(w);
    const info = m.wInfo(w);
    if ((info & W_V4) == 0) continue; // no IPv4 address at all (the first one is inline)
    const clash = table.insert(m.wIp4(w), w, net);
    if (clash != ADDED) return failV4Clash(p, w, 0, clash, net);
    if ((info & W_EXTRA) == 0) continue;
    const at = extra.offset(w);
    const n4 = at < 0 ? 0 : <i32>extra.word(at);
    for (let j = 0; j < n4; j++) {
      const more = table.insert(extra.word(at + 1 + j), w, net);
      if (more != ADDED) return failV4Clash(p, w, j + 1, more, net);
    }
  }
}

/** The message the clash of workload w's `ordinal`-th IPv4 address gets (error path only). */
export function failV4Clash(p: MeshParser, w: i32, ordinal: i32, clash: i32, net: i32): void {
  const r = p.reader;
  const m = p.mesh;
  // Find that address in the document: its index among all of w's addresses, its spelling.
  const f = new FieldReader(new ConfigReader(), p.document, WORKLOAD_FIELDS);
  let k = -1;
  let text = "";
  const outer = p.document.fork(true);
  outer.valueAt(p.workloadsOffset);
  let t = outer.next() == JsonToken.BeginArray ? outer.next() : JsonToken.Error;
  for (let i = 0; i < w && t != JsonToken.EndArray && t != JsonToken.Error; i++) {
    t = outer.skip(t) ? outer.next() : JsonToken.Error;
  }
  if (f.at(p.workloadsPath, w).read(outer, t) && f.optionalArray(WF_ADDRESSES)) {
    const list = f.stream;
    for (let i = 0, seen = 0; ; i++) {
      const e = list.next();
      if (e != JsonToken.String) break;
      if (ipFamily(list, p.scratch) != FAMILY_V4) continue;
      if (seen++ == ordinal) {
        k = i;
        text = list.stringValue();
        break;
      }
    }
  }
  const path = r.indexPath(r.childPath(r.indexPath(p.workloadsPath, w), "addresses"), k);
  if (clash == w) return r.failEarlier(path, "duplicate address " + q(text));
  if (clash < 0) return r.failEarlier(path, "address table full");
  const owner = r.indexPath(p.workloadsPath, clash);
  r.failEarlier(path, "address " + q(text) + " on " + onNetwork(m.networkName(net)) + " is already used by " + owner);
}

export function readWorkload(p: MeshParser, i: i32, t: JsonToken): void {
  const r = p.reader;
  const m = p.mesh;
  const f = p.workloadFields.at(p.workloadsPath, i);
  if (!f.read(p.outer, t)) return;
  const s = f.stream;

  if (!f.requireString(WF_UID)) return;
  if (s.stringByteLength() == 0) return f.failField("uid", "must not be empty");
  const first = p.uids.add(s, i);
  if (first >= 0) {
    const where = r.indexPath(p.workloadsPath, first);
    return f.failField("uid", "duplicate uid " + q(s.stringValue()) + " (first at " + where + ")");
  }

  let net = 0;
  if (f.optionalString(WF_NETWORK)) net = p.networkId(s, f, "network");
  if (r.failed()) return;
  m.setWNet(i, <u16>net);

  const istio = f.optionalEnum(WF_TLS_MODE, TLS_MODES, TLS_DISABLED) == TLS_ISTIO;
  const identity = readIdentity(p, f, istio);
  const healthy = f.optionalBool(WF_HEALTHY, true);
  let loc = 0;
  if (f.optionalString(WF_LOCALITY)) {
    loc = p.localityId(s);
    if (loc < 0) {
      return f.failField("locality", "not a locality (expected " + LOCALITY_SHAPE + "): " + q(s.stringValue()));
    }
    if (loc > MAX_LOCALITIES) return f.failField("locality", "more than " + MAX_LOCALITIES.toString() + " distinct localities");
  }
  if (r.failed()) return;
  m.setWLoc(i, <u16>loc);
  let info = <u32>identity | W_LIVE; // identity checked against IDENTITY_MASK when interned
  if (istio) info |= W_ISTIO;
  if (healthy) info |= W_HEALTHY;
  m.setWInfo(i, info);

  if (f.optionalObject(WF_WAYPOINT)) {
    const where = p.waypointFields.atField(p.workloadsPath, i, "waypoint");
    const ref = p.ref(f.offset(WF_WAYPOINT), where, net);
    if (ref >= 0 && !m.wWaypoint.set(i, <u32>(ref + 1))) return f.failField("waypoint", "waypoint count changed while parsing");
  }
  if (r.failed()) return;
  let gateway = false;
  if (f.optionalObject(WF_GATEWAY)) {
    gateway = true;
    const where = p.gatewayFields.atField(p.workloadsPath, i, "networkGateway");
    const ref = p.ref(f.offset(WF_GATEWAY), where, net);
    if (ref >= 0 && !m.wGateway.set(i, <u32>(ref + 1))) return f.failField("networkGateway", "gateway count changed while parsing");
  }
  if (r.failed()) return;

  let count = 0;
  p.v4s.length = 0;
  p.v6s.length = 0;
  if (f.optionalArray(WF_ADDRESSES)) {
    while (true) {
      const e = s.next();
      if (e == JsonToken.EndArray) break;
      readWorkloadAddress(p, i, f, e, count, net);
      if (r.failed()) break;
      count++;
    }
  }
  // Stored even after a failure: fillV4Table checks the IPv4 ones read before it.
  setAddresses(m, i, p.v4s, p.v6s);
  if (r.failed()) return;
  if (count == 0 && !gateway) {
    return f.failField("addresses", "must not be empty unless networkGateway is set");
  }
}

/** The interned identity id (0 = none); validates the SPIFFE shape once per distinct text. */
export function readIdentity(p: MeshParser, f: FieldReader, required: bool): i32 {
  if (p.reader.failed()) return 0;
  if (!f.has(WF_IDENTITY)) {
    if (required) f.failField("identity", 'required when tlsMode is "istio"');
    return 0;
  }
  if (!f.requireString(WF_IDENTITY)) return 0;
  const s = f.stream;
  const known = p.identityIds.find(s);
  if (known > 0) return known; // only valid identities are interned
  const text = s.stringValue();
  if (!isSpiffeIdentity(text)) {
    f.failField("identity", "not a SPIFFE identity (expected " + SPIFFE_SHAPE + "): " + q(text));
    return 0;
  }
  const id = p.identityIds.intern(text);
  if (<u32>id > IDENTITY_MASK) {
    f.failField("identity", "more than " + IDENTITY_MASK.toString() + " distinct identities");
    return 0;
  }
  return id;
}

/** Address k (first token `t` on f's stream) of workload w on network `net`. */
export function readWorkloadAddress(p: MeshParser, w: i32, f: FieldReader, t: JsonToken, k: i32, net: i32): void {
  const r = p.reader;
  const m = p.mesh;
  if (!f.elementString(t, "addresses", k)) return;
  const s = f.stream;
  if (!p.parseAddress(s, f, "addresses", k)) return;
  const a = p.scratch;
  let clash = ADDED;
  if (a.family == FAMILY_V4) {
    // Checked for clashes once the services are read (fillV4Table).
    p.v4s.push(a.v4);
  } else {
    clash = m.v6Table.insert(a.hi, a.lo, w, net);
    if (clash == ADDED) {
      p.v6s.push(a.hi);
      p.v6s.push(a.lo);
    }
  }
  if (clash == ADDED) return;
  const path = r.indexPath(f.fieldPath("addresses"), k);
  const text = s.stringValue();
  if (clash == w) return r.failEarlier(path, "duplicate address " + q(text));
  if (clash < 0) return r.fail(path, "address table full");
  const owner = r.indexPath(p.workloadsPath, clash);
  r.fail(path, "address " + q(text) + " on " + onNetwork(m.networkName(net)) + " is already used by " + owner);
}

// The JSON mesh build's `services`: the limits, each service's fields in their fixed order
// (hostname, headless, cluster, ports, vips, endpoints, waypoint, subjectAltNames,
// loadBalancing), endpoints as memberships with their port overrides.
import { JsonToken } from "../json";
import { FAMILY_V4 } from "./ip";
import { addMembership, ensureMemberships, ensureServices, markHeadlessMembers, reserveMembers, reserveSlots, setHostname, setPorts, setSans, setVips } from "./edit";
import { failElementString, failEnum, failInteger, FieldReader } from "./fields";
import { DEFAULT_CLUSTER, DEFAULT_LB_PREFS, S_HEADLESS, S_LB_STANDARD, S_LIVE, VIP_WORDS } from "./model";
import { EF_PORTS, EF_WORKLOAD, LB_MODES, LB_STANDARD, LF_MODE, LF_PREFERENCE, MAX_SERVICE_ITEMS, SCOPES, SF_CLUSTER, SF_ENDPOINTS, SF_HEADLESS, SF_HOSTNAME, SF_LB, SF_PORTS, SF_SANS, SF_VIPS, SF_WAYPOINT, VF_ADDRESS, VF_NETWORK } from "./parse";
import { MeshParser } from "./parse_context";
import { MeshScan } from "./parse_scan";
import { integerIn, keyText, onNetwork, portOfKey, q } from "./parse_text";
import { ChunkPool } from "./pool";
import { ADDED, AddrTable4, AddrTable6, U64Table } from "./table";
import { isHostname, isSanText, SAN_COMMA } from "./validate";

/**
 * While one service's endpoints are read, this bit of a workload's wIdentityFlags marks it as
 * already an endpoint of that service (the model uses bits 0..25); cleared right after.
 */
const W_ENDPOINT_MARK: u32 = 1 << 31;

export function readServices(p: MeshParser, scan: MeshScan): void {
  const r = p.reader;
  const m = p.mesh;
  const path = p.servicesPath;
  const limits = p.limits;
  if (!p.withinLimit(path, scan.services, limits.services, "services")) return;
  if (!p.withinLimit(path, scan.vips, limits.addresses, "VIPs")) return;
  if (!p.withinLimit(path, scan.endpoints, limits.serviceItems, "endpoints")) return;
  if (!p.withinLimit(path, scan.slots, limits.serviceItems, "service ports")) return;
  if (!p.withinLimit(path, scan.sans, limits.serviceItems, "subject alt names")) return;
  const n = <i32>scan.services;
  const slots = <i32>scan.slots;
  const endpoints = <i32>scan.endpoints;
  ensureServices(m, n, true);
  m.serviceTotal = n;
  m.sPorts = new ChunkPool(slots, scan.servicesWithPorts, n);
  reserveSlots(m, slots);
  m.portIndex = new U64Table(slots);
  m.sMembers = new ChunkPool(endpoints + n, n, n);
  ensureMemberships(m, endpoints, true);
  m.memOverrides = new ChunkPool(<i32>min(scan.overrides, MAX_SERVICE_ITEMS), scan.overriddenEndpoints, endpoints);
  m.sSans = new ChunkPool(<i32>scan.sans, scan.servicesWithSans, n);
  m.sVips = new ChunkPool(<i32>scan.vips * VIP_WORDS, scan.servicesWithVips, n);
  m.vipTable4 = new AddrTable4(scan.vip4);
  m.vipTable6 = new AddrTable6(scan.vip6);
  if (!p.enter(scan.servicesAt)) return r.fail(path, "invalid JSON");
  const outer = p.outer;
  for (let i = 0; i < n && !r.failed(); i++) {
    // Each service leaves a little garbage (paths, cluster-name pieces), which the incremental
    // GC lets pile up to about the live heap's size before it collects: collecting now and
    // then keeps it inside the reserved block (a full cycle only walks the model's objects).
    if ((i & 255) == 255) __collect();
    readService(p, i, outer.next());
    m.liveServices = i + 1;
  }
}

export function readService(p: MeshParser, i: i32, t: JsonToken): void {
  const r = p.reader;
  const m = p.mesh;
  const f = p.serviceFields.at(p.servicesPath, i);
  if (!f.read(p.outer, t)) return;
  const s = f.stream;

  if (!f.requireString(SF_HOSTNAME)) return;
  const hostname = s.stringValue();
  if (!isHostname(hostname)) return f.failField("hostname", "not a hostname: " + q(hostname));
  const holder = m.serviceByHostname(hostname);
  if (holder >= 0) {
    const first = r.indexPath(p.servicesPath, holder);
    return f.failField("hostname", "duplicate hostname " + q(hostname) + " (first at " + first + ")");
  }
  setHostname(m, i, hostname);

  const headless = f.optionalBool(SF_HEADLESS, false);
  let cluster: ArrayBuffer | null = null;
  if (f.has(SF_CLUSTER)) {
    if (!f.requireString(SF_CLUSTER)) return;
    if (s.stringByteLength() == 0) return f.failField("cluster", "must not be empty");
    cluster = String.UTF8.encode(s.stringValue());
  }
  if (r.failed()) return;
  readServicePorts(p, i, f, hostname, cluster);
  readVips(p, i, f);
  readEndpointList(p, i, f);
  if (r.failed()) return;

  if (f.optionalObject(SF_WAYPOINT)) {
    const where = p.waypointFields.atField(p.servicesPath, i, "waypoint");
    unchecked((m.sWaypoint[i] = <u32>(p.ref(f.offset(SF_WAYPOINT), where, 0) + 1)));
  }
  if (r.failed()) return;
  if (f.optionalArray(SF_SANS)) {
    const names = p.sanList;
    names.length = 0;
    for (let k = 0; ; k++) {
      const e = s.next();
      if (e == JsonToken.EndArray) break;
      if (e != JsonToken.String) return failElementString(r, r.indexPath(f.fieldPath("subjectAltNames"), k));
      if (s.stringByteLength() == 0) return r.fail(r.indexPath(f.fieldPath("subjectAltNames"), k), "must not be empty");
      const san = s.stringValue();
      if (!isSanText(san)) return r.fail(r.indexPath(f.fieldPath("subjectAltNames"), k), SAN_COMMA);
      names.push(san);
    }
    setSans(m, i, names);
  }
  if (r.failed()) return;
  let flags: u8 = headless ? S_HEADLESS | S_LIVE : S_LIVE;
  if (readLoadBalancing(p, i, f)) flags |= S_LB_STANDARD;
  unchecked((m.sFlags[i] = flags));
  // Its endpoints were added above, before these flags: mark them now (model_columns.ts: wHeadless).
  if (headless) markHeadlessMembers(m, i);
}

/** `ports`: service port → default target port; one port slot each, with its cluster name. */
export function readServicePorts(p: MeshParser, si: i32, f: FieldReader, hostname: string, cluster: ArrayBuffer | null): void {
  const m = p.mesh;
  if (!f.optionalObject(SF_PORTS)) return;
  const words = p.portWords;
  words.length = 0;
  while (true) {
    const port = nextPortKey(p, f);
    if (port <= 0) break;
    const target = portTarget(p, f);
    if (target < 0) break;
    words.push((<u32>port << 16) | <u32>target);
  }
  // Stored before the endpoints are read: their overrides must name these ports.
  setPorts(m, si, words, cluster !== null ? cluster : DEFAULT_CLUSTER);
}

export function readVips(p: MeshParser, si: i32, f: FieldReader): void {
  const r = p.reader;
  const m = p.mesh;
  if (!f.optionalArray(SF_VIPS)) return;
  const list = f.stream;
  const path = f.fieldPath("vips");
  const words = p.vipWords;
  words.length = 0;
  for (let k = 0; !r.failed(); k++) {
    const t = list.next();
    if (t == JsonToken.EndArray) return setVips(m, si, words, false);
    const vf = p.vipFields.at(path, k);
    if (!vf.read(list, t)) return;
    const s = vf.stream;
    let net = 0;
    if (vf.optionalString(VF_NETWORK)) net = p.networkId(s, vf, "network");
    if (r.failed()) return;
    if (!vf.requireString(VF_ADDRESS) || !p.parseAddress(s, vf, "address", -1)) return;
    const a = p.scratch;
    // Tables map a VIP to its service (the owner); inserted as read, for the clash message.
    const clash =
      a.family == FAMILY_V4 ? m.vipTable4.insert(a.v4, si, net) : m.vipTable6.insert(a.hi, a.lo, si, net);
    if (clash == ADDED) {
      words.push((<u32>net << 8) | <u32>a.family);
      if (a.family == FAMILY_V4) {
        words.push(a.v4);
        words.push(0);
        words.push(0);
        words.push(0);
      } else {
        words.push(<u32>(a.hi >> 32));
        words.push(<u32>a.hi);
        words.push(<u32>(a.lo >> 32));
        words.push(<u32>a.lo);
      }
      continue;
    }
    if (clash < 0 || clash >= m.serviceTotal) return vf.failField("address", "VIP table full");
    const text = s.stringValue();
    const owner = clash;
    if (owner == si) return vf.failField("address", "duplicate VIP " + q(text));
    const other = r.indexPath(p.servicesPath, owner);
    const where = onNetwork(m.networkName(net));
    return vf.failField("address", "VIP " + q(text) + " on " + where + " is already used by " + other);
  }
}

/**
 * Endpoints of service si (one per pod: paths are built only on failure). Read into the
 * parser's lists first, then added as memberships in order (the member list is allocated at
 * its exact size, so the membership ids run service after service as the endpoints did).
 */
export function readEndpointList(p: MeshParser, si: i32, f: FieldReader): void {
  const m = p.mesh;
  if (!f.optionalArray(SF_ENDPOINTS)) return;
  const members = p.members;
  members.length = 0;
  p.overrideWords.length = 0;
  p.overrideCounts.length = 0;
  readEndpoints(p, si, f);
  // Clear the "already an endpoint" marks this service set.
  const capacity = m.workloadCapacity();
  for (let k = 0; k < members.length; k++) {
    const w = unchecked(members[k]);
    if (w < capacity) m.setWInfo(w, m.wInfo(w) & ~W_ENDPOINT_MARK);
  }
  if (p.reader.failed()) return;
  reserveMembers(m, si, members.length);
  const one = p.oneOverride;
  let from = 0;
  for (let k = 0; k < members.length; k++) {
    const n = unchecked(p.overrideCounts[k]);
    one.length = 0;
    for (let j = 0; j < n; j++) one.push(unchecked(p.overrideWords[from + j]));
    from += n;
    addMembership(m, unchecked(members[k]), si, n > 0 ? one : null);
  }
}

export function readEndpoints(p: MeshParser, si: i32, f: FieldReader): void {
  const r = p.reader;
  const m = p.mesh;
  const list = f.stream;
  const path = f.fieldPath("endpoints");
  const capacity = m.workloadCapacity();
  const members = p.members;
  for (let k = 0; !r.failed(); k++) {
    const t = list.next();
    if (t == JsonToken.EndArray) return;
    const ef = p.endpointFields.at(path, k);
    if (!ef.read(list, t) || !ef.requireString(EF_WORKLOAD)) return;
    const s = ef.stream;
    const w = p.uids.find(s);
    if (w < 0 || w >= capacity) return ef.failField("workload", "unknown workload uid " + q(s.stringValue()));
    if ((m.wInfo(w) & W_ENDPOINT_MARK) != 0) {
      let before = 0;
      while (before < members.length && unchecked(members[before]) != w) before++;
      const first = r.indexPath(path, before);
      return ef.failField("workload", "workload " + q(s.stringValue()) + " is already an endpoint (at " + first + ")");
    }
    m.setWInfo(w, m.wInfo(w) | W_ENDPOINT_MARK);
    members.push(w);
    const before = p.overrideWords.length;
    if (ef.optionalObject(EF_PORTS)) readEndpointPorts(p, si, ef, f);
    p.overrideCounts.push(p.overrideWords.length - before);
  }
}

/** An endpoint's `ports` overrides: service port (which si must have) → target port. */
export function readEndpointPorts(p: MeshParser, si: i32, ef: FieldReader, service: FieldReader): void {
  const r = p.reader;
  const m = p.mesh;
  while (true) {
    const port = nextPortKey(p, ef);
    if (port <= 0) return;
    if (!m.exposesPort(si, port)) {
      const reason = "service port " + port.toString() + " is not in " + service.fieldPath("ports");
      return r.fail(r.childPath(ef.fieldPath("ports"), ef.stream.stringValue()), reason);
    }
    const target = portTarget(p, ef);
    if (target < 0) return;
    p.overrideWords.push((<u32>port << 16) | <u32>target);
  }
}

/**
 * The next key of the `ports` object on f's stream, as a port (1..65535); 0 at the object's
 * end; -1 after a failure (recorded). The stream stays on the key.
 */
export function nextPortKey(p: MeshParser, f: FieldReader): i32 {
  const s = f.stream;
  const t = s.next();
  if (t == JsonToken.EndObject) return 0;
  if (t != JsonToken.Key) {
    f.failField("ports", "invalid JSON");
    return -1;
  }
  const port = portOfKey(s);
  if (port < 0) {
    const r = p.reader;
    const key = s.stringValue();
    r.fail(r.childPath(f.fieldPath("ports"), key), "not a port number (1..65535): " + q(key));
  }
  return port;
}

/** The target port (1..65535) the key nextPortKey read maps to; -1 after a failure (recorded). */
export function portTarget(p: MeshParser, f: FieldReader): i32 {
  const r = p.reader;
  const s = f.stream;
  const keyAt = s.tokenOffset();
  const v = s.next();
  const target = <i32>integerIn(s, v, 1, 65535);
  if (target < 0) failInteger(r, v, r.childPath(f.fieldPath("ports"), keyText(s, keyAt)), 1, 65535);
  return target;
}

/** Fills the routing preference; true when mode is "standard". */
export function readLoadBalancing(p: MeshParser, si: i32, f: FieldReader): bool {
  const r = p.reader;
  const m = p.mesh;
  unchecked((m.sLbPrefs[si] = DEFAULT_LB_PREFS));
  if (!f.optionalObject(SF_LB)) return false;
  const lb = p.lbFields.atField(p.servicesPath, si, "loadBalancing");
  if (!lb.readAt(f.offset(SF_LB))) return false;
  if (lb.optionalArray(LF_PREFERENCE)) {
    const s = lb.stream;
    let packed: u32 = 0;
    for (let k = 0; ; k++) {
      const t = s.next();
      if (t == JsonToken.EndArray) break;
      const scope = t == JsonToken.String ? SCOPES.find(s) + 1 : 0;
      if (scope <= 0) {
        failEnum(r, r.indexPath(lb.fieldPath("routingPreference"), k), SCOPES.names);
        return false;
      }
      for (let j = 0; j < k; j++) {
        if (((packed >> (<u32>j * 8)) & 0xff) == <u32>scope) {
          const at = r.indexPath(lb.fieldPath("routingPreference"), k);
          r.fail(at, "duplicate scope " + q(unchecked(SCOPES.names[scope - 1])));
          return false;
        }
      }
      // Four distinct scopes at most, so k < 4 here.
      packed |= <u32>scope << (<u32>k * 8);
    }
    unchecked((m.sLbPrefs[si] = packed));
  }
  if (r.failed()) return false;
  return lb.optionalEnum(LF_MODE, LB_MODES, 0) == LB_STANDARD;
}

// The tree-based mesh parser as it was before streaming (assembly/mesh/parse.ts and fields.ts at
// commit eb2c51c), kept verbatim apart from renames (and split in three files: legacy_mesh_fields.ts, legacy_mesh_workloads.ts, this one) as the oracle for mesh_stream.spec.ts (which
// imports it from here): the
// streaming parser must build the same model and report the same first error for every input.
// Since the model became mutable it stores what it read through the model's edit
// primitives (assembly/mesh/edit.ts) instead of writing compressed-row columns; its reading
// and checking are unchanged.
import { ConfigReader, JsonValue, parseJson } from "../json";
import { FAMILY_V4, IpParse, parseIpString } from "../mesh/ip";
import { DEFAULT_CLUSTER, DEFAULT_LB_PREFS, Mesh, RefTarget, S_HEADLESS, S_LB_STANDARD, S_LIVE } from "../mesh/model";
import {
  addMembership,
  ensureMemberships,
  ensureServices,
  markHeadlessMembers,
  reserveMembers,
  setHostname,
  setPorts,
  setSans,
  setVips,
} from "../mesh/edit";
import { ADDED, AddrTable4, AddrTable6, U64Table } from "../mesh/table";
import { isHostname, isSanText, parsePortKey, SAN_COMMA } from "../mesh/validate";
import { MESH_FIELDS, MeshLimits, MeshParseResult } from "../mesh/parse";
import {
  LegacyItemReader,
  SERVICE_FIELDS,
  VIP_FIELDS,
  ENDPOINT_FIELDS,
  LB_FIELDS,
  LB_MODES,
  SCOPES,
  legacyPresent,
  legacyQ,
  legacyOnNetwork,
} from "./legacy_mesh_fields";
import { LegacyWorkloadParser } from "./legacy_mesh_workloads";

class LegacyMeshParser extends LegacyWorkloadParser {
  constructor(reader: ConfigReader, limits: MeshLimits) {
    super(reader, limits);
  }

  run(root: JsonValue, path: string): Mesh | null {
    const r = this.reader;
    const workloads = r.optionalArray(root, "workloads", path);
    const services = r.optionalArray(root, "services", path);
    this.workloadsPath = r.childPath(path, "workloads");
    this.servicesPath = r.childPath(path, "services");
    if (workloads !== null) this.workloads(workloads.items(), this.workloadsPath);
    if (services !== null) this.services(services.items(), this.servicesPath);
    if (r.failed()) return null;
    this.resolveRefs();
    return this.mesh;
  }

  protected services(items: Array<JsonValue>, path: string): void {
    const r = this.reader;
    const m = this.mesh;
    const n = items.length;
    if (!this.withinLimit(path, n, this.limits.services, "services")) return;
    // First pass: sizes of every pool.
    let slots: i64 = 0;
    let endpoints: i64 = 0;
    let sans: i64 = 0;
    let vips: i64 = 0;
    let vip4 = 0;
    let vip6 = 0;
    for (let i = 0; i < n; i++) {
      const s = unchecked(items[i]);
      const ports = s.get("ports");
      if (ports !== null) slots += ports.keys().length;
      const eps = s.get("endpoints");
      if (eps !== null) endpoints += eps.items().length;
      const names = s.get("subjectAltNames");
      if (names !== null) sans += names.items().length;
      const list = s.get("vips");
      if (list === null) continue;
      const vipItems = list.items();
      vips += vipItems.length;
      for (let k = 0; k < vipItems.length; k++) {
        const a = unchecked(vipItems[k]).get("address");
        if (a === null || !a.isString()) continue;
        if (parseIpString(a.asString(), this.scratch) != IpParse.Ok) continue;
        if (this.scratch.family == FAMILY_V4) vip4++;
        else vip6++;
      }
    }
    const limits = this.limits;
    if (!this.withinLimit(path, vips, limits.addresses, "VIPs")) return;
    if (!this.withinLimit(path, endpoints, limits.serviceItems, "endpoints")) return;
    if (!this.withinLimit(path, slots, limits.serviceItems, "service ports")) return;
    if (!this.withinLimit(path, sans, limits.serviceItems, "subject alt names")) return;

    ensureServices(m, n, true);
    m.serviceTotal = n;
    m.portIndex = new U64Table(<i32>slots);
    ensureMemberships(m, <i32>endpoints, true);
    m.vipTable4 = new AddrTable4(vip4);
    m.vipTable6 = new AddrTable6(vip6);
    // (service, workload) pairs seen, to refuse a workload listed twice in one service.
    const seen = new U64Table(<i32>endpoints);
    for (let i = 0; i < n && !r.failed(); i++) {
      this.service(i, unchecked(items[i]), path, seen);
    }
  }

  /** Fails with "<count> <what> exceed the limit of <limit>" when count > limit. */

  protected service(i: i32, item: JsonValue, listPath: string, seen: U64Table): void {
    const r = this.reader;
    const m = this.mesh;
    const p = r.indexPath(listPath, i);
    const obj = r.expectObject(item, p);
    if (obj === null || !r.onlyKnownFields(obj, p, SERVICE_FIELDS)) return;

    const hostname = r.requireString(obj, "hostname", p);
    if (r.failed()) return;
    const hostPath = r.childPath(p, "hostname");
    if (!isHostname(hostname)) return r.fail(hostPath, "not a hostname: " + legacyQ(hostname));
    const holder = m.serviceByHostname(hostname);
    if (holder >= 0) {
      const first = r.indexPath(listPath, holder);
      return r.fail(hostPath, "duplicate hostname " + legacyQ(hostname) + " (first at " + first + ")");
    }
    setHostname(m, i, hostname);

    const headless = r.optionalBool(obj, "headless", p, false);
    let cluster: ArrayBuffer | null = null;
    if (legacyPresent(obj, "cluster")) {
      const name = r.requireString(obj, "cluster", p);
      if (r.failed()) return;
      if (name.length == 0) return r.fail(r.childPath(p, "cluster"), "must not be empty");
      cluster = String.UTF8.encode(name);
    }
    this.servicePorts(i, obj, p, hostname, cluster);
    this.vips(i, obj, p);
    this.endpoints(i, obj, p, seen);

    const waypoint = r.optionalObject(obj, "waypoint", p);
    if (waypoint !== null) {
      const ref = this.ref(waypoint, this.nested.atField(listPath, i, "waypoint"), "port", 0);
      unchecked((m.sWaypoint[i] = <u32>(ref + 1)));
    }
    const sans = r.optionalArray(obj, "subjectAltNames", p);
    if (sans !== null) {
      const sanPath = r.childPath(p, "subjectAltNames");
      const list = sans.items();
      const names = new Array<string>();
      for (let k = 0; k < list.length && !r.failed(); k++) {
        const at = r.indexPath(sanPath, k);
        const name = r.expectString(unchecked(list[k]), at);
        if (r.failed()) return;
        if (name.length == 0) return r.fail(at, "must not be empty");
        if (!isSanText(name)) return r.fail(at, SAN_COMMA);
        names.push(name);
      }
      setSans(m, i, names);
    }
    let flags: u8 = headless ? S_HEADLESS | S_LIVE : S_LIVE;
    if (this.loadBalancing(i, obj, p)) flags |= S_LB_STANDARD;
    unchecked((m.sFlags[i] = flags));
    // As the build does: its endpoints came first, so they get their headless hint now.
    if (headless) markHeadlessMembers(m, i);
  }

  /** `ports`: service port → default target port; one port slot each, with its cluster name. */
  protected servicePorts(s: i32, obj: JsonValue, p: string, hostname: string, cluster: ArrayBuffer | null): void {
    const r = this.reader;
    const m = this.mesh;
    const ports = r.optionalObject(obj, "ports", p);
    if (ports === null) return;
    const path = r.childPath(p, "ports");
    const keys = ports.keys();
    const words = new Array<u32>();
    for (let k = 0; k < keys.length && !r.failed(); k++) {
      const key = unchecked(keys[k]);
      const port = parsePortKey(key);
      if (port < 0) return r.fail(r.childPath(path, key), "not a port number (1..65535): " + legacyQ(key));
      const target = <i32>r.requireInteger(ports, key, path, 1, 65535);
      if (r.failed()) return;
      words.push((<u32>port << 16) | <u32>target);
    }
    // The default "outbound|<port>||<hostname>" is the model's own (built on first use).
    setPorts(m, s, words, cluster !== null ? cluster : DEFAULT_CLUSTER);
  }

  protected vips(s: i32, obj: JsonValue, p: string): void {
    const r = this.reader;
    const m = this.mesh;
    const vips = r.optionalArray(obj, "vips", p);
    if (vips === null) return;
    const path = r.childPath(p, "vips");
    const list = vips.items();
    const words = new Array<u32>();
    for (let k = 0; k < list.length && !r.failed(); k++) {
      const f = this.nested.at(path, k);
      const vip = f.object(unchecked(list[k]), VIP_FIELDS);
      if (vip === null) return;
      const network = f.optionalString(vip, "network", "");
      const net = this.networkId(network, f, "network");
      const text = f.requireString(vip, "address");
      if (net < 0 || !this.parseAddress(text, f, "address", -1)) return;
      const a = this.scratch;
      const clash =
        a.family == FAMILY_V4
          ? m.vipTable4.insert(a.v4, s, net)
          : m.vipTable6.insert(a.hi, a.lo, s, net);
      if (clash == ADDED) {
        words.push((<u32>net << 8) | <u32>a.family);
        words.push(a.family == FAMILY_V4 ? a.v4 : <u32>(a.hi >> 32));
        words.push(a.family == FAMILY_V4 ? 0 : <u32>a.hi);
        words.push(a.family == FAMILY_V4 ? 0 : <u32>(a.lo >> 32));
        words.push(a.family == FAMILY_V4 ? 0 : <u32>a.lo);
        continue;
      }
      if (clash < 0 || clash >= m.serviceTotal) return f.failField("address", "VIP table full");
      const owner = clash;
      if (owner == s) return f.failField("address", "duplicate VIP " + legacyQ(text));
      const other = r.indexPath(this.servicesPath, owner);
      return f.failField("address", "VIP " + legacyQ(text) + " on " + legacyOnNetwork(network) + " is already used by " + other);
    }
    if (!r.failed()) setVips(m, s, words, false);
  }

  /** Endpoints of service s (one per pod, so paths are built only on failure). */
  protected endpoints(s: i32, obj: JsonValue, p: string, seen: U64Table): void {
    const r = this.reader;
    const m = this.mesh;
    const endpoints = r.optionalArray(obj, "endpoints", p);
    if (endpoints === null) return;
    const path = r.childPath(p, "endpoints");
    const list = endpoints.items();
    const members = new Array<i32>();
    const overrides = new Array<Array<u32>>();
    for (let k = 0; k < list.length && !r.failed(); k++) {
      const f = this.nested.at(path, k);
      const ep = f.object(unchecked(list[k]), ENDPOINT_FIELDS);
      if (ep === null) return;
      const uid = f.requireString(ep, "workload");
      if (r.failed()) return;
      if (!this.uids.has(uid)) return f.failField("workload", "unknown workload uid " + legacyQ(uid));
      const w = this.uids.get(uid);
      const before = seen.add((<u64>s << 32) | <u64>w, k);
      if (before != ADDED) {
        const first = r.indexPath(path, before);
        return f.failField("workload", "workload " + legacyQ(uid) + " is already an endpoint (at " + first + ")");
      }
      members.push(w);
      const own = new Array<u32>();
      overrides.push(own);
      const ports = f.optionalObject(ep, "ports");
      if (ports !== null) this.endpointPorts(s, own, ports, f, p);
    }
    if (r.failed()) return;
    reserveMembers(m, s, members.length);
    for (let k = 0; k < members.length; k++) addMembership(m, unchecked(members[k]), s, unchecked(overrides[k]));
  }

  /** An endpoint's `ports` overrides: service port (which s must have) → target port. */
  protected endpointPorts(s: i32, own: Array<u32>, overrides: JsonValue, f: LegacyItemReader, servicePath: string): void {
    const r = this.reader;
    const m = this.mesh;
    const keys = overrides.keys();
    for (let j = 0; j < keys.length && !r.failed(); j++) {
      const key = unchecked(keys[j]);
      const port = parsePortKey(key);
      if (port < 0) {
        return r.fail(r.childPath(f.fieldPath("ports"), key), "not a port number (1..65535): " + legacyQ(key));
      }
      if (!m.exposesPort(s, port)) {
        const reason = "service port " + port.toString() + " is not in " + r.childPath(servicePath, "ports");
        return r.fail(r.childPath(f.fieldPath("ports"), key), reason);
      }
      const v = overrides.get(key);
      let target: i64 = v !== null && v.isInteger() ? v.asInteger() : 0;
      if (target < 1 || target > 65535) target = r.requireInteger(overrides, key, f.fieldPath("ports"), 1, 65535);
      if (r.failed()) return;
      own.push((<u32>port << 16) | <u32>target);
    }
  }

  /** Fills the routing preference; true when mode is "standard". */
  protected loadBalancing(s: i32, obj: JsonValue, p: string): bool {
    const r = this.reader;
    const m = this.mesh;
    unchecked((m.sLbPrefs[s] = DEFAULT_LB_PREFS));
    const lb = r.optionalObject(obj, "loadBalancing", p);
    if (lb === null) return false;
    const path = r.childPath(p, "loadBalancing");
    if (!r.onlyKnownFields(lb, path, LB_FIELDS)) return false;
    const prefs = r.optionalArray(lb, "routingPreference", path);
    if (prefs !== null) {
      const prefsPath = r.childPath(path, "routingPreference");
      const list = prefs.items();
      let packed: u32 = 0;
      for (let k = 0; k < list.length && !r.failed(); k++) {
        const at = r.indexPath(prefsPath, k);
        const name = r.expectEnum(unchecked(list[k]), at, SCOPES);
        if (r.failed()) return false;
        const scope = <u32>SCOPES.indexOf(name) + 1;
        for (let j = 0; j < k; j++) {
          if (((packed >> (<u32>j * 8)) & 0xff) == scope) {
            r.fail(at, "duplicate scope " + legacyQ(name));
            return false;
          }
        }
        // Four distinct scopes at most, so k < 4 here.
        packed |= scope << (<u32>k * 8);
      }
      unchecked((m.sLbPrefs[s] = packed));
    }
    return r.optionalEnum(lb, "mode", path, LB_MODES, "failover") == "standard";
  }

  // ================================================================ derived indexes

  /**
   * Resolves each reference once. A hostname names a service. An address is looked up on the
   * referrer's network first (the workload's own; the default network for a service), then on
   * every other network in id order; on each network a workload address wins over a service
   * VIP (as ztunnel resolves addresses). No match is recorded as Unresolved, not an error.
   */
  protected resolveRefs(): void {
    const m = this.mesh;
    const networks = m.networkCount();
    for (let i = 0; i < m.refs.length; i++) {
      const ref = unchecked(m.refs[i]);
      ref.target = RefTarget.Unresolved;
      ref.index = -1;
      if (ref.hostname.length > 0) {
        const s = m.serviceByHostname(ref.hostname);
        if (s >= 0) {
          ref.target = RefTarget.Service;
          ref.index = s;
        }
        continue;
      }
      for (let k = -1; k < networks && ref.index < 0; k++) {
        if (k == ref.network) continue;
        const net = k < 0 ? ref.network : k;
        const w = m.workloadByAddress(net, ref.address);
        if (w >= 0) {
          ref.target = RefTarget.Workload;
          ref.index = w;
          break;
        }
        const s = m.serviceByVip(net, ref.address);
        if (s >= 0) {
          ref.target = RefTarget.Service;
          ref.index = s;
        }
      }
    }
  }

}
/** The original tree-based parseMeshConfig. */
export function legacyParseMeshConfig(bytes: ArrayBuffer, limits: MeshLimits): MeshParseResult {
  const parsed = parseJson(bytes);
  const root = parsed.value;
  if (!parsed.ok() || root === null) return new MeshParseResult(null, parsed.error);
  const reader = new ConfigReader();
  if (!reader.onlyKnownFields(root, "", MESH_FIELDS)) return new MeshParseResult(null, reader.error());
  if (reader.failed()) return new MeshParseResult(null, reader.error());
  if (!root.isObject()) {
    reader.fail("", "expected an object");
    return new MeshParseResult(null, reader.error());
  }
  const mesh = new LegacyMeshParser(reader, limits).run(root, "");
  if (mesh === null || reader.failed()) return new MeshParseResult(null, reader.error());
  return new MeshParseResult(mesh, "");
}

// ==================================================================== the tests

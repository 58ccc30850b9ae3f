// Builds the Mesh from the plugin configuration's `workloads` and `services` fields.
//
// Runs once per configuration. Every check goes through the ConfigReader, so the first
// problem becomes one line naming the field ("workloads[3].addresses[1]: not an IP
// address: ...") and the whole configuration is refused. Counts are taken in a first pass so
// every column is allocated once at its exact size (no growth, no slack).
import { ConfigReader, JsonValue, parseJson, quoteForMessage } from "../json";
import { Address, FAMILY_V4, IpParse, parseIpString } from "./ip";
import {
  DEFAULT_LB_PREFS,
  IDENTITY_MASK,
  Mesh,
  Ref,
  RefTarget,
  S_HEADLESS,
  S_LB_STANDARD,
  W_HEALTHY,
  W_ISTIO,
} from "./model";
import { ItemReader } from "./fields";
import { ADDED, AddrTable4, AddrTable6, MAX_TABLE_NETWORKS, U64Table } from "./table";
import {
  isHostname,
  isLocality,
  isSpiffeIdentity,
  LOCALITY_SHAPE,
  parsePortKey,
  SPIFFE_SHAPE,
} from "./validate";

/** The fields parseMesh reads; add them to the filter's own list for onlyKnownFields. */
export const MESH_FIELDS: string[] = ["workloads", "services"];

/** Limits, checked before anything is allocated for them. */
export const MAX_WORKLOADS: i32 = 2000000;
export const MAX_SERVICES: i32 = 2000000;
/** Workload addresses in total; service VIPs in total have the same limit. */
export const MAX_ADDRESSES: i32 = 2000000;
/** Endpoints, service ports and subject alt names, each in total over all services. */
export const MAX_SERVICE_ITEMS: i32 = 4000000;
/** Distinct network names (address-table entries hold the network id in 11 bits). */
export const MAX_NETWORKS: i32 = MAX_TABLE_NETWORKS;

export const DEFAULT_HBONE_PORT: i32 = 15008;

/** The limits a parse enforces; the defaults are the MAX_* constants (tests pass smaller). */
export class MeshLimits {
  workloads: i32 = MAX_WORKLOADS;
  services: i32 = MAX_SERVICES;
  addresses: i32 = MAX_ADDRESSES;
  serviceItems: i32 = MAX_SERVICE_ITEMS;
}

const DEFAULT_LIMITS = new MeshLimits();

const WORKLOAD_FIELDS = [
  "uid",
  "addresses",
  "network",
  "identity",
  "tlsMode",
  "healthy",
  "locality",
  "waypoint",
  "networkGateway",
];
const SERVICE_FIELDS = [
  "hostname",
  "vips",
  "ports",
  "endpoints",
  "waypoint",
  "subjectAltNames",
  "headless",
  "cluster",
  "loadBalancing",
];
const VIP_FIELDS = ["network", "address"];
const ENDPOINT_FIELDS = ["workload", "ports"];
const WAYPOINT_FIELDS = ["address", "hostname", "port"];
const GATEWAY_FIELDS = ["address", "hostname", "hboneMtlsPort"];
const LB_FIELDS = ["routingPreference", "mode"];
const TLS_MODES = ["istio", "disabled"];
const LB_MODES = ["failover", "standard"];
/** In Scope order: index + 1 is the Scope value. */
const SCOPES = ["network", "region", "zone", "subzone"];

export class MeshParseResult {
  constructor(public mesh: Mesh | null, public error: string) {}

  ok(): bool {
    return this.mesh !== null && this.error.length == 0;
  }
}

/** True when obj has `key` with a non-null value (the reader treats null as absent too). */
function present(obj: JsonValue, key: string): bool {
  const v = obj.get(key);
  return v !== null && !v.isNull();
}

// @ts-ignore: decorator
@inline function portKey(index: i32, port: i32): u64 {
  return (<u64>index << 16) | <u64>port;
}

function q(text: string): string {
  return quoteForMessage(text);
}

function onNetwork(name: string): string {
  return name.length == 0 ? "the default network" : "network " + q(name);
}

const EMPTY_LIST = new Array<JsonValue>();

/** A key that identifies an address independent of how it was written. */
function addressKey(a: Address): string {
  if (a.family == FAMILY_V4) return "4:" + a.v4.toString();
  return "6:" + a.hi.toString() + ":" + a.lo.toString();
}

class MeshParser {
  mesh: Mesh = new Mesh();
  private scratch: Address = new Address();
  /** uid → workload index; only needed while parsing (uids are not kept). */
  private uids: Map<string, i32> = new Map<string, i32>();
  /** Canonical reference text → reference id, so identical references are stored once. */
  private refIds: Map<string, i32> = new Map<string, i32>();
  private v4Next: i32 = 0;
  private v6Next: i32 = 0;
  private slotNext: i32 = 0;
  private epNext: i32 = 0;
  private vipNext: i32 = 0;
  // First-pass counts.
  private total: i64 = 0;
  private count4: i32 = 0;
  private count6: i32 = 0;
  // Paths of the two lists, for messages that point at another entry.
  private workloadsPath: string = "workloads";
  private servicesPath: string = "services";
  // Lazy-path readers (see fields.ts): `item` for a workload, `nested` for what sits inside a
  // workload or service (a reference, a VIP, an endpoint).
  private item: ItemReader;
  private nested: ItemReader;

  constructor(
    private reader: ConfigReader,
    private limits: MeshLimits,
  ) {
    this.item = new ItemReader(reader);
    this.nested = new ItemReader(reader);
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
    this.buildHeadlessIndex();
    return this.mesh;
  }

  // ================================================================ workloads

  private workloads(items: Array<JsonValue>, path: string): void {
    const r = this.reader;
    const m = this.mesh;
    const n = items.length;
    if (!this.withinLimit(path, n, this.limits.workloads, "workloads")) return;
    this.countAddresses(items);
    if (!this.withinLimit(path, this.total, this.limits.addresses, "addresses")) return;
    m.workloadTotal = n;
    m.wIdentityFlags = new StaticArray<u32>(n);
    m.wNetwork = new StaticArray<u16>(n);
    m.wLocality = new StaticArray<u32>(n);
    m.wWaypoint = new StaticArray<u32>(n);
    m.wGateway = new StaticArray<u32>(n);
    m.v4Start = new StaticArray<u32>(n + 1);
    m.v4Pool = new StaticArray<u32>(this.count4);
    m.v4Table = new AddrTable4(this.count4);
    if (this.count6 > 0) {
      m.v6Start = new StaticArray<u32>(n + 1);
      m.v6Pool = new StaticArray<u64>(this.count6 * 2);
      m.v6Table = new AddrTable6(this.count6);
    }
    for (let i = 0; i < n; i++) {
      this.workload(i, unchecked(items[i]), path);
      if (r.failed()) return;
      unchecked((m.v4Start[i + 1] = <u32>this.v4Next));
      if (m.v6Start.length > i + 1) unchecked((m.v6Start[i + 1] = <u32>this.v6Next));
    }
  }

  /** First pass: how many addresses there are, and how many of each family are valid. */
  private countAddresses(items: Array<JsonValue>): void {
    for (let i = 0; i < items.length; i++) {
      const addresses = unchecked(items[i]).get("addresses");
      if (addresses === null) continue;
      const list = addresses.items();
      this.total += list.length;
      for (let k = 0; k < list.length; k++) {
        const a = unchecked(list[k]);
        if (!a.isString() || parseIpString(a.asString(), this.scratch) != IpParse.Ok) continue;
        if (this.scratch.family == FAMILY_V4) this.count4++;
        else this.count6++;
      }
    }
  }

  private workload(i: i32, value: JsonValue, listPath: string): void {
    const r = this.reader;
    const m = this.mesh;
    const f = this.item.at(listPath, i);
    const obj = f.object(value, WORKLOAD_FIELDS);
    if (obj === null) return;

    const uid = f.requireString(obj, "uid");
    if (r.failed()) return;
    if (uid.length == 0) return f.failField("uid", "must not be empty");
    if (this.uids.has(uid)) {
      const first = r.indexPath(listPath, this.uids.get(uid));
      return f.failField("uid", "duplicate uid " + q(uid) + " (first at " + first + ")");
    }
    this.uids.set(uid, i);

    const network = f.optionalString(obj, "network", "");
    const net = this.networkId(network, f, "network");
    if (net < 0) return;
    unchecked((m.wNetwork[i] = <u16>net));

    const tls = f.optionalEnum(obj, "tlsMode", TLS_MODES, "disabled");
    const identity = this.identity(obj, f, tls == "istio");
    const healthy = f.optionalBool(obj, "healthy", true);
    const locality = f.optionalString(obj, "locality", "");
    if (r.failed()) return;
    const loc = this.localityId(locality);
    if (loc < 0) {
      return f.failField("locality", "not a locality (expected " + LOCALITY_SHAPE + "): " + q(locality));
    }
    unchecked((m.wLocality[i] = <u32>loc));
    let info = <u32>identity; // checked against IDENTITY_MASK when interned
    if (tls == "istio") info |= W_ISTIO;
    if (healthy) info |= W_HEALTHY;
    unchecked((m.wIdentityFlags[i] = info));

    const waypoint = f.optionalObject(obj, "waypoint");
    if (waypoint !== null) {
      const ref = this.ref(waypoint, this.nested.atField(listPath, i, "waypoint"), "port", net);
      unchecked((m.wWaypoint[i] = <u32>(ref + 1)));
    }
    const gateway = f.optionalObject(obj, "networkGateway");
    if (gateway !== null) {
      const ref = this.ref(gateway, this.nested.atField(listPath, i, "networkGateway"), "hboneMtlsPort", net);
      unchecked((m.wGateway[i] = <u32>(ref + 1)));
    }

    const addresses = f.optionalArray(obj, "addresses");
    if (r.failed()) return;
    const list = addresses === null ? EMPTY_LIST : addresses.items();
    if (list.length == 0 && gateway === null) {
      return f.failField("addresses", "must not be empty unless networkGateway is set");
    }
    for (let k = 0; k < list.length && !r.failed(); k++) {
      this.workloadAddress(i, unchecked(list[k]), f, k, net, network);
    }
  }

  /** The interned identity id (0 = none); validates the SPIFFE shape once per distinct text. */
  private identity(obj: JsonValue, f: ItemReader, required: bool): i32 {
    const r = this.reader;
    if (!present(obj, "identity")) {
      if (required) f.failField("identity", 'required when tlsMode is "istio"');
      return 0;
    }
    const text = f.requireString(obj, "identity");
    if (r.failed()) return 0;
    const known = this.mesh.identities.find(text);
    if (known > 0) return known; // only valid identities are interned
    if (!isSpiffeIdentity(text)) {
      f.failField("identity", "not a SPIFFE identity (expected " + SPIFFE_SHAPE + "): " + q(text));
      return 0;
    }
    const id = this.mesh.identities.intern(text);
    if (<u32>id > IDENTITY_MASK) {
      f.failField("identity", "more than " + IDENTITY_MASK.toString() + " distinct identities");
      return 0;
    }
    return id;
  }

  /** Address k of workload w (the item `f` points at) on network `net` (named `network`). */
  private workloadAddress(w: i32, value: JsonValue, f: ItemReader, k: i32, net: i32, network: string): void {
    const r = this.reader;
    const m = this.mesh;
    const text = f.elementString(value, "addresses", k);
    if (!this.parseAddress(text, f, "addresses", k)) return;
    const a = this.scratch;
    let clash = ADDED;
    if (a.family == FAMILY_V4) {
      if (this.v4Next >= m.v4Pool.length) return f.failField("addresses", "address count changed while parsing");
      clash = m.v4Table.insert(a.v4, w, net);
      if (clash == ADDED) unchecked((m.v4Pool[this.v4Next++] = a.v4));
    } else {
      const at = this.v6Next << 1;
      if (at + 1 >= m.v6Pool.length) return f.failField("addresses", "address count changed while parsing");
      clash = m.v6Table.insert(a.hi, a.lo, w, net);
      if (clash == ADDED) {
        unchecked((m.v6Pool[at] = a.hi));
        unchecked((m.v6Pool[at + 1] = a.lo));
        this.v6Next++;
      }
    }
    if (clash == ADDED) return;
    const path = r.indexPath(f.fieldPath("addresses"), k);
    if (clash == w) return r.fail(path, "duplicate address " + q(text));
    if (clash < 0) return r.fail(path, "address table full");
    const owner = r.indexPath(this.workloadsPath, clash);
    r.fail(path, "address " + q(text) + " on " + onNetwork(network) + " is already used by " + owner);
  }

  /**
   * Parses `text` into the scratch address; false (with the failure recorded) if invalid. The
   * failure is reported at field `key` of the item `f` points at, or at its element `index`
   * when index >= 0.
   */
  private parseAddress(text: string, f: ItemReader, key: string, index: i32): bool {
    const r = this.reader;
    if (r.failed()) return false;
    const status = parseIpString(text, this.scratch);
    if (status == IpParse.Ok) return true;
    const path = index < 0 ? f.fieldPath(key) : r.indexPath(f.fieldPath(key), index);
    if (status == IpParse.Zone) r.fail(path, "IPv6 zone not allowed: " + q(text));
    else r.fail(path, "not an IP address: " + q(text));
    return false;
  }

  /** The network's id, interning it; -1 (failure recorded at f's field `key`) past the limit. */
  private networkId(name: string, f: ItemReader, key: string): i32 {
    if (this.reader.failed()) return -1;
    const id = this.mesh.networks.intern(name);
    if (id >= MAX_NETWORKS) {
      f.failField(key, "more than " + MAX_NETWORKS.toString() + " distinct networks");
      return -1;
    }
    return id;
  }

  /**
   * Interns a locality and its region / region-zone / full prefixes; -1 when it is not a valid
   * locality. Validated once per distinct text.
   */
  private localityId(text: string): i32 {
    const m = this.mesh;
    const known = m.localities.find(text);
    if (known >= 0) return known;
    if (!isLocality(text)) return -1;
    const id = m.localities.intern(text);
    const parts = text.split("/");
    const n = parts.length;
    const region = m.localityPrefixes.intern(unchecked(parts[0]));
    const zone = n > 1 ? m.localityPrefixes.intern(unchecked(parts[0]) + "/" + unchecked(parts[1])) : 0;
    const subzone = n > 2 ? m.localityPrefixes.intern(text) : 0;
    m.localityParts.push(region);
    m.localityParts.push(zone);
    m.localityParts.push(subzone);
    return id;
  }

  /**
   * A waypoint (`portField` "port") or network gateway ("hboneMtlsPort") reference, the object
   * `f` points at: exactly one of address / hostname. Returns the shared reference id, or -1
   * after a failure. `network` is where an address reference is looked up first.
   */
  private ref(obj: JsonValue, f: ItemReader, portField: string, network: i32): i32 {
    const r = this.reader;
    const known = portField == "port" ? WAYPOINT_FIELDS : GATEWAY_FIELDS;
    if (f.object(obj, known) === null) return -1;
    const hasAddress = present(obj, "address");
    const hasHostname = present(obj, "hostname");
    if (hasAddress && hasHostname) {
      f.fail('both "address" and "hostname" are set; exactly one is allowed');
      return -1;
    }
    if (!hasAddress && !hasHostname) {
      f.fail('one of "address" or "hostname" is required');
      return -1;
    }
    const port = <i32>f.optionalInteger(obj, portField, 1, 65535, DEFAULT_HBONE_PORT);
    let key = "";
    let hostname = "";
    if (hasHostname) {
      hostname = f.requireString(obj, "hostname");
      if (r.failed()) return -1;
      if (!isHostname(hostname)) {
        f.failField("hostname", "not a hostname: " + q(hostname));
        return -1;
      }
      key = "h|" + port.toString() + "|" + hostname;
    } else {
      const text = f.requireString(obj, "address");
      if (!this.parseAddress(text, f, "address", -1)) return -1;
      key = "a|" + network.toString() + "|" + port.toString() + "|" + addressKey(this.scratch);
    }
    if (this.refIds.has(key)) return this.refIds.get(key);
    const ref = new Ref();
    ref.hostname = hostname;
    if (!hasHostname) ref.address.copyFrom(this.scratch);
    ref.port = port;
    ref.network = network;
    const id = this.mesh.refs.length;
    this.mesh.refs.push(ref);
    this.refIds.set(key, id);
    return id;
  }

  // ================================================================ services

  private services(items: Array<JsonValue>, path: string): void {
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

    m.serviceTotal = n;
    m.sFlags = new StaticArray<u8>(n);
    m.sWaypoint = new StaticArray<u32>(n);
    m.sLbPrefs = new StaticArray<u32>(n);
    m.sPortStart = new StaticArray<u32>(n + 1);
    m.slotPort = new StaticArray<u16>(<i32>slots);
    m.slotTarget = new StaticArray<u16>(<i32>slots);
    m.slotService = new StaticArray<u32>(<i32>slots);
    m.portIndex = new U64Table(<i32>slots);
    m.sEpStart = new StaticArray<u32>(n + 1);
    m.epWorkload = new StaticArray<u32>(<i32>endpoints);
    m.sSanStart = new StaticArray<u32>(n + 1);
    m.sVipStart = new StaticArray<u32>(n + 1);
    const nv = <i32>vips;
    m.vipService = new StaticArray<u32>(nv);
    m.vipNetwork = new StaticArray<u16>(nv);
    m.vipFamily = new StaticArray<u8>(nv);
    m.vipV4 = new StaticArray<u32>(nv);
    m.vipHi = new StaticArray<u64>(nv);
    m.vipLo = new StaticArray<u64>(nv);
    m.vipTable4 = new AddrTable4(vip4);
    m.vipTable6 = new AddrTable6(vip6);
    // (service, workload) pairs seen, to refuse a workload listed twice in one service.
    const seen = new U64Table(<i32>endpoints);
    for (let i = 0; i < n && !r.failed(); i++) {
      this.service(i, unchecked(items[i]), path, seen);
      unchecked((m.sPortStart[i + 1] = <u32>this.slotNext));
      unchecked((m.sEpStart[i + 1] = <u32>this.epNext));
      unchecked((m.sVipStart[i + 1] = <u32>this.vipNext));
      unchecked((m.sSanStart[i + 1] = <u32>m.sans.length));
    }
  }

  /** Fails with "<count> <what> exceed the limit of <limit>" when count > limit. */
  private withinLimit(path: string, count: i64, limit: i32, what: string): bool {
    if (count <= <i64>limit) return true;
    const text = count.toString() + " " + what + " exceed the limit of " + limit.toString();
    this.reader.fail(path, text);
    return false;
  }

  private service(i: i32, item: JsonValue, listPath: string, seen: U64Table): void {
    const r = this.reader;
    const m = this.mesh;
    const p = r.indexPath(listPath, i);
    const obj = r.expectObject(item, p);
    if (obj === null || !r.onlyKnownFields(obj, p, SERVICE_FIELDS)) return;

    const hostname = r.requireString(obj, "hostname", p);
    if (r.failed()) return;
    const hostPath = r.childPath(p, "hostname");
    if (!isHostname(hostname)) return r.fail(hostPath, "not a hostname: " + q(hostname));
    if (m.hostnames.has(hostname)) {
      const first = r.indexPath(listPath, m.hostnames.get(hostname));
      return r.fail(hostPath, "duplicate hostname " + q(hostname) + " (first at " + first + ")");
    }
    m.hostnames.set(hostname, i);
    m.sHostname.push(hostname);

    const headless = r.optionalBool(obj, "headless", p, false);
    let cluster: ArrayBuffer | null = null;
    if (present(obj, "cluster")) {
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
      for (let k = 0; k < list.length && !r.failed(); k++) {
        const at = r.indexPath(sanPath, k);
        const name = r.expectString(unchecked(list[k]), at);
        if (r.failed()) return;
        if (name.length == 0) return r.fail(at, "must not be empty");
        m.sans.push(name);
      }
    }
    let flags: u8 = headless ? S_HEADLESS : 0;
    if (this.loadBalancing(i, obj, p)) flags |= S_LB_STANDARD;
    unchecked((m.sFlags[i] = flags));
  }

  /** `ports`: service port → default target port; one port slot each, with its cluster name. */
  private servicePorts(s: i32, obj: JsonValue, p: string, hostname: string, cluster: ArrayBuffer | null): void {
    const r = this.reader;
    const m = this.mesh;
    const ports = r.optionalObject(obj, "ports", p);
    if (ports === null) return;
    const path = r.childPath(p, "ports");
    const keys = ports.keys();
    for (let k = 0; k < keys.length && !r.failed(); k++) {
      const key = unchecked(keys[k]);
      const port = parsePortKey(key);
      if (port < 0) return r.fail(r.childPath(path, key), "not a port number (1..65535): " + q(key));
      const target = <i32>r.requireInteger(ports, key, path, 1, 65535);
      if (r.failed()) return;
      const slot = this.slotNext;
      if (slot >= m.slotPort.length) return r.fail(path, "port count changed while parsing");
      this.slotNext++;
      m.portIndex.add(portKey(s, port), slot);
      unchecked((m.slotPort[slot] = <u16>port));
      unchecked((m.slotTarget[slot] = <u16>target));
      unchecked((m.slotService[slot] = <u32>s));
      const name = cluster !== null ? cluster : String.UTF8.encode("outbound|" + port.toString() + "||" + hostname);
      m.slotCluster.push(name);
    }
  }

  private vips(s: i32, obj: JsonValue, p: string): void {
    const r = this.reader;
    const m = this.mesh;
    const vips = r.optionalArray(obj, "vips", p);
    if (vips === null) return;
    const path = r.childPath(p, "vips");
    const list = vips.items();
    for (let k = 0; k < list.length && !r.failed(); k++) {
      const f = this.nested.at(path, k);
      const vip = f.object(unchecked(list[k]), VIP_FIELDS);
      if (vip === null) return;
      const network = f.optionalString(vip, "network", "");
      const net = this.networkId(network, f, "network");
      const text = f.requireString(vip, "address");
      if (net < 0 || !this.parseAddress(text, f, "address", -1)) return;
      const v = this.vipNext;
      if (v >= m.vipService.length) return r.fail(path, "VIP count changed while parsing");
      const a = this.scratch;
      unchecked((m.vipService[v] = <u32>s));
      unchecked((m.vipNetwork[v] = <u16>net));
      unchecked((m.vipFamily[v] = <u8>a.family));
      unchecked((m.vipV4[v] = a.v4));
      unchecked((m.vipHi[v] = a.hi));
      unchecked((m.vipLo[v] = a.lo));
      const clash =
        a.family == FAMILY_V4
          ? m.vipTable4.insert(a.v4, v, net)
          : m.vipTable6.insert(a.hi, a.lo, v, net);
      if (clash == ADDED) {
        this.vipNext++;
        continue;
      }
      if (clash < 0 || clash >= m.vipService.length) return f.failField("address", "VIP table full");
      const owner = <i32>unchecked(m.vipService[clash]);
      if (owner == s) return f.failField("address", "duplicate VIP " + q(text));
      const other = r.indexPath(this.servicesPath, owner);
      return f.failField("address", "VIP " + q(text) + " on " + onNetwork(network) + " is already used by " + other);
    }
  }

  /** Endpoints of service s (one per pod, so paths are built only on failure). */
  private endpoints(s: i32, obj: JsonValue, p: string, seen: U64Table): void {
    const r = this.reader;
    const m = this.mesh;
    const endpoints = r.optionalArray(obj, "endpoints", p);
    if (endpoints === null) return;
    const path = r.childPath(p, "endpoints");
    const list = endpoints.items();
    for (let k = 0; k < list.length && !r.failed(); k++) {
      const f = this.nested.at(path, k);
      const ep = f.object(unchecked(list[k]), ENDPOINT_FIELDS);
      if (ep === null) return;
      const uid = f.requireString(ep, "workload");
      if (r.failed()) return;
      if (!this.uids.has(uid)) return f.failField("workload", "unknown workload uid " + q(uid));
      const w = this.uids.get(uid);
      const before = seen.add((<u64>s << 32) | <u64>w, k);
      if (before != ADDED) {
        const first = r.indexPath(path, before);
        return f.failField("workload", "workload " + q(uid) + " is already an endpoint (at " + first + ")");
      }
      const g = this.epNext;
      if (g >= m.epWorkload.length) return r.fail(path, "endpoint count changed while parsing");
      this.epNext++;
      unchecked((m.epWorkload[g] = <u32>w));
      const overrides = f.optionalObject(ep, "ports");
      if (overrides !== null) this.endpointPorts(s, g, overrides, f, p);
    }
  }

  /** An endpoint's `ports` overrides: service port (which s must have) → target port. */
  private endpointPorts(s: i32, g: i32, overrides: JsonValue, f: ItemReader, servicePath: string): void {
    const r = this.reader;
    const m = this.mesh;
    const keys = overrides.keys();
    for (let j = 0; j < keys.length && !r.failed(); j++) {
      const key = unchecked(keys[j]);
      const port = parsePortKey(key);
      if (port < 0) {
        return r.fail(r.childPath(f.fieldPath("ports"), key), "not a port number (1..65535): " + q(key));
      }
      if (m.portIndex.get(portKey(s, port)) < 0) {
        const reason = "service port " + port.toString() + " is not in " + r.childPath(servicePath, "ports");
        return r.fail(r.childPath(f.fieldPath("ports"), key), reason);
      }
      const v = overrides.get(key);
      let target: i64 = v !== null && v.isInteger() ? v.asInteger() : 0;
      if (target < 1 || target > 65535) target = r.requireInteger(overrides, key, f.fieldPath("ports"), 1, 65535);
      if (r.failed()) return;
      m.overrides.add(portKey(g, port), <i32>target);
    }
  }

  /** Fills the routing preference; true when mode is "standard". */
  private loadBalancing(s: i32, obj: JsonValue, p: string): bool {
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
            r.fail(at, "duplicate scope " + q(name));
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
  private resolveRefs(): void {
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

  /** (workload, effective target port) → port slot, for every endpoint of a headless service. */
  private buildHeadlessIndex(): void {
    const m = this.mesh;
    for (let s = 0; s < m.serviceTotal; s++) {
      if (!m.serviceHeadless(s)) continue;
      const slotFrom = <i32>unchecked(m.sPortStart[s]);
      const slotTo = <i32>unchecked(m.sPortStart[s + 1]);
      const epFrom = <i32>unchecked(m.sEpStart[s]);
      const epTo = <i32>unchecked(m.sEpStart[s + 1]);
      for (let g = epFrom; g < epTo && g < m.epWorkload.length; g++) {
        const w = <i32>unchecked(m.epWorkload[g]);
        for (let slot = slotFrom; slot < slotTo && slot < m.slotPort.length; slot++) {
          const port = <i32>unchecked(m.slotPort[slot]);
          let target = m.overrides.size > 0 ? m.overrides.get(portKey(g, port)) : -1;
          if (target < 0) target = <i32>unchecked(m.slotTarget[slot]);
          m.headless.add(portKey(w, target), slot);
        }
      }
    }
  }
}

/**
 * Reads `workloads` and `services` of `root` (the filter's own configuration object) into a
 * Mesh. `path` is root's path for messages ("" at the top). Failures are recorded in `reader`
 * (first one wins) and give null. The caller checks unknown fields itself, with MESH_FIELDS
 * added to its own list.
 */
export function parseMesh(
  root: JsonValue,
  reader: ConfigReader,
  path: string,
  limits: MeshLimits = DEFAULT_LIMITS,
): Mesh | null {
  if (reader.failed()) return null;
  if (!root.isObject()) {
    reader.fail(path, "expected an object");
    return null;
  }
  return new MeshParser(reader, limits).run(root, path);
}

/** Parses a configuration that holds only the mesh (tests, tools). */
export function parseMeshConfig(bytes: ArrayBuffer, limits: MeshLimits = DEFAULT_LIMITS): MeshParseResult {
  const parsed = parseJson(bytes);
  const root = parsed.value;
  if (!parsed.ok() || root === null) return new MeshParseResult(null, parsed.error);
  const reader = new ConfigReader();
  if (!reader.onlyKnownFields(root, "", MESH_FIELDS)) return new MeshParseResult(null, reader.error());
  const mesh = parseMesh(root, reader, "", limits);
  if (mesh === null || reader.failed()) return new MeshParseResult(null, reader.error());
  return new MeshParseResult(mesh, "");
}

/** parseMeshConfig for a string. */
export function parseMeshConfigString(text: string, limits: MeshLimits = DEFAULT_LIMITS): MeshParseResult {
  return parseMeshConfig(String.UTF8.encode(text), limits);
}

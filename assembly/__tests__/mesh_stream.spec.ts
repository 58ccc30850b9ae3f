// The tree-based mesh parser as it was before streaming (assembly/mesh/parse.ts and fields.ts at
// commit eb2c51c), kept verbatim apart from renames as the oracle for mesh_stream.spec.ts: the
// streaming parser must build the same model and report the same first error for every input.
// Since the model became mutable (issue 15) it stores what it read through the model's edit
// primitives (assembly/mesh/edit.ts) instead of writing compressed-row columns; its reading
// and checking are unchanged.
import { ConfigReader, JsonValue, parseJson, quoteForMessage } from "../json";
import { Address, FAMILY_V4, IpParse, parseIpString } from "../mesh/ip";
import {
  DEFAULT_CLUSTER,
  DEFAULT_LB_PREFS,
  IDENTITY_MASK,
  Mesh,
  Ref,
  RefTarget,
  S_HEADLESS,
  S_LB_STANDARD,
  S_LIVE,
  VIP_WORDS,
  W_HEALTHY,
  W_ISTIO,
  W_LIVE,
} from "../mesh/model";
import { addMembership, ensureMemberships, ensureServices, ensureWorkloads, markHeadlessMembers, reserveMembers, setAddresses, setHostname, setPorts, setSans, setVips } from "../mesh/edit";
import { ADDED, AddrTable4, AddrTable6, SparseColumn, U64Table } from "../mesh/table";
import {
  isHostname,
  isLocality,
  isSanText,
  isSpiffeIdentity,
  LOCALITY_SHAPE,
  parsePortKey,
  SAN_COMMA,
  SPIFFE_SHAPE,
} from "../mesh/validate";
import { DEFAULT_HBONE_PORT, MAX_NETWORKS, MESH_FIELDS, MeshLimits, MeshParseResult } from "../mesh/parse";

/** True when every key of `obj` is in `known` (obj must be an object). */
function legacyOnlyKnown(obj: JsonValue, known: string[]): bool {
  const keys = obj.keys();
  for (let i = 0; i < keys.length; i++) {
    if (!known.includes(unchecked(keys[i]))) return false;
  }
  return true;
}

function legacyAbsent(v: JsonValue | null): bool {
  return v === null || v.isNull();
}

/** Reads the fields of `list[index]` (or of `list[index].key` when a key is set). */
class LegacyItemReader {
  private list: string = "";
  private index: i32 = 0;
  private key: string = "";

  constructor(readonly reader: ConfigReader) {}

  /** Points at `list[index]`; returns this for chaining. */
  at(list: string, index: i32): LegacyItemReader {
    this.list = list;
    this.index = index;
    this.key = "";
    return this;
  }

  /** Points at `list[index].key`. */
  atField(list: string, index: i32, key: string): LegacyItemReader {
    this.at(list, index);
    this.key = key;
    return this;
  }

  /** The item's path, built on demand (failures only). */
  path(): string {
    const item = this.reader.indexPath(this.list, this.index);
    return this.key.length == 0 ? item : this.reader.childPath(item, this.key);
  }

  /** The path of one of the item's fields, built on demand. */
  fieldPath(key: string): string {
    return this.reader.childPath(this.path(), key);
  }

  /** Records `reason` at the item's field `key`. */
  failField(key: string, reason: string): void {
    this.reader.fail(this.fieldPath(key), reason);
  }

  /** Records `reason` at the item itself. */
  fail(reason: string): void {
    this.reader.fail(this.path(), reason);
  }

  /** `value` as an object holding only `known` keys, else null (failure recorded). */
  object(value: JsonValue, known: string[]): JsonValue | null {
    if (value.isObject() && legacyOnlyKnown(value, known)) return value;
    const r = this.reader;
    const p = this.path();
    const obj = r.expectObject(value, p);
    if (obj !== null) r.onlyKnownFields(obj, p, known);
    return null;
  }

  requireString(obj: JsonValue, key: string): string {
    const v = obj.get(key);
    if (v !== null && v.isString()) return v.asString();
    return this.reader.requireString(obj, key, this.path());
  }

  optionalString(obj: JsonValue, key: string, fallback: string): string {
    const v = obj.get(key);
    if (legacyAbsent(v)) return fallback;
    if (v !== null && v.isString()) return v.asString();
    return this.reader.optionalString(obj, key, this.path(), fallback);
  }

  optionalBool(obj: JsonValue, key: string, fallback: bool): bool {
    const v = obj.get(key);
    if (legacyAbsent(v)) return fallback;
    if (v !== null && v.isBool()) return v.asBool();
    return this.reader.optionalBool(obj, key, this.path(), fallback);
  }

  optionalEnum(obj: JsonValue, key: string, allowed: string[], fallback: string): string {
    const v = obj.get(key);
    if (legacyAbsent(v)) return fallback;
    if (v !== null && v.isString() && allowed.includes(v.asString())) return v.asString();
    return this.reader.optionalEnum(obj, key, this.path(), allowed, fallback);
  }

  optionalInteger(obj: JsonValue, key: string, min: i64, max: i64, fallback: i64): i64 {
    const v = obj.get(key);
    if (legacyAbsent(v)) return fallback;
    if (v !== null && v.isInteger() && v.asInteger() >= min && v.asInteger() <= max) return v.asInteger();
    return this.reader.optionalInteger(obj, key, this.path(), min, max, fallback);
  }

  optionalArray(obj: JsonValue, key: string): JsonValue | null {
    const v = obj.get(key);
    if (legacyAbsent(v)) return null;
    if (v !== null && v.isArray()) return v;
    return this.reader.optionalArray(obj, key, this.path());
  }

  optionalObject(obj: JsonValue, key: string): JsonValue | null {
    const v = obj.get(key);
    if (legacyAbsent(v)) return null;
    if (v !== null && v.isObject()) return v;
    return this.reader.optionalObject(obj, key, this.path());
  }

  /** Element `index` of the item's array field `key`, which must be a string. */
  elementString(value: JsonValue, key: string, index: i32): string {
    if (value.isString()) return value.asString();
    return this.reader.expectString(value, this.reader.indexPath(this.fieldPath(key), index));
  }
}

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

/** True when obj has `key` with a non-null value (the reader treats null as absent too). */
function legacyPresent(obj: JsonValue, key: string): bool {
  const v = obj.get(key);
  return v !== null && !v.isNull();
}

function legacyQ(text: string): string {
  return quoteForMessage(text);
}

function legacyOnNetwork(name: string): string {
  return name.length == 0 ? "the default network" : "network " + legacyQ(name);
}

const LEGACY_EMPTY_LIST = new Array<JsonValue>();

/** A key that identifies an address independent of how it was written. */
function addressKey(a: Address): string {
  if (a.family == FAMILY_V4) return "4:" + a.v4.toString();
  return "6:" + a.hi.toString() + ":" + a.lo.toString();
}

class LegacyMeshParser {
  mesh: Mesh = new Mesh();
  private scratch: Address = new Address();
  /** uid → workload index; only needed while parsing (uids are not kept). */
  private uids: Map<string, i32> = new Map<string, i32>();
  /** Canonical reference text → reference id, so identical references are stored once. */
  private refIds: Map<string, i32> = new Map<string, i32>();
  private v4s: Array<u32> = new Array<u32>();
  private v6s: Array<u64> = new Array<u64>();
  // First-pass counts.
  private total: i64 = 0;
  private count4: i32 = 0;
  private count6: i32 = 0;
  // Paths of the two lists, for messages that point at another entry.
  private workloadsPath: string = "workloads";
  private servicesPath: string = "services";
  // Lazy-path readers (see fields.ts): `item` for a workload, `nested` for what sits inside a
  // workload or service (a reference, a VIP, an endpoint).
  private item: LegacyItemReader;
  private nested: LegacyItemReader;

  constructor(
    private reader: ConfigReader,
    private limits: MeshLimits,
  ) {
    this.item = new LegacyItemReader(reader);
    this.nested = new LegacyItemReader(reader);
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

  // ================================================================ workloads

  private workloads(items: Array<JsonValue>, path: string): void {
    const r = this.reader;
    const m = this.mesh;
    const n = items.length;
    if (!this.withinLimit(path, n, this.limits.workloads, "workloads")) return;
    this.countAddresses(items);
    if (!this.withinLimit(path, this.total, this.limits.addresses, "addresses")) return;
    ensureWorkloads(m, n, true);
    m.workloadTotal = n;
    m.wWaypoint = new SparseColumn(n, n);
    m.wGateway = new SparseColumn(n, n);
    m.v4Table = new AddrTable4(this.count4);
    if (this.count6 > 0) m.v6Table = new AddrTable6(this.count6);
    for (let i = 0; i < n; i++) {
      this.v4s.length = 0;
      this.v6s.length = 0;
      this.workload(i, unchecked(items[i]), path);
      setAddresses(m, i, this.v4s, this.v6s);
      if (r.failed()) return;
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
      return f.failField("uid", "duplicate uid " + legacyQ(uid) + " (first at " + first + ")");
    }
    this.uids.set(uid, i);

    const network = f.optionalString(obj, "network", "");
    const net = this.networkId(network, f, "network");
    if (net < 0) return;
    m.setWNet(i, <u16>net);

    const tls = f.optionalEnum(obj, "tlsMode", TLS_MODES, "disabled");
    const identity = this.identity(obj, f, tls == "istio");
    const healthy = f.optionalBool(obj, "healthy", true);
    const locality = f.optionalString(obj, "locality", "");
    if (r.failed()) return;
    const loc = this.localityId(locality);
    if (loc < 0) {
      return f.failField("locality", "not a locality (expected " + LOCALITY_SHAPE + "): " + legacyQ(locality));
    }
    m.setWLoc(i, <u16>loc);
    let info = <u32>identity | W_LIVE; // checked against IDENTITY_MASK when interned
    if (tls == "istio") info |= W_ISTIO;
    if (healthy) info |= W_HEALTHY;
    m.setWInfo(i, info);

    const waypoint = f.optionalObject(obj, "waypoint");
    if (waypoint !== null) {
      const ref = this.ref(waypoint, this.nested.atField(listPath, i, "waypoint"), "port", net);
      m.wWaypoint.set(i, <u32>(ref + 1));
    }
    const gateway = f.optionalObject(obj, "networkGateway");
    if (gateway !== null) {
      const ref = this.ref(gateway, this.nested.atField(listPath, i, "networkGateway"), "hboneMtlsPort", net);
      m.wGateway.set(i, <u32>(ref + 1));
    }

    const addresses = f.optionalArray(obj, "addresses");
    if (r.failed()) return;
    const list = addresses === null ? LEGACY_EMPTY_LIST : addresses.items();
    if (list.length == 0 && gateway === null) {
      return f.failField("addresses", "must not be empty unless networkGateway is set");
    }
    for (let k = 0; k < list.length && !r.failed(); k++) {
      this.workloadAddress(i, unchecked(list[k]), f, k, net, network);
    }
  }

  /** The interned identity id (0 = none); validates the SPIFFE shape once per distinct text. */
  private identity(obj: JsonValue, f: LegacyItemReader, required: bool): i32 {
    const r = this.reader;
    if (!legacyPresent(obj, "identity")) {
      if (required) f.failField("identity", 'required when tlsMode is "istio"');
      return 0;
    }
    const text = f.requireString(obj, "identity");
    if (r.failed()) return 0;
    const known = this.mesh.identities.find(text);
    if (known > 0) return known; // only valid identities are interned
    if (!isSpiffeIdentity(text)) {
      f.failField("identity", "not a SPIFFE identity (expected " + SPIFFE_SHAPE + "): " + legacyQ(text));
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
  private workloadAddress(w: i32, value: JsonValue, f: LegacyItemReader, k: i32, net: i32, network: string): void {
    const r = this.reader;
    const m = this.mesh;
    const text = f.elementString(value, "addresses", k);
    if (!this.parseAddress(text, f, "addresses", k)) return;
    const a = this.scratch;
    let clash = ADDED;
    if (a.family == FAMILY_V4) {
      clash = m.v4Table.insert(a.v4, w, net);
      if (clash == ADDED) this.v4s.push(a.v4);
    } else {
      clash = m.v6Table.insert(a.hi, a.lo, w, net);
      if (clash == ADDED) {
        this.v6s.push(a.hi);
        this.v6s.push(a.lo);
      }
    }
    if (clash == ADDED) return;
    const path = r.indexPath(f.fieldPath("addresses"), k);
    if (clash == w) return r.fail(path, "duplicate address " + legacyQ(text));
    if (clash < 0) return r.fail(path, "address table full");
    const owner = r.indexPath(this.workloadsPath, clash);
    r.fail(path, "address " + legacyQ(text) + " on " + legacyOnNetwork(network) + " is already used by " + owner);
  }

  /**
   * Parses `text` into the scratch address; false (with the failure recorded) if invalid. The
   * failure is reported at field `key` of the item `f` points at, or at its element `index`
   * when index >= 0.
   */
  private parseAddress(text: string, f: LegacyItemReader, key: string, index: i32): bool {
    const r = this.reader;
    if (r.failed()) return false;
    const status = parseIpString(text, this.scratch);
    if (status == IpParse.Ok) return true;
    const path = index < 0 ? f.fieldPath(key) : r.indexPath(f.fieldPath(key), index);
    if (status == IpParse.Zone) r.fail(path, "IPv6 zone not allowed: " + legacyQ(text));
    else r.fail(path, "not an IP address: " + legacyQ(text));
    return false;
  }

  /** The network's id, interning it; -1 (failure recorded at f's field `key`) past the limit. */
  private networkId(name: string, f: LegacyItemReader, key: string): i32 {
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
  private ref(obj: JsonValue, f: LegacyItemReader, portField: string, network: i32): i32 {
    const r = this.reader;
    const known = portField == "port" ? WAYPOINT_FIELDS : GATEWAY_FIELDS;
    if (f.object(obj, known) === null) return -1;
    const hasAddress = legacyPresent(obj, "address");
    const hasHostname = legacyPresent(obj, "hostname");
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
        f.failField("hostname", "not a hostname: " + legacyQ(hostname));
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
  private servicePorts(s: i32, obj: JsonValue, p: string, hostname: string, cluster: ArrayBuffer | null): void {
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

  private vips(s: i32, obj: JsonValue, p: string): void {
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
  private endpoints(s: i32, obj: JsonValue, p: string, seen: U64Table): void {
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
  private endpointPorts(s: i32, own: Array<u32>, overrides: JsonValue, f: LegacyItemReader, servicePath: string): void {
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

}

/** The original tree-based parseMeshConfig. */
function legacyParseMeshConfig(bytes: ArrayBuffer, limits: MeshLimits): MeshParseResult {
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
import { JsonKind, writeJson } from "../json";
import { formatIp, TlsMode } from "../mesh";
import { MeshDocument, parseMesh, parseMeshDocument, parseMeshSource } from "../mesh/parse";
import { MemorySource } from "../json/source";
import { HostBufferSource } from "../runtime/config_source";
import { BufferType } from "../runtime/types";

/** Everything the Mesh answers through its public API, as text. */
function digest(m: Mesh): string {
  const out = new Array<string>();
  const a = new Address();
  out.push("networks " + m.networkCount().toString());
  for (let n = 0; n < m.networkCount(); n++) out.push(" net " + n.toString() + "=" + m.networkName(n));
  for (let w = 0; w < m.workloadCount(); w++) {
    let line = "w" + w.toString() + " net=" + m.workloadNetwork(w).toString();
    line += " tls=" + (m.workloadTlsMode(w) == TlsMode.Istio ? "istio" : "disabled");
    line += " healthy=" + (m.workloadHealthy(w) ? "1" : "0") + " id=" + m.workloadIdentity(w);
    line += "#" + m.workloadIdentityId(w).toString() + " loc=" + m.workloadLocality(w);
    line += " r=" + m.localityPrefix(m.workloadRegion(w)) + " z=" + m.localityPrefix(m.workloadZone(w));
    line += " s=" + m.localityPrefix(m.workloadSubzone(w));
    line += " wp=" + m.workloadWaypoint(w).toString() + " gw=" + m.workloadGateway(w).toString();
    for (let i = 0; i < m.workloadAddressCount(w); i++) {
      m.workloadAddress(w, i, a);
      line += " " + formatIp(a) + "->" + m.workloadByAddress(m.workloadNetwork(w), a).toString();
    }
    out.push(line);
  }
  for (let s = 0; s < m.serviceCount(); s++) {
    let line = "s" + s.toString() + " " + m.serviceHostname(s) + " by=" + m.serviceByHostname(m.serviceHostname(s)).toString();
    line += " headless=" + (m.serviceHeadless(s) ? "1" : "0") + " wp=" + m.serviceWaypoint(s).toString();
    line += " lb=" + m.lbMode(s).toString() + ":";
    for (let i = 0; i < m.lbPreferenceCount(s); i++) line += m.lbPreference(s, i).toString();
    for (let i = 0; i < m.servicePortCount(s); i++) {
      const port = m.servicePortAt(s, i);
      const cluster = m.clusterName(s, port);
      line += " port " + port.toString() + "->" + m.serviceTargetPort(s, port).toString();
      line += " " + (cluster === null ? "<null>" : String.UTF8.decode(cluster));
      for (let e = 0; e < m.endpointCount(s); e++) line += " e" + e.toString() + ":" + m.targetPort(s, e, port).toString();
    }
    for (let e = 0; e < m.endpointCount(s); e++) line += " ep=" + m.endpointWorkload(s, e).toString();
    for (let i = 0; i < m.sanCount(s); i++) line += " san=" + m.san(s, i);
    for (let i = 0; i < m.vipCount(s); i++) {
      m.vipAddress(s, i, a);
      line += " vip=" + formatIp(a) + "@" + m.vipNetworkId(s, i).toString() + "->" + m.serviceByVip(m.vipNetworkId(s, i), a).toString();
    }
    out.push(line);
  }
  for (let r = 0; r < m.refs.length; r++) {
    let line = "ref" + r.toString() + " t=" + m.refTarget(r).toString() + " i=" + m.refIndex(r).toString();
    line += " port=" + m.refPort(r).toString() + " host=" + m.refHostname(r);
    if (m.refAddress(r, a)) line += " addr=" + formatIp(a);
    out.push(line);
  }
  // Headless lookups for every (workload, port) some service names.
  for (let w = 0; w < m.workloadCount(); w++) {
    for (let s = 0; s < m.serviceCount(); s++) {
      for (let i = 0; i < m.servicePortCount(s); i++) {
        const port = m.serviceTargetPort(s, m.servicePortAt(s, i));
        const h = m.headlessServiceOf(w, port);
        if (h >= 0) out.push("headless " + w.toString() + ":" + port.toString() + "=" + h.toString() + "/" + m.headlessServicePort(w, port).toString());
      }
    }
  }
  return out.join("\n");
}

/** The outcome of a parse: the error, or the model's digest. */
function outcome(mesh: Mesh | null, error: string): string {
  if (mesh === null) return "error: " + error;
  return error.length > 0 ? "both: " + error : digest(mesh);
}

let checked = 0;
let mismatches = 0;
let accepted = 0;
const errorsSeen = new Set<string>();

/** The streaming parser and the original one agree on `bytes`. */
function same(bytes: ArrayBuffer, limits: MeshLimits = new MeshLimits()): bool {
  const expected = legacyParseMeshConfig(bytes, limits);
  const doc = parseMeshDocument(bytes, [], limits);
  const a = outcome(expected.mesh, expected.error);
  let b = outcome(doc.mesh, doc.error);
  // The windowed reader (the way a filter reads the host's configuration) with windows so
  // small that nearly every token crosses a window boundary or lies outside it when re-read.
  const source = new MemorySource(bytes);
  const windowed = parseMeshSource(source, [], limits, 16 + (checked % 5) * 8, 4 + (checked % 4));
  const c = outcome(windowed.mesh, windowed.error);
  if (c != b) b = "windowed: " + c + " / in memory: " + b;
  else if (windowed.mesh !== null && bytes.byteLength > 64 && source.reads < 2) b = "windowed: the window was never refilled";
  checked++;
  if (doc.mesh !== null) accepted++;
  else errorsSeen.add(doc.error);
  if (a != b) {
    mismatches++;
    if (mismatches <= 3) {
      log<string>("input: " + String.UTF8.decode(bytes));
      expect(b).toBe(a);
    }
    return false;
  }
  return true;
}

function sameText(text: string, limits: MeshLimits = new MeshLimits()): bool {
  return same(String.UTF8.encode(text), limits);
}

// ---- fixtures: the configurations of mesh_parse, mesh_errors and passthrough_mtls specs ----

const FULL = `{
  "workloads": [
    {"uid": "pod-a", "addresses": ["10.0.0.1", "FD00:0::1"], "network": "net1",
     "identity": "spiffe://cluster.local/ns/default/sa/app", "tlsMode": "istio", "healthy": false,
     "locality": "us-east1/us-east1-b/rack7", "waypoint": {"address": "10.0.9.9", "port": 15009},
     "networkGateway": {"hostname": "gw.example.com", "hboneMtlsPort": 15443}},
    {"uid": "pod-b", "addresses": ["10.0.0.2"]},
    {"uid": "pod-c", "addresses": ["10.0.0.3", "::ffff:10.0.0.4"], "locality": "us-east1", "network": "net1",
     "waypoint": {"hostname": "my-service.default.svc.cluster.local"}, "identity": "spiffe://cluster.local/ns/default/sa/app"},
    {"uid": "remote", "network": "net2", "networkGateway": {"address": "192.0.2.1"}}
  ],
  "services": [
    {"hostname": "my-service.default.svc.cluster.local",
     "vips": [{"address": "10.96.0.10"}, {"network": "net1", "address": "fd00:96::10"}],
     "ports": {"80": 9376, "443": 8443},
     "endpoints": [{"workload": "pod-a", "ports": {"80": 9377}}, {"workload": "pod-b"}, {"workload": "pod-c"}],
     "waypoint": {"hostname": "waypoint.default.svc.cluster.local"},
     "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/app", "other"],
     "headless": true, "cluster": "custom-cluster",
     "loadBalancing": {"routingPreference": ["zone", "network"], "mode": "standard"}},
    {"hostname": "plain.default.svc.cluster.local", "ports": {"8080": 8080}, "waypoint": {"address": "10.0.0.2"},
     "endpoints": [{"workload": "pod-b", "ports": {"8080": 8081}}], "headless": true},
    {"hostname": "waypoint.default.svc.cluster.local", "vips": [{"address": "10.96.0.99"}],
     "loadBalancing": {"routingPreference": []}}
  ]
}`;

const W1 = `{"uid": "w1", "addresses": ["10.0.0.1"]}`;

/** Bodies of single workloads (after a valid one) and services (after a valid one) from mesh_errors. */
const WORKLOAD_CASES = [
  `"uid": "w", "addresses": ["10.0.0.2"], "ip": "x"`,
  `"uid": "w", "networkGateway": {"hostname": "g", "port": 1}`,
  `"uid": 7`,
  `"uid": "w", "addresses": "10.0.0.2"`,
  `"uid": "w", "addresses": [1]`,
  `"uid": "w", "addresses": ["10.0.0.2"], "healthy": "yes"`,
  `"uid": "w", "addresses": ["10.0.0.2"], "tlsMode": "strict"`,
  `"addresses": ["10.0.0.2"]`,
  `"uid": "w", "addresses": ["10.0.0.2", "10.0.0.300"]`,
  `"uid": "w", "addresses": ["fe80::1%eth0"]`,
  `"uid": "w", "addresses": []`,
  `"uid": "w"`,
  `"uid": "w", "addresses": ["10.0.0.1"]`,
  `"uid": "w", "addresses": ["10.0.0.2", "::ffff:10.0.0.2"]`,
  `"uid": "w0", "addresses": ["10.0.0.2"]`,
  `"uid": "", "addresses": ["10.0.0.2"]`,
  `"uid": "w", "addresses": ["10.0.0.2"], "tlsMode": "istio"`,
  `"uid": "w", "addresses": ["10.0.0.2"], "identity": "spiffe://td/ns/n/sa/s/extra"`,
  `"uid": "w", "addresses": ["10.0.0.2"], "identity": ""`,
  `"uid": "w", "addresses": ["10.0.0.2"], "locality": "r//s"`,
  `"uid": "w", "addresses": ["10.0.0.2"], "locality": "a/b/c/d"`,
  `"uid": "w", "networkGateway": {"hboneMtlsPort": 15008}`,
  `"uid": "w", "networkGateway": {"address": "1.2.3.4", "hboneMtlsPort": 65536}`,
  `"uid": "w", "networkGateway": {"address": "gw.example.com"}`,
  `"uid": "w", "addresses": null, "networkGateway": {"hostname": "gw"}`,
  `"uid": "w", "addresses": ["10.0.0.2"], "identity": null, "tlsMode": null, "healthy": null, "locality": null`,
  `"uid": "w", "addresses": ["10.0.0.2"], "waypoint": null, "networkGateway": null, "network": null`,
  `"uid": "w", "addresses": ["10.0.0.2"], "waypoint": [], "tlsMode": 5`,
  `"uid": null, "addresses": ["10.0.0.2"]`,
  `"uid": "w\\u0030", "addresses": ["10.0.0.2"]`,
  `"uid": "w", "addresses": ["10.0.0.\\u0032"], "network": "n\\u00e9t", "identity": "spiffe://td/ns/n/sa/\\u0073"`,
];

const SERVICE_CASES = [
  `"hostname": "s", "vip": []`,
  `"hostname": "s", "vips": [{"address": "10.1.0.1", "net": "a"}]`,
  `"hostname": "s", "endpoints": [{"workload": "w1", "port": 1}]`,
  `"hostname": "s", "waypoint": {"hostname": "w", "hboneMtlsPort": 1}`,
  `"hostname": "s", "loadBalancing": {"prefs": []}`,
  `"hostname": "s", "ports": []`,
  `"hostname": "s", "ports": {"80": "9376"}`,
  `"hostname": "s", "headless": 1`,
  `"hostname": "s", "subjectAltNames": [1]`,
  `"ports": {}`,
  `"hostname": "s", "vips": [{"network": "n"}]`,
  `"hostname": "s", "endpoints": [{}]`,
  `"hostname": "s", "vips": [{"address": "vip"}]`,
  `"hostname": "s", "vips": [{"address": "10.96.0.1"}, {"address": "10.96.0.1"}]`,
  `"hostname": "s", "waypoint": {"address": "10.0.0.9", "hostname": "wp"}`,
  `"hostname": "s", "waypoint": {"hostname": "wp", "port": 0}`,
  `"hostname": "s", "waypoint": {"hostname": "a|b"}`,
  `"hostname": "s0"`,
  `"hostname": "a..b"`,
  `"hostname": "svc:80"`,
  `"hostname": ""`,
  `"hostname": "s", "ports": {"0": 80}`,
  `"hostname": "s", "ports": {"65536": 80}`,
  `"hostname": "s", "ports": {"http": 80}`,
  `"hostname": "s", "ports": {"80": 0}`,
  `"hostname": "s", "ports": {"80": 65536}`,
  `"hostname": "s", "ports": {"80": null}`,
  `"hostname": "s", "ports": {"80": 8e1, "\\u0038\\u0031": 81.0}`,
  `"hostname": "s", "endpoints": [{"workload": "nope"}]`,
  `"hostname": "s", "endpoints": [{"workload": "w1"}, {"workload": "w1"}]`,
  `"hostname": "s", "ports": {"80": 9376}, "endpoints": [{"workload": "w1", "ports": {"81": 9377}}]`,
  `"hostname": "s", "ports": {"80": 9376}, "endpoints": [{"workload": "w1", "ports": {"80": 0}}]`,
  `"hostname": "s", "ports": {"80": 9376}, "endpoints": [{"workload": "w1", "ports": {"80": null}}]`,
  `"hostname": "s", "cluster": ""`,
  `"hostname": "s", "cluster": 5`,
  `"hostname": "s", "subjectAltNames": [""]`,
  `"hostname": "s", "subjectAltNames": [null]`,
  `"hostname": "s", "loadBalancing": {"routingPreference": ["zone", "zone"]}`,
  `"hostname": "s", "loadBalancing": {"routingPreference": ["cluster"]}`,
  `"hostname": "s", "loadBalancing": {"routingPreference": [1]}`,
  `"hostname": "s", "loadBalancing": {"mode": "strict"}`,
  `"hostname": "s", "loadBalancing": []`,
  `"hostname": "s", "waypoint": {"address": "10.0.0.1"}, "headless": true, "ports": {"80": 8080},
   "endpoints": [{"workload": "w1"}], "subjectAltNames": ["a"], "vips": [{"address": "10.96.1.1", "network": "x"}]`,
];

const WHOLE_CASES = [
  `{"workloads": [}`,
  "[]",
  `"x"`,
  "null",
  `{"workload": []}`,
  `{"workloads": {}}`,
  `{"workloads": [5]}`,
  `{"workloads": [null]}`,
  `{"services": {}, "workloads": [5]}`,
  `{"workloads": [5], "services": 3}`,
  `{"services": [{"hostname": "a", "endpoints": [{"workload": "x"}]}], "workloads": [{"uid": "x", "addresses": ["10.0.0.1"]}]}`,
  `{"services": [{"hostname": "a", "vips": [{"address": "10.96.0.1"}]}, {"hostname": "b", "vips": [{"address": "10.96.0.1"}]}]}`,
  `{"workloads": [{"uid": "a", "network": "n", "addresses": ["fd00::1"]}, {"uid": "b", "network": "n", "addresses": ["FD00:0::1"]}]}`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}], "extra": 1, "services": [{"hostname": 5}]}`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "a", "addresses": ["10.0.0.2"]}], "x": 1}`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}], "workloads": []}`,
  `{}`,
  `{"workloads": null, "services": null}`,
  `{"workloads": [], "services": []}`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}] , "services": [{"hostname": "s", "endpoints": [{"workload": "a"}]}]} x`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"], "waypoint": {"address": "10.0.0.1"}},
    {"uid": "b", "addresses": ["10.0.0.2"], "network": "n2", "waypoint": {"address": "10.0.0.1"}},
    {"uid": "c", "addresses": ["10.0.0.1"], "network": "n2", "networkGateway": {"address": "10.96.0.1"}}],
   "services": [{"hostname": "s", "vips": [{"address": "10.96.0.1", "network": "n2"}], "waypoint": {"address": "10.0.0.1"}}]}`,
];

function workloadDoc(fields: string): string {
  return `{"workloads": [{"uid": "w0", "addresses": ["10.0.0.1"]}, {${fields}}]}`;
}

function serviceDoc(fields: string): string {
  return `{"workloads": [${W1}], "services": [{"hostname": "s0"}, {${fields}}]}`;
}

/** Every fixture as a whole configuration. */
function fixtures(): Array<string> {
  const all = new Array<string>();
  all.push(FULL);
  for (let i = 0; i < WORKLOAD_CASES.length; i++) all.push(workloadDoc(WORKLOAD_CASES[i]));
  for (let i = 0; i < SERVICE_CASES.length; i++) all.push(serviceDoc(SERVICE_CASES[i]));
  for (let i = 0; i < WHOLE_CASES.length; i++) all.push(WHOLE_CASES[i]);
  return all;
}

// ---- tree mutations: every kind of wrong value, shuffled key orders, unknown keys ----

let seed: u32 = 20240607;

function random(n: i32): i32 {
  seed = seed * 1103515245 + 12345;
  return n <= 0 ? 0 : <i32>((seed >> 8) % <u32>n);
}

const STRINGS = ["", "w0", "w1", "pod-a", "pod-b", "10.0.0.1", "10.0.0.2", "fd00::1", "fe80::1%eth0", "net1",
  "spiffe://cluster.local/ns/default/sa/app", "r/z", "r//z", "istio", "disabled", "standard", "zone", "network",
  "s0", "my-service.default.svc.cluster.local", "a|b", "80", "0", "x", "10.96.0.10", "gw.example.com"];

/** A random value of a random kind. */
function randomValue(depth: i32): JsonValue {
  const kind = random(depth > 1 ? 5 : 7);
  if (kind == 0) return JsonValue.fromNull();
  if (kind == 1) return JsonValue.fromBool(random(2) == 0);
  if (kind == 2) {
    const ints: i64[] = [0, 1, 80, 8080, 15008, 65535, 65536, -1];
    const v = ints[random(ints.length)];
    return JsonValue.fromNumber(<f64>v, true, v);
  }
  if (kind == 3 || kind == 4) return JsonValue.fromString(STRINGS[random(STRINGS.length)]);
  if (kind == 5) {
    const items = new Array<JsonValue>();
    for (let i = random(3); i > 0; i--) items.push(randomValue(depth + 1));
    return JsonValue.fromArray(items);
  }
  const obj = JsonValue.newObject();
  const keys = ["address", "hostname", "port", "workload", "ports", "80", "uid", "routingPreference", "mode", "zz"];
  for (let i = random(3); i > 0; i--) obj.addField(keys[random(keys.length)], randomValue(depth + 1));
  return obj;
}

/** A copy of `v` with (rarely) one node replaced, objects' keys shuffled, entries dropped or repeated. */
function mutate(v: JsonValue, rate: i32): JsonValue {
  if (random(rate) == 0) return randomValue(0);
  if (v.kind == JsonKind.Array) {
    const items = v.items();
    const out = new Array<JsonValue>();
    for (let i = 0; i < items.length; i++) {
      if (random(rate * 2) == 0) continue; // dropped
      const item = mutate(items[i], rate);
      out.push(item);
      if (random(rate * 2) == 0) out.push(item); // repeated
    }
    return JsonValue.fromArray(out);
  }
  if (v.kind == JsonKind.Object) {
    const keys = v.keys().slice(0);
    // Shuffle: the first error must not depend on key order in the document.
    for (let i = keys.length - 1; i > 0; i--) {
      const j = random(i + 1);
      const t = keys[i];
      keys[i] = keys[j];
      keys[j] = t;
    }
    const obj = JsonValue.newObject();
    for (let i = 0; i < keys.length; i++) {
      const child = v.get(keys[i]);
      if (child === null || random(rate * 2) == 0) continue;
      obj.addField(keys[i], mutate(child, rate));
    }
    if (random(rate * 3) == 0) obj.addField("zz", randomValue(1));
    return obj;
  }
  return v;
}

// ==================================================================== specs

describe("parseMeshDocument: same model and messages as the tree-based parser", () => {
  it("on every fixture", () => {
    const all = fixtures();
    let bad = 0;
    for (let i = 0; i < all.length; i++) if (!sameText(all[i])) bad++;
    expect(bad).toBe(0);
  });

  it("on the limit checks", () => {
    const limits = new MeshLimits();
    limits.workloads = 1;
    limits.addresses = 2;
    limits.services = 1;
    limits.serviceItems = 1;
    const docs = [
      `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "b", "addresses": ["10.0.0.2"]}]}`,
      `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1", "10.0.0.2", "fd00::1"]}]}`,
      `{"services": [{"hostname": "a"}, {"hostname": "b"}]}`,
      `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}], "services": [{"hostname": "a", "endpoints": [{"workload": "a"}, {"workload": "a"}]}]}`,
      `{"services": [{"hostname": "a", "vips": [{"address": "1.1.1.1"}, {"address": "1.1.1.2"}, {"address": "1.1.1.3"}]}]}`,
      `{"services": [{"hostname": "a", "ports": {"1": 1, "2": 2}}]}`,
      `{"services": [{"hostname": "a", "subjectAltNames": ["x", "y"]}]}`,
      `{"workloads": [{"uid": 1, "addresses": [1, 2, 3]}]}`,
      `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, 7], "services": [{"hostname": "a", "vips": [1, 2, 3]}]}`,
    ];
    let bad = 0;
    for (let i = 0; i < docs.length; i++) if (!sameText(docs[i], limits)) bad++;
    expect(bad).toBe(0);
  });

  it("on too many networks", () => {
    const parts = new Array<string>();
    for (let i = 0; i <= 2048; i++) parts.push(`{"uid": "w${i}", "addresses": ["10.0.0.1"], "network": "n${i}"}`);
    expect(sameText(`{"workloads": [${parts.join(",")}]}`)).toBe(true);
  });

  it("on thousands of mutated fixtures: wrong types, shuffled keys, dropped and repeated entries", () => {
    const all = fixtures();
    const trees = new Array<JsonValue>();
    for (let i = 0; i < all.length; i++) {
      const tree = parseJson(String.UTF8.encode(all[i])).value;
      if (tree !== null) trees.push(tree);
    }
    checked = 0;
    mismatches = 0;
    accepted = 0;
    errorsSeen.clear();
    for (let round = 0; round < 4000; round++) {
      const base = trees[round % trees.length];
      same(String.UTF8.encode(writeJson(mutate(base, 6 + (round % 20)))));
    }
    log<string>(
      "mutated configurations compared: " + checked.toString() + ", accepted: " + accepted.toString() +
        ", distinct errors: " + errorsSeen.size.toString(),
    );
    expect(mismatches).toBe(0);
    // The mutations reach both outcomes and many different checks.
    expect(accepted).toBeGreaterThan(100);
    expect(errorsSeen.size).toBeGreaterThan(150);
  });

  it("on corrupted bytes (JSON errors win wherever they are)", () => {
    const base = Uint8Array.wrap(String.UTF8.encode(FULL));
    const interesting: u8[] = [0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x30, 0x2d, 0x80, 0x20, 0x61];
    mismatches = 0;
    for (let round = 0; round < 1500; round++) {
      const copy = base.slice(0);
      seed = seed * 1103515245 + 12345;
      copy[<i32>((seed >> 8) % <u32>copy.length)] = interesting[random(interesting.length)];
      same(copy.buffer);
    }
    for (let len = 0; len < base.length; len += 7) same(base.slice(0, len).buffer);
    expect(mismatches).toBe(0);
  });
});

const OWN = ["localNetwork", "mode"];

describe("parseMeshDocument: the caller's own fields", () => {
  it("hands back the own fields as a small object and streams the mesh", () => {
    const doc = parseMeshDocument(
      String.UTF8.encode(`{"mode": "subset", "workloads": [${W1}], "localNetwork": {"a": [1]}, "services": []}`),
      OWN,
    );
    expect(doc.error).toBe("");
    expect(doc.ok()).toBe(true);
    const own = doc.own;
    expect(own).not.toBeNull();
    if (own === null) return;
    expect(own.keys().join(",")).toBe("mode,localNetwork");
    expect(writeJson(own)).toBe('{"mode":"subset","localNetwork":{"a":[1]}}');
    const m = doc.mesh;
    expect(m !== null && m.workloadCount() == 1).toBe(true);
  });

  it("refuses unknown top-level fields with ConfigReader's message, listing own fields first", () => {
    const doc = parseMeshDocument(String.UTF8.encode(`{"workloads": [], "mtls_cluster": "x", "y": 1}`), OWN);
    expect(doc.error).toBe("mtls_cluster: unknown field (known: localNetwork, mode, workloads, services)");
    expect(doc.own).toBeNull();
    expect(doc.mesh).toBeNull();
    expect(parseMeshDocument(String.UTF8.encode(`{"a b": 1}`), OWN).error).toBe(
      '["a b"]: unknown field (known: localNetwork, mode, workloads, services)',
    );
  });

  it("reports JSON errors anywhere before everything else, and a root that is not an object", () => {
    expect(parseMeshDocument(String.UTF8.encode(`{"x": 1, "workloads": [}`), OWN).error).toBe(
      "byte 23: unexpected character '}'",
    );
    expect(parseMeshDocument(String.UTF8.encode(`{"mode": 1, "mode": 2}`), OWN).error).toBe(
      'byte 12: duplicate key "mode"',
    );
    expect(parseMeshDocument(String.UTF8.encode(`[1]`), OWN).error).toBe("(root): expected an object");
    expect(parseMeshDocument(String.UTF8.encode(`[1`), OWN).error).toBe("byte 2: unexpected end of input");
  });

  it("keeps the own fields when the mesh fails, so the caller can report its own first", () => {
    const doc = parseMeshDocument(String.UTF8.encode(`{"workloads": [{"uid": ""}], "mode": 5}`), OWN);
    expect(doc.error).toBe("workloads[0].uid: must not be empty");
    expect(doc.mesh).toBeNull();
    const own = doc.own;
    expect(own !== null && own.has("mode")).toBe(true);
  });

  it("streams services that come before workloads", () => {
    const doc = parseMeshDocument(
      String.UTF8.encode(`{"services": [{"hostname": "s", "endpoints": [{"workload": "w1"}]}], "workloads": [${W1}]}`),
      OWN,
    );
    expect(doc.error).toBe("");
    const m = doc.mesh;
    expect(m !== null && m.endpointWorkload(0, 0) == 0).toBe(true);
  });
});

describe("parseMesh on a tree: the same parser through writeJson", () => {
  it("gives the same model and messages as parseMeshDocument, under the caller's path", () => {
    const all = fixtures();
    let bad = 0;
    for (let i = 0; i < all.length; i++) {
      const tree = parseJson(String.UTF8.encode(all[i])).value;
      if (tree === null || !tree.isObject()) continue;
      const reader = new ConfigReader();
      if (!reader.onlyKnownFields(tree, "", MESH_FIELDS)) continue;
      const fromTree = parseMesh(tree, reader, "");
      const doc: MeshDocument = parseMeshDocument(String.UTF8.encode(all[i]), []);
      if (outcome(fromTree, reader.error()) != outcome(doc.mesh, doc.error)) {
        bad++;
        expect(outcome(fromTree, reader.error())).toBe(outcome(doc.mesh, doc.error));
      }
    }
    expect(bad).toBe(0);
    const tree = parseJson(String.UTF8.encode(`{"workloads": [{"uid": 1}]}`)).value;
    if (tree === null) return;
    const reader = new ConfigReader();
    expect(parseMesh(tree, reader, "mesh")).toBeNull();
    expect(reader.error()).toBe("mesh.workloads[0].uid: expected a string");
  });
});

describe("parseMeshSource: reading the configuration from the host", () => {
  it("refuses the configuration with a message when the host serves no bytes", () => {
    // as-pect's host answers every proxy_* call with Unimplemented: the first window is empty.
    const doc = parseMeshSource(new HostBufferSource(BufferType.PluginConfiguration, 40), []);
    expect(doc.own).toBeNull();
    expect(doc.mesh).toBeNull();
    expect(doc.error).toBe("byte 0: configuration could not be read past this offset");
  });

  it("matches endpoint uids that lie ahead of the services (sorted keys) and cross a window's end", () => {
    // "services" sorts before "workloads": each endpoint's uid is compared with uids further on
    // in the document, some of which start inside the current window and end past it.
    let services = "";
    let workloads = "";
    const uid = (i: i32): string => "kubernetes//Pod/default/a-rather-long-pod-name-" + i.toString();
    for (let i = 0; i < 12; i++) {
      if (i > 0) {
        services += ",";
        workloads += ",";
      }
      // The last service names the first workload, whose uid follows a few bytes later.
      services += `{"hostname": "s${i}.default.svc", "ports": {"80": 8080}, "endpoints": [{"workload": "${uid(11 - i)}"}]}`;
      workloads += `{"uid": "${uid(i)}", "addresses": ["10.0.0.${i + 1}"]}`;
    }
    const bytes = String.UTF8.encode(`{"services": [${services}], "workloads": [${workloads}]}`);
    const whole = parseMeshDocument(bytes, []);
    expect(whole.error).toBe("");
    const expected = digest(whole.mesh!);
    for (let window = 16; window <= 160; window += 3) {
      const windowed = parseMeshSource(new MemorySource(bytes), [], new MeshLimits(), window, 4);
      expect(windowed.error).toBe("", "window " + window.toString());
      expect(digest(windowed.mesh!)).toBe(expected, "window " + window.toString());
    }
  });

  it("reports a source that stops early at the offset where it stopped", () => {
    const text = String.UTF8.encode(`{"workloads": [], "services": []}`);
    const doc = parseMeshSource(new TruncatedSource(text, 20), [], new MeshLimits(), 16, 4);
    expect(doc.error).toBe("byte 20: configuration could not be read past this offset");
  });
});

/** Serves only the first `stop` bytes of `bytes`, as a host that fails part way would. */
class TruncatedSource extends MemorySource {
  constructor(bytes: ArrayBuffer, private stop: i32) {
    super(bytes);
  }

  read(start: i32, length: i32, dest: usize): i32 {
    if (start >= this.stop) return 0;
    return super.read(start, min(length, this.stop - start), dest);
  }
}

// The workloads half of the tree-based mesh parser kept as an oracle (legacy_mesh_parser.ts has
// the services half and the entry point), verbatim from the parser at commit eb2c51c apart from
// its members being protected so that the services half can extend it.
import { ConfigReader, JsonValue } from "../json";
import { Address, FAMILY_V4, IpParse, parseIpString } from "../mesh/ip";
import { IDENTITY_MASK, Mesh, Ref, W_HEALTHY, W_ISTIO, W_LIVE } from "../mesh/model";
import { ensureWorkloads, setAddresses } from "../mesh/edit";
import { ADDED, AddrTable4, AddrTable6, SparseColumn } from "../mesh/table";
import { isHostname, isLocality, isSpiffeIdentity, LOCALITY_SHAPE, SPIFFE_SHAPE } from "../mesh/validate";
import { DEFAULT_HBONE_PORT, MAX_NETWORKS, MeshLimits } from "../mesh/parse";
import {
  LegacyItemReader,
  WORKLOAD_FIELDS,
  WAYPOINT_FIELDS,
  GATEWAY_FIELDS,
  TLS_MODES,
  legacyPresent,
  legacyQ,
  legacyOnNetwork,
  LEGACY_EMPTY_LIST,
  addressKey,
} from "./legacy_mesh_fields";

export class LegacyWorkloadParser {
  mesh: Mesh = new Mesh();
  protected scratch: Address = new Address();
  /** uid → workload index; only needed while parsing (uids are not kept). */
  protected uids: Map<string, i32> = new Map<string, i32>();
  /** Canonical reference text → reference id, so identical references are stored once. */
  protected refIds: Map<string, i32> = new Map<string, i32>();
  protected v4s: Array<u32> = new Array<u32>();
  protected v6s: Array<u64> = new Array<u64>();
  // First-pass counts.
  protected total: i64 = 0;
  protected count4: i32 = 0;
  protected count6: i32 = 0;
  // Paths of the two lists, for messages that point at another entry.
  protected workloadsPath: string = "workloads";
  protected servicesPath: string = "services";
  // Lazy-path readers (see fields.ts): `item` for a workload, `nested` for what sits inside a
  // workload or service (a reference, a VIP, an endpoint).
  protected item: LegacyItemReader;
  protected nested: LegacyItemReader;

  constructor(
    protected reader: ConfigReader,
    protected limits: MeshLimits,
  ) {
    this.item = new LegacyItemReader(reader);
    this.nested = new LegacyItemReader(reader);
  }

  // ================================================================ workloads

  protected workloads(items: Array<JsonValue>, path: string): void {
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
  protected countAddresses(items: Array<JsonValue>): void {
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

  protected workload(i: i32, value: JsonValue, listPath: string): void {
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
  protected identity(obj: JsonValue, f: LegacyItemReader, required: bool): i32 {
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
  protected workloadAddress(w: i32, value: JsonValue, f: LegacyItemReader, k: i32, net: i32, network: string): void {
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
  protected parseAddress(text: string, f: LegacyItemReader, key: string, index: i32): bool {
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
  protected networkId(name: string, f: LegacyItemReader, key: string): i32 {
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
  protected localityId(text: string): i32 {
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
  protected ref(obj: JsonValue, f: LegacyItemReader, portField: string, network: i32): i32 {
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

  protected withinLimit(path: string, count: i64, limit: i32, what: string): bool {
    if (count <= <i64>limit) return true;
    const text = count.toString() + " " + what + " exceed the limit of " + limit.toString();
    this.reader.fail(path, text);
    return false;
  }
}

// The JSON mesh build's state (the model being built, the lookups by bytes, one FieldReader per
// object shape, the lists each item collects) and the checks workloads and services share:
// network and locality ids, an IP address, a waypoint or network-gateway reference.
import { ConfigReader, JsonStream, JsonToken } from "../json";
import { Address, IpParse, parseIpBytes, parseIpString } from "./ip";
import { addLocalityParts } from "./edit";
import { FieldReader } from "./fields";
import { Mesh, Ref } from "./model";
import {
  DEFAULT_HBONE_PORT,
  ENDPOINT_FIELDS,
  GATEWAY_FIELDS,
  LB_FIELDS,
  MAX_NETWORKS,
  MeshLimits,
  RF_ADDRESS,
  RF_HOSTNAME,
  RF_PORT,
  SERVICE_FIELDS,
  VIP_FIELDS,
  WAYPOINT_FIELDS,
  WORKLOAD_FIELDS,
} from "./parse";
import { RefIndex, TextIndex, UidIndex } from "./parse_lookup";
import { q } from "./parse_text";
import { isHostname, isLocality } from "./validate";

export class MeshParser {
  mesh: Mesh;
  scratch: Address = new Address();
  uids: UidIndex = new UidIndex();
  /** The uid index's memory during the build, then the IPv4 table's (fillV4Table). */
  shared: StaticArray<u32> = new StaticArray<u32>(0);
  /** Workloads whose addresses are in the pools: all of them, or up to the one that failed. */
  workloadsRead: i32 = 0;
  workloadsOffset: i32 = 0;
  count4: i32 = 0;
  document: JsonStream;
  refs: RefIndex;
  identityIds: TextIndex;
  networkIds: TextIndex;
  localityIds: TextIndex;
  // Reused per item: what one workload / service / endpoint collects before it is stored.
  v4s: Array<u32> = new Array<u32>();
  v6s: Array<u64> = new Array<u64>();
  portWords: Array<u32> = new Array<u32>();
  clusters: Array<ArrayBuffer> = new Array<ArrayBuffer>();
  vipWords: Array<u32> = new Array<u32>();
  sanList: Array<string> = new Array<string>();
  members: Array<i32> = new Array<i32>();
  /** Override words of all endpoints of the current service, and each endpoint's count. */
  overrideWords: Array<u32> = new Array<u32>();
  overrideCounts: Array<i32> = new Array<i32>();
  oneOverride: Array<u32> = new Array<u32>();
  // Paths of the two lists, for messages that point at another entry.
  workloadsPath: string = "workloads";
  servicesPath: string = "services";
  /** Walks the workloads / services arrays. */
  outer: JsonStream;
  // One reader per object shape, each with its own stream, so they can nest.
  workloadFields: FieldReader;
  serviceFields: FieldReader;
  vipFields: FieldReader;
  endpointFields: FieldReader;
  waypointFields: FieldReader;
  gatewayFields: FieldReader;
  lbFields: FieldReader;

  constructor(
    public reader: ConfigReader,
    public limits: MeshLimits,
    document: JsonStream,
  ) {
    const m = new Mesh();
    this.mesh = m;
    this.refs = new RefIndex(m.refs);
    this.identityIds = new TextIndex(m.identities);
    this.networkIds = new TextIndex(m.networks);
    this.localityIds = new TextIndex(m.localities);
    this.document = document;
    this.outer = document.fork(true); // the scan read it all: no duplicate-key check again
    this.workloadFields = new FieldReader(reader, document, WORKLOAD_FIELDS);
    this.serviceFields = new FieldReader(reader, document, SERVICE_FIELDS);
    this.vipFields = new FieldReader(reader, document, VIP_FIELDS);
    this.endpointFields = new FieldReader(reader, document, ENDPOINT_FIELDS);
    this.waypointFields = new FieldReader(reader, document, WAYPOINT_FIELDS);
    this.gatewayFields = new FieldReader(reader, document, GATEWAY_FIELDS);
    this.lbFields = new FieldReader(reader, document, LB_FIELDS);
  }

  /** A list field's first token: true for an array, false when absent / null / wrong (recorded). */
  isList(t: JsonToken, path: string): bool {
    if (t == JsonToken.Null) return false;
    if (t == JsonToken.BeginArray) return true;
    this.reader.fail(path, "expected an array");
    return false;
  }

  /** Positions `outer` just inside the array at `offset`. */
  enter(offset: i32): bool {
    this.outer.valueAt(offset);
    return this.outer.next() == JsonToken.BeginArray;
  }

  /**
   * Parses the current string token of `s` into the scratch address; false (with the failure
   * recorded) if invalid. The failure is reported at field `key` of the item `f` points at, or
   * at its element `index` when index >= 0.
   */
  parseAddress(s: JsonStream, f: FieldReader, key: string, index: i32): bool {
    const r = this.reader;
    if (r.failed()) return false;
    if (!s.stringEscaped() && parseIpBytes(s.stringPtr(), s.stringByteLength(), this.scratch) == IpParse.Ok) {
      return true;
    }
    const text = s.stringValue();
    const status = parseIpString(text, this.scratch);
    if (status == IpParse.Ok) return true;
    const path = index < 0 ? f.fieldPath(key) : r.indexPath(f.fieldPath(key), index);
    if (status == IpParse.Zone) r.fail(path, "IPv6 zone not allowed: " + q(text));
    else r.fail(path, "not an IP address: " + q(text));
    return false;
  }

  /** The id of the network named by the current string token; -1 (recorded) past the limit. */
  networkId(s: JsonStream, f: FieldReader, key: string): i32 {
    if (this.reader.failed()) return -1;
    let id = this.networkIds.find(s);
    if (id < 0) id = this.networkIds.intern(s.stringValue());
    if (id >= MAX_NETWORKS) {
      f.failField(key, "more than " + MAX_NETWORKS.toString() + " distinct networks");
      return -1;
    }
    return id;
  }

  /**
   * The locality of the current string token, interned with its region / region-zone / full
   * prefixes; -1 when it is not a valid locality. Validated once per distinct text.
   */
  localityId(s: JsonStream): i32 {
    const m = this.mesh;
    const known = this.localityIds.find(s);
    if (known >= 0) return known;
    const text = s.stringValue();
    if (!isLocality(text)) return -1;
    const id = this.localityIds.intern(text);
    addLocalityParts(m, text);
    return id;
  }

  /**
   * The waypoint or network-gateway reference object at `offset` (`f` knows which, and where
   * it is for messages): exactly one of address / hostname. Returns the shared reference id,
   * or -1 after a failure. `network` is where an address reference is looked up first.
   */
  ref(offset: i32, f: FieldReader, network: i32): i32 {
    const r = this.reader;
    if (!f.readAt(offset)) return -1;
    const hasAddress = f.has(RF_ADDRESS);
    const hasHostname = f.has(RF_HOSTNAME);
    if (hasAddress && hasHostname) {
      f.fail('both "address" and "hostname" are set; exactly one is allowed');
      return -1;
    }
    if (!hasAddress && !hasHostname) {
      f.fail('one of "address" or "hostname" is required');
      return -1;
    }
    const port = <i32>f.optionalInteger(RF_PORT, 1, 65535, DEFAULT_HBONE_PORT);
    if (r.failed()) return -1;
    const s = f.stream;
    if (hasHostname) {
      if (!f.requireString(RF_HOSTNAME)) return -1;
      const known = this.refs.findHostname(s, port);
      if (known >= 0) return known; // same text: already validated
      const hash = RefIndex.hostnameHash(s.stringHash(), port);
      const hostname = s.stringValue();
      if (!isHostname(hostname)) {
        f.failField("hostname", "not a hostname: " + q(hostname));
        return -1;
      }
      const ref = new Ref();
      ref.hostname = hostname;
      ref.port = port;
      ref.network = network;
      return this.refs.add(ref, hash);
    }
    if (!f.requireString(RF_ADDRESS)) return -1;
    if (!this.parseAddress(s, f, "address", -1)) return -1;
    const a = this.scratch;
    const known = this.refs.findAddress(a, port, network);
    if (known >= 0) return known;
    const ref = new Ref();
    ref.address.copyFrom(a);
    ref.port = port;
    ref.network = network;
    return this.refs.add(ref, RefIndex.addressHash(a, port, network));
  }

  /** Fails with "<count> <what> exceed the limit of <limit>" when count > limit. */
  withinLimit(path: string, count: i64, limit: i32, what: string): bool {
    if (count <= <i64>limit) return true;
    const text = count.toString() + " " + what + " exceed the limit of " + limit.toString();
    this.reader.fail(path, text);
    return false;
  }

}

// Builds the Mesh from the plugin configuration's `workloads` and `services` fields, streaming
// the configuration bytes (no JsonValue tree).
//
// Two passes over the bytes, both with JsonStream:
//   1. scan: validates the whole document exactly as parseJson would (so a JSON error anywhere
//      wins, as before), refuses unknown top-level fields, copies the caller's own fields into a
//      small JsonValue object, notes where `workloads` and `services` start, and counts what the
//      columns need (items, addresses per family, endpoints, ports, VIPs, SANs).
//   2. build: allocates every column once at its exact size, then reads each workload and
//      service straight into them. Each item's fields are located in one pass and then checked
//      in a fixed order (fields.ts), so messages and their precedence are the tree reader's.
// Counting first instead of growing columns keeps the peak at the final size: a column grown
// by doubling leaves its old block behind as a free region, and linear memory never shrinks.
//
// Per pod nothing is allocated that outlives the pod, except what the model keeps: uids are
// matched by their bytes in the input (a transient index of 4-byte slots plus one 4-byte offset
// per workload, freed at the end), interned texts (identity, network, locality) are looked up
// by their bytes, and references are deduplicated by value. Strings are decoded only for the
// first occurrence of a text, for the per-service texts the model keeps, and for messages.
//
// Every check goes through the ConfigReader, so the first problem becomes one line naming the
// field ("workloads[3].addresses[1]: not an IP address: ...") and the whole configuration is
// refused.
import { ConfigReader, hashBytes, JsonNames, JsonStream, JsonToken, JsonValue, quoteForMessage, writeJson } from "../json";
import { ByteSource } from "../json/source";
import { DEFAULT_MARGIN, DEFAULT_WINDOW } from "../json/stream";
import { Address, FAMILY_V4, FAMILY_V6, IpParse, parseIpBytes, parseIpString } from "./ip";
import { StringTable } from "./intern";
import {
  DEFAULT_LB_PREFS,
  IDENTITY_MASK,
  Mesh,
  Ref,
  S_HEADLESS,
  S_LB_STANDARD,
  S_LIVE,
  VIP_WORDS,
  W_EXTRA,
  W_HEALTHY,
  W_ISTIO,
  W_LIVE,
  W_V4,
} from "./model";
import { addLocalityParts, addMembership, ensureMemberships, markHeadlessMembers, ensureServices, ensureWorkloads, reserveMembers, reserveSlots, setAddresses, setHostname, setPorts, setSans, setVips } from "./edit";
import { failElementString, failEnum, failInteger, FieldReader } from "./fields";
import { ChunkPool } from "./pool";
import { ADDED, AddrTable4, AddrTable6, exactCapacity, MAX_TABLE_NETWORKS, mix32, mix64, slotOf, SparseColumn, tableCapacity, U64Table } from "./table";
import {
  isHostname,
  isLocality,
  isSanText,
  isSpiffeIdentity,
  LOCALITY_SHAPE,
  parsePortKey,
  SAN_COMMA,
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
/** Distinct localities (ids fit the u16 locality column; "" is id 0). */
export const MAX_LOCALITIES: i32 = 65535;

export const DEFAULT_HBONE_PORT: i32 = 15008;

/** The limits a parse enforces; the defaults are the MAX_* constants (tests pass smaller). */
export class MeshLimits {
  workloads: i32 = MAX_WORKLOADS;
  services: i32 = MAX_SERVICES;
  addresses: i32 = MAX_ADDRESSES;
  serviceItems: i32 = MAX_SERVICE_ITEMS;
  /**
   * Bytes a filter derives per workload and per endpoint right after the build (an index of its
   * own), added to the build's one memory reservation: allocated later on its own, that index
   * would find the heap full and grow linear memory by its whole current size.
   */
  derivedBytesPerWorkload: i32 = 0;
  derivedBytesPerEndpoint: i32 = 0;
}

const DEFAULT_LIMITS = new MeshLimits();

// Known fields of each object, and each field's index in its list.
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
const WF_UID = 0;
const WF_ADDRESSES = 1;
const WF_NETWORK = 2;
const WF_IDENTITY = 3;
const WF_TLS_MODE = 4;
const WF_HEALTHY = 5;
const WF_LOCALITY = 6;
const WF_WAYPOINT = 7;
const WF_GATEWAY = 8;

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
const SF_HOSTNAME = 0;
const SF_VIPS = 1;
const SF_PORTS = 2;
const SF_ENDPOINTS = 3;
const SF_WAYPOINT = 4;
const SF_SANS = 5;
const SF_HEADLESS = 6;
const SF_CLUSTER = 7;
const SF_LB = 8;

const VIP_FIELDS = ["network", "address"];
const VF_NETWORK = 0;
const VF_ADDRESS = 1;

const ENDPOINT_FIELDS = ["workload", "ports"];
const EF_WORKLOAD = 0;
const EF_PORTS = 1;

// A reference: the port field is "port" for a waypoint, "hboneMtlsPort" for a gateway.
const WAYPOINT_FIELDS = ["address", "hostname", "port"];
const GATEWAY_FIELDS = ["address", "hostname", "hboneMtlsPort"];
const RF_ADDRESS = 0;
const RF_HOSTNAME = 1;
const RF_PORT = 2;

const LB_FIELDS = ["routingPreference", "mode"];
const LF_PREFERENCE = 0;
const LF_MODE = 1;

const TLS_MODES = new JsonNames(["istio", "disabled"]);
const TLS_ISTIO = 0;
const TLS_DISABLED = 1;
const LB_MODES = new JsonNames(["failover", "standard"]);
const LB_STANDARD = 1;
/** In Scope order: index + 1 is the Scope value. */
const SCOPES = new JsonNames(["network", "region", "zone", "subzone"]);

// Keys the scan looks for.
const MESH_NAMES = new JsonNames(MESH_FIELDS);
const MESH_WORKLOADS = 0;
const ADDRESSES_NAME = new JsonNames(["addresses"]);
const ADDRESS_NAME = new JsonNames(["address"]);
const SERVICE_COUNTED = new JsonNames(["ports", "endpoints", "subjectAltNames", "vips"]);
/** Service texts the reservation sizes one by one (see MeshScan.countServices). */
const SERVICE_TEXT_NAMES = new JsonNames(["hostname", "cluster"]);
const TEXT_HOSTNAME = 0;
/** Workload references whose columns exist only when some workload has one. */
const WORKLOAD_REF_NAMES = new JsonNames(["waypoint", "networkGateway"]);
const REF_WAYPOINT = 0;
const ENDPOINT_PORTS_NAME = new JsonNames(["ports"]);
/** Workload texts the model interns (decoded once per distinct text). */
const INTERNED_NAMES = new JsonNames(["identity", "network", "locality"]);
const INTERNED_LOCALITY = 2;
/** Bits of the scan's "text seen" filter (32 KB), see MeshScan.internedBytes. */
const SEEN_BITS: u32 = 1 << 18;
const COUNT_PORTS = 0;
const COUNT_ENDPOINTS = 1;
const COUNT_SANS = 2;

/**
 * While one service's endpoints are read, this bit of a workload's wIdentityFlags marks it as
 * already an endpoint of that service (the model uses bits 0..25); cleared right after.
 */
const W_ENDPOINT_MARK: u32 = 1 << 31;

export class MeshParseResult {
  constructor(public mesh: Mesh | null, public error: string) {}

  ok(): bool {
    return this.mesh !== null && this.error.length == 0;
  }
}

/** A filter configuration streamed by parseMeshDocument: the mesh and the filter's own fields. */
export class MeshDocument {
  constructor(
    /**
     * The caller's own top-level fields that are present, as a JSON object (read them with a
     * ConfigReader at path ""); null when the document failed before them: JSON syntax, a root
     * that is not an object, or an unknown top-level field.
     */
    public own: JsonValue | null,
    /** The mesh; null when `error` is set. */
    public mesh: Mesh | null,
    /** The first problem, "" when none: the document's when `own` is null, else the mesh's. */
    public error: string,
  ) {}

  ok(): bool {
    return this.own !== null && this.mesh !== null && this.error.length == 0;
  }
}

function q(text: string): string {
  return quoteForMessage(text);
}

function onNetwork(name: string): string {
  return name.length == 0 ? "the default network" : "network " + q(name);
}

/** A one-field object, so ConfigReader.onlyKnownFields names `key` in its own words. */
function objectWithKey(key: string): JsonValue {
  const obj = JsonValue.newObject();
  obj.addField(key, JsonValue.fromNull());
  return obj;
}

/** The family (FAMILY_V4 / FAMILY_V6) of the IP in the current string token, or 0. */
function ipFamily(s: JsonStream, out: Address): i32 {
  if (!s.stringEscaped()) {
    return parseIpBytes(s.stringPtr(), s.stringByteLength(), out) == IpParse.Ok ? out.family : 0;
  }
  return parseIpString(s.stringValue(), out) == IpParse.Ok ? out.family : 0;
}

/** A port written as an object key (the current Key token), as parsePortKey; else -1. */
function portOfKey(s: JsonStream): i32 {
  if (s.stringEscaped()) return parsePortKey(s.stringValue());
  const n = s.stringByteLength();
  if (n == 0 || n > 5) return -1;
  const ptr = s.stringPtr();
  if (n > 1 && load<u8>(ptr) == 0x30) return -1;
  let port = 0;
  for (let i = 0; i < n; i++) {
    const c = <i32>load<u8>(ptr + <usize>i);
    if (c < 0x30 || c > 0x39) return -1;
    port = port * 10 + (c - 0x30);
  }
  return port >= 1 && port <= 65535 ? port : -1;
}

/** The current Number token as an integer in [min, max], or -1 (min must be >= 0). */
function integerIn(s: JsonStream, t: JsonToken, min: i64, max: i64): i64 {
  if (t != JsonToken.Number || !s.numberIsInteger()) return -1;
  const n = s.numberInteger();
  return n >= min && n <= max ? n : -1;
}

// ==================================================================== pass 1: scan

/** What the scan found: the own fields, where the mesh lists start, and their counts. */
class MeshScan {
  own: JsonValue = JsonValue.newObject();
  error: string = "";
  /** Offset and first token of each list's value; Null when absent. */
  workloadsAt: i32 = 0;
  workloadsToken: JsonToken = JsonToken.Null;
  servicesAt: i32 = 0;
  servicesToken: JsonToken = JsonToken.Null;
  // Counts, exactly as the tree reader took them: addresses and VIPs of any type count
  // toward the limits; only valid IPs count toward a family's table.
  workloads: i64 = 0;
  addresses: i64 = 0;
  count4: i32 = 0;
  count6: i32 = 0;
  services: i64 = 0;
  slots: i64 = 0;
  endpoints: i64 = 0;
  sans: i64 = 0;
  vips: i64 = 0;
  vip4: i32 = 0;
  vip6: i32 = 0;
  // For the build's memory reservation (see reserveBuildMemory): bytes the services' own texts
  // may cost once decoded (names, SANs, a cluster name per port).
  serviceTextBytes: i64 = 0;
  /** Workloads with a `waypoint` / `networkGateway` value (null counts too: an upper bound). */
  workloadWaypoints: i64 = 0;
  workloadGateways: i64 = 0;
  /** Keys of the endpoints' `ports` objects: the per-endpoint target-port overrides. */
  overrides: i64 = 0;
  /** Endpoints with at least one override (each gets a chunk in Mesh.memOverrides). */
  overriddenEndpoints: i64 = 0;
  /** Workloads with addresses beyond one IPv4 (a Mesh.wExtra chunk) and that chunk's words. */
  extraWorkloads: i64 = 0;
  extraWords: i64 = 0;
  /** Services with any port / VIP / SAN (a chunk each in the service pools). */
  servicesWithPorts: i64 = 0;
  servicesWithVips: i64 = 0;
  servicesWithSans: i64 = 0;
  /**
   * What interning the workloads' identities, networks and localities may cost: each distinct
   * text (told apart by a 2^18-bit filter of their hashes: a collision undercounts, which the
   * reservation's spare covers while distinct texts are far fewer than 2^18) as UTF-16 and
   * UTF-8 with headers; a locality as its three prefixes.
   */
  internedBytes: i64 = 0;
  private seen: StaticArray<u32> | null = null;
  private scratch: Address = new Address();

  /**
   * Scans the whole document. `own` are the caller's field names, `known` the full list for
   * the unknown-field message. False with `error` set on the first problem.
   */
  run(s: JsonStream, own: JsonNames, known: string[]): bool {
    let t = s.next();
    if (t != JsonToken.BeginObject) {
      // The JSON must still be valid as a whole before the root's type is the problem.
      if (s.skip(t)) s.next();
      if (s.failed()) return this.fail(s.error());
      const r = new ConfigReader();
      r.fail("", "expected an object");
      return this.fail(r.error());
    }
    let unknown: string | null = null;
    while (true) {
      t = s.next();
      if (t == JsonToken.EndObject) break;
      if (t != JsonToken.Key) return this.fail(s.error());
      const list = MESH_NAMES.find(s);
      if (list == MESH_WORKLOADS) {
        const v = s.next();
        this.workloadsAt = s.tokenOffset();
        this.workloadsToken = v;
        if (!(v == JsonToken.BeginArray ? this.countWorkloads(s) : s.skip(v))) return this.fail(s.error());
        continue;
      }
      if (list >= 0) {
        const v = s.next();
        this.servicesAt = s.tokenOffset();
        this.servicesToken = v;
        if (!(v == JsonToken.BeginArray ? this.countServices(s) : s.skip(v))) return this.fail(s.error());
        continue;
      }
      if (own.find(s) >= 0) {
        const key = s.stringValue();
        const value = s.readValue();
        if (value === null) return this.fail(s.error());
        this.own.addField(key, value);
        continue;
      }
      // Unknown: remembered, refused once the whole document is known to be valid JSON.
      if (unknown === null) unknown = s.stringValue();
      if (!s.skipValue()) return this.fail(s.error());
    }
    if (s.next() != JsonToken.End) return this.fail(s.error());
    if (unknown !== null) {
      const r = new ConfigReader();
      r.onlyKnownFields(objectWithKey(unknown), "", known);
      return this.fail(r.error());
    }
    return true;
  }

  private fail(error: string): bool {
    this.error = error.length > 0 ? error : "invalid JSON";
    return false;
  }

  /** Counts the workloads (just inside the array) and their addresses. */
  private countWorkloads(s: JsonStream): bool {
    while (true) {
      let t = s.next();
      if (t == JsonToken.EndArray) return true;
      this.workloads++;
      if (t != JsonToken.BeginObject) {
        if (!s.skip(t)) return false;
        continue;
      }
      while (true) {
        t = s.next();
        if (t == JsonToken.EndObject) break;
        if (t != JsonToken.Key) return false;
        const addresses = ADDRESSES_NAME.find(s) == 0;
        const interned = INTERNED_NAMES.find(s);
        const ref = WORKLOAD_REF_NAMES.find(s);
        if (ref == REF_WAYPOINT) this.workloadWaypoints++;
        else if (ref > REF_WAYPOINT) this.workloadGateways++;
        t = s.next();
        if (interned >= 0 && t == JsonToken.String) this.noteInterned(s, interned == INTERNED_LOCALITY ? 3 : 1);
        if (!addresses || t != JsonToken.BeginArray) {
          if (!s.skip(t)) return false;
          continue;
        }
        let own4 = 0;
        let own6 = 0;
        while (true) {
          t = s.next();
          if (t == JsonToken.EndArray) break;
          this.addresses++;
          if (t == JsonToken.String) {
            const family = ipFamily(s, this.scratch);
            if (family == FAMILY_V4) own4++;
            else if (family == FAMILY_V6) own6++;
          } else if (!s.skip(t)) {
            return false;
          }
        }
        this.count4 += own4;
        this.count6 += own6;
        // Beyond the inline IPv4 address: a chunk [n4, v4..., v6 as 4 words...].
        if (own4 > 1 || own6 > 0) {
          this.extraWorkloads++;
          this.extraWords += 1 + <i64>max(own4 - 1, 0) + <i64>own6 * 4;
        }
      }
    }
  }

  /** Accounts for the current string as an interned text, once per distinct text. */
  private noteInterned(s: JsonStream, copies: i32): void {
    let seen = this.seen;
    if (seen === null) {
      seen = new StaticArray<u32>(<i32>(SEEN_BITS >> 5));
      this.seen = seen;
    }
    const bit = mix32(s.stringHash()) & (SEEN_BITS - 1);
    const word = <i32>(bit >> 5);
    const mask: u32 = 1 << (bit & 31);
    if ((unchecked(seen[word]) & mask) != 0) return;
    unchecked((seen[word] |= mask));
    this.internedBytes += <i64>copies * (<i64>s.stringByteLength() * 3 + 64);
  }

  /** Drops the filter (the build does not need it). */
  release(): void {
    this.seen = null;
  }

  /** Counts the services (just inside the array) and their ports, endpoints, SANs and VIPs. */
  private countServices(s: JsonStream): bool {
    while (true) {
      let t = s.next();
      if (t == JsonToken.EndArray) return true;
      this.services++;
      if (t != JsonToken.BeginObject) {
        if (!s.skip(t)) return false;
        continue;
      }
      const slotsBefore = this.slots;
      const sansBefore = this.sans;
      const vipsBefore = this.vips;
      let hostname: i64 = 0;
      let cluster: i64 = 0;
      let sanText: i64 = 0;
      let otherText: i64 = 0;
      while (true) {
        t = s.next();
        if (t == JsonToken.EndObject) {
          this.serviceTextBytes += serviceBytes(this.slots - slotsBefore, hostname, cluster, this.sans - sansBefore, sanText, otherText);
          if (this.slots > slotsBefore) this.servicesWithPorts++;
          if (this.sans > sansBefore) this.servicesWithSans++;
          if (this.vips > vipsBefore) this.servicesWithVips++;
          break;
        }
        if (t != JsonToken.Key) return false;
        const textName = SERVICE_TEXT_NAMES.find(s);
        const counted = SERVICE_COUNTED.find(s);
        const valueAt = s.offset();
        const ports = counted == COUNT_PORTS;
        const endpoints = counted == COUNT_ENDPOINTS;
        const sans = counted == COUNT_SANS;
        const vips = counted > COUNT_SANS;
        t = s.next();
        if (ports && t == JsonToken.BeginObject) {
          while (true) {
            t = s.next();
            if (t == JsonToken.EndObject) break;
            if (t != JsonToken.Key || !s.skipValue()) return false;
            this.slots++;
          }
        } else if ((endpoints || sans || vips) && t == JsonToken.BeginArray) {
          while (true) {
            t = s.next();
            if (t == JsonToken.EndArray) break;
            if (endpoints) this.endpoints++;
            else if (sans) this.sans++;
            else this.vips++;
            if (t != JsonToken.BeginObject || sans) {
              if (!s.skip(t)) return false;
            } else if (!(vips ? this.countVip(s) : this.countEndpoint(s))) {
              return false;
            }
          }
        } else if (!s.skip(t)) {
          return false;
        } else {
          const bytes = <i64>(s.offset() - valueAt);
          if (textName == TEXT_HOSTNAME) hostname = bytes;
          else if (textName > TEXT_HOSTNAME) cluster = bytes;
          else otherText += bytes;
        }
        if (sans) sanText += <i64>(s.offset() - valueAt);
      }
    }
  }

  /** One endpoint object (just inside it): counts the keys of its `ports` overrides. */
  private countEndpoint(s: JsonStream): bool {
    const before = this.overrides;
    while (true) {
      let t = s.next();
      if (t == JsonToken.EndObject) {
        if (this.overrides > before) this.overriddenEndpoints++;
        return true;
      }
      if (t != JsonToken.Key) return false;
      const ports = ENDPOINT_PORTS_NAME.find(s) == 0;
      t = s.next();
      if (!ports || t != JsonToken.BeginObject) {
        if (!s.skip(t)) return false;
        continue;
      }
      while (true) {
        t = s.next();
        if (t == JsonToken.EndObject) break;
        if (t != JsonToken.Key || !s.skipValue()) return false;
        this.overrides++;
      }
    }
  }

  /** One VIP object (just inside it): counts its address's family. */
  private countVip(s: JsonStream): bool {
    while (true) {
      let t = s.next();
      if (t == JsonToken.EndObject) return true;
      if (t != JsonToken.Key) return false;
      const address = ADDRESS_NAME.find(s) == 0;
      t = s.next();
      if (address && t == JsonToken.String) {
        const family = ipFamily(s, this.scratch);
        if (family == FAMILY_V4) this.vip4++;
        else if (family == FAMILY_V6) this.vip6++;
      } else if (!s.skip(t)) {
        return false;
      }
    }
  }
}

/**
 * What one service may leave in memory once built, from the byte lengths of its values in the
 * document (which include quotes and escapes, so they over-count the texts a little): its
 * hostname as a string (UTF-16) with a hostnames-map entry and a list slot (either may have
 * doubled once); per port a UTF-8 cluster name ("outbound|<port>||<hostname>" or the explicit
 * `cluster`) with its list slot; per SAN a string and a slot; for anything else (a waypoint
 * reference, loadBalancing) its text as a string and a reference object; the explicit cluster's
 * decoded string, which is garbage until the next collection.
 */
function serviceBytes(ports: i64, hostname: i64, cluster: i64, sans: i64, sanText: i64, otherText: i64): i64 {
  const name = max(hostname + 16, cluster);
  let bytes: i64 = 2 * hostname + 20 + 64;
  bytes += ports * (name + 20 + 12);
  bytes += 2 * sanText + sans * (20 + 12);
  if (otherText > 0) bytes += 2 * otherText + 160;
  if (cluster > 0) bytes += 2 * cluster + 20;
  return bytes;
}

/**
 * "outbound|<port>||<hostname>" as UTF-8, written straight into its buffer (no intermediate
 * strings: a service with many ports would otherwise leave several per port as garbage).
 * Hostnames are ASCII (isHostname).
 */
export function defaultClusterName(port: i32, hostname: string): ArrayBuffer {
  const digits = port >= 10000 ? 5 : port >= 1000 ? 4 : port >= 100 ? 3 : port >= 10 ? 2 : 1;
  const n = hostname.length;
  const out = new ArrayBuffer(9 + digits + 2 + n);
  const p = changetype<usize>(out);
  const prefix = "outbound|";
  for (let i = 0; i < 9; i++) store<u8>(p + <usize>i, <u8>prefix.charCodeAt(i));
  let value = port;
  for (let i = digits - 1; i >= 0; i--) {
    store<u8>(p + 9 + <usize>i, <u8>(0x30 + value % 10));
    value /= 10;
  }
  const at = p + 9 + <usize>digits;
  store<u8>(at, 0x7c);
  store<u8>(at + 1, 0x7c);
  for (let i = 0; i < n; i++) store<u8>(at + 2 + <usize>i, <u8>hostname.charCodeAt(i));
  return out;
}

// ==================================================================== lookups by bytes

/**
 * Finds interned texts by the UTF-8 bytes of a string token, so a text repeated by a million
 * pods is decoded once. Indexes every id of `table` (hash → id, compared with its UTF-8).
 */
class TextIndex {
  private slots: StaticArray<u32> = new StaticArray<u32>(32); // [hash, id + 1] per slot
  private mask: i32 = 15;
  private used: i32 = 0;

  constructor(private table: StringTable) {
    for (let id = 0; id < table.size; id++) this.add(id);
  }

  /** The id of the current string token's text, or -1. */
  find(s: JsonStream): i32 {
    if (s.stringEscaped()) return this.table.find(s.stringValue());
    const hash = s.stringHash();
    const ptr = s.stringPtr();
    const len = s.stringByteLength();
    const slots = this.slots;
    let i = <i32>hash & this.mask;
    for (let probes = 0; probes <= this.mask; probes++) {
      const at = i << 1;
      const entry = unchecked(slots[at + 1]);
      if (entry == 0) return -1;
      if (unchecked(slots[at]) == hash) {
        const id = <i32>entry - 1;
        const bytes = this.table.utf8(id);
        if (bytes.byteLength == len && memory.compare(changetype<usize>(bytes), ptr, <usize>len) == 0) return id;
      }
      i = (i + 1) & this.mask;
    }
    return -1;
  }

  /** Interns `text` in the table (and here). */
  intern(text: string): i32 {
    const before = this.table.size;
    const id = this.table.intern(text);
    if (id >= before) this.add(id);
    return id;
  }

  private add(id: i32): void {
    if ((this.used + 1) * 2 > this.mask + 1) this.grow();
    const bytes = this.table.utf8(id);
    this.place(hashBytes(changetype<usize>(bytes), bytes.byteLength), <u32>id + 1);
    this.used++;
  }

  private place(hash: u32, entry: u32): void {
    const slots = this.slots;
    let i = <i32>hash & this.mask;
    while (unchecked(slots[(i << 1) + 1]) != 0) i = (i + 1) & this.mask;
    unchecked((slots[i << 1] = hash));
    unchecked((slots[(i << 1) + 1] = entry));
  }

  private grow(): void {
    const old = this.slots;
    const capacity = (this.mask + 1) << 1;
    this.slots = new StaticArray<u32>(capacity << 1);
    this.mask = capacity - 1;
    for (let i = 0; i + 1 < old.length; i += 2) {
      if (unchecked(old[i + 1]) != 0) this.place(unchecked(old[i]), unchecked(old[i + 1]));
    }
  }
}

/**
 * uid → workload index while parsing (uids are not kept): 4 bytes per slot (owner + 1 in the
 * low bits, hash bits above) and 4 per workload (where its uid is in the input), in memory the
 * parser lends it until the services are read and then gives to the IPv4 address table (see
 * MeshParser.fillV4Table), so the index costs nothing at the peak. uids are compared by their
 * text in the input.
 */
class UidIndex {
  /** One block: `capacity` slots, then one offset per workload (see bytesFor). */
  private slots: usize = 0;
  private offsets: usize = 0;
  private capacity: i32 = 0;
  private count: i32 = 0;
  private limit: i32 = 0;
  private ownerMask: u32 = 0;

  /** Room for `n` workloads in `storage` (at least wordsFor(n) u32 words, owned by the caller). */
  init(n: i32, storage: StaticArray<u32>): void {
    this.release();
    const capacity = exactCapacity(n);
    if (<i64>storage.length < UidIndex.wordsFor(n)) return; // capacity 0: nothing is found
    this.slots = changetype<usize>(storage);
    memory.fill(this.slots, 0, <usize>capacity << 2);
    this.offsets = this.slots + (<usize>capacity << 2);
    this.capacity = capacity;
    this.limit = n;
    this.count = 0;
    // Enough low bits for n + 1; the rest of the slot holds hash bits that rule out most
    // non-matching slots without touching the input.
    const bits = 32 - clz<u32>(<u32>n + 1);
    this.ownerMask = bits >= 32 ? 0xffffffff : (<u32>1 << <u32>bits) - 1;
  }

  /** The workload whose uid equals the current string token of `s`, or -1. */
  find(s: JsonStream): i32 {
    return this.probe(s, s.stringHash(), -1);
  }

  /**
   * Adds workload w (= the count so far) with the current string token of `s` as its uid,
   * unless a workload already has that uid: then nothing is added and that workload is
   * returned. -1 when added.
   */
  add(s: JsonStream, w: i32): i32 {
    if (w != this.count || w >= this.limit || this.count + 1 >= this.capacity) return -1;
    return this.probe(s, s.stringHash(), w);
  }

  /** Finds the uid; when absent and `add` >= 0, stores it as workload `add` in the free slot. */
  private probe(s: JsonStream, hash: u32, add: i32): i32 {
    if (this.capacity == 0) return -1;
    const tag = hash & ~this.ownerMask;
    const capacity = <u32>this.capacity;
    // The home slot from remixed bits, so it does not correlate with the tag (high bits).
    let i = slotOf(mix32(hash), capacity);
    for (let probes = 0; probes < this.capacity; probes++) {
      const slot = this.slots + (<usize>i << 2);
      const entry = load<u32>(slot);
      if (entry == 0) {
        if (add >= 0) {
          store<u32>(this.offsets + (<usize>add << 2), <u32>s.tokenOffset());
          store<u32>(slot, tag | (<u32>add + 1));
          this.count++;
        }
        return -1;
      }
      if ((entry & ~this.ownerMask) == tag) {
        const w = <i32>(entry & this.ownerMask) - 1;
        if (w >= 0 && w < this.count && s.sameStringAt(<i32>load<u32>(this.offsets + (<usize>w << 2)))) return w;
      }
      i = i + 1 == capacity ? 0 : i + 1;
    }
    return -1;
  }

  /** u32 words the index needs for n workloads: its slots, then one uid offset per workload. */
  static wordsFor(n: i32): i64 {
    return <i64>exactCapacity(n) + <i64>max(n, 1);
  }

  /** Forgets the storage (the caller owns it and reuses it for the IPv4 table). */
  release(): void {
    this.slots = 0;
    this.offsets = 0;
    this.capacity = 0;
    this.count = 0;
  }
}

/** Identical references share one id: hostname + port, or address + port + network. */
class RefIndex {
  private slots: StaticArray<u32> = new StaticArray<u32>(32); // [hash, id + 1]
  private mask: i32 = 15;
  private used: i32 = 0;

  constructor(private refs: Array<Ref>) {}

  findHostname(s: JsonStream, port: i32): i32 {
    const hash = RefIndex.hostnameHash(s.stringHash(), port);
    let i = <i32>hash & this.mask;
    for (let probes = 0; probes <= this.mask; probes++) {
      const entry = unchecked(this.slots[(i << 1) + 1]);
      if (entry == 0) return -1;
      if (unchecked(this.slots[i << 1]) == hash) {
        const id = <i32>entry - 1;
        if (id < this.refs.length) {
          const ref = unchecked(this.refs[id]);
          if (ref.hostname.length > 0 && ref.port == port && s.stringEquals(ref.hostname)) return id;
        }
      }
      i = (i + 1) & this.mask;
    }
    return -1;
  }

  findAddress(a: Address, port: i32, network: i32): i32 {
    const hash = RefIndex.addressHash(a, port, network);
    let i = <i32>hash & this.mask;
    for (let probes = 0; probes <= this.mask; probes++) {
      const entry = unchecked(this.slots[(i << 1) + 1]);
      if (entry == 0) return -1;
      if (unchecked(this.slots[i << 1]) == hash) {
        const id = <i32>entry - 1;
        if (id < this.refs.length) {
          const ref = unchecked(this.refs[id]);
          if (ref.hostname.length == 0 && ref.port == port && ref.network == network && ref.address.sameIp(a)) {
            return id;
          }
        }
      }
      i = (i + 1) & this.mask;
    }
    return -1;
  }

  /** Adds `ref` as a new reference; its id. */
  add(ref: Ref, hash: u32): i32 {
    const id = this.refs.length;
    this.refs.push(ref);
    if ((this.used + 1) * 2 > this.mask + 1) this.grow();
    this.place(hash, <u32>id + 1);
    this.used++;
    return id;
  }

  static hostnameHash(textHash: u32, port: i32): u32 {
    return mix32(textHash ^ mix32(<u32>port + 0x9e3779b9));
  }

  static addressHash(a: Address, port: i32, network: i32): u32 {
    const key = a.family == FAMILY_V4 ? <u64>a.v4 : a.hi ^ mix64(a.lo);
    return <u32>mix64(key ^ ((<u64>port << 40) | (<u64>network << 8) | <u64>a.family));
  }

  private place(hash: u32, entry: u32): void {
    let i = <i32>hash & this.mask;
    while (unchecked(this.slots[(i << 1) + 1]) != 0) i = (i + 1) & this.mask;
    unchecked((this.slots[i << 1] = hash));
    unchecked((this.slots[(i << 1) + 1] = entry));
  }

  private grow(): void {
    const old = this.slots;
    const capacity = (this.mask + 1) << 1;
    this.slots = new StaticArray<u32>(capacity << 1);
    this.mask = capacity - 1;
    for (let i = 0; i + 1 < old.length; i += 2) {
      if (unchecked(old[i + 1]) != 0) this.place(unchecked(old[i]), unchecked(old[i + 1]));
    }
  }
}

// ==================================================================== pass 2: build

/**
 * Linear memory never shrinks, and AssemblyScript's allocator grows it by at least its current
 * size whenever a block does not fit: a build that allocates column after column would end
 * with up to twice the memory it needs. So before the first column, one block the size of
 * everything the build will allocate (estimated from the scan's counts, with 1/16 and 128 KB
 * to spare) is allocated and freed at once: memory grows by that much once, while it is still small, and
 * every later allocation fits in the freed space. Columns and tables are sized exactly as
 * below; texts from the scan's byte counts; interned identities, localities and networks from
 * a per-workload allowance (they are shared texts; a mesh where every pod has its own identity
 * goes over it and then grows as before).
 */
function reserveBuildMemory(scan: MeshScan, limits: MeshLimits): void {
  lastReservation = 0;
  const n = scan.workloads;
  // The uid index and the IPv4 table share one block (MeshParser.fillV4Table): the larger.
  const shared = max<i64>(<i64>AddrTable4.wordsFor(scan.count4), UidIndex.wordsFor(<i32>min(n, MAX_WORKLOADS))) * 4;
  const nw = <i32>min(n, MAX_WORKLOADS);
  // Per workload: identity + flags 4, network 2, locality 2, inline IPv4 4, first membership 4.
  let bytes: i64 = n * 16 + shared;
  bytes += SparseColumn.bytesFor(nw, scan.workloadWaypoints);
  bytes += SparseColumn.bytesFor(nw, scan.workloadGateways);
  bytes += ChunkPool.bytesFor(scan.extraWords, scan.extraWorkloads, nw);
  if (scan.count6 > 0) bytes += <i64>tableCapacity(scan.count6) * 20;
  bytes += n * limits.derivedBytesPerWorkload + scan.endpoints * limits.derivedBytesPerEndpoint;
  bytes += scan.internedBytes + n / 4; // interned texts (and their index slots)
  const services = scan.services;
  const ns = <i32>min(services, MAX_SERVICES);
  // Per service: flags 1, waypoint 4, routing preference 4; its member list [count, ...].
  bytes += services * 9 + 16;
  bytes += ChunkPool.bytesFor(scan.endpoints + services, services, ns);
  // Per port slot: port 2, target 2, its id in the service's chunk 4; the (service, port) index.
  bytes += scan.slots * 4 + ChunkPool.bytesFor(scan.slots, scan.servicesWithPorts, ns);
  bytes += <i64>tableCapacity(<i32>min(scan.slots, MAX_SERVICE_ITEMS)) * 16;
  // Per endpoint (membership): service 4, position 4, next of the workload 4.
  bytes += scan.endpoints * 12;
  bytes += ChunkPool.bytesFor(scan.overrides, scan.overriddenEndpoints, <i32>min(scan.endpoints, MAX_SERVICE_ITEMS));
  bytes += ChunkPool.bytesFor(scan.vips * VIP_WORDS, scan.servicesWithVips, ns);
  bytes += ChunkPool.bytesFor(scan.sans, scan.servicesWithSans, ns);
  bytes += <i64>exactCapacity(scan.vip4) * 8 + <i64>tableCapacity(scan.vip6) * 20;
  bytes += scan.serviceTextBytes;
  // Spare: 1/16 and 256 KB: garbage the build collects only every 256 services, and the free
  // heap a filter has after configure for its own garbage (log lines: runtime/log.ts).
  bytes += (bytes >> 4) + 262144;
  // Beyond the limits the build refuses the configuration before allocating: nothing to reserve.
  if (bytes > <i64>0x40000000) return;
  const block = heap.alloc(<usize>growthRequest(bytes));
  heap.free(block);
  lastReservation = bytes;
}

/**
 * The request that makes the allocator grow memory by about `bytes`: before growing it rounds a
 * request up to the top of its size class (TLSF's roundSize in std/assembly/rt/tlsf.ts adds up
 * to 1/16), and all of the grown memory becomes free heap. Asking for `bytes` itself would grow
 * memory by up to 1/16 more than the build needs (measured: 2.4 MB at 1M pods).
 */
function growthRequest(bytes: i64): i64 {
  const classStep = (<i64>1) << (63 - clz<i64>(bytes) - 4);
  return bytes - classStep;
}

/** Bytes the last build reserved (0: none); for the benchmark. */
export let lastReservation: i64 = 0;

class MeshParser {
  mesh: Mesh;
  private scratch: Address = new Address();
  private uids: UidIndex = new UidIndex();
  /** The uid index's memory during the build, then the IPv4 table's (fillV4Table). */
  private shared: StaticArray<u32> = new StaticArray<u32>(0);
  /** Workloads whose addresses are in the pools: all of them, or up to the one that failed. */
  private workloadsRead: i32 = 0;
  private workloadsOffset: i32 = 0;
  private count4: i32 = 0;
  private document: JsonStream;
  private refs: RefIndex;
  private identityIds: TextIndex;
  private networkIds: TextIndex;
  private localityIds: TextIndex;
  // Reused per item: what one workload / service / endpoint collects before it is stored.
  private v4s: Array<u32> = new Array<u32>();
  private v6s: Array<u64> = new Array<u64>();
  private portWords: Array<u32> = new Array<u32>();
  private clusters: Array<ArrayBuffer> = new Array<ArrayBuffer>();
  private vipWords: Array<u32> = new Array<u32>();
  private sanList: Array<string> = new Array<string>();
  private members: Array<i32> = new Array<i32>();
  /** Override words of all endpoints of the current service, and each endpoint's count. */
  private overrideWords: Array<u32> = new Array<u32>();
  private overrideCounts: Array<i32> = new Array<i32>();
  private oneOverride: Array<u32> = new Array<u32>();
  // Paths of the two lists, for messages that point at another entry.
  private workloadsPath: string = "workloads";
  private servicesPath: string = "services";
  /** Walks the workloads / services arrays. */
  private outer: JsonStream;
  // One reader per object shape, each with its own stream, so they can nest.
  private workloadFields: FieldReader;
  private serviceFields: FieldReader;
  private vipFields: FieldReader;
  private endpointFields: FieldReader;
  private waypointFields: FieldReader;
  private gatewayFields: FieldReader;
  private lbFields: FieldReader;

  constructor(
    private reader: ConfigReader,
    private limits: MeshLimits,
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

  run(scan: MeshScan, path: string): Mesh | null {
    const r = this.reader;
    this.workloadsPath = r.childPath(path, "workloads");
    this.servicesPath = r.childPath(path, "services");
    // Both lists' types first, as ConfigReader.optionalArray on each did.
    const workloads = this.isList(scan.workloadsToken, this.workloadsPath);
    const services = this.isList(scan.servicesToken, this.servicesPath);
    scan.release();
    if (!r.failed()) reserveBuildMemory(scan, this.limits);
    if (workloads && !r.failed()) this.workloads(scan);
    if (services && !r.failed()) this.services(scan);
    this.uids.release();
    // After the services, but a clash it finds is a workload's error: it replaces any later one.
    this.fillV4Table();
    if (r.failed()) return null;
    this.resolveRefs();
    // The last services' garbage goes now, so the filter starts with the spare free.
    __collect();
    return this.mesh;
  }

  /** A list field's first token: true for an array, false when absent / null / wrong (recorded). */
  private isList(t: JsonToken, path: string): bool {
    if (t == JsonToken.Null) return false;
    if (t == JsonToken.BeginArray) return true;
    this.reader.fail(path, "expected an array");
    return false;
  }

  /** Positions `outer` just inside the array at `offset`. */
  private enter(offset: i32): bool {
    this.outer.valueAt(offset);
    return this.outer.next() == JsonToken.BeginArray;
  }

  // ================================================================ workloads

  private workloads(scan: MeshScan): void {
    const r = this.reader;
    const m = this.mesh;
    const path = this.workloadsPath;
    if (!this.withinLimit(path, scan.workloads, this.limits.workloads, "workloads")) return;
    if (!this.withinLimit(path, scan.addresses, this.limits.addresses, "addresses")) return;
    const n = <i32>scan.workloads;
    ensureWorkloads(m, n, true);
    m.workloadTotal = n;
    m.wWaypoint = new SparseColumn(n, scan.workloadWaypoints);
    m.wGateway = new SparseColumn(n, scan.workloadGateways);
    m.wExtra = new ChunkPool(<i32>min(scan.extraWords, 0x10000000), scan.extraWorkloads, n);
    if (scan.count6 > 0) m.v6Table = new AddrTable6(scan.count6);
    // One block for the uid index now and the IPv4 table after the services (fillV4Table).
    this.count4 = scan.count4;
    this.workloadsOffset = scan.workloadsAt;
    this.shared = new StaticArray<u32>(<i32>max<i64>(<i64>AddrTable4.wordsFor(scan.count4), UidIndex.wordsFor(n)));
    this.uids.init(n, this.shared);
    if (!this.enter(scan.workloadsAt)) return r.fail(path, "invalid JSON");
    const outer = this.outer;
    for (let i = 0; i < n; i++) {
      this.workload(i, outer.next());
      // The failed one too: fillV4Table checks the addresses it got before failing.
      this.workloadsRead = i + 1;
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
  private fillV4Table(): void {
    const m = this.mesh;
    const read = this.workloadsRead;
    m.v4Table = AddrTable4.over(this.shared, this.count4);
    const table = m.v4Table;
    const extra = m.wExtra;
    for (let w = 0; w < read && w < m.workloadCapacity(); w++) {
      const net = <i32>m.wNet(w);
      const info = m.wInfo(w);
      if ((info & W_V4) == 0) continue; // no IPv4 address at all (the first one is inline)
      const clash = table.insert(m.wIp4(w), w, net);
      if (clash != ADDED) return this.failV4Clash(w, 0, clash, net);
      if ((info & W_EXTRA) == 0) continue;
      const at = extra.offset(w);
      const n4 = at < 0 ? 0 : <i32>extra.word(at);
      for (let j = 0; j < n4; j++) {
        const more = table.insert(extra.word(at + 1 + j), w, net);
        if (more != ADDED) return this.failV4Clash(w, j + 1, more, net);
      }
    }
  }

  /** The message the clash of workload w's `ordinal`-th IPv4 address gets (error path only). */
  private failV4Clash(w: i32, ordinal: i32, clash: i32, net: i32): void {
    const r = this.reader;
    const m = this.mesh;
    // Find that address in the document: its index among all of w's addresses, its spelling.
    const f = new FieldReader(new ConfigReader(), this.document, WORKLOAD_FIELDS);
    let k = -1;
    let text = "";
    const outer = this.document.fork(true);
    outer.valueAt(this.workloadsOffset);
    let t = outer.next() == JsonToken.BeginArray ? outer.next() : JsonToken.Error;
    for (let i = 0; i < w && t != JsonToken.EndArray && t != JsonToken.Error; i++) {
      t = outer.skip(t) ? outer.next() : JsonToken.Error;
    }
    if (f.at(this.workloadsPath, w).read(outer, t) && f.optionalArray(WF_ADDRESSES)) {
      const list = f.stream;
      for (let i = 0, seen = 0; ; i++) {
        const e = list.next();
        if (e != JsonToken.String) break;
        if (ipFamily(list, this.scratch) != FAMILY_V4) continue;
        if (seen++ == ordinal) {
          k = i;
          text = list.stringValue();
          break;
        }
      }
    }
    const path = r.indexPath(r.childPath(r.indexPath(this.workloadsPath, w), "addresses"), k);
    if (clash == w) return r.failEarlier(path, "duplicate address " + q(text));
    if (clash < 0) return r.failEarlier(path, "address table full");
    const owner = r.indexPath(this.workloadsPath, clash);
    r.failEarlier(path, "address " + q(text) + " on " + onNetwork(m.networkName(net)) + " is already used by " + owner);
  }

  private workload(i: i32, t: JsonToken): void {
    const r = this.reader;
    const m = this.mesh;
    const f = this.workloadFields.at(this.workloadsPath, i);
    if (!f.read(this.outer, t)) return;
    const s = f.stream;

    if (!f.requireString(WF_UID)) return;
    if (s.stringByteLength() == 0) return f.failField("uid", "must not be empty");
    const first = this.uids.add(s, i);
    if (first >= 0) {
      const where = r.indexPath(this.workloadsPath, first);
      return f.failField("uid", "duplicate uid " + q(s.stringValue()) + " (first at " + where + ")");
    }

    let net = 0;
    if (f.optionalString(WF_NETWORK)) net = this.networkId(s, f, "network");
    if (r.failed()) return;
    m.setWNet(i, <u16>net);

    const istio = f.optionalEnum(WF_TLS_MODE, TLS_MODES, TLS_DISABLED) == TLS_ISTIO;
    const identity = this.identity(f, istio);
    const healthy = f.optionalBool(WF_HEALTHY, true);
    let loc = 0;
    if (f.optionalString(WF_LOCALITY)) {
      loc = this.localityId(s);
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
      const where = this.waypointFields.atField(this.workloadsPath, i, "waypoint");
      const ref = this.ref(f.offset(WF_WAYPOINT), where, net);
      if (ref >= 0 && !m.wWaypoint.set(i, <u32>(ref + 1))) return f.failField("waypoint", "waypoint count changed while parsing");
    }
    if (r.failed()) return;
    let gateway = false;
    if (f.optionalObject(WF_GATEWAY)) {
      gateway = true;
      const where = this.gatewayFields.atField(this.workloadsPath, i, "networkGateway");
      const ref = this.ref(f.offset(WF_GATEWAY), where, net);
      if (ref >= 0 && !m.wGateway.set(i, <u32>(ref + 1))) return f.failField("networkGateway", "gateway count changed while parsing");
    }
    if (r.failed()) return;

    let count = 0;
    this.v4s.length = 0;
    this.v6s.length = 0;
    if (f.optionalArray(WF_ADDRESSES)) {
      while (true) {
        const e = s.next();
        if (e == JsonToken.EndArray) break;
        this.workloadAddress(i, f, e, count, net);
        if (r.failed()) break;
        count++;
      }
    }
    // Stored even after a failure: fillV4Table checks the IPv4 ones read before it.
    setAddresses(m, i, this.v4s, this.v6s);
    if (r.failed()) return;
    if (count == 0 && !gateway) {
      return f.failField("addresses", "must not be empty unless networkGateway is set");
    }
  }

  /** The interned identity id (0 = none); validates the SPIFFE shape once per distinct text. */
  private identity(f: FieldReader, required: bool): i32 {
    if (this.reader.failed()) return 0;
    if (!f.has(WF_IDENTITY)) {
      if (required) f.failField("identity", 'required when tlsMode is "istio"');
      return 0;
    }
    if (!f.requireString(WF_IDENTITY)) return 0;
    const s = f.stream;
    const known = this.identityIds.find(s);
    if (known > 0) return known; // only valid identities are interned
    const text = s.stringValue();
    if (!isSpiffeIdentity(text)) {
      f.failField("identity", "not a SPIFFE identity (expected " + SPIFFE_SHAPE + "): " + q(text));
      return 0;
    }
    const id = this.identityIds.intern(text);
    if (<u32>id > IDENTITY_MASK) {
      f.failField("identity", "more than " + IDENTITY_MASK.toString() + " distinct identities");
      return 0;
    }
    return id;
  }

  /** Address k (first token `t` on f's stream) of workload w on network `net`. */
  private workloadAddress(w: i32, f: FieldReader, t: JsonToken, k: i32, net: i32): void {
    const r = this.reader;
    const m = this.mesh;
    if (!f.elementString(t, "addresses", k)) return;
    const s = f.stream;
    if (!this.parseAddress(s, f, "addresses", k)) return;
    const a = this.scratch;
    let clash = ADDED;
    if (a.family == FAMILY_V4) {
      // Checked for clashes once the services are read (fillV4Table).
      this.v4s.push(a.v4);
    } else {
      clash = m.v6Table.insert(a.hi, a.lo, w, net);
      if (clash == ADDED) {
        this.v6s.push(a.hi);
        this.v6s.push(a.lo);
      }
    }
    if (clash == ADDED) return;
    const path = r.indexPath(f.fieldPath("addresses"), k);
    const text = s.stringValue();
    if (clash == w) return r.failEarlier(path, "duplicate address " + q(text));
    if (clash < 0) return r.fail(path, "address table full");
    const owner = r.indexPath(this.workloadsPath, clash);
    r.fail(path, "address " + q(text) + " on " + onNetwork(m.networkName(net)) + " is already used by " + owner);
  }

  /**
   * Parses the current string token of `s` into the scratch address; false (with the failure
   * recorded) if invalid. The failure is reported at field `key` of the item `f` points at, or
   * at its element `index` when index >= 0.
   */
  private parseAddress(s: JsonStream, f: FieldReader, key: string, index: i32): bool {
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
  private networkId(s: JsonStream, f: FieldReader, key: string): i32 {
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
  private localityId(s: JsonStream): i32 {
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
  private ref(offset: i32, f: FieldReader, network: i32): i32 {
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

  // ================================================================ services

  private services(scan: MeshScan): void {
    const r = this.reader;
    const m = this.mesh;
    const path = this.servicesPath;
    const limits = this.limits;
    if (!this.withinLimit(path, scan.services, limits.services, "services")) return;
    if (!this.withinLimit(path, scan.vips, limits.addresses, "VIPs")) return;
    if (!this.withinLimit(path, scan.endpoints, limits.serviceItems, "endpoints")) return;
    if (!this.withinLimit(path, scan.slots, limits.serviceItems, "service ports")) return;
    if (!this.withinLimit(path, scan.sans, limits.serviceItems, "subject alt names")) return;
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
    if (!this.enter(scan.servicesAt)) return r.fail(path, "invalid JSON");
    const outer = this.outer;
    for (let i = 0; i < n && !r.failed(); i++) {
      // Each service leaves a little garbage (paths, cluster-name pieces), which the incremental
      // GC lets pile up to about the live heap's size before it collects: collecting now and
      // then keeps it inside the reserved block (a full cycle only walks the model's objects).
      if ((i & 255) == 255) __collect();
      this.service(i, outer.next());
      m.liveServices = i + 1;
    }
  }

  /** Fails with "<count> <what> exceed the limit of <limit>" when count > limit. */
  private withinLimit(path: string, count: i64, limit: i32, what: string): bool {
    if (count <= <i64>limit) return true;
    const text = count.toString() + " " + what + " exceed the limit of " + limit.toString();
    this.reader.fail(path, text);
    return false;
  }

  private service(i: i32, t: JsonToken): void {
    const r = this.reader;
    const m = this.mesh;
    const f = this.serviceFields.at(this.servicesPath, i);
    if (!f.read(this.outer, t)) return;
    const s = f.stream;

    if (!f.requireString(SF_HOSTNAME)) return;
    const hostname = s.stringValue();
    if (!isHostname(hostname)) return f.failField("hostname", "not a hostname: " + q(hostname));
    if (m.hostnames.has(hostname)) {
      const first = r.indexPath(this.servicesPath, m.hostnames.get(hostname));
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
    this.servicePorts(i, f, hostname, cluster);
    this.vips(i, f);
    this.endpoints(i, f);
    if (r.failed()) return;

    if (f.optionalObject(SF_WAYPOINT)) {
      const where = this.waypointFields.atField(this.servicesPath, i, "waypoint");
      unchecked((m.sWaypoint[i] = <u32>(this.ref(f.offset(SF_WAYPOINT), where, 0) + 1)));
    }
    if (r.failed()) return;
    if (f.optionalArray(SF_SANS)) {
      const names = this.sanList;
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
    if (this.loadBalancing(i, f)) flags |= S_LB_STANDARD;
    unchecked((m.sFlags[i] = flags));
    // Its endpoints were added above, before these flags: mark them now (model.ts: wHeadless).
    if (headless) markHeadlessMembers(m, i);
  }

  /** `ports`: service port → default target port; one port slot each, with its cluster name. */
  private servicePorts(si: i32, f: FieldReader, hostname: string, cluster: ArrayBuffer | null): void {
    const m = this.mesh;
    if (!f.optionalObject(SF_PORTS)) return;
    const words = this.portWords;
    const names = this.clusters;
    words.length = 0;
    names.length = 0;
    while (true) {
      const port = this.nextPortKey(f);
      if (port <= 0) break;
      const target = this.portTarget(f);
      if (target < 0) break;
      words.push((<u32>port << 16) | <u32>target);
      names.push(cluster !== null ? cluster : defaultClusterName(port, hostname));
    }
    // Stored before the endpoints are read: their overrides must name these ports.
    setPorts(m, si, words, names);
  }

  private vips(si: i32, f: FieldReader): void {
    const r = this.reader;
    const m = this.mesh;
    if (!f.optionalArray(SF_VIPS)) return;
    const list = f.stream;
    const path = f.fieldPath("vips");
    const words = this.vipWords;
    words.length = 0;
    for (let k = 0; !r.failed(); k++) {
      const t = list.next();
      if (t == JsonToken.EndArray) return setVips(m, si, words, false);
      const vf = this.vipFields.at(path, k);
      if (!vf.read(list, t)) return;
      const s = vf.stream;
      let net = 0;
      if (vf.optionalString(VF_NETWORK)) net = this.networkId(s, vf, "network");
      if (r.failed()) return;
      if (!vf.requireString(VF_ADDRESS) || !this.parseAddress(s, vf, "address", -1)) return;
      const a = this.scratch;
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
      const other = r.indexPath(this.servicesPath, owner);
      const where = onNetwork(m.networkName(net));
      return vf.failField("address", "VIP " + q(text) + " on " + where + " is already used by " + other);
    }
  }

  /**
   * Endpoints of service si (one per pod: paths are built only on failure). Read into the
   * parser's lists first, then added as memberships in order (the member list is allocated at
   * its exact size, so the membership ids run service after service as the endpoints did).
   */
  private endpoints(si: i32, f: FieldReader): void {
    const m = this.mesh;
    if (!f.optionalArray(SF_ENDPOINTS)) return;
    const members = this.members;
    members.length = 0;
    this.overrideWords.length = 0;
    this.overrideCounts.length = 0;
    this.readEndpoints(si, f);
    // Clear the "already an endpoint" marks this service set.
    const capacity = m.workloadCapacity();
    for (let k = 0; k < members.length; k++) {
      const w = unchecked(members[k]);
      if (w < capacity) m.setWInfo(w, m.wInfo(w) & ~W_ENDPOINT_MARK);
    }
    if (this.reader.failed()) return;
    reserveMembers(m, si, members.length);
    const one = this.oneOverride;
    let from = 0;
    for (let k = 0; k < members.length; k++) {
      const n = unchecked(this.overrideCounts[k]);
      one.length = 0;
      for (let j = 0; j < n; j++) one.push(unchecked(this.overrideWords[from + j]));
      from += n;
      addMembership(m, unchecked(members[k]), si, n > 0 ? one : null);
    }
  }

  private readEndpoints(si: i32, f: FieldReader): void {
    const r = this.reader;
    const m = this.mesh;
    const list = f.stream;
    const path = f.fieldPath("endpoints");
    const capacity = m.workloadCapacity();
    const members = this.members;
    for (let k = 0; !r.failed(); k++) {
      const t = list.next();
      if (t == JsonToken.EndArray) return;
      const ef = this.endpointFields.at(path, k);
      if (!ef.read(list, t) || !ef.requireString(EF_WORKLOAD)) return;
      const s = ef.stream;
      const w = this.uids.find(s);
      if (w < 0 || w >= capacity) return ef.failField("workload", "unknown workload uid " + q(s.stringValue()));
      if ((m.wInfo(w) & W_ENDPOINT_MARK) != 0) {
        let before = 0;
        while (before < members.length && unchecked(members[before]) != w) before++;
        const first = r.indexPath(path, before);
        return ef.failField("workload", "workload " + q(s.stringValue()) + " is already an endpoint (at " + first + ")");
      }
      m.setWInfo(w, m.wInfo(w) | W_ENDPOINT_MARK);
      members.push(w);
      const before = this.overrideWords.length;
      if (ef.optionalObject(EF_PORTS)) this.endpointPorts(si, ef, f);
      this.overrideCounts.push(this.overrideWords.length - before);
    }
  }

  /** An endpoint's `ports` overrides: service port (which si must have) → target port. */
  private endpointPorts(si: i32, ef: FieldReader, service: FieldReader): void {
    const r = this.reader;
    const m = this.mesh;
    while (true) {
      const port = this.nextPortKey(ef);
      if (port <= 0) return;
      if (!m.exposesPort(si, port)) {
        const reason = "service port " + port.toString() + " is not in " + service.fieldPath("ports");
        return r.fail(r.childPath(ef.fieldPath("ports"), ef.stream.stringValue()), reason);
      }
      const target = this.portTarget(ef);
      if (target < 0) return;
      this.overrideWords.push((<u32>port << 16) | <u32>target);
    }
  }

  /**
   * The next key of the `ports` object on f's stream, as a port (1..65535); 0 at the object's
   * end; -1 after a failure (recorded). The stream stays on the key.
   */
  private nextPortKey(f: FieldReader): i32 {
    const s = f.stream;
    const t = s.next();
    if (t == JsonToken.EndObject) return 0;
    if (t != JsonToken.Key) {
      f.failField("ports", "invalid JSON");
      return -1;
    }
    const port = portOfKey(s);
    if (port < 0) {
      const r = this.reader;
      const key = s.stringValue();
      r.fail(r.childPath(f.fieldPath("ports"), key), "not a port number (1..65535): " + q(key));
    }
    return port;
  }

  /** The target port (1..65535) the key nextPortKey read maps to; -1 after a failure (recorded). */
  private portTarget(f: FieldReader): i32 {
    const r = this.reader;
    const s = f.stream;
    const keyAt = s.tokenOffset();
    const v = s.next();
    const target = <i32>integerIn(s, v, 1, 65535);
    if (target < 0) failInteger(r, v, r.childPath(f.fieldPath("ports"), keyText(s, keyAt)), 1, 65535);
    return target;
  }

  /** Fills the routing preference; true when mode is "standard". */
  private loadBalancing(si: i32, f: FieldReader): bool {
    const r = this.reader;
    const m = this.mesh;
    unchecked((m.sLbPrefs[si] = DEFAULT_LB_PREFS));
    if (!f.optionalObject(SF_LB)) return false;
    const lb = this.lbFields.atField(this.servicesPath, si, "loadBalancing");
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

  // ================================================================ derived indexes

  /** Resolves each reference once (Mesh.resolveRef: the rules are the model's). */
  private resolveRefs(): void {
    const m = this.mesh;
    for (let i = 0; i < m.refs.length; i++) m.resolveRef(unchecked(m.refs[i]));
  }
}

/** The text of the key whose opening quote is at `keyAt` (for a message; moves `s`). */
function keyText(s: JsonStream, keyAt: i32): string {
  s.valueAt(keyAt);
  return s.next() == JsonToken.String ? s.stringValue() : "";
}

// ==================================================================== entry points

/**
 * Streams a filter's whole configuration object: `workloads` and `services` go straight into
 * the Mesh, the filter's own top-level fields (`ownFields`) come back as a small JsonValue
 * object to read with a ConfigReader, and any other top-level field is refused
 * (`x: unknown field (known: <ownFields>, workloads, services)`).
 *
 * The first problem wins in the order the tree reader had: JSON syntax anywhere ("byte N:
 * ..."), a root that is not an object, an unknown field (these three leave `own` null); then
 * the mesh. The caller checks its own fields between the two (see MeshDocument), so its
 * messages keep their place before the mesh's.
 */
export function parseMeshDocument(
  bytes: ArrayBuffer,
  ownFields: string[],
  limits: MeshLimits = DEFAULT_LIMITS,
): MeshDocument {
  return parseMeshStream(new JsonStream(bytes), ownFields, limits);
}

/**
 * parseMeshDocument over a document that is never whole in linear memory: every reader reads
 * `source` (the host's plugin configuration, say) through its own window of `window` bytes.
 * Same model, same messages. `margin` is the look-ahead kept in each window (tests shrink
 * both to make every token cross a window boundary).
 */
export function parseMeshSource(
  source: ByteSource,
  ownFields: string[],
  limits: MeshLimits = DEFAULT_LIMITS,
  window: i32 = DEFAULT_WINDOW,
  margin: i32 = DEFAULT_MARGIN,
): MeshDocument {
  return parseMeshStream(JsonStream.windowed(source, window, margin), ownFields, limits);
}

function parseMeshStream(stream: JsonStream, ownFields: string[], limits: MeshLimits): MeshDocument {
  const scan = new MeshScan();
  const known = ownFields.concat(MESH_FIELDS);
  if (!scan.run(stream, new JsonNames(ownFields), known)) return new MeshDocument(null, null, scan.error);
  const reader = new ConfigReader();
  const mesh = new MeshParser(reader, limits, stream).run(scan, "");
  if (mesh === null || reader.failed()) return new MeshDocument(scan.own, null, reader.error());
  return new MeshDocument(scan.own, mesh, "");
}

/**
 * Reads `workloads` and `services` of `root` (the filter's own configuration object, already
 * parsed into a tree) into a Mesh. `path` is root's path for messages ("" at the top).
 * Failures are recorded in `reader` (first one wins) and give null. The caller checks unknown
 * fields itself, with MESH_FIELDS added to its own list.
 *
 * For small configurations and tests: the two fields are written back to JSON and streamed
 * through the same parser as parseMeshDocument, so both give the same model and messages.
 * Large configurations should use parseMeshDocument and never build the tree.
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
  const subset = JsonValue.newObject();
  for (let i = 0; i < MESH_FIELDS.length; i++) {
    const key = unchecked(MESH_FIELDS[i]);
    const value = root.get(key);
    if (value !== null) subset.addField(key, value);
  }
  const stream = JsonStream.fromString(writeJson(subset));
  const scan = new MeshScan();
  if (!scan.run(stream, new JsonNames([]), MESH_FIELDS)) {
    // Only a tree no JSON text can spell (a lone surrogate in a string) gets here.
    reader.fail(path, scan.error);
    return null;
  }
  return new MeshParser(reader, limits, stream).run(scan, path);
}

/** Parses a configuration that holds only the mesh (tests, tools). */
export function parseMeshConfig(bytes: ArrayBuffer, limits: MeshLimits = DEFAULT_LIMITS): MeshParseResult {
  const doc = parseMeshDocument(bytes, [], limits);
  return new MeshParseResult(doc.mesh, doc.error);
}

/** parseMeshConfig for a string. */
export function parseMeshConfigString(text: string, limits: MeshLimits = DEFAULT_LIMITS): MeshParseResult {
  return parseMeshConfig(String.UTF8.encode(text), limits);
}

// Pass 1 of the JSON mesh reader: one walk over the whole document that validates it as
// parseJson would, refuses unknown top-level fields, copies the caller's own fields, notes where
// `workloads` and `services` start and counts everything the build's columns need.
import { ConfigReader, JsonNames, JsonStream, JsonToken, JsonValue } from "../json";
import { Address, FAMILY_V4, FAMILY_V6 } from "./ip";
import { MESH_NAMES } from "./parse";
import { ipFamily, objectWithKey } from "./parse_text";
import { mix32 } from "./table";

// Keys the scan looks for.
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

/** What the scan found: the own fields, where the mesh lists start, and their counts. */
export class MeshScan {
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
 * hostname as a string (UTF-16) with a hostname-index slot and a list slot (either may have
 * doubled once); per port a UTF-8 cluster name ("outbound|<port>||<hostname>" or the explicit
 * `cluster`) with its list slot; per SAN a string and a slot; for anything else (a waypoint
 * reference, loadBalancing) its text as a string and a reference object; the explicit cluster's
 * decoded string, which is garbage until the next collection.
 */
export function serviceBytes(ports: i64, hostname: i64, cluster: i64, sans: i64, sanText: i64, otherText: i64): i64 {
  const name = max(hostname + 16, cluster);
  let bytes: i64 = 2 * hostname + 20 + 64;
  bytes += ports * (name + 20 + 12);
  bytes += 2 * sanText + sans * (20 + 12);
  if (otherText > 0) bytes += 2 * otherText + 160;
  if (cluster > 0) bytes += 2 * cluster + 20;
  return bytes;
}


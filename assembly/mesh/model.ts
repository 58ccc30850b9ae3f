// The mesh model: workloads, services and the references between them, built once per
// configuration (parse.ts) and then only read.
//
// Layout is struct-of-arrays: one flat column per field, indexed by workload or service
// index, so a pod costs a few bytes per column and no object of its own (see README.md for
// the per-pod budget). Repeated texts (identities, networks, localities) are interned ids.
// Lookups are O(1) hash probes over flat arrays and allocate nothing; every accessor answers a
// neutral value (-1, "", false, an empty buffer) for an index out of range instead of trapping.
//
// The columns are public so parse.ts can fill them; nothing may write them after parsing.
import { Address, FAMILY_V4, FAMILY_V6 } from "./ip";
import { StringTable } from "./intern";
import { AddrTable4, AddrTable6, OBJECT_OVERHEAD, PortTable, SparseColumn, U64Table } from "./table";

export enum TlsMode {
  Disabled = 0,
  Istio = 1,
}

/** A load-balancing scope of `loadBalancing.routingPreference`. */
export enum Scope {
  Network = 1,
  Region = 2,
  Zone = 3,
  Subzone = 4,
}

export enum LbMode {
  Failover = 0,
  Standard = 1,
}

/** What a waypoint / network-gateway reference points at. */
export enum RefTarget {
  /** Not a reference (no waypoint / gateway, or an unknown reference id). */
  None = 0,
  /** A valid reference that names nothing in this configuration (a runtime outcome). */
  Unresolved = 1,
  Workload = 2,
  Service = 3,
}

/** A waypoint or network-gateway reference; identical references are shared. */
export class Ref {
  /** The referenced hostname, or "" for an address reference. */
  hostname: string = "";
  /** The referenced address (family NONE for a hostname reference); `port` is unused. */
  address: Address = new Address();
  /** waypoint `port` / gateway `hboneMtlsPort`. */
  port: i32 = 15008;
  /** Network an address reference is looked up on first: the referrer's (0 for services). */
  network: i32 = 0;
  target: RefTarget = RefTarget.Unresolved;
  /** Workload or service index when resolved, else -1. */
  index: i32 = -1;
}

// A workload's identity id and flags share one u32 (`wIdentityFlags`), so the fields a
// connection decision reads first come from one cache line: bits 0..23 identity id (ids are
// at most the number of workloads, < 2^24), bits 24..31 flags.
export const IDENTITY_MASK: u32 = 0xffffff;
export const W_ISTIO: u32 = 1 << 24;
export const W_HEALTHY: u32 = 2 << 24;
// Service flag bits.
export const S_HEADLESS: u8 = 1;
export const S_LB_STANDARD: u8 = 2;

/** Default routing preference: network, region, zone, subzone (one scope per byte). */
export const DEFAULT_LB_PREFS: u32 = 0x04030201;

const EMPTY_BYTES = new ArrayBuffer(0);

// @ts-ignore: decorator
@inline function inRange(i: i32, n: i32): bool {
  return <u32>i < <u32>n;
}

// @ts-ignore: decorator
@inline function portKey(index: i32, port: i32): u64 {
  return (<u64>index << 16) | <u64>port;
}

// @ts-ignore: decorator
@inline function validPort(port: i32): bool {
  return port >= 1 && port <= 65535;
}

function arrayBytes<T>(a: StaticArray<T>): i64 {
  return <i64>a.length * sizeof<T>() + OBJECT_OVERHEAD;
}

export class Mesh {
  // ---- Interned texts ----
  networks: StringTable = new StringTable();
  identities: StringTable = new StringTable();
  /** Whole locality strings, "region/zone/subzone". */
  localities: StringTable = new StringTable();
  /**
   * Locality prefixes "r", "r/z", "r/z/s": equal zone ids mean same region AND zone, so scope
   * comparisons are one integer compare.
   */
  localityPrefixes: StringTable = new StringTable();
  /** Per locality id: region, zone and subzone prefix ids. */
  localityParts: Array<i32> = [0, 0, 0];

  // ---- Workloads (n = workloadTotal) ----
  workloadTotal: i32 = 0;
  wIdentityFlags: StaticArray<u32> = new StaticArray<u32>(0);
  wNetwork: StaticArray<u16> = new StaticArray<u16>(0);
  /** Locality id (at most MAX_LOCALITIES distinct). */
  wLocality: StaticArray<u16> = new StaticArray<u16>(0);
  /**
   * Reference id + 1; 0 = none. Dense only when many workloads have one (a service waypoint is
   * the common case; a workload's own waypoint or gateway is rare), so a mesh without them pays
   * nothing per pod, and one with a few gateway-fronted workloads pays only for those.
   */
  wWaypoint: SparseColumn = new SparseColumn();
  wGateway: SparseColumn = new SparseColumn();
  /** Workload w's IPv4 addresses are v4Pool[v4Start[w] .. v4Start[w + 1]). */
  v4Start: StaticArray<u32> = new StaticArray<u32>(1);
  v4Pool: StaticArray<u32> = new StaticArray<u32>(0);
  /** Same for IPv6, two u64 per address; both empty when no workload has one. */
  v6Start: StaticArray<u32> = new StaticArray<u32>(0);
  v6Pool: StaticArray<u64> = new StaticArray<u64>(0);
  v4Table: AddrTable4 = new AddrTable4(0);
  v6Table: AddrTable6 = new AddrTable6(0);

  // ---- Services (m = serviceTotal) ----
  serviceTotal: i32 = 0;
  sHostname: Array<string> = new Array<string>();
  hostnames: Map<string, i32> = new Map<string, i32>();
  sFlags: StaticArray<u8> = new StaticArray<u8>(0);
  sWaypoint: StaticArray<u32> = new StaticArray<u32>(0);
  /** Routing preference, one Scope per byte from the lowest, 0 ends the list. */
  sLbPrefs: StaticArray<u32> = new StaticArray<u32>(0);
  /** Service s's ports are port slots sPortStart[s] .. sPortStart[s + 1]. */
  sPortStart: StaticArray<u32> = new StaticArray<u32>(1);
  slotPort: StaticArray<u16> = new StaticArray<u16>(0);
  slotTarget: StaticArray<u16> = new StaticArray<u16>(0);
  slotService: StaticArray<u32> = new StaticArray<u32>(0);
  slotCluster: Array<ArrayBuffer> = new Array<ArrayBuffer>();
  /** (service, service port) → port slot. */
  portIndex: U64Table = new U64Table();
  /** Service s's endpoints are epWorkload[sEpStart[s] .. sEpStart[s + 1]) (global ids). */
  sEpStart: StaticArray<u32> = new StaticArray<u32>(1);
  epWorkload: StaticArray<u32> = new StaticArray<u32>(0);
  /** (global endpoint id, service port) → per-endpoint target port. */
  overrides: PortTable = new PortTable();
  sSanStart: StaticArray<u32> = new StaticArray<u32>(1);
  sans: Array<string> = new Array<string>();
  sVipStart: StaticArray<u32> = new StaticArray<u32>(1);
  vipService: StaticArray<u32> = new StaticArray<u32>(0);
  vipNetwork: StaticArray<u16> = new StaticArray<u16>(0);
  vipFamily: StaticArray<u8> = new StaticArray<u8>(0);
  vipV4: StaticArray<u32> = new StaticArray<u32>(0);
  vipHi: StaticArray<u64> = new StaticArray<u64>(0);
  vipLo: StaticArray<u64> = new StaticArray<u64>(0);
  vipTable4: AddrTable4 = new AddrTable4(0);
  vipTable6: AddrTable6 = new AddrTable6(0);
  /** (workload, effective target port) → port slot of a headless service; first one wins. */
  headless: U64Table = new U64Table();

  // ---- References ----
  refs: Array<Ref> = new Array<Ref>();

  // ================================================================ networks

  networkCount(): i32 {
    return this.networks.size;
  }

  /** The id of a network name ("" is 0), or -1 when no workload or VIP uses it. */
  networkId(name: string): i32 {
    return this.networks.find(name);
  }

  networkName(id: i32): string {
    return this.networks.text(id);
  }

  // ================================================================ workloads

  workloadCount(): i32 {
    return this.workloadTotal;
  }

  /** The workload holding `addr`'s IP on `network`, or -1. No allocation. */
  workloadByAddress(network: i32, addr: Address): i32 {
    if (addr.family == FAMILY_V4) return this.workloadByV4(network, addr.v4);
    if (addr.family == FAMILY_V6) return this.workloadByV6(network, addr.hi, addr.lo);
    return -1;
  }

  workloadByV4(network: i32, ip: u32): i32 {
    return this.v4Table.find(ip, network);
  }

  workloadByV6(network: i32, hi: u64, lo: u64): i32 {
    return this.v6Table.find(hi, lo, network);
  }

  workloadNetwork(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>unchecked(this.wNetwork[w]) : -1;
  }

  workloadTlsMode(w: i32): TlsMode {
    return this.flag(w, W_ISTIO) ? TlsMode.Istio : TlsMode.Disabled;
  }

  /** tlsMode is "istio". */
  workloadIstio(w: i32): bool {
    return this.flag(w, W_ISTIO);
  }

  workloadHealthy(w: i32): bool {
    return this.flag(w, W_HEALTHY);
  }

  /** Interned identity id (0 = none). */
  workloadIdentityId(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>(unchecked(this.wIdentityFlags[w]) & IDENTITY_MASK) : 0;
  }

  /** SPIFFE identity, "" when none. */
  workloadIdentity(w: i32): string {
    return this.identities.text(this.workloadIdentityId(w));
  }

  /** The identity as UTF-8 (shared, do not modify); empty when none. */
  workloadIdentityUtf8(w: i32): ArrayBuffer {
    return this.identities.utf8(this.workloadIdentityId(w));
  }

  /** Interned locality id (0 = ""). */
  workloadLocalityId(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>unchecked(this.wLocality[w]) : 0;
  }

  /** "region/zone/subzone" as configured. */
  workloadLocality(w: i32): string {
    return this.localities.text(this.workloadLocalityId(w));
  }

  /** Region id (0 = none); equal ids mean the same region. */
  workloadRegion(w: i32): i32 {
    return this.localityPart(w, 0);
  }

  /** Zone id (0 = none); equal ids mean the same region and zone. */
  workloadZone(w: i32): i32 {
    return this.localityPart(w, 1);
  }

  /** Subzone id (0 = none); equal ids mean the same region, zone and subzone. */
  workloadSubzone(w: i32): i32 {
    return this.localityPart(w, 2);
  }

  /** The text of a region/zone/subzone id: "r", "r/z", "r/z/s". */
  localityPrefix(id: i32): string {
    return this.localityPrefixes.text(id);
  }

  /** Waypoint reference id, or -1. */
  workloadWaypoint(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>this.wWaypoint.get(w) - 1 : -1;
  }

  /** Network-gateway reference id, or -1. */
  workloadGateway(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>this.wGateway.get(w) - 1 : -1;
  }

  /** IPv4 addresses first, then IPv6, each in configuration order. */
  workloadAddressCount(w: i32): i32 {
    if (!inRange(w, this.workloadTotal)) return 0;
    return this.v4Count(w) + this.v6Count(w);
  }

  /** Writes address i of workload w into `out` (port -1); false when there is none. */
  workloadAddress(w: i32, i: i32, out: Address): bool {
    out.clear();
    if (!inRange(w, this.workloadTotal) || i < 0) return false;
    const n4 = this.v4Count(w);
    if (i < n4) {
      const at = <i32>unchecked(this.v4Start[w]) + i;
      if (!inRange(at, this.v4Pool.length)) return false;
      out.setV4(unchecked(this.v4Pool[at]));
      return true;
    }
    if (i - n4 >= this.v6Count(w)) return false;
    const at = (<i32>unchecked(this.v6Start[w]) + i - n4) << 1;
    if (!inRange(at + 1, this.v6Pool.length)) return false;
    out.setV6(unchecked(this.v6Pool[at]), unchecked(this.v6Pool[at + 1]));
    return true;
  }

  // ================================================================ services

  serviceCount(): i32 {
    return this.serviceTotal;
  }

  /** The service with VIP `addr` on `network`, or -1. No allocation. */
  serviceByVip(network: i32, addr: Address): i32 {
    let vip = -1;
    if (addr.family == FAMILY_V4) vip = this.vipTable4.find(addr.v4, network);
    else if (addr.family == FAMILY_V6) vip = this.vipTable6.find(addr.hi, addr.lo, network);
    return inRange(vip, this.vipService.length) ? <i32>unchecked(this.vipService[vip]) : -1;
  }

  /** The service with this hostname, or -1. */
  serviceByHostname(hostname: string): i32 {
    return this.hostnames.has(hostname) ? this.hostnames.get(hostname) : -1;
  }

  serviceHostname(s: i32): string {
    return inRange(s, this.sHostname.length) ? unchecked(this.sHostname[s]) : "";
  }

  serviceHeadless(s: i32): bool {
    return inRange(s, this.serviceTotal) && (unchecked(this.sFlags[s]) & S_HEADLESS) != 0;
  }

  serviceWaypoint(s: i32): i32 {
    return inRange(s, this.serviceTotal) ? <i32>unchecked(this.sWaypoint[s]) - 1 : -1;
  }

  servicePortCount(s: i32): i32 {
    return this.rangeLength(this.sPortStart, s);
  }

  /** Service port number i of s (configuration order), or -1. */
  servicePortAt(s: i32, i: i32): i32 {
    const slot = this.rangeItem(this.sPortStart, s, i);
    return inRange(slot, this.slotPort.length) ? <i32>unchecked(this.slotPort[slot]) : -1;
  }

  /** The service's default target port for `servicePort`, or -1 when not exposed. */
  serviceTargetPort(s: i32, servicePort: i32): i32 {
    const slot = this.portSlot(s, servicePort);
    return inRange(slot, this.slotTarget.length) ? <i32>unchecked(this.slotTarget[slot]) : -1;
  }

  exposesPort(s: i32, servicePort: i32): bool {
    return this.portSlot(s, servicePort) >= 0;
  }

  /**
   * UTF-8 Envoy cluster name for (s, servicePort): `cluster` when configured, else
   * "outbound|<port>||<hostname>". Precomputed and shared (do not modify); null when s does
   * not expose the port.
   */
  clusterName(s: i32, servicePort: i32): ArrayBuffer | null {
    const slot = this.portSlot(s, servicePort);
    return inRange(slot, this.slotCluster.length) ? unchecked(this.slotCluster[slot]) : null;
  }

  endpointCount(s: i32): i32 {
    return this.rangeLength(this.sEpStart, s);
  }

  /** Endpoints of all services, numbered service after service: the global endpoint ids. */
  endpointTotal(): i32 {
    return this.epWorkload.length;
  }

  /** Workload index of global endpoint g, or -1. */
  globalEndpointWorkload(g: i32): i32 {
    return inRange(g, this.epWorkload.length) ? <i32>unchecked(this.epWorkload[g]) : -1;
  }

  /**
   * The service global endpoint g belongs to, or -1: a binary search over the services'
   * endpoint ranges (O(log services), no allocation). `globalEndpointIndex` gives e within it.
   */
  endpointService(g: i32): i32 {
    const starts = this.sEpStart;
    const n = starts.length - 1;
    if (n <= 0 || !inRange(g, <i32>unchecked(starts[n]))) return -1;
    // The last s with starts[s] <= g (services without endpoints share their start).
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (<i32>unchecked(starts[mid]) <= g) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** g's position within its service `s` (= endpointService(g)), or -1. */
  globalEndpointIndex(s: i32, g: i32): i32 {
    if (!inRange(s + 1, this.sEpStart.length) || s < 0) return -1;
    const e = g - <i32>unchecked(this.sEpStart[s]);
    return inRange(e, this.rangeLength(this.sEpStart, s)) ? e : -1;
  }

  /** Workload index of endpoint e (0-based within s), or -1. */
  endpointWorkload(s: i32, e: i32): i32 {
    const g = this.rangeItem(this.sEpStart, s, e);
    return inRange(g, this.epWorkload.length) ? <i32>unchecked(this.epWorkload[g]) : -1;
  }

  /**
   * The target port endpoint e of service s serves `servicePort` on: the endpoint's own
   * override first, then the service default; -1 when s does not expose `servicePort` or e is
   * not an endpoint of s.
   */
  targetPort(s: i32, e: i32, servicePort: i32): i32 {
    const slot = this.portSlot(s, servicePort);
    if (!inRange(slot, this.slotTarget.length)) return -1;
    const g = this.rangeItem(this.sEpStart, s, e);
    if (g < 0) return -1;
    if (this.overrides.size > 0) {
      const t = this.overrides.get(g, servicePort);
      if (t >= 0) return t;
    }
    return <i32>unchecked(this.slotTarget[slot]);
  }

  sanCount(s: i32): i32 {
    return this.rangeLength(this.sSanStart, s);
  }

  san(s: i32, i: i32): string {
    const at = this.rangeItem(this.sSanStart, s, i);
    return inRange(at, this.sans.length) ? unchecked(this.sans[at]) : "";
  }

  vipCount(s: i32): i32 {
    return this.rangeLength(this.sVipStart, s);
  }

  /** Writes VIP i of service s into `out`; false when there is none. */
  vipAddress(s: i32, i: i32, out: Address): bool {
    out.clear();
    const v = this.rangeItem(this.sVipStart, s, i);
    if (!inRange(v, this.vipFamily.length)) return false;
    const family = <i32>unchecked(this.vipFamily[v]);
    if (family == FAMILY_V4) out.setV4(unchecked(this.vipV4[v]));
    else out.setV6(unchecked(this.vipHi[v]), unchecked(this.vipLo[v]));
    return true;
  }

  /** Network id of VIP i of service s, or -1. */
  vipNetworkId(s: i32, i: i32): i32 {
    const v = this.rangeItem(this.sVipStart, s, i);
    return inRange(v, this.vipNetwork.length) ? <i32>unchecked(this.vipNetwork[v]) : -1;
  }

  lbMode(s: i32): LbMode {
    return inRange(s, this.serviceTotal) && (unchecked(this.sFlags[s]) & S_LB_STANDARD) != 0
      ? LbMode.Standard
      : LbMode.Failover;
  }

  lbPreferenceCount(s: i32): i32 {
    if (!inRange(s, this.serviceTotal)) return 0;
    const prefs = unchecked(this.sLbPrefs[s]);
    let n = 0;
    while (n < 4 && ((prefs >> (<u32>n * 8)) & 0xff) != 0) n++;
    return n;
  }

  /** Scope i of the routing preference, or 0. */
  lbPreference(s: i32, i: i32): i32 {
    if (!inRange(s, this.serviceTotal) || !inRange(i, 4)) return 0;
    return <i32>((unchecked(this.sLbPrefs[s]) >> (<u32>i * 8)) & 0xff);
  }

  /** Whether workloads a and b share `scope` (equal values, "" included, as Istio compares). */
  sameScope(scope: i32, a: i32, b: i32): bool {
    if (!inRange(a, this.workloadTotal) || !inRange(b, this.workloadTotal)) return false;
    if (scope == Scope.Network) return unchecked(this.wNetwork[a]) == unchecked(this.wNetwork[b]);
    if (scope == Scope.Region) return this.workloadRegion(a) == this.workloadRegion(b);
    if (scope == Scope.Zone) return this.workloadZone(a) == this.workloadZone(b);
    if (scope == Scope.Subzone) return this.workloadSubzone(a) == this.workloadSubzone(b);
    return false;
  }

  /**
   * How many leading scopes of s's routing preference `source` and `candidate` share (0 ..
   * lbPreferenceCount(s)). Failover picks among the candidates with the highest rank.
   */
  localityRank(s: i32, source: i32, candidate: i32): i32 {
    const n = this.lbPreferenceCount(s);
    let rank = 0;
    while (rank < n && this.sameScope(this.lbPreference(s, rank), source, candidate)) rank++;
    return rank;
  }

  // ================================================================ headless services

  /**
   * The headless service that has workload w as an endpoint and serves on TARGET port `port`
   * for it (the effective target port: the endpoint's override, else the service default),
   * or -1. A direct pod connection dials the pod's target port. When several headless
   * services match, the first in configuration order wins.
   */
  headlessServiceOf(w: i32, port: i32): i32 {
    const slot = this.headlessSlot(w, port);
    return inRange(slot, this.slotService.length) ? <i32>unchecked(this.slotService[slot]) : -1;
  }

  /** The SERVICE port of that match (for clusterName), or -1. */
  headlessServicePort(w: i32, port: i32): i32 {
    const slot = this.headlessSlot(w, port);
    return inRange(slot, this.slotPort.length) ? <i32>unchecked(this.slotPort[slot]) : -1;
  }

  /** Cluster name of that match (UTF-8, shared), or null. */
  headlessCluster(w: i32, port: i32): ArrayBuffer | null {
    const slot = this.headlessSlot(w, port);
    return inRange(slot, this.slotCluster.length) ? unchecked(this.slotCluster[slot]) : null;
  }

  /**
   * Every (service, endpoint index) pair that has workload w, flattened [s0, e0, s1, e1, ...].
   * Scans all endpoints and allocates: for configure-time use (e.g. a server-side filter
   * learning which ports its own workload serves), not per connection.
   */
  endpointsOfWorkload(w: i32): Array<i32> {
    const out = new Array<i32>();
    for (let s = 0; s < this.serviceTotal; s++) {
      const n = this.endpointCount(s);
      for (let e = 0; e < n; e++) {
        if (this.endpointWorkload(s, e) == w) {
          out.push(s);
          out.push(e);
        }
      }
    }
    return out;
  }

  // ================================================================ references

  refCount(): i32 {
    return this.refs.length;
  }

  /** RefTarget of reference r (None for r = -1, i.e. "no waypoint"). */
  refTarget(r: i32): RefTarget {
    return inRange(r, this.refs.length) ? unchecked(this.refs[r]).target : RefTarget.None;
  }

  /** Workload or service index r resolved to, or -1. */
  refIndex(r: i32): i32 {
    return inRange(r, this.refs.length) ? unchecked(this.refs[r]).index : -1;
  }

  /** Waypoint port / gateway HBONE port, or -1. */
  refPort(r: i32): i32 {
    return inRange(r, this.refs.length) ? unchecked(this.refs[r]).port : -1;
  }

  /** The configured hostname ("" for an address reference). */
  refHostname(r: i32): string {
    return inRange(r, this.refs.length) ? unchecked(this.refs[r]).hostname : "";
  }

  /** Writes the configured address into `out` (port = refPort); false for a hostname ref. */
  refAddress(r: i32, out: Address): bool {
    out.clear();
    if (!inRange(r, this.refs.length)) return false;
    const ref = unchecked(this.refs[r]);
    if (ref.hostname.length > 0) return false;
    out.copyFrom(ref.address);
    out.port = ref.port;
    return true;
  }

  // ================================================================ accounting

  /**
   * Approximate bytes the model keeps after parsing: every column, table, interned text and
   * per-service string. An estimate (object headers counted at 20 bytes), used to document
   * and regress the per-pod budget.
   */
  retainedBytes(): i64 {
    let t: i64 = 0;
    t += this.networks.byteSize() + this.identities.byteSize();
    t += this.localities.byteSize() + this.localityPrefixes.byteSize();
    t += <i64>this.localityParts.length * 4 + OBJECT_OVERHEAD;
    t += arrayBytes(this.wIdentityFlags) + arrayBytes(this.wNetwork);
    t += arrayBytes(this.wLocality) + this.wWaypoint.byteSize() + this.wGateway.byteSize();
    t += arrayBytes(this.v4Start) + arrayBytes(this.v4Pool);
    t += arrayBytes(this.v6Start) + arrayBytes(this.v6Pool);
    t += this.v4Table.byteSize() + this.v6Table.byteSize();
    for (let s = 0; s < this.sHostname.length; s++) {
      t += <i64>unchecked(this.sHostname[s]).length * 2 + OBJECT_OVERHEAD + 4 + 24;
    }
    t += arrayBytes(this.sFlags) + arrayBytes(this.sWaypoint) + arrayBytes(this.sLbPrefs);
    t += arrayBytes(this.sPortStart) + arrayBytes(this.slotPort) + arrayBytes(this.slotTarget);
    t += arrayBytes(this.slotService) + this.portIndex.byteSize();
    for (let i = 0; i < this.slotCluster.length; i++) {
      t += <i64>unchecked(this.slotCluster[i]).byteLength + OBJECT_OVERHEAD + 4;
    }
    t += arrayBytes(this.sEpStart) + arrayBytes(this.epWorkload) + this.overrides.byteSize();
    t += arrayBytes(this.sSanStart);
    for (let i = 0; i < this.sans.length; i++) {
      t += <i64>unchecked(this.sans[i]).length * 2 + OBJECT_OVERHEAD + 4;
    }
    t += arrayBytes(this.sVipStart) + arrayBytes(this.vipService) + arrayBytes(this.vipNetwork);
    t += arrayBytes(this.vipFamily) + arrayBytes(this.vipV4);
    t += arrayBytes(this.vipHi) + arrayBytes(this.vipLo);
    t += this.vipTable4.byteSize() + this.vipTable6.byteSize() + this.headless.byteSize();
    t += <i64>this.refs.length * (64 + OBJECT_OVERHEAD * 3);
    return t;
  }

  // ================================================================ internals

  private flag(w: i32, bit: u32): bool {
    return inRange(w, this.workloadTotal) && (unchecked(this.wIdentityFlags[w]) & bit) != 0;
  }

  private localityPart(w: i32, part: i32): i32 {
    const at = this.workloadLocalityId(w) * 3 + part;
    return inRange(at, this.localityParts.length) ? unchecked(this.localityParts[at]) : 0;
  }

  private v4Count(w: i32): i32 {
    return this.rangeLength(this.v4Start, w);
  }

  private v6Count(w: i32): i32 {
    return this.rangeLength(this.v6Start, w);
  }

  /** Length of item i's range in an offsets column of n + 1 entries; 0 when out of range. */
  private rangeLength(starts: StaticArray<u32>, i: i32): i32 {
    if (!inRange(i + 1, starts.length) || i < 0) return 0;
    return <i32>(unchecked(starts[i + 1]) - unchecked(starts[i]));
  }

  /** Global position of element k of item i's range, or -1. */
  private rangeItem(starts: StaticArray<u32>, i: i32, k: i32): i32 {
    if (!inRange(k, this.rangeLength(starts, i))) return -1;
    return <i32>unchecked(starts[i]) + k;
  }

  private portSlot(s: i32, port: i32): i32 {
    if (!inRange(s, this.serviceTotal) || !validPort(port)) return -1;
    return this.portIndex.get(portKey(s, port));
  }

  private headlessSlot(w: i32, port: i32): i32 {
    if (!inRange(w, this.workloadTotal) || !validPort(port) || this.headless.size == 0) return -1;
    return this.headless.get(portKey(w, port));
  }
}

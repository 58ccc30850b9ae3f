// The mesh model's per-service answers: a service by VIP or hostname, its ports and target
// ports, cluster names, endpoints, SANs, VIPs and load-balancing preference.
import { Address, FAMILY_V4, FAMILY_V6 } from "./ip";
import { defaultClusterName } from "./parse_text";
import { MeshWorkloads } from "./model_workloads";
import { inRange, LbMode, M_OVERRIDES, M_POS_MASK, MEM_POS, MEM_WORKLOAD, portKey, PORTS_SCANNED, S_HEADLESS, S_LB_STANDARD, S_LIVE, Scope, validPort, VIP_WORDS } from "./model_layout";

/** Mesh's service accessors (see model.ts). */
export class MeshServices extends MeshWorkloads {
  // ================================================================ services

  /** Service ids are below this (some may be free after changes: serviceLive). */
  serviceCount(): i32 {
    return this.serviceTotal;
  }

  // @ts-ignore: decorator
  @inline serviceLive(s: i32): bool {
    return inRange(s, this.serviceTotal) && (unchecked(this.sFlags[s]) & S_LIVE) != 0;
  }

  /**
   * The service with VIP `addr` on `network`, or -1. No allocation. A removed service's VIPs
   * may stay in the tables until a later message releases them (RetiredServices): they never
   * answer, since their owner is not live (an id made live again released them first).
   */
  serviceByVip(network: i32, addr: Address): i32 {
    let s = -1;
    if (addr.family == FAMILY_V4) s = this.vipTable4.find(addr.v4, network);
    else if (addr.family == FAMILY_V6) s = this.vipTable6.find(addr.hi, addr.lo, network);
    return s >= 0 && this.serviceLive(s) ? s : -1;
  }

  /** The service with this hostname, or -1. */
  serviceByHostname(hostname: string): i32 {
    return this.hostnames.find(hostname, this.sHostname);
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
    return inRange(s, this.serviceTotal) ? this.sPorts.capacityOf(s) : 0;
  }

  /** Service port number i of s (configuration order), or -1. */
  servicePortAt(s: i32, i: i32): i32 {
    const slot = this.slotAt(s, i);
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
    return this.slotClusterName(s, this.portSlot(s, servicePort));
  }

  /**
   * The cluster name of s's port slot `slot` (UTF-8, shared: do not modify), or null. A
   * default name is built the first time it is asked for and kept until the port changes:
   * once per dialled port, never per port loaded.
   */
  slotClusterName(s: i32, slot: i32): ArrayBuffer | null {
    if (!inRange(slot, this.slotCluster.length) || !inRange(s, this.serviceTotal)) return null;
    const name = unchecked(this.slotCluster[slot]);
    if (name.byteLength > 0) return name;
    const built = defaultClusterName(<i32>unchecked(this.slotPort[slot]), unchecked(this.sHostname[s]));
    unchecked((this.slotCluster[slot] = built));
    return built;
  }

  endpointCount(s: i32): i32 {
    if (!inRange(s, this.serviceTotal)) return 0;
    const at = this.sMembers.offset(s);
    return at < 0 ? 0 : <i32>this.sMembers.word(at);
  }

  /**
   * Membership ids ("global endpoint ids") are below this; free ids answer -1 below. The JSON
   * build numbers them service after service, in configuration order.
   */
  endpointTotal(): i32 {
    return this.memTotal;
  }

  /** Workload of membership (global endpoint) g, or -1. */
  globalEndpointWorkload(g: i32): i32 {
    const s = this.membershipService(g);
    if (s < 0) return -1;
    return <i32>this.mem3(g, MEM_WORKLOAD);
  }

  /** The service global endpoint g belongs to, or -1 (O(1)). */
  endpointService(g: i32): i32 {
    return this.membershipService(g);
  }

  /** g's position within its service `s` (= endpointService(g)), or -1. */
  globalEndpointIndex(s: i32, g: i32): i32 {
    if (s < 0 || this.membershipService(g) != s) return -1;
    return <i32>(this.mem3(g, MEM_POS) & M_POS_MASK);
  }

  /** Workload index of endpoint e (0-based within s), or -1. */
  endpointWorkload(s: i32, e: i32): i32 {
    const g = this.endpointMembership(s, e);
    return g >= 0 ? <i32>this.mem3(g, MEM_WORKLOAD) : -1;
  }

  /** The membership id of endpoint e (0-based within s), or -1. */
  endpointMembership(s: i32, e: i32): i32 {
    if (!inRange(s, this.serviceTotal)) return -1;
    const pool = this.sMembers;
    const at = pool.offset(s);
    if (at < 0 || !inRange(e, <i32>pool.word(at))) return -1;
    const g = <i32>pool.word(at + 1 + e);
    return inRange(g, this.memTotal) ? g : -1;
  }

  /**
   * The target port endpoint e of service s serves `servicePort` on: the endpoint's own
   * override first, then the service default; -1 when s does not expose `servicePort` or e is
   * not an endpoint of s.
   */
  targetPort(s: i32, e: i32, servicePort: i32): i32 {
    const slot = this.portSlot(s, servicePort);
    if (!inRange(slot, this.slotTarget.length)) return -1;
    const g = this.endpointMembership(s, e);
    if (g < 0) return -1;
    const t = this.overrideOf(g, servicePort);
    return t >= 0 ? t : <i32>unchecked(this.slotTarget[slot]);
  }

  /** SANs of s (none once s is removed, even while they wait to be released). */
  sanCount(s: i32): i32 {
    return this.serviceLive(s) ? this.sSans.capacityOf(s) : 0;
  }

  san(s: i32, i: i32): string {
    if (!inRange(i, this.sanCount(s))) return "";
    const at = <i32>this.sSans.word(this.sSans.offset(s) + i);
    return inRange(at, this.sans.length) ? unchecked(this.sans[at]) : "";
  }

  /** VIPs of s (none once s is removed, even while they wait to be released). */
  vipCount(s: i32): i32 {
    return this.serviceLive(s) ? this.sVips.capacityOf(s) / VIP_WORDS : 0;
  }

  /** Writes VIP i of service s into `out`; false when there is none. */
  vipAddress(s: i32, i: i32, out: Address): bool {
    out.clear();
    if (!inRange(i, this.vipCount(s))) return false;
    const pool = this.sVips;
    const at = pool.offset(s) + i * VIP_WORDS;
    const family = <i32>(pool.word(at) & 0xff);
    if (family == FAMILY_V4) {
      out.setV4(pool.word(at + 1));
    } else {
      const hi = (<u64>pool.word(at + 1) << 32) | <u64>pool.word(at + 2);
      const lo = (<u64>pool.word(at + 3) << 32) | <u64>pool.word(at + 4);
      out.setV6(hi, lo);
    }
    return true;
  }

  /** Network id of VIP i of service s, or -1. */
  vipNetworkId(s: i32, i: i32): i32 {
    if (!inRange(i, this.vipCount(s))) return -1;
    return <i32>(this.sVips.word(this.sVips.offset(s) + i * VIP_WORDS) >> 8);
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
    if (scope == Scope.Network) return this.wNet(a) == this.wNet(b);
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

  // ================================================================ internals

  /** Port slot i of service s, or -1. */
  protected slotAt(s: i32, i: i32): i32 {
    if (!inRange(s, this.serviceTotal)) return -1;
    const pool = this.sPorts;
    const at = pool.offset(s);
    if (at < 0 || !inRange(i, pool.capacityOf(s))) return -1;
    return <i32>pool.word(at + i);
  }

  protected portSlot(s: i32, port: i32): i32 {
    if (!inRange(s, this.serviceTotal) || !validPort(port)) return -1;
    const pool = this.sPorts;
    const at = pool.offset(s);
    if (at < 0) return -1;
    const n = pool.capacityAt(at);
    if (n > PORTS_SCANNED) return this.portIndex.get(portKey(s, port));
    // A short list: its slots side by side (ports are unique within a service).
    for (let i = 0; i < n; i++) {
      const slot = <i32>pool.word(at + i);
      if (inRange(slot, this.slotPort.length) && <i32>unchecked(this.slotPort[slot]) == port) return slot;
    }
    return -1;
  }

  /** Membership g's override for `servicePort`, or -1. */
  overrideOf(g: i32, servicePort: i32): i32 {
    if (!inRange(g, this.memTotal) || (this.mem3(g, MEM_POS) & M_OVERRIDES) == 0) return -1;
    const pool = this.memOverrides;
    const at = pool.offset(g);
    if (at < 0) return -1;
    const n = pool.capacityOf(g);
    for (let i = 0; i < n; i++) {
      const entry = pool.word(at + i);
      if (<i32>(entry >> 16) == servicePort) return <i32>(entry & 0xffff);
    }
    return -1;
  }
}

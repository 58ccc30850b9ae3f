// The mesh model's per-workload answers: networks, a workload by address and its fields
// (flags, identity, locality and its scopes, references, addresses), its memberships.
import { Address, FAMILY_V4, FAMILY_V6 } from "./ip";
import { MeshColumns } from "./model_columns";
import { IDENTITY_MASK, inRange, M_POS_MASK, MEM_NEXT, MEM_POS, MEM_SERVICE, TlsMode, W_EXTRA, W_HEALTHY, W_ISTIO, W_LIVE, W_V4 } from "./model_layout";

/** Mesh's workload, network and membership accessors (see model.ts). */
export class MeshWorkloads extends MeshColumns {
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

  /** Workload ids are below this (some ids may be free after changes: workloadLive). */
  workloadCount(): i32 {
    return this.workloadTotal;
  }

  /** Whether id w holds a workload. */
  workloadLive(w: i32): bool {
    return this.flag(w, W_LIVE);
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
    return inRange(w, this.workloadTotal) ? <i32>this.wNet(w) : -1;
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
    return inRange(w, this.workloadTotal) ? <i32>(this.wInfo(w) & IDENTITY_MASK) : 0;
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
    return inRange(w, this.workloadTotal) ? <i32>this.wLoc(w) : 0;
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
    const info = this.wInfo(w);
    let n = (info & W_V4) != 0 ? 1 : 0;
    if ((info & W_EXTRA) != 0) {
      const at = this.wExtra.offset(w);
      if (at >= 0) {
        const n4 = <i32>this.wExtra.word(at);
        n += n4 + ((this.wExtra.capacityOf(w) - 1 - n4) >> 2);
      }
    }
    return n;
  }

  /** Writes address i of workload w into `out` (port -1); false when there is none. */
  workloadAddress(w: i32, i: i32, out: Address): bool {
    out.clear();
    if (!inRange(w, this.workloadTotal) || i < 0) return false;
    const info = this.wInfo(w);
    if ((info & W_V4) != 0) {
      if (i == 0) {
        out.setV4(this.wIp4(w));
        return true;
      }
      i--;
    }
    if ((info & W_EXTRA) == 0) return false;
    const pool = this.wExtra;
    const at = pool.offset(w);
    if (at < 0) return false;
    const n4 = <i32>pool.word(at);
    if (i < n4) {
      out.setV4(pool.word(at + 1 + i));
      return true;
    }
    const k = at + 1 + n4 + ((i - n4) << 2);
    if (k + 4 > at + pool.capacityOf(w)) return false;
    const hi = (<u64>pool.word(k) << 32) | <u64>pool.word(k + 1);
    const lo = (<u64>pool.word(k + 2) << 32) | <u64>pool.word(k + 3);
    out.setV6(hi, lo);
    return true;
  }

  // ================================================================ memberships

  /** The workload's first membership id (its chain, newest first), or -1. */
  firstMembership(w: i32): i32 {
    return inRange(w, this.workloadTotal) ? <i32>this.wChain(w) - 1 : -1;
  }

  /** The next membership of the same workload, or -1. */
  nextMembership(g: i32): i32 {
    return inRange(g, this.memTotal) && this.mem3(g, MEM_SERVICE) != 0 ? <i32>this.mem3(g, MEM_NEXT) - 1 : -1;
  }

  /** The service of membership g, or -1. */
  membershipService(g: i32): i32 {
    return inRange(g, this.memTotal) ? <i32>this.mem3(g, MEM_SERVICE) - 1 : -1;
  }

  /** g's position among its service's endpoints (endpointWorkload(s, e)), or -1. */
  membershipIndex(g: i32): i32 {
    if (!inRange(g, this.memTotal) || this.mem3(g, MEM_SERVICE) == 0) return -1;
    return <i32>(this.mem3(g, MEM_POS) & M_POS_MASK);
  }

  /** The membership of workload w in service s, or -1 (walks w's chain: a pod has few). */
  membershipOf(w: i32, s: i32): i32 {
    if (!inRange(w, this.workloadTotal)) return -1;
    const want = <u32>s + 1;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      if (this.mem3(g, MEM_SERVICE) == want) return g;
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return -1;
  }


  // ================================================================ internals

  protected flag(w: i32, bit: u32): bool {
    return inRange(w, this.workloadTotal) && (this.wInfo(w) & bit) != 0;
  }

  protected localityPart(w: i32, part: i32): i32 {
    const at = this.workloadLocalityId(w) * 3 + part;
    return inRange(at, this.localityParts.length) ? unchecked(this.localityParts[at]) : 0;
  }

}

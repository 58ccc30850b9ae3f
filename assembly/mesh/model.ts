// The mesh model: workloads, services and the references between them. Built from the JSON
// configuration (parse.ts) or a binary full message (wire_apply.ts), and changed in place by
// binary delta messages (edit.ts: workload / service upsert and remove).
//
// Layout is struct-of-arrays: one flat column per field, indexed by workload or service id
// (the JSON build numbers them in configuration order; the feed assigns them), so a pod costs a
// few bytes per column and no object of its own (see README.md for the per-pod budget). The
// columns have a capacity and grow by doubling; variable-length lists (a workload's extra
// addresses, a service's ports, VIPs, SANs and members, a membership's port overrides) live in
// ChunkPools (pool.ts). A workload's first IPv4 address is inline. Repeated texts (identities,
// networks, localities) are interned ids. Lookups are O(1) hash probes over flat arrays and
// allocate nothing; every accessor answers a neutral value (-1, "", false, an empty buffer)
// for an id out of range or not live instead of trapping.
//
// The columns are public so parse.ts and edit.ts can fill them; filters only read.
//
// Mesh is one class built in layers, one file each: model_columns.ts (the columns),
// model_workloads.ts (networks, workloads, memberships), model_services.ts (services), and
// here the headless-service matches, the references and the accounting. model_layout.ts holds
// the enums, Ref and the packed columns' bit layout, re-exported here.
import { Address } from "./ip";
import { MeshServices } from "./model_services";
import { OBJECT_OVERHEAD } from "./table";
import { arrayBytes, DEFAULT_CLUSTER, inRange, MEM_NEXT, MEM_SERVICE, Ref, RefTarget, validPort } from "./model_layout";

export {
  DEFAULT_CLUSTER,
  DEFAULT_LB_PREFS,
  IDENTITY_MASK,
  LbMode,
  M_OVERRIDES,
  M_POS_MASK,
  MEM_NEXT,
  MEM_POS,
  MEM_SERVICE,
  MEM_STRIDE,
  MEM_WORKLOAD,
  portKey,
  PORTS_SCANNED,
  Ref,
  RefTarget,
  S_HEADLESS,
  S_LB_STANDARD,
  S_LIVE,
  Scope,
  TlsMode,
  VIP_WORDS,
  W_CHAIN,
  W_EXTRA,
  W_HEALTHY,
  W_INFO,
  W_IP4,
  W_ISTIO,
  W_LIVE,
  W_PLACE,
  W_V4,
} from "./model_layout";

/**
 * The mesh model a filter reads (every accessor answers a neutral value for an id out of range
 * or not live). Its columns and lookups are in the classes it extends, see above.
 */
export class Mesh extends MeshServices {
  // ================================================================ headless services

  /**
   * The headless service that has workload w as an endpoint and serves on TARGET port `port`
   * for it (the effective target port: the endpoint's override, else the service default),
   * or -1. A direct pod connection dials the pod's target port. When several headless
   * services match, the lowest service id (configuration order) wins; within one, its first
   * matching port. Walks w's memberships and their ports: no index to keep up to date.
   */
  headlessServiceOf(w: i32, port: i32): i32 {
    const found = this.headlessMatch(w, port);
    return found < 0 ? -1 : <i32>(found >> 32);
  }

  /** The SERVICE port of that match (for clusterName), or -1. */
  headlessServicePort(w: i32, port: i32): i32 {
    const found = this.headlessMatch(w, port);
    if (found < 0) return -1;
    const slot = <i32>(found & 0xffffffff);
    return inRange(slot, this.slotPort.length) ? <i32>unchecked(this.slotPort[slot]) : -1;
  }

  /** Cluster name of that match (UTF-8, shared), or null. */
  headlessCluster(w: i32, port: i32): ArrayBuffer | null {
    const found = this.headlessMatch(w, port);
    if (found < 0) return null;
    return this.slotClusterName(<i32>(found >> 32), <i32>(found & 0xffffffff));
  }

  /**
   * The match as one value, (service id << 32) | port slot, or -1: for a caller that needs the
   * service and its cluster of one connection, so the membership walk runs once, not per field
   * (passthrough_mtls's decision; portSlotCluster turns the slot into the cluster name).
   */
  headlessMatchOf(w: i32, port: i32): i64 {
    return this.headlessMatch(w, port);
  }

  /** The cluster name (UTF-8, shared) of service s's port slot `slot` (from headlessMatchOf), or null. */
  portSlotCluster(s: i32, slot: i32): ArrayBuffer | null {
    return this.slotClusterName(s, slot);
  }

  /**
   * The service port of the lowest-id service (configuration order for JSON) listing w whose
   * port maps to TARGET port `target` for w (its override, else the default); -1 if none.
   * What tunnel_port's client needs for a connection dialled to a pod IP; walks w's
   * memberships, so it stays right under changes (an index built at configure would not).
   */
  servicePortForTarget(w: i32, target: i32): i32 {
    if (!inRange(w, this.workloadTotal) || !validPort(target)) return -1;
    let bestService = -1;
    let bestPort = -1;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      const s = <i32>this.mem3(g, MEM_SERVICE) - 1;
      if (s >= 0 && (bestService < 0 || s < bestService)) {
        const n = this.servicePortCount(s);
        for (let i = 0; i < n; i++) {
          const slot = this.slotAt(s, i);
          if (!inRange(slot, this.slotPort.length)) continue;
          const port = <i32>unchecked(this.slotPort[slot]);
          let t = this.overrideOf(g, port);
          if (t < 0) t = <i32>unchecked(this.slotTarget[slot]);
          if (t == target) {
            bestService = s;
            bestPort = port;
            break;
          }
        }
      }
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return bestPort;
  }

  /** Whether some service listing w maps `servicePort` to TARGET port `target` for it. */
  mapsPort(w: i32, servicePort: i32, target: i32): bool {
    if (!inRange(w, this.workloadTotal) || !validPort(target)) return false;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      const s = <i32>this.mem3(g, MEM_SERVICE) - 1;
      const slot = this.portSlot(s, servicePort);
      if (inRange(slot, this.slotTarget.length)) {
        let t = this.overrideOf(g, servicePort);
        if (t < 0) t = <i32>unchecked(this.slotTarget[slot]);
        if (t == target) return true;
      }
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return false;
  }

  /** Whether some service listing w maps one of its ports to a target port for it. */
  servesAnyPort(w: i32): bool {
    if (!inRange(w, this.workloadTotal)) return false;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      const s = <i32>this.mem3(g, MEM_SERVICE) - 1;
      for (let i = 0, n = this.servicePortCount(s); i < n; i++) {
        const slot = this.slotAt(s, i);
        if (!inRange(slot, this.slotPort.length)) continue;
        let t = this.overrideOf(g, <i32>unchecked(this.slotPort[slot]));
        if (t < 0) t = <i32>unchecked(this.slotTarget[slot]);
        if (validPort(t)) return true;
      }
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return false;
  }

  /**
   * Every (service, endpoint index) pair that has workload w, flattened [s0, e0, s1, e1, ...],
   * in service order. Allocates: for configure-time use, not per connection.
   */
  endpointsOfWorkload(w: i32): Array<i32> {
    const out = new Array<i32>();
    for (let s = 0; s < this.serviceTotal; s++) {
      const g = this.membershipOf(w, s);
      if (g < 0) continue;
      out.push(s);
      out.push(this.membershipIndex(g));
    }
    return out;
  }

  // ================================================================ references

  refCount(): i32 {
    return this.refs.length;
  }

  /** RefTarget of reference r (None for r = -1, i.e. "no waypoint"). */
  refTarget(r: i32): RefTarget {
    if (!inRange(r, this.refs.length)) return RefTarget.None;
    return this.resolved(unchecked(this.refs[r])).target;
  }

  /** Workload or service index r resolved to, or -1. */
  refIndex(r: i32): i32 {
    if (!inRange(r, this.refs.length)) return -1;
    return this.resolved(unchecked(this.refs[r])).index;
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

  /**
   * Resolves `ref` as of now. A hostname names a service. An address is looked up on the
   * referrer's network first (the workload's own; the default network for a service), then
   * on every other network in id order; on each network a workload address wins over a
   * service VIP (as ztunnel resolves addresses). No match is Unresolved, not an error. Done
   * once per reference and model generation: the first lookup after a change pays for it.
   */
  resolveRef(ref: Ref): void {
    ref.generation = this.generation;
    ref.target = RefTarget.Unresolved;
    ref.index = -1;
    if (ref.hostname.length > 0) {
      const s = this.serviceByHostname(ref.hostname);
      if (s >= 0) {
        ref.target = RefTarget.Service;
        ref.index = s;
      }
      return;
    }
    const networks = this.networkCount();
    for (let k = -1; k < networks; k++) {
      if (k == ref.network) continue;
      const net = k < 0 ? ref.network : k;
      const w = this.workloadByAddress(net, ref.address);
      if (w >= 0) {
        ref.target = RefTarget.Workload;
        ref.index = w;
        return;
      }
      const s = this.serviceByVip(net, ref.address);
      if (s >= 0) {
        ref.target = RefTarget.Service;
        ref.index = s;
        return;
      }
    }
  }

  // ================================================================ accounting

  /**
   * Approximate bytes the model keeps: every column, table, pool, interned text and
   * per-service string. An estimate (object headers counted at 20 bytes), used to document
   * and regress the per-pod budget.
   */
  retainedBytes(): i64 {
    let t: i64 = 0;
    t += this.networks.byteSize() + this.identities.byteSize();
    t += this.localities.byteSize() + this.localityPrefixes.byteSize();
    t += <i64>this.localityParts.length * 4 + OBJECT_OVERHEAD;
    t += arrayBytes(this.wCols) + arrayBytes(this.wHeadless);
    t += this.wWaypoint.byteSize() + this.wGateway.byteSize() + this.wExtra.byteSize();
    t += this.v4Table.byteSize() + this.v6Table.byteSize();
    t += arrayBytes(this.mem);
    t += this.memOverrides.byteSize();
    for (let s = 0; s < this.sHostname.length; s++) {
      t += <i64>unchecked(this.sHostname[s]).length * 2 + OBJECT_OVERHEAD + 4;
    }
    t += this.hostnames.byteSize();
    t += arrayBytes(this.sFlags) + arrayBytes(this.sWaypoint) + arrayBytes(this.sLbPrefs);
    t += this.sPorts.byteSize() + arrayBytes(this.slotPort) + arrayBytes(this.slotTarget);
    t += this.portIndex.byteSize() + <i64>this.slotFree.length * 4;
    // A slot holds a name object only once one was built or given (DEFAULT_CLUSTER: none yet).
    for (let i = 0; i < this.slotCluster.length; i++) {
      const name = unchecked(this.slotCluster[i]);
      t += name === DEFAULT_CLUSTER ? 4 : <i64>name.byteLength + OBJECT_OVERHEAD + 4;
    }
    t += this.sMembers.byteSize() + this.sSans.byteSize() + this.sVips.byteSize();
    for (let i = 0; i < this.sans.length; i++) {
      t += <i64>unchecked(this.sans[i]).length * 2 + OBJECT_OVERHEAD + 4;
    }
    t += this.vipTable4.byteSize() + this.vipTable6.byteSize() + this.retiredServices.byteSize();
    t += <i64>this.refs.length * (64 + OBJECT_OVERHEAD * 3);
    return t;
  }

  // ================================================================ internals
  protected resolved(ref: Ref): Ref {
    if (ref.generation != this.generation) this.resolveRef(ref);
    return ref;
  }

  /** Whether w may be an endpoint of a headless service (wHeadless). */
  mayBeHeadlessMember(w: i32): bool {
    const word = <i32>(<u32>w >> 5);
    return w >= 0 && word < this.wHeadless.length && (unchecked(this.wHeadless[word]) & (<u32>1 << (<u32>w & 31))) != 0;
  }

  /** (service << 32 | port slot) of the headless match for (w, target port), or -1. */
  private headlessMatch(w: i32, port: i32): i64 {
    if (!inRange(w, this.workloadTotal) || !validPort(port) || !this.mayBeHeadlessMember(w)) return -1;
    let best: i64 = -1;
    let g = <i32>this.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < this.memTotal && guard < this.memTotal; guard++) {
      const s = <i32>this.mem3(g, MEM_SERVICE) - 1;
      if (this.serviceHeadless(s) && (best < 0 || s < <i32>(best >> 32))) {
        const n = this.servicePortCount(s);
        for (let i = 0; i < n; i++) {
          const slot = this.slotAt(s, i);
          if (!inRange(slot, this.slotPort.length)) continue;
          let target = this.overrideOf(g, <i32>unchecked(this.slotPort[slot]));
          if (target < 0) target = <i32>unchecked(this.slotTarget[slot]);
          if (target == port) {
            best = (<i64>s << 32) | <i64><u32>slot;
            break;
          }
        }
      }
      g = <i32>this.mem3(g, MEM_NEXT) - 1;
    }
    return best;
  }
}

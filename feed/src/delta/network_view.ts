// One network's split-horizon view of the computed mesh, kept up to date object by object
// (view.ts computes the same view from scratch for the JSON snapshot; both follow the same
// rules and tests/feed/delta_incremental.test.ts checks they agree):
//   - a workload on this network (or reachable from everywhere) keeps the addresses it owns:
//     an address claimed by several workloads on one network goes to the best claimant
//     (view.ts `better`: live, then a Pod, then older, then lower uid), whatever the order;
//   - a workload on another network appears without addresses, carrying that network's
//     gateway; none when that network has no gateway;
//   - a VIP claimed by several services on one network goes to the first by hostname.
// `update` takes the uids and hostnames the mesh changed and returns the ones whose view
// changed, re-deciding only the addresses and VIPs those objects claim(ed).
import type { ComputedMesh, MeshChanges, WorkloadInfo } from "../mesh_model.js";
import type { Service, Workload } from "../schema.js";
import { better, type ViewStats } from "../view.js";
import { gatewayRef } from "../waypoints.js";
import { addTo, membersOf, removeFrom, type SetIndex } from "../compute_index.js";

/** A uid's or hostname's claim keys: the key itself when it has one (most workloads have one address). */
type Claims = string | string[];

function claimList(claims: Claims | undefined): readonly string[] {
  return claims === undefined ? [] : typeof claims === "string" ? [claims] : claims;
}

export class NetworkView {
  /** uid → the workload as this network sees it (only the ones in the view). */
  readonly workloads = new Map<string, Workload>();
  /** hostname → the service as this network sees it (its VIPs; endpoints are not kept here). */
  readonly services = new Map<string, Service>();
  /**
   * "network|address" → the uids claiming it, and uid → the keys it claims (the same strings).
   * One claimant and one key are kept as the string itself (compute_index.ts SetIndex): at 100k
   * pods a Set and an array per address were ~200 bytes per pod.
   */
  private readonly addressClaims: SetIndex = new Map();
  private readonly claimsOf = new Map<string, Claims>();
  private readonly vipClaims: SetIndex = new Map();
  private readonly vipClaimsOf = new Map<string, Claims>();
  private readonly remote = new Set<string>();
  private readonly dropped = new Set<string>();
  private addressConflicts = 0;
  private vipConflicts = 0;

  constructor(readonly network: string) {}

  stats(): ViewStats {
    return {
      workloads: this.workloads.size,
      services: this.services.size,
      remoteWorkloads: this.remote.size,
      droppedNoGateway: this.dropped.size,
      addressConflicts: this.addressConflicts,
      vipConflicts: this.vipConflicts,
    };
  }

  private local(info: WorkloadInfo): boolean {
    return info.reachableEverywhere || (info.workload.network ?? "") === this.network;
  }

  /** Re-decides the view of the changed objects; returns the uids and hostnames whose view may differ. */
  update(mesh: ComputedMesh, changes: MeshChanges): { workloads: Set<string>; services: Set<string> } {
    // A full recompute starts the view over; everything it held before counts as changed.
    const before = changes.full ? { workloads: [...this.workloads.keys()], services: [...this.services.keys()] } : undefined;
    if (changes.full) this.reset();
    const touched = new Set<string>(changes.workloads);
    // Claims: drop the changed workloads' old claims and add their new ones; every claimant of
    // an address whose claim set moved is decided again.
    for (const uid of changes.workloads) {
      for (const key of claimList(this.claimsOf.get(uid))) {
        removeFrom(this.addressClaims, key, uid);
        if (this.addressClaims.has(key)) this.addressConflicts--;
        for (const other of membersOf(this.addressClaims, key)) touched.add(other);
      }
      this.claimsOf.delete(uid);
      const info = mesh.workloads.get(uid);
      if (!info || !this.local(info)) continue;
      const keys = info.workload.addresses.map((a) => `${info.workload.network ?? ""}|${a}`);
      this.claimsOf.set(uid, keys.length === 1 ? keys[0] : keys);
      for (const key of keys) {
        if (this.addressClaims.has(key)) this.addressConflicts++;
        addTo(this.addressClaims, key, uid);
        for (const other of membersOf(this.addressClaims, key)) touched.add(other);
      }
    }
    const changedWorkloads = new Set<string>(before?.workloads);
    for (const uid of touched) {
      const info = mesh.workloads.get(uid);
      const before = this.workloads.get(uid);
      if (!info) {
        this.remote.delete(uid);
        this.dropped.delete(uid);
      }
      const after = info ? this.workloadView(mesh, info) : undefined;
      if (after) this.workloads.set(uid, after);
      else this.workloads.delete(uid);
      if (before !== after) changedWorkloads.add(uid);
    }
    // VIPs, the same way.
    const touchedServices = new Set<string>([...changes.services, ...(before?.services ?? [])]);
    for (const hostname of changes.services) {
      for (const key of claimList(this.vipClaimsOf.get(hostname))) {
        removeFrom(this.vipClaims, key, hostname);
        if (this.vipClaims.has(key)) this.vipConflicts--;
        for (const other of membersOf(this.vipClaims, key)) touchedServices.add(other);
      }
      this.vipClaimsOf.delete(hostname);
      const s = mesh.services.get(hostname);
      if (!s?.vips) continue;
      const keys = s.vips.map((v) => `${v.network ?? ""}|${v.address}`);
      this.vipClaimsOf.set(hostname, keys.length === 1 ? keys[0] : keys);
      for (const key of keys) {
        if (this.vipClaims.has(key)) this.vipConflicts++;
        addTo(this.vipClaims, key, hostname);
        for (const other of membersOf(this.vipClaims, key)) touchedServices.add(other);
      }
    }
    for (const hostname of touchedServices) {
      const s = mesh.services.get(hostname);
      if (!s) {
        this.services.delete(hostname);
        continue;
      }
      let out: Service = s;
      if (s.vips) {
        const vips = s.vips.filter((v) => this.vipOwner(`${v.network ?? ""}|${v.address}`) === hostname);
        if (vips.length !== s.vips.length) {
          out = { ...s, vips };
          if (vips.length === 0) delete out.vips;
        }
      }
      this.services.set(hostname, out);
    }
    return { workloads: changedWorkloads, services: touchedServices };
  }

  private reset(): void {
    this.workloads.clear();
    this.services.clear();
    this.addressClaims.clear();
    this.claimsOf.clear();
    this.vipClaims.clear();
    this.vipClaimsOf.clear();
    this.remote.clear();
    this.dropped.clear();
    this.addressConflicts = 0;
    this.vipConflicts = 0;
  }

  private addressOwner(mesh: ComputedMesh, key: string): string | undefined {
    let best: WorkloadInfo | undefined;
    for (const uid of membersOf(this.addressClaims, key)) {
      const info = mesh.workloads.get(uid);
      if (info && (!best || better(info, best))) best = info;
    }
    return best?.workload.uid;
  }

  private vipOwner(key: string): string | undefined {
    let first: string | undefined;
    for (const h of membersOf(this.vipClaims, key)) if (first === undefined || h < first) first = h;
    return first;
  }

  /** The workload as this network sees it, or undefined when it is not in the view. */
  private workloadView(mesh: ComputedMesh, info: WorkloadInfo): Workload | undefined {
    const w = info.workload;
    this.remote.delete(w.uid);
    this.dropped.delete(w.uid);
    if (this.local(info)) {
      const net = w.network ?? "";
      const addresses = w.addresses.filter((a) => this.addressOwner(mesh, `${net}|${a}`) === w.uid);
      if (addresses.length === 0) return undefined;
      if (addresses.length === w.addresses.length) return w;
      return { ...w, addresses };
    }
    this.remote.add(w.uid);
    const gw = mesh.gateways.get(w.network ?? "");
    if (!gw) {
      this.dropped.add(w.uid);
      return undefined;
    }
    return { ...w, addresses: [], networkGateway: gatewayRef(gw) };
  }
}

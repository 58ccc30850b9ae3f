// One network's view of the computed mesh (problem 3's split horizon): workloads on another
// network appear without addresses, carrying their network's gateway (istiod's ambient index
// does the same per service with one SplitHorizonWorkload, ambient/multicluster.go); gateways
// and east-west gateway pods keep their addresses, since other networks dial them. Then the two
// rules that keep the snapshot acceptable to the filters: an address appears once per network
// (`better` picks its holder), and services only name workloads in the view.
import type { ComputedMesh, WorkloadInfo } from "./mesh_model.js";
import type { MeshSnapshot, Service, Workload } from "./schema.js";
import { gatewayRef } from "./waypoints.js";

export interface ViewStats {
  workloads: number;
  services: number;
  remoteWorkloads: number;
  /** Remote workloads whose network has no gateway: unreachable from here, left out. */
  droppedNoGateway: number;
  /** Addresses another workload on the same network also claimed (the loser's address left out). */
  addressConflicts: number;
  /** VIPs another service on the same network also claimed. */
  vipConflicts: number;
}

/**
 * Who keeps an address two workloads on one network claim: a live one over a deleting one,
 * then a Pod over an endpoint without a Pod or a gateway's address, then the older, then the
 * lower uid. The older wins because a reused IP has a terminal or deleting previous holder
 * (the kubelet frees an address only once its pod's sandbox is gone, and a terminal pod is no
 * workload): two live pods with one address are a conflict, and a newcomer must not take the
 * address, and so the identity the sidecars verify, from the pod that holds it. Readiness does
 * not count for the same reason (a ready newcomer would win over a briefly unready holder).
 */
export function better(a: WorkloadInfo, b: WorkloadInfo): boolean {
  if (a.deleting !== b.deleting) return !a.deleting;
  const ap = a.source === "pod";
  if (ap !== (b.source === "pod")) return ap;
  if (a.created !== b.created) return a.created < b.created;
  return a.workload.uid < b.workload.uid;
}

/** The service with only the endpoints whose workload is in the view (none left: no `endpoints`). */
export function endpointsInView(s: Service, inView: ReadonlySet<string>): Service {
  if (!s.endpoints?.some((e) => !inView.has(e.workload))) return s;
  const endpoints = s.endpoints.filter((e) => inView.has(e.workload));
  const out: Service = { ...s, endpoints };
  if (endpoints.length === 0) delete out.endpoints;
  return out;
}

export function viewFor(mesh: ComputedMesh, network: string): { snapshot: MeshSnapshot; stats: ViewStats } {
  const stats: ViewStats = { workloads: 0, services: 0, remoteWorkloads: 0, droppedNoGateway: 0, addressConflicts: 0, vipConflicts: 0 };
  const uids = [...mesh.workloads.keys()].sort();
  // Pass 1: who owns each (network, address).
  const owner = new Map<string, WorkloadInfo>();
  const local = (info: WorkloadInfo) => info.reachableEverywhere || (info.workload.network ?? "") === network;
  for (const uid of uids) {
    const info = mesh.workloads.get(uid)!;
    if (!local(info)) continue;
    for (const a of info.workload.addresses) {
      const key = `${info.workload.network ?? ""}|${a}`;
      const current = owner.get(key);
      if (!current) owner.set(key, info);
      else {
        stats.addressConflicts++;
        if (better(info, current)) owner.set(key, info);
      }
    }
  }
  // Pass 2: emit.
  const workloads: Workload[] = [];
  const kept = new Set<string>();
  for (const uid of uids) {
    const info = mesh.workloads.get(uid)!;
    const w = info.workload;
    if (local(info)) {
      const addresses = w.addresses.filter((a) => owner.get(`${w.network ?? ""}|${a}`) === info);
      if (addresses.length === 0) continue;
      workloads.push(addresses.length === w.addresses.length ? w : { ...w, addresses });
    } else {
      const gw = mesh.gateways.get(w.network ?? "");
      stats.remoteWorkloads++;
      if (!gw) {
        stats.droppedNoGateway++;
        continue;
      }
      workloads.push({ ...w, addresses: [], networkGateway: gatewayRef(gw) });
    }
    kept.add(uid);
  }
  // Services: endpoints in the view only; each VIP once per network (first service by hostname).
  const vipOwner = new Set<string>();
  const services: Service[] = [];
  for (const hostname of [...mesh.services.keys()].sort()) {
    const s = mesh.services.get(hostname)!;
    let out = endpointsInView(s, kept);
    if (s.vips) {
      const vips = s.vips.filter((v) => {
        const key = `${v.network ?? ""}|${v.address}`;
        if (vipOwner.has(key)) {
          stats.vipConflicts++;
          return false;
        }
        vipOwner.add(key);
        return true;
      });
      if (vips.length !== s.vips.length) {
        out = { ...out, vips };
        if (vips.length === 0) delete out.vips;
      }
    }
    services.push(out);
  }
  stats.workloads = workloads.length;
  stats.services = services.length;
  return { snapshot: { workloads, services }, stats };
}

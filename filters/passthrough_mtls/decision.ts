// The per-connection decision, apart from the host glue so unit tests can drive it directly.
// Pure lookups on the mesh model: no allocation, no host call.
import { Address, Mesh } from "../../assembly/mesh";

export enum Route {
  /** No mesh pod on this proxy's network at that IP: plain original-destination passthrough. */
  NotAPod,
  /** A mesh pod with tlsMode disabled: plain passthrough, exactly as before the filter. */
  PlaintextPod,
  /** A mesh pod with tlsMode istio: mTLS to exactly that IP:port, verifying its identity. */
  MtlsPod,
  /** A member of a headless service on a port it serves: that service's cluster. */
  HeadlessMember,
}

export class Decision {
  route: Route = Route.NotAPod;
  /** Workload index, -1 when not a pod. */
  workload: i32 = -1;
  /** Headless service index, -1 otherwise. */
  service: i32 = -1;
  /** The headless service's port slot that matched (its cluster: Mesh.portSlotCluster), -1 otherwise. */
  slot: i32 = -1;
  /** The same IP is also a workload on another network; this network's pod won. */
  localWon: bool = false;
}

/**
 * Decides for destination `dst` (with its port) on network `localNetwork`. A direct pod
 * connection never crosses a network gateway, so only this network's pods are candidates.
 */
export function decide(mesh: Mesh, localNetwork: i32, dst: Address, out: Decision): void {
  out.route = Route.NotAPod;
  out.workload = -1;
  out.service = -1;
  out.slot = -1;
  out.localWon = false;
  const w = mesh.workloadByAddress(localNetwork, dst);
  if (w < 0) return;
  out.workload = w;
  out.localWon = existsOnAnotherNetwork(mesh, localNetwork, dst);
  if (!mesh.workloadIstio(w)) {
    out.route = Route.PlaintextPod;
    return;
  }
  // One walk of w's memberships gives both the service and the port slot whose cluster the
  // filter picks (asking for each separately walked twice: +1 us per headless connection at 1M
  // pods, bench/scale/README.md).
  const match = mesh.headlessMatchOf(w, dst.port);
  if (match >= 0) {
    out.route = Route.HeadlessMember;
    out.service = <i32>(match >> 32);
    out.slot = <i32>(match & 0xffffffff);
    return;
  }
  out.route = Route.MtlsPod;
}

function existsOnAnotherNetwork(mesh: Mesh, localNetwork: i32, dst: Address): bool {
  const networks = mesh.networkCount();
  if (networks < 2) return false;
  for (let n = 0; n < networks; n++) {
    if (n != localNetwork && mesh.workloadByAddress(n, dst) >= 0) return true;
  }
  return false;
}

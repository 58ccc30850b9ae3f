// Client side: from the original destination to (endpoint, target port, service port). Pure
// lookups on the mesh model; the only state is the per-service round-robin cursor.
import { Address, Mesh } from "../../assembly/mesh";
import { TunnelConfig } from "./config";

export enum ClientOutcome {
  /** Tunnel to `workload` at its tunnel port, :authority = podIP:targetPort. */
  Tunnel,
  /** The configuration does not know this destination (or its port). */
  Unknown,
  /** A known service, but no endpoint on this network can take a tunnel. */
  NoEndpoint,
}

export class ClientDecision {
  outcome: ClientOutcome = ClientOutcome.Unknown;
  workload: i32 = -1;
  servicePort: i32 = -1;
  targetPort: i32 = -1;
  /** -1 for a pod-IP destination. */
  service: i32 = -1;
  /** No endpoint was healthy; one of the unhealthy ones was used (Envoy's panic routing). */
  panic: bool = false;
}

/** Round-robin cursors, one per service: fair across connections, O(1) state per service. */
export class Cursors {
  private next: StaticArray<i32>;
  constructor(services: i32) {
    this.next = new StaticArray<i32>(services > 0 ? services : 0);
  }
  /**
   * Room for service ids below `services`, keeping every cursor (a service id names the same
   * service within a feed epoch; a stale cursor is only a starting point, taken modulo the count).
   * Grows by doubling: amortized O(1) per new service, not O(services) per feed message.
   */
  ensure(services: i32): void {
    const old = this.next;
    if (services <= old.length) return;
    const grown = new StaticArray<i32>(max(services, old.length * 2));
    memory.copy(changetype<usize>(grown), changetype<usize>(old), <usize>old.length << 2);
    this.next = grown;
  }
  take(s: i32, count: i32): i32 {
    if (s < 0 || s >= this.next.length || count <= 0) return 0;
    const at = unchecked(this.next[s]) % count;
    unchecked((this.next[s] = (at + 1) % count));
    return at;
  }
}

/** A workload can take a tunnel when it is a mesh pod (HBONE needs its sidecar) on this network. */
function tunnelable(mesh: Mesh, network: i32, w: i32): bool {
  return w >= 0 && mesh.workloadIstio(w) && mesh.workloadNetwork(w) == network && mesh.workloadAddressCount(w) > 0;
}

/**
 * Picks an endpoint of service `s` for `servicePort`: round robin over the healthy candidates
 * (each gets an even share, whatever sits between them in the list); when none is healthy, round
 * robin over all candidates (Envoy's panic routing). O(endpoints), no allocation.
 */
function pickEndpoint(config: TunnelConfig, cursors: Cursors, s: i32, out: ClientDecision): bool {
  const mesh = config.mesh;
  const count = mesh.endpointCount(s);
  let healthy = 0;
  let usable = 0;
  for (let e = 0; e < count; e++) {
    const w = mesh.endpointWorkload(s, e);
    if (!tunnelable(mesh, config.localNetwork, w) || mesh.targetPort(s, e, out.servicePort) <= 0) continue;
    usable++;
    if (mesh.workloadHealthy(w)) healthy++;
  }
  if (usable == 0) return false;
  const panic = healthy == 0;
  let k = cursors.take(s, panic ? usable : healthy);
  for (let e = 0; e < count; e++) {
    const w = mesh.endpointWorkload(s, e);
    if (!tunnelable(mesh, config.localNetwork, w)) continue;
    const target = mesh.targetPort(s, e, out.servicePort);
    if (target <= 0 || (!panic && !mesh.workloadHealthy(w))) continue;
    if (k-- > 0) continue;
    out.workload = w;
    out.targetPort = target;
    out.panic = panic;
    return true;
  }
  return false;
}

export function preferServicePort(config: TunnelConfig, out: ClientDecision, servicePort: i32): bool {
  if (out.outcome != ClientOutcome.Tunnel || out.service >= 0 || servicePort <= 0) return false;
  if (!config.mesh.mapsPort(out.workload, servicePort, out.targetPort)) return false;
  out.servicePort = servicePort;
  return true;
}

export function decideClient(config: TunnelConfig, cursors: Cursors, dst: Address, out: ClientDecision): void {
  out.outcome = ClientOutcome.Unknown;
  out.workload = -1;
  out.servicePort = -1;
  out.targetPort = -1;
  out.service = -1;
  out.panic = false;
  const mesh = config.mesh;
  const s = mesh.serviceByVip(config.localNetwork, dst);
  if (s >= 0) {
    if (!mesh.exposesPort(s, dst.port)) return;
    out.service = s;
    out.servicePort = dst.port;
    out.outcome = pickEndpoint(config, cursors, s, out) ? ClientOutcome.Tunnel : ClientOutcome.NoEndpoint;
    return;
  }
  // A pod IP: the port dialled is the target port; the service port is the one that maps to it.
  const w = mesh.workloadByAddress(config.localNetwork, dst);
  if (w < 0) return;
  const servicePort = mesh.servicePortForTarget(w, dst.port);
  if (servicePort < 0) return;
  out.servicePort = servicePort;
  out.targetPort = dst.port;
  if (!tunnelable(mesh, config.localNetwork, w)) {
    out.outcome = ClientOutcome.NoEndpoint;
    return;
  }
  out.workload = w;
  out.outcome = ClientOutcome.Tunnel;
}

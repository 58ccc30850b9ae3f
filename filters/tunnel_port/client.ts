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
 * Picks an endpoint of service `s` for `servicePort`: healthy endpoints first, in round-robin
 * order starting at the service's cursor; when none is healthy, the same order over all of them.
 */
function pickEndpoint(config: TunnelConfig, cursors: Cursors, s: i32, out: ClientDecision): bool {
  const mesh = config.mesh;
  const count = mesh.endpointCount(s);
  if (count == 0) return false;
  const start = cursors.take(s, count);
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < count; i++) {
      const e = (start + i) % count;
      const w = mesh.endpointWorkload(s, e);
      if (!tunnelable(mesh, config.localNetwork, w)) continue;
      if (pass == 0 && !mesh.workloadHealthy(w)) continue;
      const target = mesh.targetPort(s, e, out.servicePort);
      if (target <= 0) continue;
      out.workload = w;
      out.targetPort = target;
      out.panic = pass == 1;
      return true;
    }
  }
  return false;
}

/**
 * For a pod-IP destination: prefer the service port the route's cluster declared (an HTTP route
 * may have chosen one of several service ports that share this target), when the mesh agrees
 * that it maps to this target on this pod. Returns whether it was taken.
 */
export function preferServicePort(config: TunnelConfig, out: ClientDecision, servicePort: i32): bool {
  if (out.outcome != ClientOutcome.Tunnel || out.service >= 0 || servicePort <= 0) return false;
  const triple = (<u64>out.workload << 32) | (<u64>servicePort << 16) | <u64>out.targetPort;
  if (!config.podPortTriples.has(triple)) return false;
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
  const key = (<u64>w << 16) | <u64>dst.port;
  if (!config.podServicePort.has(key)) return;
  out.servicePort = config.podServicePort.get(key);
  out.targetPort = dst.port;
  if (!tunnelable(mesh, config.localNetwork, w)) {
    out.outcome = ClientOutcome.NoEndpoint;
    return;
  }
  out.workload = w;
  out.outcome = ClientOutcome.Tunnel;
}

// The decision of problem 3, apart from the host glue: pure lookups on the mesh model.
//   1. service with a waypoint -> a waypoint instance (healthy, same network first, then
//      locality); local -> HBONE to it with :authority VIP:P; remote -> double HBONE through its
//      network's gateway with :authority <hostname>:P at both layers; no usable instance -> error
//      (never the service's endpoints: that would skip the waypoint's policy);
//   2. no waypoint -> an endpoint the same way; local -> HBONE to podIP:15008, :authority
//      podIP:T; remote -> double HBONE as above;
//   3. a gateway that cannot be resolved -> error; a remote instance without one -> error;
//   4. a pod IP never crosses networks.
import { Address, Mesh, RefTarget, Scope, writeAddress } from "../../assembly/mesh";
import { ByteText } from "../../assembly/runtime/text";
import { WaypointConfig } from "./config";

export const HBONE_PORT = 15008;

export enum Outcome {
  /** Single HBONE to a waypoint on this network. */
  HboneWaypoint,
  /** Double HBONE through a gateway to a waypoint on another network. */
  DoubleHboneWaypoint,
  /** Single HBONE to a service endpoint on this network (no waypoint). */
  HboneEndpoint,
  /** Double HBONE through a gateway to a service endpoint on another network. */
  DoubleHboneEndpoint,
  /** A mesh pod dialled by IP on this network. */
  HbonePod,
  /** Not a service or pod of this network's mesh view. */
  Unknown,
  /** A pod of this network without a sidecar (tlsMode disabled): plain TCP, as dialled. */
  PlaintextPod,
  ErrorUnknownWaypoint,
  ErrorNoValidDestination,
  ErrorUnknownGateway,
  ErrorNoEndpoint,
}

const NO_SANS = new ArrayBuffer(0);

export class Decision {
  outcome: Outcome = Outcome.Unknown;
  service: i32 = -1;
  servicePort: i32 = -1;
  /** The chosen waypoint or endpoint workload. */
  instance: i32 = -1;
  /** The gateway workload (double HBONE), -1 otherwise. */
  gateway: i32 = -1;
  /** Where the first TCP connection goes: instance:15008, pod:15008 or gateway:hbone port. */
  readonly nextHop: Address = new Address();
  /** Inner CONNECT authority (single HBONE: the only one), formatted in place. */
  readonly authority: ByteText = new ByteText();
  /** Comma-separated SANs (UTF-8) the (inner) TLS peer must present; shared, do not modify. */
  sans: ArrayBuffer = NO_SANS;
  /** Double HBONE: SANs the gateway must present; shared, do not modify. */
  gatewaySans: ArrayBuffer = NO_SANS;
}

/** Lower is better: network first (always), then the service's locality preference. */
function rank(mesh: Mesh, s: i32, source: i32, candidate: i32): i32 {
  const remote = mesh.workloadNetwork(candidate) != mesh.workloadNetwork(source) ? 1 : 0;
  let locality = 0;
  for (let i = 0, n = mesh.lbPreferenceCount(s); i < n; i++) {
    const scope = mesh.lbPreference(s, i);
    if (scope == Scope.Network) continue;
    if (!mesh.sameScope(scope, source, candidate)) break;
    locality++;
  }
  return remote * 16 + (8 - locality);
}

/** Healthy instances only; the best rank wins, ties go to configuration order. */
function bestOf(mesh: Mesh, s: i32, source: i32, candidates: StaticArray<i32>, count: i32): i32 {
  let best = -1;
  let bestRank = i32.MAX_VALUE;
  for (let i = 0; i < count; i++) {
    const w = unchecked(candidates[i]);
    if (w < 0 || !mesh.workloadHealthy(w)) continue;
    const r = rank(mesh, s, source, w);
    if (r < bestRank) {
      best = w;
      bestRank = r;
    }
  }
  return best;
}

/** Reusable candidate buffer (per root): no allocation per connection below its size. */
export class Scratch {
  candidates: StaticArray<i32> = new StaticArray<i32>(64);
  endpointOf: StaticArray<i32> = new StaticArray<i32>(64);
  ensure(n: i32): void {
    if (n <= this.candidates.length) return;
    this.candidates = new StaticArray<i32>(n);
    this.endpointOf = new StaticArray<i32>(n);
  }
}

/** Candidates = the endpoints of service s that a tunnel can reach (mesh pods or remote proxies). */
function endpointsOf(mesh: Mesh, s: i32, scratch: Scratch): i32 {
  const n = mesh.endpointCount(s);
  scratch.ensure(n);
  let count = 0;
  for (let e = 0; e < n; e++) {
    const w = mesh.endpointWorkload(s, e);
    // A remote proxy workload has no address, only its network's gateway.
    if (w < 0 || (!mesh.workloadIstio(w) && mesh.workloadAddressCount(w) > 0)) continue;
    unchecked((scratch.candidates[count] = w));
    unchecked((scratch.endpointOf[count] = e));
    count++;
  }
  return count;
}

/** Service s's subject alt names (joined once at configure time), else w's own identity. */
function identitiesOf(config: WaypointConfig, s: i32, w: i32): ArrayBuffer {
  const sans = config.serviceSans(s);
  return sans.byteLength > 0 ? sans : config.mesh.workloadIdentityUtf8(w);
}

/**
 * The gateway of `instance`'s network: (workload, next hop, SANs). Returns false (with the error
 * outcome set) when there is none or it cannot be resolved.
 */
function resolveGateway(config: WaypointConfig, instance: i32, scratch: Scratch, out: Decision): bool {
  const mesh = config.mesh;
  const g = mesh.workloadGateway(instance);
  if (g < 0) {
    out.outcome = Outcome.ErrorNoValidDestination;
    return false;
  }
  const port = mesh.refPort(g);
  const target = mesh.refTarget(g);
  const remoteNetwork = mesh.workloadNetwork(instance);
  if (target == RefTarget.Workload) {
    // A gateway workload must be usable: healthy, on the instance's network, addressed.
    const gw = mesh.refIndex(g);
    if (!usableGateway(mesh, gw, remoteNetwork) || !mesh.workloadAddress(gw, 0, out.nextHop)) {
      out.outcome = Outcome.ErrorUnknownGateway;
      return false;
    }
    out.nextHop.port = port;
    out.gateway = gw;
    out.gatewaySans = mesh.workloadIdentityUtf8(gw);
  } else if (target == RefTarget.Service) {
    // A gateway service: one of its healthy instances on the remote network; the HBONE port may
    // be translated by the service's port map.
    // A gateway service: its first usable instance on the remote network (gateways need no
    // sidecar of their own, so tlsMode does not matter here).
    const gs = mesh.refIndex(g);
    let chosen = -1;
    let chosenEndpoint = -1;
    for (let e = 0, n = mesh.endpointCount(gs); e < n; e++) {
      const w = mesh.endpointWorkload(gs, e);
      if (usableGateway(mesh, w, remoteNetwork)) {
        chosen = w;
        chosenEndpoint = e;
        break;
      }
    }
    if (chosen < 0 || !mesh.workloadAddress(chosen, 0, out.nextHop)) {
      out.outcome = Outcome.ErrorUnknownGateway;
      return false;
    }
    const translated = mesh.targetPort(gs, chosenEndpoint, port);
    out.nextHop.port = translated > 0 ? translated : port;
    out.gateway = chosen;
    out.gatewaySans = identitiesOf(config, gs, chosen);
  } else {
    out.outcome = Outcome.ErrorUnknownGateway;
    return false;
  }
  if (out.gatewaySans.byteLength == 0) {
    // A gateway we cannot authenticate is no gateway.
    out.outcome = Outcome.ErrorUnknownGateway;
    return false;
  }
  return true;
}

function usableGateway(mesh: Mesh, w: i32, network: i32): bool {
  return w >= 0 && mesh.workloadHealthy(w) && mesh.workloadNetwork(w) == network && mesh.workloadAddressCount(w) > 0;
}

/** `<hostname>:<port>` into `out`. */
function hostAuthority(config: WaypointConfig, s: i32, port: i32, out: ByteText): void {
  out.clear().buffer(config.serviceHostnameUtf8(s)).byte(0x3a).decimal(<u32>port);
}

function reset(out: Decision): void {
  out.outcome = Outcome.Unknown;
  out.service = -1;
  out.servicePort = -1;
  out.instance = -1;
  out.gateway = -1;
  out.nextHop.clear();
  out.authority.clear();
  out.sans = NO_SANS;
  out.gatewaySans = NO_SANS;
}

export function decide(config: WaypointConfig, dst: Address, scratch: Scratch, out: Decision): void {
  reset(out);
  const mesh = config.mesh;
  const s = mesh.serviceByVip(config.network, dst);
  if (s < 0 || !mesh.exposesPort(s, dst.port)) {
    decidePod(config, dst, out);
    return;
  }
  out.service = s;
  out.servicePort = dst.port;
  const waypoint = mesh.serviceWaypoint(s);
  if (waypoint >= 0) decideWaypoint(config, s, waypoint, dst, scratch, out);
  else decideEndpoint(config, s, scratch, out);
}

function decideWaypoint(config: WaypointConfig, s: i32, r: i32, dst: Address, scratch: Scratch, out: Decision): void {
  const mesh = config.mesh;
  const target = mesh.refTarget(r);
  let instance = -1;
  let waypointService = -1;
  if (target == RefTarget.Service) {
    waypointService = mesh.refIndex(r);
    const count = endpointsOf(mesh, waypointService, scratch);
    // Ranked by the waypoint service's own load-balancing preference, as ztunnel does.
    instance = bestOf(mesh, waypointService, config.source, scratch.candidates, count);
  } else if (target == RefTarget.Workload) {
    const w = mesh.refIndex(r);
    scratch.ensure(1);
    unchecked((scratch.candidates[0] = w));
    instance = bestOf(mesh, s, config.source, scratch.candidates, 1);
  }
  if (instance < 0) {
    out.outcome = Outcome.ErrorUnknownWaypoint; // never the service's endpoints instead
    return;
  }
  out.instance = instance;
  out.sans = waypointService >= 0 ? identitiesOf(config, waypointService, instance) : mesh.workloadIdentityUtf8(instance);
  if (mesh.workloadNetwork(instance) == config.network) {
    if (!mesh.workloadAddress(instance, 0, out.nextHop)) {
      out.outcome = Outcome.ErrorUnknownWaypoint;
      return;
    }
    const port = mesh.refPort(r);
    out.nextHop.port = port > 0 ? port : HBONE_PORT;
    // :authority = VIP:P, the address the application dialled.
    writeAddress(dst, out.authority.clear());
    out.outcome = Outcome.HboneWaypoint;
    return;
  }
  if (!resolveGateway(config, instance, scratch, out)) return;
  hostAuthority(config, s, out.servicePort, out.authority);
  out.outcome = Outcome.DoubleHboneWaypoint;
}

function decideEndpoint(config: WaypointConfig, s: i32, scratch: Scratch, out: Decision): void {
  const mesh = config.mesh;
  const count = endpointsOf(mesh, s, scratch);
  const instance = bestOf(mesh, s, config.source, scratch.candidates, count);
  if (instance < 0) {
    out.outcome = Outcome.ErrorNoEndpoint;
    return;
  }
  out.instance = instance;
  out.sans = identitiesOf(config, s, instance);
  if (mesh.workloadNetwork(instance) == config.network) {
    let e = -1;
    for (let i = 0; i < count; i++) if (unchecked(scratch.candidates[i]) == instance) e = unchecked(scratch.endpointOf[i]);
    const targetPort = mesh.targetPort(s, e, out.servicePort);
    if (targetPort <= 0 || !mesh.workloadAddress(instance, 0, out.nextHop)) {
      out.outcome = Outcome.ErrorNoEndpoint;
      return;
    }
    out.nextHop.port = targetPort;
    writeAddress(out.nextHop, out.authority.clear()); // podIP:T
    out.nextHop.port = HBONE_PORT;
    out.sans = mesh.workloadIdentityUtf8(instance);
    out.outcome = Outcome.HboneEndpoint;
    return;
  }
  if (!resolveGateway(config, instance, scratch, out)) return;
  hostAuthority(config, s, out.servicePort, out.authority);
  out.outcome = Outcome.DoubleHboneEndpoint;
}

function decidePod(config: WaypointConfig, dst: Address, out: Decision): void {
  const mesh = config.mesh;
  // Only this network's pods: a pod IP never crosses a network gateway.
  const w = mesh.workloadByAddress(config.network, dst);
  if (w < 0) return;
  out.instance = w;
  if (!mesh.workloadIstio(w)) {
    out.outcome = Outcome.PlaintextPod;
    return;
  }
  writeAddress(dst, out.authority.clear());
  out.nextHop.copyFrom(dst);
  out.nextHop.port = HBONE_PORT;
  out.sans = mesh.workloadIdentityUtf8(w);
  out.outcome = Outcome.HbonePod;
}

// The decision of problem 3 (docs/problems.md), apart from the host glue: pure lookups on the
// mesh model, rule for rule as ztunnel's outbound build_request (src/proxy/outbound.rs):
//   1. service with a waypoint -> a waypoint instance (healthy, same network first, then
//      locality); local -> HBONE to it with :authority VIP:P; remote -> double HBONE through its
//      network's gateway with :authority <hostname>:P at both layers; no usable instance -> error
//      (never the service's endpoints: that would skip the waypoint's policy);
//   2. no waypoint -> an endpoint the same way; local -> HBONE to podIP:15008, :authority
//      podIP:T; remote -> double HBONE as above;
//   3. a gateway that cannot be resolved -> error; a remote instance without one -> error;
//   4. a pod IP never crosses networks;
//   5. a pod IP whose workload has its own waypoint -> through that waypoint (:authority podIP:port)
//      unless this proxy is that waypoint;
//   6. a VIP on a port the service does not list -> its waypoint (:authority VIP:port as dialled),
//      without one an error (ztunnel: NoHealthyUpstream);
//   7. a local endpoint without HBONE -> plain TCP to podIP:T; a remote one -> double HBONE;
//   8. gateway and waypoint services translate the HBONE port by their port map and must list it;
//   9. the endpoint's address keeps the dialled family.
import { Address, Mesh, RefTarget, writeAddress } from "../../assembly/mesh";
import { ByteText } from "../../assembly/runtime/text";
import { WaypointConfig } from "./config";
import { Decision, HBONE_PORT, Outcome } from "./decision";
import { resolveGateway } from "./gateway";
import { addressLike, bestOf, candidatesOf, innerSansOf, sansOf, Scratch } from "./select";

export { Decision, HBONE_PORT, Outcome, OUTCOME_NAMES, outcomeName } from "./decision";
export { Scratch } from "./select";

/** A waypoint reference's own address (a scratch: one connection at a time per VM). */
const REF_ADDRESS = new Address();

export function decide(config: WaypointConfig, dst: Address, scratch: Scratch, out: Decision): void {
  out.reset();
  if (config.source < 0) {
    out.done(Outcome.ErrorNoLocalWorkload, 0, "the mesh model in force has no workload at localWorkload");
    return;
  }
  const s = config.mesh.serviceByVip(config.network, dst);
  if (s >= 0) decideService(config, s, dst, scratch, out);
  else decidePod(config, dst, scratch, out);
}

function decideService(config: WaypointConfig, s: i32, dst: Address, scratch: Scratch, out: Decision): void {
  const mesh = config.mesh;
  out.service = s;
  out.servicePort = dst.port;
  const listed = mesh.exposesPort(s, dst.port);
  const r = mesh.serviceWaypoint(s);
  if (r >= 0) {
    // Rules 1 and 6: the waypoint takes the connection whatever port was dialled.
    const rule = listed ? 1 : 6;
    if (!chooseWaypoint(config, r, dst, scratch, out, Outcome.ErrorUnknownWaypoint, 1)) return;
    if (mesh.workloadNetwork(out.instance) == config.network) {
      writeAddress(dst, out.authority.clear()); // VIP:P, as dialled
      out.done(Outcome.HboneWaypoint, rule, "HBONE to the service's waypoint on this network");
      return;
    }
    if (!resolveGateway(config, out.instance, dst, out)) return;
    hostAuthority(config, s, dst.port, out.authority);
    out.done(Outcome.DoubleHboneWaypoint, rule, "double HBONE through the gateway to the service's waypoint on another network");
    return;
  }
  if (!listed) {
    out.fail(Outcome.ErrorUnlistedPort, 6, "the service does not list the dialled port and has no waypoint");
    return;
  }
  decideEndpoint(config, s, dst, scratch, out);
}

/**
 * The waypoint instance behind reference r into out (instance; for a local one nextHop and sans,
 * for a remote one the inner sans). False with `error` and the rule set when there is none.
 */
function chooseWaypoint(config: WaypointConfig, r: i32, dst: Address, scratch: Scratch, out: Decision, error: Outcome, rule: i32): bool {
  const mesh = config.mesh;
  const target = mesh.refTarget(r);
  const port = mesh.refPort(r);
  // A waypoint named by address is dialled at that address, one named by hostname in the
  // family the application dialled (ztunnel's fetch_waypoint).
  const byAddress = mesh.refAddress(r, REF_ADDRESS);
  const like = byAddress ? REF_ADDRESS : dst;
  if (target == RefTarget.Service) {
    const ws = mesh.refIndex(r);
    // Rule 8: the waypoint service's port map translates the HBONE port; it must list it.
    if (!mesh.exposesPort(ws, port)) return out.fail(Outcome.ErrorUnknownWaypointPort, 8, "unknown waypoint: the waypoint service does not list the waypoint's HBONE port");
    const count = candidatesOf(config, ws, true, scratch);
    // Ranked by the waypoint service's own load-balancing preference, as ztunnel does.
    const best = bestOf(mesh, ws, config.source, scratch, count);
    if (best < 0) return out.fail(error, rule, "the waypoint has no healthy instance");
    const w = unchecked(scratch.candidates[best]);
    out.instance = w;
    if (mesh.workloadNetwork(w) != config.network) {
      innerSansOf(config, ws, w, out.sans);
    } else {
      const hop = mesh.targetPort(ws, unchecked(scratch.endpointOf[best]), port);
      if (hop <= 0 || !addressLike(mesh, w, like, out.nextHop)) return out.fail(error, rule, "the waypoint instance has no address");
      out.nextHop.port = hop;
      // The waypoint service's SANs or the instance's own identity (workload_and_services_san).
      sansOf(config, ws, w, out.sans);
    }
  } else if (target == RefTarget.Workload && byAddress) {
    const w = mesh.refIndex(r);
    if (!mesh.workloadHealthy(w)) return out.fail(error, rule, "the waypoint workload is unhealthy");
    out.instance = w;
    if (mesh.workloadNetwork(w) != config.network) {
      innerSansOf(config, -1, w, out.sans);
    } else {
      out.nextHop.copyFrom(REF_ADDRESS);
      out.nextHop.port = port;
      sansOf(config, -1, w, out.sans);
    }
  } else {
    return out.fail(error, rule, "the waypoint reference names nothing in this configuration");
  }
  if (out.sans.length == 0) return out.fail(error, rule, "the waypoint has no identity to verify");
  return true;
}

function decideEndpoint(config: WaypointConfig, s: i32, dst: Address, scratch: Scratch, out: Decision): void {
  const mesh = config.mesh;
  const count = candidatesOf(config, s, false, scratch);
  const best = bestOf(mesh, s, config.source, scratch, count);
  if (best < 0) {
    out.fail(Outcome.ErrorNoEndpoint, 2, "the service has no healthy reachable endpoint");
    return;
  }
  const w = unchecked(scratch.candidates[best]);
  out.instance = w;
  if (mesh.workloadNetwork(w) == config.network) {
    const targetPort = mesh.targetPort(s, unchecked(scratch.endpointOf[best]), dst.port);
    // Rule 9: an IPv6 VIP reaches the endpoint's IPv6 address when it has one.
    if (targetPort <= 0 || !addressLike(mesh, w, dst, out.nextHop)) {
      out.fail(Outcome.ErrorNoEndpoint, 2, "the chosen endpoint has no address");
      return;
    }
    out.nextHop.port = targetPort;
    if (!mesh.workloadIstio(w)) {
      out.done(Outcome.PlaintextEndpoint, 7, "plain TCP to a local endpoint without HBONE");
      return;
    }
    writeAddress(out.nextHop, out.authority.clear()); // podIP:T
    out.nextHop.port = HBONE_PORT;
    sansOf(config, s, w, out.sans);
    out.done(Outcome.HboneEndpoint, 2, "HBONE to a local endpoint");
    return;
  }
  // Rule 7: a remote endpoint is reached through its gateway whatever its own tunnel support.
  const rule = mesh.workloadIstio(w) ? 2 : 7;
  if (innerSansOf(config, s, w, out.sans).length == 0) {
    out.fail(Outcome.ErrorNoValidDestination, rule, "the remote endpoint has no identity to verify at the inner hop");
    return;
  }
  if (!resolveGateway(config, w, dst, out)) return;
  hostAuthority(config, s, dst.port, out.authority);
  out.done(Outcome.DoubleHboneEndpoint, rule, "double HBONE through the gateway to an endpoint on another network");
}

function decidePod(config: WaypointConfig, dst: Address, scratch: Scratch, out: Decision): void {
  const mesh = config.mesh;
  // Rule 4: only this network's pods; a pod IP never crosses a network gateway.
  const w = mesh.workloadByAddress(config.network, dst);
  if (w < 0) {
    out.done(Outcome.Unknown, 0, "not in this network's mesh view");
    return;
  }
  out.instance = w;
  const r = mesh.workloadWaypoint(w);
  if (r >= 0 && !sourceIsWaypoint(mesh, r, config.source)) {
    if (!chooseWaypoint(config, r, dst, scratch, out, Outcome.ErrorUnknownPodWaypoint, 5)) return;
    if (mesh.workloadNetwork(out.instance) != config.network) {
      out.nextHop.clear();
      out.sans.clear();
      out.fail(Outcome.ErrorUnknownPodWaypoint, 4, "the pod's waypoint has no healthy instance on this network (a pod IP never crosses networks)");
      return;
    }
    writeAddress(dst, out.authority.clear()); // podIP:port, as dialled
    out.done(Outcome.HbonePodWaypoint, 5, "HBONE to the pod's own waypoint");
    return;
  }
  if (!mesh.workloadIstio(w)) {
    out.done(Outcome.PlaintextPod, 4, "plain TCP to a pod without a sidecar");
    return;
  }
  writeAddress(dst, out.authority.clear());
  out.nextHop.copyFrom(dst);
  out.nextHop.port = HBONE_PORT;
  sansOf(config, -1, w, out.sans);
  out.done(Outcome.HbonePod, r >= 0 ? 5 : 4, r >= 0 ? "HBONE to the pod: this proxy is its waypoint" : "HBONE to a pod of this network");
}

/**
 * Whether this proxy's workload is (an instance of) waypoint reference r: then a pod's own
 * waypoint is not traversed a second time (ztunnel's check_from_waypoint).
 */
function sourceIsWaypoint(mesh: Mesh, r: i32, source: i32): bool {
  const target = mesh.refTarget(r);
  const index = mesh.refIndex(r);
  if (target == RefTarget.Workload) return index == source;
  if (target != RefTarget.Service) return false;
  for (let e = 0, n = mesh.endpointCount(index); e < n; e++) if (mesh.endpointWorkload(index, e) == source) return true;
  return false;
}

/** `<hostname>:<port>` into `out`. */
function hostAuthority(config: WaypointConfig, s: i32, port: i32, out: ByteText): void {
  out.clear().buffer(config.serviceHostnameUtf8(s)).byte(0x3a).decimal(<u32>port);
}

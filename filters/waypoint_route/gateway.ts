// Rule 3 and 8 of waypoint_route: the east-west gateway of a remote instance's network, as
// ztunnel's fetch_network_gateway resolves it. See README.md.
import { Address, Mesh, RefTarget } from "../../assembly/mesh";
import { WaypointConfig } from "./config";
import { Decision, Outcome } from "./decision";
import { addressLike, sansOf } from "./select";

/** The reference's address (a scratch: filters run one connection at a time per VM). */
const REF_ADDRESS = new Address();

function usableGateway(mesh: Mesh, w: i32, network: i32): bool {
  return w >= 0 && mesh.workloadHealthy(w) && mesh.workloadNetwork(w) == network && mesh.workloadAddressCount(w) > 0;
}

/**
 * The gateway of `instance`'s network into out (gateway, nextHop = gateway IP:HBONE port,
 * gatewaySans). `dst` is what the application dialled: a gateway named by hostname is dialled in
 * its family (rule 9), one named by address at that address, as ztunnel does. Returns false with
 * the error outcome, rule and reason set when there is none or it cannot be used.
 */
export function resolveGateway(config: WaypointConfig, instance: i32, dst: Address, out: Decision): bool {
  const mesh = config.mesh;
  const g = mesh.workloadGateway(instance);
  if (g < 0) return out.fail(Outcome.ErrorNoValidDestination, 1, "the chosen instance is on another network and has no networkGateway");
  const port = mesh.refPort(g);
  const target = mesh.refTarget(g);
  const remoteNetwork = mesh.workloadNetwork(instance);
  // An address reference is dialled at that address; a hostname adapts to the caller's family.
  const byAddress = mesh.refAddress(g, REF_ADDRESS);
  const like = byAddress ? REF_ADDRESS : dst;
  if (target == RefTarget.Workload && byAddress) {
    const gw = mesh.refIndex(g);
    if (!usableGateway(mesh, gw, remoteNetwork)) return out.fail(Outcome.ErrorUnknownGateway, 3, "the gateway workload is unhealthy, unaddressed or not on the instance's network");
    // The reference's own address: one of gw's, as the reference resolved to gw by it.
    out.nextHop.copyFrom(REF_ADDRESS);
    out.nextHop.port = port;
    out.gateway = gw;
    sansOf(config, -1, gw, out.gatewaySans);
  } else if (target == RefTarget.Service) {
    const gs = mesh.refIndex(g);
    // Rule 8: the gateway service must expose the HBONE port; its port map translates it.
    if (!mesh.exposesPort(gs, port)) return out.fail(Outcome.ErrorUnknownGatewayPort, 8, "unknown gateway: the gateway service does not expose the gateway's HBONE port");
    // Its first usable instance on the remote network (gateways need no sidecar of their own,
    // so tlsMode does not matter here).
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
    if (chosen < 0) return out.fail(Outcome.ErrorUnknownGateway, 3, "the gateway service has no healthy addressed instance on the instance's network");
    const translated = mesh.targetPort(gs, chosenEndpoint, port);
    if (!addressLike(mesh, chosen, like, out.nextHop) || translated <= 0) return out.fail(Outcome.ErrorUnknownGateway, 3, "the gateway instance has no address");
    out.nextHop.port = translated;
    out.gateway = chosen;
    sansOf(config, gs, chosen, out.gatewaySans);
  } else {
    return out.fail(Outcome.ErrorUnknownGateway, 3, "the networkGateway reference names nothing in this configuration");
  }
  // A gateway we cannot authenticate is no gateway.
  if (out.gatewaySans.length == 0) return out.fail(Outcome.ErrorUnknownGateway, 3, "the gateway has no identity to verify");
  return true;
}

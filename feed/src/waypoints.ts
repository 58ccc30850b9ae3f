// Waypoints and network gateways from Gateway API Gateways, as istiod's ambient index builds
// them (pilot/pkg/serviceregistry/ambient/waypoints.go and networks.go).
import type { ClusterObjects } from "./cluster_objects.js";
import type { Gateway, KubeObject, LabelSelector, Namespace } from "./kube_objects.js";
import { labelsOf, selectorMatches } from "./kube_objects.js";
import {
  CLASS_EAST_WEST,
  CLASS_REMOTE,
  LABEL_GATEWAY_NAME,
  LABEL_NETWORK,
  LABEL_USE_WAYPOINT,
  LABEL_WAYPOINT_FOR,
  gatewayServiceAccount,
  useWaypoint,
} from "./istio_rules.js";
import { HBONE_PORT, type GatewayRef, type WaypointRef } from "./schema.js";
import { isIP } from "node:net";

export interface Waypoint {
  namespace: string;
  name: string;
  ref: WaypointRef;
  trafficType: string;
  from: string;
  selector?: LabelSelector;
}

/**
 * gatewayToWaypointTransform + makeWaypoint: any Gateway with status addresses is a waypoint
 * candidate (istiod does not check the class here; a use-waypoint label names it). Traffic type:
 * the Gateway's istio.io/waypoint-for label, else its GatewayClass's, else "service".
 * Address: getGatewayAddress (a Hostname status address first, else an IP; HBONE port 15008,
 * which istiod hard-codes). Attachment: makeAllowedRoutes (the HBONE 15008 listener's
 * allowedRoutes.namespaces, default Same).
 */
export function waypointOf(gw: Gateway, classes: ClusterObjects["gatewayClasses"]): Waypoint | undefined {
  const addresses = gw.status?.addresses ?? [];
  if (addresses.length === 0) return undefined;
  const hostname = addresses.find((a) => a.type === "Hostname" && a.value);
  const ip = addresses.find((a) => (a.type ?? "IPAddress") === "IPAddress" && a.value && isIP(a.value) !== 0);
  const ref: WaypointRef | undefined = hostname
    ? { hostname: hostname.value, port: HBONE_PORT }
    : ip
      ? { address: ip.value, port: HBONE_PORT }
      : undefined;
  if (!ref) return undefined;
  const cls = classes.get(gw.spec?.gatewayClassName ?? "");
  const trafficType = labelsOf(gw)[LABEL_WAYPOINT_FOR] ?? labelsOf(cls)[LABEL_WAYPOINT_FOR] ?? "service";
  const hbone = (gw.spec?.listeners ?? []).find((l) => l.protocol === "HBONE" && l.port === HBONE_PORT);
  const namespaces = hbone?.allowedRoutes?.namespaces;
  return {
    namespace: gw.metadata?.namespace ?? "",
    name: gw.metadata?.name ?? "",
    ref,
    trafficType,
    from: namespaces?.from ?? "Same",
    selector: namespaces?.selector,
  };
}

/** Waypoint.AllowsAttachmentFromNamespace. */
function allowsAttachment(w: Waypoint, namespace: string, ns: Namespace | undefined): boolean {
  if (w.from === "All") return true;
  if (w.from === "Selector") return selectorMatches(w.selector, labelsOf(ns));
  return w.namespace === namespace;
}

export class ClusterWaypoints {
  private readonly byKey = new Map<string, Waypoint>();

  constructor(private readonly objects: ClusterObjects) {
    for (const [key, gw] of objects.gateways) {
      const w = waypointOf(gw, objects.gatewayClasses);
      if (w) this.byKey.set(key, w);
    }
  }

  /**
   * fetchWaypointForTarget: the object's own use-waypoint label (with "none" opting out), else
   * its namespace's. A label naming a Gateway that is not (yet) a waypoint gives none (istiod
   * reports WaypointIsNotReady and binds nothing).
   */
  private forTarget(o: KubeObject): Waypoint | undefined {
    const namespace = o.metadata?.namespace ?? "";
    const own = useWaypoint(o, namespace);
    if (own && "none" in own) return undefined;
    const ns = this.objects.namespaces.get(namespace);
    const named = own ?? (ns ? useWaypoint(ns, namespace) : undefined);
    if (!named || "none" in named) return undefined;
    const w = this.byKey.get(`${named.namespace}/${named.name}`);
    if (!w) return undefined;
    return allowsAttachment(w, namespace, ns) ? w : undefined;
  }

  /** fetchWaypointForService: only waypoints for service (or all) traffic. */
  forService(o: KubeObject): WaypointRef | undefined {
    const w = this.forTarget(o);
    return w && (w.trafficType === "service" || w.trafficType === "all") ? w.ref : undefined;
  }

  /**
   * computeWaypoint: a waypoint's own instance (label gateway.networking.k8s.io/gateway-name
   * naming a waypoint) gets none; otherwise fetchWaypointForWorkload: only waypoints for
   * workload (or all) traffic.
   */
  forWorkload(o: KubeObject): WaypointRef | undefined {
    const namespace = o.metadata?.namespace ?? "";
    const instanceOf = labelsOf(o)[LABEL_GATEWAY_NAME];
    if (instanceOf && this.byKey.has(`${namespace}/${instanceOf}`)) return undefined;
    const w = this.forTarget(o);
    return w && (w.trafficType === "workload" || w.trafficType === "all") ? w.ref : undefined;
  }

  /** Whether any object's label could name a waypoint (for the README's gap counter). */
  static labelled(o: KubeObject): boolean {
    return labelsOf(o)[LABEL_USE_WAYPOINT] !== undefined;
  }
}

export interface NetworkGateway {
  network: string;
  clusterId: string;
  source: string;
  address: string;
  port: number;
  serviceAccount: { namespace: string; name: string };
}

/**
 * Network gateways (networks.go): a Gateway labelled topology.istio.io/network, of class
 * istio-east-west (remoteK8sGatewayToNetworkGateways: status addresses, an HBONE listener) or
 * istio-remote (localK8sGatewayToNetworkGateways / the sidecar registry's
 * handleGatewayResource: status, else spec, addresses), IP or Hostname addresses, port = the
 * HBONE listener's port.
 */
export function networkGatewaysOf(clusterId: string, gw: Gateway): NetworkGateway[] {
  const network = labelsOf(gw)[LABEL_NETWORK];
  const cls = gw.spec?.gatewayClassName;
  if (!network || (cls !== CLASS_EAST_WEST && cls !== CLASS_REMOTE)) return [];
  const hbone = (gw.spec?.listeners ?? []).find((l) => l.protocol === "HBONE" && typeof l.port === "number");
  if (!hbone) return [];
  const status = gw.status?.addresses ?? [];
  const addresses = status.length > 0 || cls === CLASS_EAST_WEST ? status : (gw.spec?.addresses ?? []);
  const out: NetworkGateway[] = [];
  for (const a of addresses) {
    const type = a.type ?? "IPAddress";
    if (!a.value || (type !== "IPAddress" && type !== "Hostname")) continue;
    if (type === "IPAddress" && isIP(a.value) === 0) continue;
    out.push({
      network,
      clusterId,
      source: `${gw.metadata?.namespace ?? ""}/${gw.metadata?.name ?? ""}`,
      address: a.value,
      port: hbone.port as number,
      serviceAccount: { namespace: gw.metadata?.namespace ?? "", name: gatewayServiceAccount(gw) },
    });
  }
  return out;
}

/** The model's reference to a gateway (getNetworkGatewayAddress). */
export function gatewayRef(g: NetworkGateway): GatewayRef {
  return isIP(g.address) !== 0 ? { address: g.address, hboneMtlsPort: g.port } : { hostname: g.address, hboneMtlsPort: g.port };
}

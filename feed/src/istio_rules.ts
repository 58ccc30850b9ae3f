// One function per rule istiod applies to a Kubernetes object, each naming the istiod function
// it follows (istio/istio master of 2026-08; paths relative to that repository). The README's
// field table points here.
import type { Gateway, KubeObject, Node, Pod, Service, ServicePort } from "./kube_objects.js";
import { labelsOf } from "./kube_objects.js";
import { GAP, type GapReason } from "./gaps.js";
import type { LoadBalancing } from "./schema.js";

export const LABEL_TLS_MODE = "security.istio.io/tlsMode";
export const LABEL_NETWORK = "topology.istio.io/network";
export const LABEL_SUBZONE = "topology.istio.io/subzone";
export const LABEL_REGION = "topology.kubernetes.io/region";
export const LABEL_ZONE = "topology.kubernetes.io/zone";
export const LABEL_LOCALITY = "istio-locality";
export const LABEL_USE_WAYPOINT = "istio.io/use-waypoint";
export const LABEL_USE_WAYPOINT_NAMESPACE = "istio.io/use-waypoint-namespace";
export const LABEL_WAYPOINT_FOR = "istio.io/waypoint-for";
export const LABEL_GATEWAY_NAME = "gateway.networking.k8s.io/gateway-name";
export const LABEL_GATEWAY_MANAGED = "gateway.istio.io/managed";
export const LABEL_SERVICE_NAME = "kubernetes.io/service-name";
export const ANNOTATION_GATEWAY_SA = "gateway.istio.io/service-account";
export const ANNOTATION_SERVICE_ACCOUNTS = "alpha.istio.io/kubernetes-serviceaccounts";
export const ANNOTATION_CANONICAL_SERVICE_ACCOUNTS = "alpha.istio.io/canonical-serviceaccounts";
export const ANNOTATION_TRAFFIC_DISTRIBUTION = "networking.istio.io/traffic-distribution";

export const CLASS_WAYPOINT = "istio-waypoint";
export const CLASS_EAST_WEST = "istio-east-west";
export const CLASS_REMOTE = "istio-remote";
const MANAGED_MESH = "istio.io-mesh-controller";
const MANAGED_EAST_WEST = "istio.io-eastwest-controller";

/**
 * Workload uid: pilot/pkg/serviceregistry/ambient/helpers.go generatePodUID
 * (`<cluster>//Pod/<ns>/<name>`).
 */
export function podUid(clusterId: string, pod: Pod): string {
  return `${clusterId}//Pod/${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`;
}

/**
 * uid of a workload built from an EndpointSlice endpoint with no Pod behind it:
 * ambient/workloads.go endpointSlicesBuilder.
 */
export function sliceEndpointUid(clusterId: string, namespace: string, slice: string, ip: string): string {
  return `${clusterId}/discovery.k8s.io/EndpointSlice/${namespace}/${slice}/${ip}`;
}

/** ambient/workloads.go gatewayUID. */
export function gatewayUid(network: string, address: string, port: number): string {
  return `NetworkGateway/${network}/${address}/${port}`;
}

/**
 * SPIFFE identity: pkg/spiffe MustGenSpiffeURI as used by kube.SecureNamingSAN
 * (`spiffe://<td>/ns/<ns>/sa/<sa>`). An empty service account is what the ServiceAccount
 * admission plugin turns into "default" on every real cluster.
 */
export function spiffeIdentity(trustDomain: string, namespace: string, serviceAccount: string | undefined): string {
  return `spiffe://${trustDomain}/ns/${namespace}/sa/${serviceAccount || "default"}`;
}

/**
 * tlsMode: pilot/pkg/model GetTLSModeFromEndpointLabels: `istio` only when the label says
 * exactly `istio`, otherwise disabled.
 */
export function tlsModeOf(labels: Record<string, string>): "istio" | "disabled" {
  return labels[LABEL_TLS_MODE] === "istio" ? "istio" : "disabled";
}

/**
 * Terminal pods are not workloads: pkg/kube CheckPodTerminal (phase Succeeded or Failed).
 */
export function podTerminal(pod: Pod): boolean {
  const phase = pod.status?.phase;
  return phase === "Succeeded" || phase === "Failed";
}

/** ambient/workloads.go getPodIPs: status.podIPs, else status.podIP. */
export function podIps(pod: Pod): string[] {
  const list = (pod.status?.podIPs ?? []).map((p) => p.ip ?? "").filter((ip) => ip !== "");
  if (list.length === 0 && pod.status?.podIP) list.push(pod.status.podIP);
  return list;
}

/**
 * Health: ambient/workloads.go podWorkloadBuilder: HEALTHY when the pod is Ready
 * (ambient IsPodReady: condition Ready=True) and not being deleted.
 */
export function podHealthy(pod: Pod): boolean {
  const ready = (pod.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
  return ready && !pod.metadata?.deletionTimestamp;
}

/**
 * Node locality: ambient/nodes.go nodeLocality (region, zone, subzone labels).
 */
export function nodeLocality(node: Node | undefined): { region: string; zone: string; subzone: string } | undefined {
  if (!node) return undefined;
  const l = labelsOf(node);
  const region = l[LABEL_REGION] ?? "";
  const zone = l[LABEL_ZONE] ?? "";
  const subzone = l[LABEL_SUBZONE] ?? "";
  return region || zone || subzone ? { region, zone, subzone } : undefined;
}

/**
 * Pod locality: the sidecar registry's getPodLocality
 * (pilot/pkg/serviceregistry/kube/controller/controller.go): the pod's `istio-locality` label
 * (`region.zone.subzone`, labelutil.SplitLocalityLabel) wins over its node's labels
 * (ambient/workloads.go getPodLocality reads the node only).
 *
 * The model's locality is `region[/zone[/subzone]]` with no empty part, so a locality is cut
 * at its first empty part (istiod would keep `/zone`); README lists it.
 */
export function podLocality(pod: Pod, node: Node | undefined): string {
  const label = labelsOf(pod)[LABEL_LOCALITY];
  const parts = label
    ? label.split(/[./]/)
    : (() => {
        const n = nodeLocality(node);
        return n ? [n.region, n.zone, n.subzone] : [];
      })();
  const kept: string[] = [];
  for (const part of parts.slice(0, 3)) {
    if (!part) break;
    kept.push(part);
  }
  return kept.join("/");
}

/**
 * A pod's network: its cluster's, as istiod's ambient index decides (ambient/workloads.go
 * podWorkloadBuilder takes the cluster's network, networkGetter, for every pod): 1. the system
 * namespace's topology.istio.io/network label, 2. meshNetworks fromRegistry naming the
 * cluster, 3. meshNetworks fromCidr containing the pod's IP
 * (networkManager.networkFromMeshNetworks). The pod's own topology.istio.io/network label is
 * not read: anyone who can create a pod can set it, and it would place the pod in another
 * network's view, where its address competes with that network's pods (the sidecar registry's
 * Controller.Network reads it first; the ambient index ignores it, and so does the feed). Other
 * namespaces' network labels are read by neither.
 */
export function podNetwork(systemNamespaceNetwork: string, registryNetwork: string, cidrNetwork: () => string): string {
  return systemNamespaceNetwork || registryNetwork || cidrNetwork();
}

/** Service hostname: pkg/kube ServiceHostname (`<name>.<ns>.svc.<domainSuffix>`). */
export function serviceHostname(service: Service, domainSuffix: string): string {
  return `${service.metadata?.name ?? ""}.${service.metadata?.namespace ?? ""}.svc.${domainSuffix}`;
}

/** Service VIPs: ambient/services.go getVIPs (clusterIPs, else clusterIP; never "None"). */
export function serviceVips(service: Service): string[] {
  const spec = service.spec ?? {};
  const ips = spec.clusterIPs && spec.clusterIPs.length > 0 ? spec.clusterIPs : [spec.clusterIP ?? ""];
  return ips.filter((ip) => ip !== "" && ip !== "None");
}

/** Headless: kube/conversion.go ConvertService (clusterIP None → Resolution Passthrough). */
export function serviceHeadless(service: Service): boolean {
  return service.spec?.clusterIP === "None";
}

/** TCP ports only: the filters are L4 TCP (ambient endpointSlicesBuilder: "We only support TCP for now"). */
export function tcpPorts(service: Service): ServicePort[] {
  return (service.spec?.ports ?? []).filter((p) => (p.protocol ?? "TCP") === "TCP" && typeof p.port === "number");
}

/**
 * A service port's own target port: ambient/services.go constructService (TargetPort.IntVal;
 * Kubernetes defaults an unset targetPort to the port). Named ports give undefined: they are
 * resolved per endpoint (constructServices / endpointSlicesBuilder).
 */
export function numericTargetPort(port: ServicePort): number | undefined {
  if (port.targetPort === undefined || port.targetPort === null || port.targetPort === "") return port.port;
  if (typeof port.targetPort === "number") return port.targetPort;
  return /^\d+$/.test(port.targetPort) ? Number(port.targetPort) : undefined;
}

/**
 * Load balancing: ambient/services.go constructService: internalTrafficPolicy Local → NODE
 * strict; trafficDistribution (spec, else the service's or namespace's
 * networking.istio.io/traffic-distribution annotation, model.GetTrafficDistribution):
 * PreferSameZone/PreferClose → [network, region, zone] failover; PreferSameNode → [network,
 * region, zone, subzone, node] failover. The model has no NODE scope: PreferSameNode keeps the
 * four scopes it has, internalTrafficPolicy Local is reported (README). Nothing set: the model's
 * default (all four scopes, failover), where istiod sends no preference.
 */
export function serviceLoadBalancing(service: Service, nsAnnotations: Record<string, string>): { lb?: LoadBalancing; gap?: GapReason } {
  if (service.spec?.internalTrafficPolicy === "Local") return { gap: GAP.internalTrafficLocal };
  const td =
    service.spec?.trafficDistribution ||
    service.metadata?.annotations?.[ANNOTATION_TRAFFIC_DISTRIBUTION] ||
    nsAnnotations[ANNOTATION_TRAFFIC_DISTRIBUTION] ||
    "";
  if (td === "PreferClose" || td === "PreferSameZone") return { lb: { routingPreference: ["network", "region", "zone"], mode: "failover" } };
  if (td === "PreferSameNode") return { lb: { routingPreference: ["network", "region", "zone", "subzone"], mode: "failover" }, gap: GAP.preferSameNode };
  return {};
}

/**
 * `istio.io/use-waypoint` on an object: ambient/waypoints.go GetUseWaypoint: "none" opts out;
 * `istio.io/use-waypoint-namespace` overrides the namespace.
 */
export function useWaypoint(object: KubeObject, defaultNamespace: string): { none: true } | { namespace: string; name: string } | undefined {
  const labels = labelsOf(object);
  const name = labels[LABEL_USE_WAYPOINT];
  if (name === undefined) return undefined;
  if (name === "none") return { none: true };
  return { namespace: labels[LABEL_USE_WAYPOINT_NAMESPACE] ?? defaultNamespace, name };
}

/** Services of waypoints and east-west gateways never get a waypoint: ambient/waypoints.go fetchWaypointForService. */
export function serviceCannotHaveWaypoint(service: Service): boolean {
  const managed = labelsOf(service)[LABEL_GATEWAY_MANAGED];
  return managed === MANAGED_MESH || managed === MANAGED_EAST_WEST;
}

/** Gateway service account: pilot/pkg/serviceregistry/kube/conversion.go GatewaySA. */
export function gatewayServiceAccount(gw: Gateway): string {
  const annotated = gw.metadata?.annotations?.[ANNOTATION_GATEWAY_SA];
  if (annotated) return annotated;
  if (gw.spec?.gatewayClassName === CLASS_REMOTE) return `${gw.metadata?.name ?? ""}-${CLASS_REMOTE}`;
  return gw.metadata?.name ?? "";
}

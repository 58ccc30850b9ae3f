// Plain builders for the objects the feed tests create. No kubelet, scheduler or controllers run
// behind the API server, so whatever they would fill in is the test's to write: pod status (phase,
// IPs, conditions) through the status subresource, nodeName at creation, EndpointSlices by hand
// (or by the real endpointslice controller when the cluster runs kube-controller-manager).
import type { V1EndpointSlice, V1Namespace, V1Node, V1Pod, V1PodCondition, V1PodStatus, V1Service, V1ServicePort } from "@kubernetes/client-node";

type Labels = Record<string, string>;

export interface NamespaceInput {
  name: string;
  labels?: Labels;
  annotations?: Labels;
}

export function namespaceObject(input: NamespaceInput): V1Namespace {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name: input.name, labels: input.labels, annotations: input.annotations } };
}

export interface NodeInput {
  name: string;
  /** topology.kubernetes.io/region */
  region?: string;
  /** topology.kubernetes.io/zone */
  zone?: string;
  /** topology.istio.io/subzone */
  subzone?: string;
  labels?: Labels;
  /** status.addresses InternalIP (set through the status subresource). */
  internalIP?: string;
}

export function nodeObject(input: NodeInput): V1Node {
  const labels: Labels = { "kubernetes.io/hostname": input.name, ...input.labels };
  if (input.region !== undefined) labels["topology.kubernetes.io/region"] = input.region;
  if (input.zone !== undefined) labels["topology.kubernetes.io/zone"] = input.zone;
  if (input.subzone !== undefined) labels["topology.istio.io/subzone"] = input.subzone;
  return { apiVersion: "v1", kind: "Node", metadata: { name: input.name, labels } };
}

export interface ContainerPortInput {
  name?: string;
  containerPort: number;
  protocol?: "TCP" | "UDP" | "SCTP";
}

export interface PodInput {
  namespace: string;
  name: string;
  labels?: Labels;
  annotations?: Labels;
  /**
   * Default "default": the ServiceAccount admission plugin (disabled here: no controller makes the
   * default ServiceAccount) would otherwise have filled it in, and every real pod has one.
   */
  serviceAccountName?: string;
  /** Set at creation, as the scheduler would bind it. */
  nodeName?: string;
  ports?: ContainerPortInput[];
  hostNetwork?: boolean;
  image?: string;
}

export function podObject(input: PodInput): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { namespace: input.namespace, name: input.name, labels: input.labels, annotations: input.annotations },
    spec: {
      serviceAccountName: input.serviceAccountName ?? "default",
      nodeName: input.nodeName,
      hostNetwork: input.hostNetwork,
      containers: [{ name: "app", image: input.image ?? "registry.invalid/app:test", ports: input.ports }],
    },
  };
}

export interface PodStatusInput {
  /** Default "Running". */
  phase?: "Pending" | "Running" | "Succeeded" | "Failed";
  /** The Ready and ContainersReady conditions. Default true when Running. */
  ready?: boolean;
  podIP?: string;
  /** Default [podIP]; the API server requires podIPs[0] == podIP. */
  podIPs?: string[];
  hostIP?: string;
}

/** The status a kubelet would report for a pod in this state. */
export function podStatus(input: PodStatusInput, now = new Date()): V1PodStatus {
  const phase = input.phase ?? "Running";
  const ready = input.ready ?? phase === "Running";
  const condition = (type: string, status: boolean): V1PodCondition => ({ type, status: status ? "True" : "False", lastTransitionTime: now });
  const podIPs = input.podIPs ?? (input.podIP ? [input.podIP] : undefined);
  return {
    phase,
    podIP: input.podIP,
    podIPs: podIPs?.map((ip) => ({ ip })),
    hostIP: input.hostIP,
    hostIPs: input.hostIP ? [{ ip: input.hostIP }] : undefined,
    startTime: phase === "Pending" ? undefined : now,
    conditions: [
      condition("PodScheduled", true),
      condition("Initialized", phase !== "Pending"),
      condition("ContainersReady", ready),
      condition("Ready", ready),
    ],
  };
}

export interface ServicePortInput {
  name?: string;
  port: number;
  /** A number or a container port name. Default: port. */
  targetPort?: number | string;
  protocol?: "TCP" | "UDP" | "SCTP";
  appProtocol?: string;
}

export interface ServiceInput {
  namespace: string;
  name: string;
  selector?: Labels;
  ports: ServicePortInput[];
  labels?: Labels;
  annotations?: Labels;
  /** clusterIP: None. */
  headless?: boolean;
  type?: "ClusterIP" | "NodePort" | "LoadBalancer";
}

export function serviceObject(input: ServiceInput): V1Service {
  const ports: V1ServicePort[] = input.ports.map((port) => ({
    name: port.name,
    port: port.port,
    targetPort: (port.targetPort ?? port.port) as unknown as V1ServicePort["targetPort"],
    protocol: port.protocol ?? "TCP",
    appProtocol: port.appProtocol,
  }));
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { namespace: input.namespace, name: input.name, labels: input.labels, annotations: input.annotations },
    spec: { selector: input.selector, ports, type: input.type, clusterIP: input.headless ? "None" : undefined },
  };
}

export interface EndpointInput {
  addresses: string[];
  /** conditions.ready; default true. */
  ready?: boolean;
  /** conditions.serving; default: ready. */
  serving?: boolean;
  terminating?: boolean;
  nodeName?: string;
  zone?: string;
  hostname?: string;
  /** targetRef to the pod (namespace: the slice's). */
  pod?: { name: string; uid?: string };
}

export interface EndpointSliceInput {
  namespace: string;
  name: string;
  /** kubernetes.io/service-name */
  service: string;
  addressType?: "IPv4" | "IPv6" | "FQDN";
  /** The resolved target ports, named like the service's ports. */
  ports: Array<{ name?: string; port: number; protocol?: "TCP" | "UDP" | "SCTP"; appProtocol?: string }>;
  endpoints: EndpointInput[];
  labels?: Labels;
}

export function endpointSliceObject(input: EndpointSliceInput): V1EndpointSlice {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      namespace: input.namespace,
      name: input.name,
      labels: { "kubernetes.io/service-name": input.service, "endpointslice.kubernetes.io/managed-by": "kube-harness.test", ...input.labels },
    },
    addressType: input.addressType ?? "IPv4",
    ports: input.ports.map((port) => ({ name: port.name ?? "", port: port.port, protocol: port.protocol ?? "TCP", appProtocol: port.appProtocol })),
    endpoints: input.endpoints.map((endpoint) => {
      const ready = endpoint.ready ?? true;
      return {
        addresses: endpoint.addresses,
        conditions: { ready, serving: endpoint.serving ?? ready, terminating: endpoint.terminating ?? false },
        nodeName: endpoint.nodeName,
        zone: endpoint.zone,
        hostname: endpoint.hostname,
        targetRef: endpoint.pod ? { kind: "Pod", namespace: input.namespace, name: endpoint.pod.name, uid: endpoint.pod.uid } : undefined,
      };
    }),
  };
}

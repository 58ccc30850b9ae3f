// Kubernetes objects as the API server returns them, for the feed's unit tests.
import type { EndpointSlice, Gateway, Namespace, Node, Pod, Service } from "../../feed/src/kube_objects.js";

export interface PodOptions {
  ip?: string | string[];
  sa?: string;
  labels?: Record<string, string>;
  ready?: boolean;
  node?: string;
  created?: string;
  deleting?: boolean;
  phase?: string;
  hostNetwork?: boolean;
}

export function pod(namespace: string, name: string, o: PodOptions = {}): Pod {
  const ips = o.ip === undefined ? [] : Array.isArray(o.ip) ? o.ip : [o.ip];
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      namespace,
      name,
      labels: o.labels ?? { "security.istio.io/tlsMode": "istio" },
      creationTimestamp: o.created ?? "2026-01-01T00:00:00Z",
      ...(o.deleting && { deletionTimestamp: "2026-01-02T00:00:00Z" }),
    },
    spec: { serviceAccountName: o.sa ?? name, ...(o.node && { nodeName: o.node }), ...(o.hostNetwork && { hostNetwork: true }) },
    status: {
      phase: o.phase ?? "Running",
      ...(ips.length > 0 && { podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) }),
      conditions: [{ type: "Ready", status: o.ready === false ? "False" : "True" }],
    },
  };
}

export function service(namespace: string, name: string, ports: Array<{ name?: string; port: number; targetPort?: number | string }>, o: { clusterIP?: string; labels?: Record<string, string>; annotations?: Record<string, string> } = {}): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { namespace, name, labels: o.labels ?? {}, annotations: o.annotations ?? {} },
    spec: { clusterIP: o.clusterIP ?? "10.96.0.10", clusterIPs: o.clusterIP === "None" ? ["None"] : [o.clusterIP ?? "10.96.0.10"], ports: ports.map((p) => ({ protocol: "TCP", ...p })), selector: { app: name } },
  };
}

export function slice(namespace: string, serviceName: string, name: string, ports: Array<{ name?: string; port: number }>, endpoints: Array<{ ip: string; pod?: string; ready?: boolean }>): EndpointSlice {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { namespace, name, labels: { "kubernetes.io/service-name": serviceName } },
    addressType: endpoints[0]?.ip.includes(":") ? "IPv6" : "IPv4",
    ports: ports.map((p) => ({ name: p.name ?? "", port: p.port, protocol: "TCP" })),
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      conditions: { ready: e.ready ?? true },
      ...(e.pod && { targetRef: { kind: "Pod", namespace, name: e.pod } }),
    })),
  };
}

export function namespace(name: string, labels: Record<string, string> = {}): Namespace {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name, labels } };
}

export function node(name: string, region: string, zone: string, subzone?: string): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels: { "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone, ...(subzone && { "topology.istio.io/subzone": subzone }) } },
  };
}

export function waypointGateway(namespace: string, name: string, o: { trafficType?: string; hostname?: string; ip?: string } = {}): Gateway {
  return {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    metadata: { namespace, name, labels: o.trafficType ? { "istio.io/waypoint-for": o.trafficType } : {} },
    spec: { gatewayClassName: "istio-waypoint", listeners: [{ name: "mesh", port: 15008, protocol: "HBONE" }] },
    status: {
      addresses: [
        ...(o.ip ? [{ type: "IPAddress", value: o.ip }] : []),
        ...(o.ip && !o.hostname ? [] : [{ type: "Hostname", value: o.hostname ?? `${name}.${namespace}.svc.cluster.local` }]),
      ],
    },
  };
}

export function eastWestGateway(namespace: string, name: string, network: string, address: string, port = 15008): Gateway {
  return {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    metadata: { namespace, name, labels: { "topology.istio.io/network": network } },
    spec: { gatewayClassName: "istio-east-west", listeners: [{ name: "mesh", port, protocol: "HBONE", tls: { mode: "Terminate" } }] },
    status: { addresses: [{ type: "IPAddress", value: address }] },
  };
}

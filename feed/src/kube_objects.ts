// The parts of the Kubernetes and Gateway API objects the feed reads, as structural types. They
// match both the JSON the API server sends and the objects @kubernetes/client-node builds from
// it (same camelCase names; timestamps may be Date or string), so fixtures in tests are plain
// JSON and the watch layer passes the client's objects straight through.

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  creationTimestamp?: Date | string;
  deletionTimestamp?: Date | string;
  resourceVersion?: string;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

export interface Pod extends KubeObject {
  spec?: { serviceAccountName?: string; nodeName?: string; hostNetwork?: boolean };
  status?: {
    phase?: string;
    podIP?: string;
    podIPs?: Array<{ ip?: string }>;
    conditions?: Array<{ type?: string; status?: string }>;
  };
}

export interface ServicePort {
  name?: string;
  port?: number;
  protocol?: string;
  /** A number or a container port name; unset means the same as `port`. */
  targetPort?: number | string;
  appProtocol?: string;
}

export interface Service extends KubeObject {
  spec?: {
    type?: string;
    clusterIP?: string;
    clusterIPs?: string[];
    ports?: ServicePort[];
    selector?: Record<string, string>;
    trafficDistribution?: string;
    internalTrafficPolicy?: string;
    publishNotReadyAddresses?: boolean;
  };
}

export interface EndpointSlice extends KubeObject {
  addressType?: string;
  endpoints?: Array<{
    addresses?: string[];
    conditions?: { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null };
    targetRef?: { kind?: string; name?: string; namespace?: string; uid?: string };
    nodeName?: string;
    zone?: string;
  }>;
  ports?: Array<{ name?: string | null; port?: number | null; protocol?: string | null }>;
}

export type Namespace = KubeObject;

export type Node = KubeObject;

export interface Gateway extends KubeObject {
  spec?: {
    gatewayClassName?: string;
    addresses?: Array<{ type?: string; value?: string }>;
    listeners?: Array<{
      name?: string;
      port?: number;
      protocol?: string;
      tls?: { mode?: string };
      allowedRoutes?: { namespaces?: { from?: string; selector?: LabelSelector } };
    }>;
  };
  status?: { addresses?: Array<{ type?: string; value?: string }> };
}

export type GatewayClass = KubeObject;

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key?: string; operator?: string; values?: string[] }>;
}

/** Namespace/name, or the name alone for cluster-scoped objects. */
export function objectKey(o: KubeObject): string {
  const m = o.metadata ?? {};
  return m.namespace ? `${m.namespace}/${m.name ?? ""}` : (m.name ?? "");
}

export function labelsOf(o: KubeObject | undefined): Record<string, string> {
  return o?.metadata?.labels ?? {};
}

/** Kubernetes label-selector semantics (matchLabels AND every matchExpression). */
export function selectorMatches(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const key = e.key ?? "";
    const values = e.values ?? [];
    const has = Object.hasOwn(labels, key);
    switch (e.operator) {
      case "In": if (!has || !values.includes(labels[key])) return false; break;
      case "NotIn": if (has && values.includes(labels[key])) return false; break;
      case "Exists": if (!has) return false; break;
      case "DoesNotExist": if (has) return false; break;
      default: return false;
    }
  }
  return true;
}

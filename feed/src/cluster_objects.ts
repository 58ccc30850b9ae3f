// What the feed knows about one cluster: the objects its informers hold, keyed by namespace/name
// (cluster-scoped objects by name). The watch layer fills it; compute.ts reads it.
import type { EndpointSlice, Gateway, GatewayClass, KubeObject, Namespace, Node, Pod, Service } from "./kube_objects.js";
import { objectKey } from "./kube_objects.js";

export const KINDS = ["pods", "services", "endpointSlices", "namespaces", "nodes", "gateways", "gatewayClasses"] as const;
export type Kind = (typeof KINDS)[number];

export class ClusterObjects {
  readonly pods = new Map<string, Pod>();
  readonly services = new Map<string, Service>();
  readonly endpointSlices = new Map<string, EndpointSlice>();
  readonly namespaces = new Map<string, Namespace>();
  readonly nodes = new Map<string, Node>();
  readonly gateways = new Map<string, Gateway>();
  readonly gatewayClasses = new Map<string, GatewayClass>();
  /** Bumped on every change, so a render can tell whether anything moved. */
  generation = 0;

  constructor(readonly clusterId: string) {}

  map(kind: Kind): Map<string, KubeObject> {
    return this[kind] as Map<string, KubeObject>;
  }

  upsert(kind: Kind, object: KubeObject): void {
    this.map(kind).set(objectKey(object), object);
    this.generation++;
  }

  remove(kind: Kind, object: KubeObject): void {
    if (this.map(kind).delete(objectKey(object))) this.generation++;
  }

  /** Replaces a kind's whole content (an informer's relist). */
  replace(kind: Kind, objects: KubeObject[]): void {
    const m = this.map(kind);
    m.clear();
    for (const o of objects) m.set(objectKey(o), o);
    this.generation++;
  }

  count(): Record<Kind, number> {
    return Object.fromEntries(KINDS.map((k) => [k, this.map(k).size])) as Record<Kind, number>;
  }
}

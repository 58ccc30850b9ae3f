// What the feed knows about one cluster: the objects its informers hold, keyed by namespace/name
// (cluster-scoped objects by name). The watch layer fills it; compute.ts reads it. Every change
// also notes the object's key as dirty, so compute.ts can recompute only what a change touches.
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
  /** Keys changed since the last takeDirty(), by kind; `all` after a kind's wholesale replace. */
  private dirty = new Map<Kind, Set<string>>();
  private dirtyAll = false;

  constructor(readonly clusterId: string) {}

  private mark(kind: Kind, key: string): void {
    let set = this.dirty.get(kind);
    if (!set) this.dirty.set(kind, (set = new Set()));
    set.add(key);
  }

  /** What changed since the last call (and forgets it). */
  takeDirty(): { all: boolean; keys: Map<Kind, Set<string>> } {
    const out = { all: this.dirtyAll, keys: this.dirty };
    this.dirty = new Map();
    this.dirtyAll = false;
    return out;
  }

  map(kind: Kind): Map<string, KubeObject> {
    return this[kind] as Map<string, KubeObject>;
  }

  upsert(kind: Kind, object: KubeObject): void {
    const key = objectKey(object);
    this.map(kind).set(key, object);
    this.mark(kind, key);
    this.generation++;
  }

  remove(kind: Kind, object: KubeObject): void {
    const key = objectKey(object);
    if (this.map(kind).delete(key)) {
      this.mark(kind, key);
      this.generation++;
    }
  }

  /** Replaces a kind's whole content (an informer's relist). */
  replace(kind: Kind, objects: KubeObject[]): void {
    const m = this.map(kind);
    m.clear();
    for (const o of objects) m.set(objectKey(o), o);
    this.dirtyAll = true;
    this.generation++;
  }

  count(): Record<Kind, number> {
    return Object.fromEntries(KINDS.map((k) => [k, this.map(k).size])) as Record<Kind, number>;
  }
}

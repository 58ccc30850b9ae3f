// The incremental compute's bookkeeping (compute.ts): per cluster, what a pod's or a service's
// computation needs besides the object itself, and the reverse indexes that say what a change
// touches (slices by service and by pod, pods by node), plus the signatures that tell a node or
// namespace update that changes nothing the model reads from one that does.
import { isIP } from "node:net";
import type { ClusterObjects } from "./cluster_objects.js";
import type { EndpointSlice, KubeObject } from "./kube_objects.js";
import { labelsOf } from "./kube_objects.js";
import { LABEL_REGION, LABEL_SERVICE_NAME, LABEL_SUBZONE, LABEL_ZONE } from "./istio_rules.js";
import type { ClusterWaypoints } from "./waypoints.js";

/** What the feed last read from an EndpointSlice: its service and the pods it names. */
export interface SliceIndex {
  service?: string;
  pods: string[];
  /** Pods this slice says are not ready (an IPv4/IPv6 slice, an endpoint with an address). */
  notReady?: Set<string>;
}

/**
 * Per cluster: what a pod's or a service's computation needs besides the object itself
 * (waypoints, networks, east-west gateways: rebuilt on a full compute), and the reverse
 * indexes that say what a change touches (slices by service and by pod, pods by node).
 */
export interface ClusterState {
  c: ClusterObjects;
  waypoints: ClusterWaypoints;
  systemNetwork: string;
  registryNetwork: string;
  network: string;
  eastWest: Set<string>;
  slices: Map<string, SliceIndex>;
  podSlices: SetIndex;
  serviceSlices: SetIndex;
  nodePods: SetIndex;
  podNode: Map<string, string>;
  nodeSignatures: Map<string, string>;
  namespaceSignatures: Map<string, string>;
}

/**
 * A reverse index whose keys mostly have one member (a pod is in one slice, a service has one
 * slice): the member itself until a second one comes, then a Set. At 100k pods a Set per pod
 * is ~150 bytes each; a key with one member costs only its map entry.
 */
export type SetIndex = Map<string, string | Set<string>>;

const NONE: readonly string[] = [];

export function addTo(index: SetIndex, key: string, value: string): void {
  const held = index.get(key);
  if (held === undefined) index.set(key, value);
  else if (typeof held === "string") {
    if (held !== value) index.set(key, new Set([held, value]));
  } else held.add(value);
}

export function removeFrom(index: SetIndex, key: string, value: string): void {
  const held = index.get(key);
  if (held === undefined) return;
  if (typeof held === "string") {
    if (held === value) index.delete(key);
    return;
  }
  held.delete(value);
  if (held.size === 1) index.set(key, held.values().next().value as string);
  else if (held.size === 0) index.delete(key);
}

/** The members of `key` (none when absent). */
export function membersOf(index: SetIndex, key: string): Iterable<string> {
  const held = index.get(key);
  return held === undefined ? NONE : typeof held === "string" ? [held] : held;
}

/**
 * A slice names only pods of its own namespace: a Service selects pods in its namespace (the
 * EndpointSlice controller never writes another), and istiod's ambient index finds a pod's
 * services in the pod's namespace. An endpoint naming another namespace's pod is ignored (no
 * membership, no say on that pod's health).
 */
export function sameNamespace(targetNamespace: string | undefined, sliceNamespace: string): boolean {
  return targetNamespace === undefined || targetNamespace === "" || targetNamespace === sliceNamespace;
}

export function sliceIndexOf(slice: EndpointSlice | undefined): SliceIndex | undefined {
  if (!slice) return undefined;
  const namespace = slice.metadata?.namespace ?? "";
  const name = labelsOf(slice)[LABEL_SERVICE_NAME];
  const pods: string[] = [];
  let notReady: Set<string> | undefined;
  const ipFamily = slice.addressType === "IPv4" || slice.addressType === "IPv6";
  for (const ep of slice.endpoints ?? []) {
    if (ep.targetRef?.kind !== "Pod" || !sameNamespace(ep.targetRef.namespace, namespace)) continue;
    const key = `${namespace}/${ep.targetRef.name ?? ""}`;
    pods.push(key);
    if (ipFamily && ep.conditions?.ready === false && (ep.addresses ?? []).some((a) => isIP(a) !== 0)) (notReady ??= new Set()).add(key);
  }
  return { ...(name && { service: `${namespace}/${name}` }), pods, ...(notReady && { notReady }) };
}

/** What of a node the model reads (its locality labels): other updates (status) change nothing. */
export function nodeSignature(node: KubeObject | undefined): string {
  if (!node) return "";
  const l = labelsOf(node);
  return `${l[LABEL_REGION] ?? ""}\n${l[LABEL_ZONE] ?? ""}\n${l[LABEL_SUBZONE] ?? ""}`;
}

/** What of a namespace the model reads: labels and annotations. */
export function namespaceSignature(ns: KubeObject | undefined): string {
  return ns ? JSON.stringify([ns.metadata?.labels ?? {}, ns.metadata?.annotations ?? {}]) : "";
}


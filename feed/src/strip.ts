// What the feed keeps of an object it receives: a new, small plain object with exactly the
// fields compute*.ts, view.ts, istio_rules.ts and waypoints.ts read (the structural types in
// kube_objects.ts), built when the object arrives, before anything stores it. istiod does the
// same with an informer transform (it drops managedFields and more). A pod as the API server
// sends it carries managedFields, containers, volumes, container statuses and annotations:
// kilobytes the model never reads, kept once per pod in the informer's cache otherwise.
//
// resourceVersion stays: the informer compares it to skip updates it already holds.
// Texts that repeat across objects (namespaces, label keys and values, service accounts, node
// names, phases, zones, condition texts) are interned (intern.ts), and the pieces most pods
// share whole (the Ready condition list, an endpoint's conditions) are one shared, read-only
// object each: nothing downstream writes to a stripped object.
// Annotations are kept only for the keys the model reads, per kind; labels whole (selectors
// and waypoint/network rules read any label), except on nodes (only locality is read).
import type { Kind } from "./cluster_objects.js";
import {
  ANNOTATION_CANONICAL_SERVICE_ACCOUNTS,
  ANNOTATION_GATEWAY_SA,
  ANNOTATION_SERVICE_ACCOUNTS,
  ANNOTATION_TRAFFIC_DISTRIBUTION,
  LABEL_REGION,
  LABEL_SUBZONE,
  LABEL_ZONE,
} from "./istio_rules.js";
import { Interner } from "./intern.js";
import type { EndpointSlice, Gateway, KubeObject, LabelSelector, ObjectMeta, Pod, Service } from "./kube_objects.js";

/** The texts stripped objects share (bounded: intern.ts). */
const texts = new Interner();

/** The annotations each kind's rules read (every other annotation is dropped). */
const ANNOTATIONS_READ: Record<Kind, readonly string[]> = {
  pods: [],
  services: [ANNOTATION_SERVICE_ACCOUNTS, ANNOTATION_CANONICAL_SERVICE_ACCOUNTS, ANNOTATION_TRAFFIC_DISTRIBUTION],
  endpointSlices: [],
  namespaces: [ANNOTATION_TRAFFIC_DISTRIBUTION],
  nodes: [],
  gateways: [ANNOTATION_GATEWAY_SA],
  gatewayClasses: [],
};

const NODE_LABELS_READ = [LABEL_REGION, LABEL_ZONE, LABEL_SUBZONE];

type Loose = Record<string, unknown>;

function record(v: unknown): Record<string, string> | undefined {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, string>) : undefined;
}

function pickKeys(from: Record<string, string> | undefined, keys: readonly string[]): Record<string, string> | undefined {
  if (!from) return undefined;
  let out: Record<string, string> | undefined;
  for (const k of keys) if (Object.hasOwn(from, k)) (out ??= {})[k] = texts.of(from[k]);
  return out;
}

/**
 * Label sets by content: the pods of one workload carry the same labels, so they share one
 * read-only object (bounded like the texts; a set seen again after a clear is a new object).
 * A set whose text passes LABEL_SET_MAX_CHARS is not shared (typical sets are a few hundred
 * characters), so the table holds at most ~16k × 4k characters of keys.
 */
const LABEL_SETS_KEPT = 16_384;
const LABEL_SET_MAX_CHARS = 4096;
const labelSets = new Map<string, Record<string, string>>();

/** A string map with its keys and values interned, shared with every object carrying the same map. */
function internedMap(from: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!from) return undefined;
  const keys = Object.keys(from);
  // Each key and value prefixed by its length: equal texts iff equal maps (in order), whatever
  // characters they hold.
  let id = "";
  let shareable = true;
  for (const k of keys) {
    const v = from[k];
    if (typeof v !== "string" || id.length > LABEL_SET_MAX_CHARS) {
      shareable = false;
      break;
    }
    id += `${k.length}:${k}${v.length}:${v}`;
  }
  if (id.length > LABEL_SET_MAX_CHARS) shareable = false;
  const kept = shareable ? labelSets.get(id) : undefined;
  if (kept) return kept;
  const out: Record<string, string> = {};
  for (const k of keys) out[texts.of(k)] = texts.of(from[k]);
  // (A map with a value that is not text, from a broken object, is never shared.)
  if (!shareable) return out;
  if (labelSets.size >= LABEL_SETS_KEPT) labelSets.clear();
  labelSets.set(id, out);
  return out;
}

/** Copies the defined values of `source` under `keys` (absent and undefined stay absent), interning those under `shared`. */
function copy<T extends object>(source: Loose | undefined, keys: readonly string[], shared: readonly string[] = []): T | undefined {
  if (!source || typeof source !== "object") return undefined;
  const out: Loose = {};
  for (const k of keys) if (source[k] !== undefined) out[k] = shared.includes(k) ? texts.of(source[k]) : source[k];
  return out as T;
}

function list<T>(v: unknown, each: (item: Loose) => T): T[] | undefined {
  return Array.isArray(v) ? v.map((item) => each((item ?? {}) as Loose)) : undefined;
}

/**
 * Creation times as the API's text, one instance per second seen recently (pods created together
 * share it). The client library's typed lists give a Date, ~100 bytes per object; a watch gives
 * the text. Only the instant is read (compute.ts), which both forms keep.
 */
const times = new Interner(4096);

function timestamp(t: unknown): string {
  if (t instanceof Date) {
    const ms = t.getTime();
    // The API's form (RFC 3339, seconds): 2026-01-01T00:00:00Z.
    return Number.isFinite(ms) ? times.of(ms % 1000 === 0 ? `${t.toISOString().slice(0, 19)}Z` : t.toISOString()) : "";
  }
  return times.of(t as string);
}

function meta(kind: Kind, m: Loose | undefined): ObjectMeta | undefined {
  if (!m) return undefined;
  const out: ObjectMeta = {};
  if (m.name !== undefined) out.name = m.name as string;
  if (m.namespace !== undefined) out.namespace = texts.of(m.namespace as string);
  if (m.resourceVersion !== undefined) out.resourceVersion = m.resourceVersion as string;
  if (m.creationTimestamp !== undefined) out.creationTimestamp = timestamp(m.creationTimestamp);
  if (m.deletionTimestamp !== undefined) out.deletionTimestamp = m.deletionTimestamp as string;
  const labels = kind === "nodes" ? pickKeys(record(m.labels), NODE_LABELS_READ) : internedMap(record(m.labels));
  if (labels) out.labels = labels;
  const annotations = pickKeys(record(m.annotations), ANNOTATIONS_READ[kind]);
  if (annotations) out.annotations = annotations;
  return out;
}

function base(kind: Kind, o: Loose): KubeObject {
  const out: KubeObject = {};
  const m = meta(kind, o.metadata as Loose | undefined);
  if (m) out.metadata = m;
  return out;
}

/**
 * The Ready condition lists almost every pod has, one shared instance per status (read-only):
 * a list, an object and two strings per pod otherwise.
 */
const READY_CONDITIONS = new Map<unknown, Array<{ type?: string; status?: string }>>(["True", "False", "Unknown"].map((status) => [status, [{ type: "Ready", status }]]));

function pod(o: Loose): Pod {
  const out: Pod = base("pods", o);
  const spec = copy<NonNullable<Pod["spec"]>>(o.spec as Loose, ["serviceAccountName", "nodeName", "hostNetwork"], ["serviceAccountName", "nodeName"]);
  if (spec) out.spec = spec;
  const s = o.status as Loose | undefined;
  if (s && typeof s === "object") {
    const status: NonNullable<Pod["status"]> = copy(s, ["phase", "podIP"], ["phase"]) ?? {};
    // The usual first entry repeats podIP: one string for both. A list of exactly podIP is
    // dropped, since the rules read podIP when podIPs is absent (istio_rules.ts podIps).
    const podIPs = list(s.podIPs, (p) => (p.ip !== undefined && p.ip === status.podIP ? { ip: status.podIP } : (copy<{ ip?: string }>(p, ["ip"]) ?? {})));
    const onlyPodIp = podIPs?.length === 1 && podIPs[0].ip === status.podIP && Object.keys(podIPs[0]).length === 1;
    if (podIPs && !onlyPodIp) status.podIPs = podIPs;
    // Only the Ready condition is read (istio_rules.ts podHealthy).
    const conditions = (s.conditions as Loose[] | undefined)?.filter?.((c) => c?.type === "Ready").map((c) => copy<{ type?: string; status?: string }>(c, ["type", "status"], ["type", "status"]) ?? {});
    if (conditions) status.conditions = sharedReady(conditions);
    out.status = status;
  }
  return out;
}

/** The shared list for the usual [{ type: "Ready", status }], else `conditions` itself. */
function sharedReady(conditions: Array<{ type?: string; status?: string }>): Array<{ type?: string; status?: string }> {
  if (conditions.length !== 1) return conditions;
  const c = conditions[0];
  const keys = Object.keys(c);
  if (keys.length !== 2 || c.type !== "Ready") return conditions;
  return READY_CONDITIONS.get(c.status) ?? conditions;
}

function service(o: Loose): Service {
  const out: Service = base("services", o);
  const spec = copy<NonNullable<Service["spec"]>>(o.spec as Loose, ["type", "clusterIP", "clusterIPs", "selector", "trafficDistribution", "internalTrafficPolicy", "publishNotReadyAddresses"]);
  if (spec) {
    const ports = list((o.spec as Loose).ports, (p) => copy(p, ["name", "port", "protocol", "targetPort", "appProtocol"]) ?? {});
    if (ports) spec.ports = ports;
    out.spec = spec;
  }
  return out;
}

type EndpointConditions = { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null };

/** Each combination of an endpoint's three conditions, one shared read-only object (built when first seen). */
const ENDPOINT_CONDITIONS = new Map<string, EndpointConditions>();
const CONDITION_KEYS = ["ready", "serving", "terminating"] as const;

function endpointConditions(c: Loose | undefined): EndpointConditions | undefined {
  if (!c || typeof c !== "object") return undefined;
  let key = "";
  for (const k of CONDITION_KEYS) {
    const v = c[k];
    // Only the values the API gives are shared; anything else is copied as it is.
    if (v !== undefined && v !== null && v !== true && v !== false) return copy<EndpointConditions>(c, CONDITION_KEYS);
    key += v === undefined ? "u" : v === null ? "n" : v ? "t" : "f";
  }
  let shared = ENDPOINT_CONDITIONS.get(key);
  if (!shared) ENDPOINT_CONDITIONS.set(key, (shared = copy<EndpointConditions>(c, CONDITION_KEYS)!));
  return shared;
}

function endpointSlice(o: Loose): EndpointSlice {
  const out: EndpointSlice = base("endpointSlices", o);
  if (o.addressType !== undefined) out.addressType = o.addressType as string;
  const endpoints = list(o.endpoints, (e) => {
    const ep: NonNullable<EndpointSlice["endpoints"]>[number] = copy(e, ["addresses", "nodeName", "zone"], ["nodeName", "zone"]) ?? {};
    const conditions = endpointConditions(e.conditions as Loose | undefined);
    if (conditions) ep.conditions = conditions;
    const targetRef = copy<{ kind?: string; name?: string; namespace?: string; uid?: string }>(e.targetRef as Loose, ["kind", "name", "namespace"], ["kind", "namespace"]);
    if (targetRef) ep.targetRef = targetRef;
    return ep;
  });
  if (endpoints) out.endpoints = endpoints;
  const ports = list(o.ports, (p) => copy(p, ["name", "port", "protocol"]) ?? {});
  if (ports) out.ports = ports;
  return out;
}

function selector(s: Loose | undefined): LabelSelector | undefined {
  if (!s || typeof s !== "object") return undefined;
  const out: LabelSelector = {};
  if (s.matchLabels !== undefined) out.matchLabels = s.matchLabels as Record<string, string>;
  const expressions = list(s.matchExpressions, (e) => copy<{ key?: string; operator?: string; values?: string[] }>(e, ["key", "operator", "values"]) ?? {});
  if (expressions) out.matchExpressions = expressions;
  return out;
}

function gateway(o: Loose): Gateway {
  const out: Gateway = base("gateways", o);
  const s = o.spec as Loose | undefined;
  const address = (a: Loose) => copy<{ type?: string; value?: string }>(a, ["type", "value"]) ?? {};
  if (s && typeof s === "object") {
    const spec: NonNullable<Gateway["spec"]> = copy(s, ["gatewayClassName"]) ?? {};
    const addresses = list(s.addresses, address);
    if (addresses) spec.addresses = addresses;
    const listeners = list(s.listeners, (l) => {
      const listener: NonNullable<NonNullable<Gateway["spec"]>["listeners"]>[number] = copy(l, ["name", "port", "protocol"]) ?? {};
      const tls = copy<{ mode?: string }>(l.tls as Loose, ["mode"]);
      if (tls) listener.tls = tls;
      const routes = l.allowedRoutes as Loose | undefined;
      if (routes && typeof routes === "object") {
        const ns = routes.namespaces as Loose | undefined;
        listener.allowedRoutes = ns && typeof ns === "object" ? { namespaces: { ...copy<{ from?: string }>(ns, ["from"]), ...(ns.selector !== undefined && { selector: selector(ns.selector as Loose) }) } } : {};
      }
      return listener;
    });
    if (listeners) spec.listeners = listeners;
    out.spec = spec;
  }
  const addresses = list((o.status as Loose | undefined)?.addresses, address);
  if (addresses) out.status = { addresses };
  return out;
}

/**
 * A new object holding only what the model reads of `o` (a `kind` as the API server, the
 * client library or a file gives it). Never throws: missing or odd fields come out missing.
 */
export function stripObject(kind: Kind, o: object): KubeObject {
  const loose = o as Loose;
  switch (kind) {
    case "pods": return pod(loose);
    case "services": return service(loose);
    case "endpointSlices": return endpointSlice(loose);
    case "gateways": return gateway(loose);
    case "namespaces":
    case "nodes":
    case "gatewayClasses":
      return base(kind, loose);
  }
}

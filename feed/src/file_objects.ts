// One file of a file source (file_source.ts) turned into the objects ClusterObjects holds: its
// YAML documents (or a `kind: List`'s items), each mapped by `apiVersion`/`kind` to a kind of
// ClusterObjects, and checked field by field on the fields the feed reads (kube_objects.ts), as
// the API server would have checked them: compute.ts trusts their types. The whole file is
// refused on the first problem, with one line naming the document and the field.
import { isIP } from "node:net";
import { parseAllDocuments } from "yaml";
import type { Kind } from "./cluster_objects.js";
import { objectKey, type KubeObject } from "./kube_objects.js";
import { stripObject } from "./strip.js";

export interface FileObject {
  kind: Kind;
  /** objectKey: namespace/name, or the name of a cluster-scoped object. */
  key: string;
  object: KubeObject;
}

export type FileRead =
  | { ok: true; objects: FileObject[]; /** documents of kinds the feed does not read: one line each */ skipped: string[] }
  | { ok: false; reason: "yaml" | "object"; error: string };

/** A field's expected shape: a leaf type, an object's fields, or a list of one shape. Null is "absent" everywhere. */
type Shape = "string" | "integer" | "boolean" | "stringMap" | "intOrString" | "ip" | "ipOrNone" | { [field: string]: Shape } | [Shape];

const META: Shape = {
  name: "string",
  namespace: "string",
  uid: "string",
  labels: "stringMap",
  annotations: "stringMap",
  creationTimestamp: "string",
  deletionTimestamp: "string",
  resourceVersion: "string",
};
const SELECTOR: Shape = { matchLabels: "stringMap", matchExpressions: [{ key: "string", operator: "string", values: ["string"] }] };
const GATEWAY_ADDRESSES: Shape = [{ type: "string", value: "string" }];

interface KindRule {
  kind: Kind;
  apiVersions: string[];
  namespaced: boolean;
  shape: { [field: string]: Shape };
}

/** Every kind ClusterObjects holds, by the `kind` field. Gateway API objects in v1 or v1beta1 (same fields). */
const RULES: Record<string, KindRule> = {
  Pod: {
    kind: "pods",
    apiVersions: ["v1"],
    namespaced: true,
    shape: {
      spec: { serviceAccountName: "string", nodeName: "string", hostNetwork: "boolean" },
      status: { phase: "string", podIP: "ip", podIPs: [{ ip: "ip" }], conditions: [{ type: "string", status: "string" }] },
    },
  },
  Service: {
    kind: "services",
    apiVersions: ["v1"],
    namespaced: true,
    shape: {
      spec: {
        type: "string",
        clusterIP: "ipOrNone",
        clusterIPs: ["ipOrNone"],
        ports: [{ name: "string", port: "integer", protocol: "string", targetPort: "intOrString", appProtocol: "string" }],
        selector: "stringMap",
        trafficDistribution: "string",
        internalTrafficPolicy: "string",
        publishNotReadyAddresses: "boolean",
      },
    },
  },
  EndpointSlice: {
    kind: "endpointSlices",
    apiVersions: ["discovery.k8s.io/v1"],
    namespaced: true,
    shape: {
      addressType: "string",
      endpoints: [
        {
          addresses: ["string"],
          conditions: { ready: "boolean", serving: "boolean", terminating: "boolean" },
          targetRef: { kind: "string", name: "string", namespace: "string", uid: "string" },
          nodeName: "string",
          zone: "string",
        },
      ],
      ports: [{ name: "string", port: "integer", protocol: "string" }],
    },
  },
  Namespace: { kind: "namespaces", apiVersions: ["v1"], namespaced: false, shape: {} },
  Node: { kind: "nodes", apiVersions: ["v1"], namespaced: false, shape: {} },
  Gateway: {
    kind: "gateways",
    apiVersions: ["gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v1beta1"],
    namespaced: true,
    shape: {
      spec: {
        gatewayClassName: "string",
        addresses: GATEWAY_ADDRESSES,
        listeners: [{ name: "string", port: "integer", protocol: "string", tls: { mode: "string" }, allowedRoutes: { namespaces: { from: "string", selector: SELECTOR } } }],
      },
      status: { addresses: GATEWAY_ADDRESSES },
    },
  },
  GatewayClass: { kind: "gatewayClasses", apiVersions: ["gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v1beta1"], namespaced: false, shape: {} },
};

/** The first field (dotted path) of `value` that does not have `shape`, with why; undefined when it fits. */
function mismatch(value: unknown, shape: Shape, at: string): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (Array.isArray(shape)) {
    if (!Array.isArray(value)) return `${at}: expected a list`;
    for (let i = 0; i < value.length; i++) {
      const bad = mismatch(value[i], shape[0], `${at}[${i}]`);
      if (bad) return bad;
    }
    return undefined;
  }
  if (typeof shape === "object") {
    if (typeof value !== "object" || Array.isArray(value)) return `${at}: expected an object`;
    for (const [field, inner] of Object.entries(shape)) {
      const bad = mismatch((value as Record<string, unknown>)[field], inner, at ? `${at}.${field}` : field);
      if (bad) return bad;
    }
    return undefined;
  }
  switch (shape) {
    case "string":
      return typeof value === "string" ? undefined : `${at}: expected a string`;
    case "boolean":
      return typeof value === "boolean" ? undefined : `${at}: expected true or false`;
    case "integer":
      return Number.isInteger(value) ? undefined : `${at}: expected an integer`;
    case "intOrString":
      return Number.isInteger(value) || typeof value === "string" ? undefined : `${at}: expected an integer or a name`;
    case "ip":
      return typeof value === "string" && isIP(value) !== 0 ? undefined : `${at}: expected an IP address, not ${JSON.stringify(value)}`;
    case "ipOrNone":
      return typeof value === "string" && (value === "None" || isIP(value) !== 0) ? undefined : `${at}: expected an IP address or None, not ${JSON.stringify(value)}`;
    case "stringMap":
      if (typeof value !== "object" || Array.isArray(value)) return `${at}: expected a map of strings`;
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) if (typeof v !== "string") return `${at}.${k}: expected a string (quote numbers and booleans)`;
      return undefined;
  }
}

/** One object: its kind, checked fields, and a namespace as kubectl would give it ("default"). */
function toFileObject(raw: unknown, where: string): { object?: FileObject; skipped?: string; error?: string } {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return { error: `${where}: expected a Kubernetes object (a map with apiVersion, kind, metadata)` };
  const o = raw as Record<string, unknown>;
  if (typeof o.kind !== "string" || o.kind === "") return { error: `${where}: kind: missing` };
  const rule = RULES[o.kind];
  if (!rule) return { skipped: `${where}: kind ${o.kind} is not one the feed reads (${Object.keys(RULES).join(", ")}); skipped` };
  if (typeof o.apiVersion !== "string" || !rule.apiVersions.includes(o.apiVersion)) {
    return { error: `${where} (${o.kind}): apiVersion: expected ${rule.apiVersions.join(" or ")}, not ${JSON.stringify(o.apiVersion ?? null)}` };
  }
  if (o.metadata !== undefined && o.metadata !== null && (typeof o.metadata !== "object" || Array.isArray(o.metadata))) return { error: `${where} (${o.kind}): metadata: expected an object` };
  const meta = (o.metadata ?? {}) as Record<string, unknown>;
  if (typeof meta.name !== "string" || meta.name === "") return { error: `${where} (${o.kind}): metadata.name: ${meta.name === undefined || meta.name === null ? "missing" : "expected a non-empty string"}` };
  const named = `${where} (${o.kind} ${typeof meta.namespace === "string" && meta.namespace ? `${meta.namespace}/` : ""}${meta.name})`;
  const bad = mismatch(meta, META, "metadata") ?? mismatch(o, rule.shape, "");
  if (bad) return { error: `${named}: ${bad}` };
  if (rule.namespaced) {
    if (!meta.namespace) meta.namespace = "default";
  } else {
    delete meta.namespace;
  }
  o.metadata = meta;
  // Kept as the watch keeps an API server's objects: only what the model reads (strip.ts).
  const object = stripObject(rule.kind, o);
  return { object: { kind: rule.kind, key: objectKey(object), object } };
}

/**
 * Reads a file's text. `yaml` limits alias expansion (maxAliasCount 100), so a small file
 * cannot expand into a huge object; the caller caps the file's size.
 */
export function readObjects(text: string): FileRead {
  const objects: FileObject[] = [];
  const skipped: string[] = [];
  const documents = parseAllDocuments(text);
  const list = Array.isArray(documents) ? documents : [documents];
  for (let d = 0; d < list.length; d++) {
    const doc = list[d];
    const where = `document ${d + 1}`;
    if (doc.errors.length > 0) {
      const e = doc.errors[0];
      // The parser's message ends with a quoted excerpt on the next lines: the first line names the place.
      return { ok: false, reason: "yaml", error: `${where}: ${e.message.split("\n")[0].replace(/:$/, "")}` };
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (error) {
      return { ok: false, reason: "yaml", error: `${where}: ${(error as Error).message.split("\n")[0]}` };
    }
    if (value === null || value === undefined) continue; // an empty document (a trailing ---)
    const v = value as Record<string, unknown>;
    // `kubectl get -o yaml` writes a List of its items.
    const items = typeof v === "object" && v.kind === "List" && Array.isArray(v.items) ? v.items.map((item, i) => ({ item, at: `${where} item ${i + 1}` })) : [{ item: value, at: where }];
    for (const { item, at } of items) {
      const r = toFileObject(item, at);
      if (r.error) return { ok: false, reason: "object", error: r.error };
      if (r.skipped) skipped.push(r.skipped);
      if (r.object) objects.push(r.object);
    }
  }
  return { ok: true, objects, skipped };
}

// The feed's mesh model and istiod's own view of the same Kubernetes objects (mesh.yaml), put
// side by side field by field. istiod's view is the dump of tests/istio/common/istiod_view_test.go
// (scripts/istio-gen.sh): the ambient index's Workloads and Services (workloadapi, what ztunnel
// receives) and the sidecar registry's Services with the IstioEndpoints EDS is built from. The
// feed side is feed/src/compute.ts + view.ts on the same objects, as the controller runs them.
//
// Every difference is one record (source, object, field, the two values); the test
// (tests/istio/feed_vs_istiod.test.ts) holds the named list of the ones that are expected, with
// the reason for each.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { ClusterObjects, type Kind } from "../../feed/src/cluster_objects.js";
import { MeshComputer } from "../../feed/src/compute.js";
import type { ComputedMesh } from "../../feed/src/mesh_model.js";
import type { KubeObject } from "../../feed/src/kube_objects.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import type { MeshSnapshot, Service, Workload } from "../../feed/src/schema.js";
import { viewFor } from "../../feed/src/view.js";
import { REPO_ROOT } from "../support/paths.js";

export const FIXTURE = join(REPO_ROOT, "tests/istiodview/mesh.yaml");
export const NETWORKS = join(REPO_ROOT, "tests/istiodview/mesh-networks.yaml");
/** The fake discovery server's cluster id (constants.DefaultClusterName) and the fixture's network. */
export const CLUSTER = "Kubernetes";
export const LOCAL_NETWORK = "net1";
const TRUST_DOMAIN = "cluster.local";
const DOMAIN_SUFFIX = "cluster.local";

// ------------------------------------------------------------------ the feed's side

const KIND_OF: Record<string, Kind> = {
  Pod: "pods",
  Service: "services",
  EndpointSlice: "endpointSlices",
  Namespace: "namespaces",
  Node: "nodes",
  Gateway: "gateways",
  GatewayClass: "gatewayClasses",
};

/** mesh.yaml as one cluster's informer contents. */
export function fixtureCluster(): ClusterObjects {
  const c = new ClusterObjects(CLUSTER);
  for (const doc of parseAllDocuments(readFileSync(FIXTURE, "utf8"))) {
    const o = doc.toJS() as KubeObject & { kind?: string };
    if (!o) continue;
    const kind = KIND_OF[o.kind ?? ""];
    if (!kind) throw new Error(`${FIXTURE}: kind ${o.kind} is not one the feed watches`);
    c.upsert(kind, o);
  }
  return c;
}

export interface FeedSide {
  mesh: ComputedMesh;
  /** The local network's view: what a filter on net1 is given. */
  view: MeshSnapshot;
}

export function feedSide(): FeedSide {
  const mesh = new MeshComputer({ trustDomain: TRUST_DOMAIN, domainSuffix: DOMAIN_SUFFIX, systemNamespace: "istio-system", networks: NetworkResolver.parse(readFileSync(NETWORKS, "utf8")) }).compute([fixtureCluster()]);
  return { mesh, view: viewFor(mesh, LOCAL_NETWORK).snapshot };
}

// ------------------------------------------------------------------ istiod's side

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface IstiodView {
  cluster: string;
  ambientWorkloads: Json[];
  ambientServices: Json[];
  sidecarServices: Array<{
    hostname: string;
    namespace: string;
    vips: string[];
    resolution: number;
    ports: Array<{ name: string; port: number; protocol: string }>;
    serviceAccounts: string[];
    endpointServiceAccounts: string[];
    endpoints: Array<{
      addresses: string[];
      servicePortName: string;
      endpointPort: number;
      serviceAccount: string;
      network: string;
      locality: string;
      tlsMode: string;
      healthStatus: number;
    }>;
  }>;
}

export function loadIstiodView(era: string): IstiodView {
  const file = join(REPO_ROOT, "build/istio", era, "view/istiod_view.json");
  try {
    return JSON.parse(readFileSync(file, "utf8")) as IstiodView;
  } catch (e) {
    throw new Error(`${file}: ${(e as Error).message} (scripts/istio-gen.sh writes it: npm run test:istio)`);
  }
}

/** workloadapi bytes (base64 in protojson) → the IP's text, as the feed spells it. */
function ipOf(b64: string): string {
  const b = Buffer.from(b64, "base64");
  if (b.length === 4) return [...b].join(".");
  if (b.length === 16) {
    const groups: string[] = [];
    for (let i = 0; i < 16; i += 2) groups.push(b.readUInt16BE(i).toString(16));
    // RFC 5952: the longest run of zero groups (length >= 2) becomes "::".
    let best = -1, bestLen = 0;
    for (let i = 0; i < 8; ) {
      if (groups[i] !== "0") { i++; continue; }
      let j = i;
      while (j < 8 && groups[j] === "0") j++;
      if (j - i > bestLen && j - i >= 2) { best = i; bestLen = j - i; }
      i = j;
    }
    if (best < 0) return groups.join(":");
    return `${groups.slice(0, best).join(":")}::${groups.slice(best + bestLen).join(":")}`;
  }
  return `<${b.length} bytes>`;
}

/** A workloadapi GatewayAddress as the model's reference ({hostname|address, port}). */
function gatewayAddress(g: Json | undefined, portKey: "port" | "hboneMtlsPort"): Json | undefined {
  if (!g) return undefined;
  const port = g.hboneMtlsPort ?? g.hbone_mtls_port ?? 0;
  if (g.hostname) return { hostname: g.hostname.hostname, [portKey]: port };
  if (g.address) return { address: ipOf(g.address.address), [portKey]: port };
  return undefined;
}

const pick = (o: Json, camel: string, snake: string): any => o[camel] ?? o[snake]; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The fields of the model an ambient Workload carries, in the model's spelling. */
function ambientWorkload(w: Json): Json {
  const loc = w.locality as Json | undefined;
  const parts = loc ? [loc.region ?? "", loc.zone ?? "", loc.subzone ?? ""] : [];
  const kept: string[] = [];
  for (const p of parts) {
    if (!p) break;
    kept.push(p);
  }
  const tunnel = pick(w, "tunnelProtocol", "tunnel_protocol");
  return {
    addresses: ((w.addresses ?? []) as string[]).map(ipOf),
    network: w.network || undefined,
    // No service account: no identity (ztunnel's rule for a workload without one).
    identity: pick(w, "serviceAccount", "service_account")
      ? `spiffe://${pick(w, "trustDomain", "trust_domain") || TRUST_DOMAIN}/ns/${w.namespace ?? ""}/sa/${pick(w, "serviceAccount", "service_account")}`
      : undefined,
    // The model's tlsMode istio = the workload takes Istio mTLS (LEGACY_ISTIO_MTLS) or HBONE.
    tlsMode: tunnel === "LEGACY_ISTIO_MTLS" || tunnel === "HBONE" ? "istio" : "disabled",
    healthy: (w.status ?? "HEALTHY") === "HEALTHY",
    locality: kept.join("/") || undefined,
    waypoint: gatewayAddress(w.waypoint, "port"),
    networkGateway: gatewayAddress(pick(w, "networkGateway", "network_gateway"), "hboneMtlsPort"),
  };
}

/** The feed's workload with the model's defaults made explicit (so absent = default compares). */
function feedWorkload(w: Workload): Json {
  return {
    addresses: w.addresses,
    network: w.network || undefined,
    identity: w.identity,
    tlsMode: w.tlsMode ?? "disabled",
    healthy: w.healthy !== false,
    locality: w.locality || undefined,
    waypoint: w.waypoint,
    networkGateway: w.networkGateway,
  };
}

// ------------------------------------------------------------------ the comparison

export interface Difference {
  source: "ambient" | "sidecar";
  /** A workload ("default/reviews-1"), a service ("reviews.default"), or service|endpoint. */
  object: string;
  field: string;
  feed: unknown;
  istiod: unknown;
}

/** Short names: "Kubernetes//Pod/default/x" → "default/x", "x.ns.svc.cluster.local" → "x.ns". */
export function shortUid(uid: string): string {
  return uid.startsWith(`${CLUSTER}//Pod/`) ? uid.slice(`${CLUSTER}//Pod/`.length) : uid;
}
export function shortHost(hostname: string): string {
  return hostname.endsWith(`.svc.${DOMAIN_SUFFIX}`) ? hostname.slice(0, -`.svc.${DOMAIN_SUFFIX}`.length) : hostname;
}

/** Canonical JSON (sorted keys, undefined dropped) so equal values compare equal. */
function canon(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.keys(x).sort().filter((k) => x[k] !== undefined).map((k) => [k, x[k]])) : x,
  ) ?? "undefined";
}

function compareFields(out: Difference[], source: Difference["source"], object: string, feed: Json | undefined, istiod: Json | undefined, fields: string[]): void {
  if (!feed || !istiod) {
    if (feed || istiod) out.push({ source, object, field: "present", feed: !!feed, istiod: !!istiod });
    return;
  }
  for (const f of fields) {
    if (canon(feed[f]) !== canon(istiod[f])) out.push({ source, object, field: f, feed: feed[f], istiod: istiod[f] });
  }
}

const WORKLOAD_FIELDS = ["addresses", "network", "identity", "tlsMode", "healthy", "locality", "waypoint", "networkGateway"];

/** Per endpoint: service port → target port. */
type Targets = Record<string, number>;

function feedEndpointTargets(s: Service): Map<string, Targets> {
  const out = new Map<string, Targets>();
  for (const e of s.endpoints ?? []) {
    const t: Targets = {};
    for (const [port, target] of Object.entries(s.ports ?? {})) t[port] = e.ports?.[port] ?? target;
    out.set(e.workload, t);
  }
  return out;
}

export function compare(feed: FeedSide, istiod: IstiodView): Difference[] {
  const out: Difference[] = [];
  const feedWorkloads = new Map(feed.view.workloads.map((w) => [w.uid, w]));
  const feedServices = new Map(feed.view.services.map((s) => [s.hostname, s]));

  // ---- ambient: workloads
  const ambientWorkloads = new Map(istiod.ambientWorkloads.map((w) => [w.uid as string, w]));
  for (const uid of [...new Set([...feedWorkloads.keys(), ...ambientWorkloads.keys()])].sort()) {
    const f = feedWorkloads.get(uid);
    const a = ambientWorkloads.get(uid);
    compareFields(out, "ambient", shortUid(uid), f && feedWorkload(f), a && ambientWorkload(a), WORKLOAD_FIELDS);
  }

  // ---- ambient: services (and their endpoints: the workloads whose `services` name them)
  const ambientServices = new Map(istiod.ambientServices.map((s) => [s.hostname as string, s]));
  const ambientEndpoints = new Map<string, Map<string, Targets>>();
  for (const w of istiod.ambientWorkloads) {
    for (const [key, list] of Object.entries((w.services ?? {}) as Record<string, Json>)) {
      const hostname = key.slice(key.indexOf("/") + 1);
      const t: Targets = {};
      for (const p of (list.ports ?? []) as Json[]) t[String(pick(p, "servicePort", "service_port"))] = pick(p, "targetPort", "target_port") ?? 0;
      if (!ambientEndpoints.has(hostname)) ambientEndpoints.set(hostname, new Map());
      ambientEndpoints.get(hostname)!.set(w.uid, t);
    }
  }
  for (const hostname of [...new Set([...feedServices.keys(), ...ambientServices.keys()])].sort()) {
    const f = feedServices.get(hostname);
    const a = ambientServices.get(hostname);
    const object = shortHost(hostname);
    if (!f || !a) {
      compareFields(out, "ambient", object, f, a, []);
      continue;
    }
    const aPorts: Record<string, number | "per endpoint"> = {};
    for (const p of (a.ports ?? []) as Json[]) {
      const target = pick(p, "targetPort", "target_port") ?? 0;
      // target 0: a named targetPort, resolved per workload (compared per endpoint below).
      aPorts[String(pick(p, "servicePort", "service_port"))] = target === 0 ? "per endpoint" : target;
    }
    const fPorts: Record<string, number | "per endpoint"> = {};
    for (const [port, target] of Object.entries(f.ports ?? {})) fPorts[port] = aPorts[port] === "per endpoint" ? "per endpoint" : target;
    const lb = pick(a, "loadBalancing", "load_balancing") as Json | undefined;
    const fe = Object.fromEntries([...feedEndpointTargets(f)].map(([uid, t]) => [shortUid(uid), t]));
    const ae = Object.fromEntries([...(ambientEndpoints.get(hostname) ?? new Map<string, Targets>())].map(([uid, t]) => [shortUid(uid), t]));
    compareFields(
      out,
      "ambient",
      object,
      {
        vips: (f.vips ?? []).map((v) => `${v.network ?? ""}/${v.address}`).sort(),
        ports: fPorts,
        waypoint: f.waypoint,
        subjectAltNames: f.subjectAltNames ?? [],
        loadBalancing: f.loadBalancing,
      },
      {
        vips: ((a.addresses ?? []) as Json[]).map((v) => `${v.network ?? ""}/${ipOf(v.address)}`).sort(),
        ports: aPorts,
        waypoint: gatewayAddress(a.waypoint, "port"),
        subjectAltNames: [...(pick(a, "subjectAltNames", "subject_alt_names") ?? [])].sort(),
        loadBalancing: lb && {
          routingPreference: (pick(lb, "routingPreference", "routing_preference") ?? []).map((x: string) => x.toLowerCase()),
          mode: String(lb.mode ?? "UNSPECIFIED_MODE").toLowerCase(),
        },
      },
      ["vips", "ports", "waypoint", "subjectAltNames", "loadBalancing"],
    );
    for (const uid of [...new Set([...Object.keys(fe), ...Object.keys(ae)])].sort()) {
      compareFields(out, "ambient", `${object}|${uid}`, fe[uid] && { targets: fe[uid] }, ae[uid] && { targets: ae[uid] }, ["targets"]);
    }
  }

  // ---- sidecar registry: services, endpoints, and the endpoint fields
  const byAddress = new Map<string, Workload>();
  for (const info of feed.mesh.workloads.values()) for (const a of info.workload.addresses) byAddress.set(a, info.workload);
  const sidecar = new Map(istiod.sidecarServices.map((s) => [s.hostname, s]));
  for (const hostname of [...new Set([...feedServices.keys(), ...sidecar.keys()])].sort()) {
    const f = feedServices.get(hostname);
    const s = sidecar.get(hostname);
    const object = shortHost(hostname);
    if (!f || !s) {
      compareFields(out, "sidecar", object, f, s, []);
      continue;
    }
    compareFields(
      out,
      "sidecar",
      object,
      {
        vips: (f.vips ?? []).map((v) => v.address).sort(),
        headless: !!f.headless,
        ports: Object.keys(f.ports ?? {}).sort(),
        subjectAltNames: f.subjectAltNames ?? [],
      },
      {
        // 0.0.0.0 (constants.UnspecifiedIP) is how the sidecar registry spells "no VIP" (headless).
        vips: s.vips.filter((v) => v !== "0.0.0.0").sort(),
        headless: s.resolution === 2, // model.Passthrough
        ports: s.ports.map((p) => String(p.port)).sort(),
        subjectAltNames: [...new Set([...s.serviceAccounts, ...s.endpointServiceAccounts])].sort(),
      },
      ["vips", "headless", "ports", "subjectAltNames"],
    );
    const portByName = new Map(s.ports.map((p) => [p.name, String(p.port)]));
    const sEndpoints = new Map<string, { targets: Targets; fields: Json }>();
    for (const ep of s.endpoints) {
      const w = byAddress.get(ep.addresses[0]);
      const uid = w ? w.uid : `?${ep.addresses[0]}`;
      let e = sEndpoints.get(uid);
      if (!e) {
        e = {
          targets: {},
          fields: {
            network: ep.network || undefined,
            identity: ep.serviceAccount || undefined,
            tlsMode: ep.tlsMode || "disabled",
            healthy: ep.healthStatus === 1,
            locality: ep.locality || undefined,
          },
        };
        sEndpoints.set(uid, e);
      }
      e.targets[portByName.get(ep.servicePortName) ?? `?${ep.servicePortName}`] = ep.endpointPort;
    }
    const fe = feedEndpointTargets(f);
    for (const uid of [...new Set([...fe.keys(), ...sEndpoints.keys()])].sort()) {
      const fw = feed.mesh.workloads.get(uid)?.workload;
      const fTargets = fe.get(uid);
      const se = sEndpoints.get(uid);
      compareFields(
        out,
        "sidecar",
        `${object}|${shortUid(uid)}`,
        fTargets && {
          targets: fTargets,
          network: fw?.network || undefined,
          identity: fw?.identity,
          tlsMode: fw?.tlsMode ?? "disabled",
          healthy: fw?.healthy !== false,
          locality: fw?.locality || undefined,
        },
        se && { targets: se.targets, ...se.fields },
        ["targets", "network", "identity", "tlsMode", "healthy", "locality"],
      );
    }
  }
  return out;
}

/** One line per difference, for failure messages and the README. */
export function describe(d: Difference): string {
  return `${d.source} ${d.object} ${d.field}: feed ${canon(d.feed)}, istiod ${canon(d.istiod)}`;
}

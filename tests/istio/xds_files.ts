// Turns what istiod generated for one sidecar (a dump of tests/istio/common/generate_test.go) into
// an upstream Envoy bootstrap whose xDS comes from files: LDS, CDS, and every resource istiod
// would send over ADS (RDS, EDS, ECDS) as a path config source holding exactly istiod's response,
// SDS as files holding the test's certificates under Istio's secret names (`default`, `ROOTCA`).
// A resource istiod does not serve becomes an empty response, so Envoy waits for it as it would
// on a live stream.
//
// Why files and not ADS: the generated config carries istio-proxy-only extensions that upstream
// Envoy (the pinned .venv/envoy) refuses, which have to come out first; that is what `stripped`
// lists (one entry per removed extension: where, name, type). Nothing else is changed.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Dump, Json } from "./dump.js";

/** Extensions only istio-proxy has (Istio's own builds of Envoy); matched by type URL. */
export const ISTIO_ONLY_TYPES = new Set([
  "type.googleapis.com/stats.PluginConfig", // istio.stats
  "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange", // istio.metadata_exchange (network)
  "type.googleapis.com/io.istio.http.peer_metadata.Config", // istio.metadata_exchange (HTTP)
  "type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig", // istio.alpn
]);

export interface Stripped {
  where: string;
  name: string;
  type: string;
}

export interface Secrets {
  /** PEM of the sidecar's own certificate chain and key (Istio's SDS secret `default`). */
  certChain: string;
  key: string;
  /** PEM of the mesh CA (Istio's SDS secret `ROOTCA`). */
  rootCa: string;
}

export interface Translation {
  bootstrap: Json;
  stripped: Stripped[];
  /** ECDS names the listeners reference that have no resource in the chosen ECDS set. */
  unserved: string[];
  /** The files Envoy watches: LDS, and one per ECDS name (what `pushFile` replaces). */
  files: { lds: string; ecds: Map<string, string> };
}

/**
 * Delivers an update as istiod's push would arrive: the resources of `source` (a file of another
 * translation) with a new version, moved atomically onto `target`, the file Envoy watches.
 */
export function pushFile(source: string, target: string, version: string): void {
  const next = { ...JSON.parse(readFileSync(source, "utf8")), versionInfo: version };
  const staging = join(dirname(target), `.next-${version}`);
  writeFileSync(staging, JSON.stringify(next, null, 1));
  renameSync(staging, target);
}

type EcdsSet = "ecdsAgent" | "ecdsAgentFetchFailed" | "ecds";

const TYPED_STRUCTS = new Set(["type.googleapis.com/udpa.type.v1.TypedStruct", "type.googleapis.com/xds.type.v3.TypedStruct"]);

/** The extension type of a node's typed config, looking through a TypedStruct (how Istio ships its own). */
function typeOf(node: Json): string | undefined {
  const typed = node?.typedConfig ?? node?.typed_config;
  const type = typed?.["@type"];
  return type && TYPED_STRUCTS.has(type) ? (typed.typeUrl ?? typed.type_url) : type;
}

/** Where route A's manifests mount the module in the pod (a ConfigMap), and where it is here. */
const POD_WASM_DIR = "/var/local/lib/wasm/";

/** Removes every array element whose typed config is istio-proxy-only, recording where. */
function strip(node: Json, path: string, out: Stripped[]): void {
  if (Array.isArray(node)) {
    for (let i = node.length - 1; i >= 0; i--) {
      const type = typeOf(node[i]);
      if (type && ISTIO_ONLY_TYPES.has(type)) {
        out.unshift({ where: path, name: node[i].name ?? "", type });
        node.splice(i, 1);
      }
    }
    node.forEach((child, i) => strip(child, `${path}[${i}]`, out));
  } else if (node && typeof node === "object") {
    for (const [key, child] of Object.entries(node)) strip(child, path ? `${path}.${key}` : key, out);
  }
}

const safe = (name: string): string => name.replace(/[^A-Za-z0-9._-]/g, "_");

export function translate(
  d: Dump,
  dir: string,
  secrets: Secrets,
  // nodeMetadata: what pilot-agent puts in the bootstrap's node (e.g. NETWORK from the pod's
  // topology.istio.io/network label); istiod does not make the bootstrap.
  // keepListener: which of istiod's listeners this Envoy runs (two sidecars in one network
  // namespace would both bind 15001 and 15006; each keeps the side its test needs).
  options: { ecds: EcdsSet; adminPort: number; nodeId: string; wasmDir: string; nodeMetadata?: Record<string, string>; keepListener?: (name: string) => boolean },
): Translation {
  const wasmDir = options.wasmDir;
  mkdirSync(dir, { recursive: true });
  const stripped: Stripped[] = [];
  const unserved: string[] = [];
  const ecdsFiles = new Map<string, string>();
  const listeners = structuredClone(d.listeners).filter((l: Json) => options.keepListener?.(l.name) ?? true);
  const clusters = structuredClone(d.clusters);
  const routes = structuredClone(d.routes);
  const endpoints = structuredClone(d.endpoints);
  const ecds = structuredClone(d[options.ecds]);
  listeners.forEach((l: Json) => strip(l, `listener ${l.name}`, stripped));
  clusters.forEach((c: Json) => strip(c, `cluster ${c.name}`, stripped));
  routes.forEach((r: Json) => strip(r, `route ${r.name}`, stripped));

  const file = (kind: string, name: string, resources: Json[]): string => {
    const path = join(dir, `${kind}-${safe(name)}.json`);
    writeFileSync(path, JSON.stringify({ versionInfo: "1", resources }, null, 1));
    return path;
  };
  const pathSource = (source: Json, path: string): Json => ({
    pathConfigSource: { path },
    resourceApiVersion: "V3",
    ...(source?.initialFetchTimeout !== undefined ? { initialFetchTimeout: source.initialFetchTimeout } : {}),
  });
  const secretResource = (name: string): Json => {
    if (name === "default") {
      return { "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", name, tlsCertificate: { certificateChain: { inlineString: secrets.certChain }, privateKey: { inlineString: secrets.key } } };
    }
    if (name === "ROOTCA") {
      return { "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", name, validationContext: { trustedCa: { inlineString: secrets.rootCa } } };
    }
    throw new Error(`xds_files: SDS secret ${name} has no test stand-in`);
  };

  // Every ADS / SDS config source, rewritten to a file with what istiod (or the test CA) serves.
  const rewrite = (node: Json): void => {
    if (Array.isArray(node)) return node.forEach(rewrite);
    if (!node || typeof node !== "object") return;
    if (node.configDiscovery?.configSource) {
      const name: string = node.name;
      const resource = ecds.find((r: Json) => r.name === name);
      if (!resource) unserved.push(name);
      const path = file("ecds", name, resource ? [resource] : []);
      ecdsFiles.set(name, path);
      node.configDiscovery.configSource = pathSource(node.configDiscovery.configSource, path);
    }
    if (node.rds?.configSource) {
      const name: string = node.rds.routeConfigName;
      const route = routes.find((r: Json) => r.name === name);
      const resources = route ? [{ "@type": "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", ...route }] : [];
      node.rds.configSource = pathSource(node.rds.configSource, file("rds", name, resources));
    }
    if (node.edsClusterConfig?.edsConfig) {
      const name: string = node.edsClusterConfig.serviceName ?? node.name;
      const cla = endpoints.find((e: Json) => e.clusterName === name);
      const resources = [{ "@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", ...(cla ?? { clusterName: name }) }];
      node.edsClusterConfig.edsConfig = pathSource(node.edsClusterConfig.edsConfig, file("eds", name, resources));
    }
    // Route A's module file, mounted into istio-proxy from a ConfigMap: here the build output.
    if (typeof node.filename === "string" && node.filename.startsWith(POD_WASM_DIR)) {
      node.filename = join(wasmDir, node.filename.slice(POD_WASM_DIR.length));
    }
    if (node.sdsConfig && typeof node.name === "string") {
      node.sdsConfig = pathSource(node.sdsConfig, file("sds", node.name, [secretResource(node.name)]));
    }
    for (const child of Object.values(node)) rewrite(child);
  };
  listeners.forEach(rewrite);
  clusters.forEach(rewrite);

  const lds = file("lds", "all", listeners.map((l: Json) => ({ "@type": "type.googleapis.com/envoy.config.listener.v3.Listener", ...l })));
  const cds = file("cds", "all", clusters.map((c: Json) => ({ "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", ...c })));
  const bootstrap = {
    node: { id: options.nodeId, cluster: options.nodeId.split("~")[2] ?? "sidecar", ...(options.nodeMetadata ? { metadata: options.nodeMetadata } : {}) },
    admin: { address: { socketAddress: { address: "127.0.0.1", portValue: options.adminPort } } },
    dynamicResources: {
      ldsConfig: { pathConfigSource: { path: lds }, resourceApiVersion: "V3" },
      cdsConfig: { pathConfigSource: { path: cds }, resourceApiVersion: "V3" },
    },
    // Istio's bootstrap declares it for every proxy; internal listeners need it.
    bootstrapExtensions: [{
      name: "envoy.bootstrap.internal_listener",
      typedConfig: { "@type": "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener" },
    }],
  };
  return { bootstrap, stripped, unserved, files: { lds, ecds: ecdsFiles } };
}

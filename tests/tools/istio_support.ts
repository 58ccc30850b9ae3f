// Shared support for the Istio manifest tests (tests/tools/istio_*.test.ts): loading the YAML
// documents under istio/<filter>/, Istio's CRD schema (@kubernetes-models/istio), the plugin
// configurations the manifests embed and the compiled filter that must accept them (test host),
// a small EnvoyFilter patcher over an Istio-shaped sidecar, and the pinned Envoy's
// `--mode validate` on the patched sidecar.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { it } from "node:test";
import { WasmPlugin } from "@kubernetes-models/istio/extensions.istio.io/v1alpha1";
import { DestinationRule } from "@kubernetes-models/istio/networking.istio.io/v1";
import { EnvoyFilter } from "@kubernetes-models/istio/networking.istio.io/v1alpha3";
import { parse, parseAllDocuments, stringify } from "yaml";
import { ProxyWasmHost } from "../../host/index.js";
import { validateConfig } from "../support/envoy.js";
import { ensureBuilt } from "../host/helpers.js";
import { REPO_ROOT } from "../support/paths.js";

export type Json = any; // manifests are free-form YAML; each test asserts the shape it relies on

export const WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm";
export const TCP_PROXY_TYPE = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";
export const UPSTREAM_TLS_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
export const STRING_VALUE_TYPE = "type.googleapis.com/google.protobuf.StringValue";
export const CATCH_ALL_CHAIN = "virtualOutbound-catchall-tcp";
export const TCP_PROXY = "envoy.filters.network.tcp_proxy";
export const WASM_FILTER = "envoy.filters.network.wasm";
export const RBAC_TYPE = "type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC";
/** istiod 1.30+ serves a WasmPlugin as a translated TrafficExtension (tests/istio proves it). */
export const ECDS_PREFIX = "extensions.istio.io/trafficextension/";
export const ECDS_SUFFIX = "~istio-translated-wasmplugin";
/** The hookups' proxyVersion keys: 1.30 and later, 1.29 and earlier (old ECDS name). */
export const PROXY_1_30_PLUS = String.raw`^1\.([3-9][0-9])([.-].*)?$`;
export const PROXY_1_29_OR_OLDER = String.raw`^1\.([0-9]|[12][0-9])([.-].*)?$`;

/**
 * A hookup EnvoyFilter's patches as a 1.30+ proxy gets them: the copies keyed on 1.29 and older
 * dropped, the proxyVersion match of the others removed (the rest of the patch is unchanged).
 */
export function currentPatches(efOrPatches: Json): Json[] {
  const patches: Json[] = Array.isArray(efOrPatches) ? efOrPatches : efOrPatches.spec.configPatches;
  return patches
    .filter((p) => p.match?.proxy?.proxyVersion !== PROXY_1_29_OR_OLDER)
    .map((p) => {
      if (p.match?.proxy?.proxyVersion !== PROXY_1_30_PLUS) return p;
      const copy = structuredClone(p);
      delete copy.match.proxy;
      return copy;
    });
}

/** A hookup EnvoyFilter with currentPatches only. */
export const currentHookup = (ef: Json): Json => ({ ...ef, spec: { ...ef.spec, configPatches: currentPatches(ef) } });
export const HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/** `build/<filter>.wasm`. */
export const wasmPath = (filter: string): string => join(REPO_ROOT, "build", `${filter}.wasm`);

// ---------------------------------------------------------------------------------------------
// The manifests

export interface Manifest {
  /** `istio/<path>#<index>` for messages. */
  readonly where: string;
  readonly file: string;
  readonly index: number;
  readonly doc: Json;
}

/** The Istio CRD model class for each apiVersion/kind the manifests may use. */
export const MODELS: Record<string, new (data: Json) => { validate(): void }> = {
  "networking.istio.io/v1alpha3/EnvoyFilter": EnvoyFilter,
  "extensions.istio.io/v1alpha1/WasmPlugin": WasmPlugin,
  "networking.istio.io/v1/DestinationRule": DestinationRule,
};

/** Every .yaml / .yml file below `dir` (subfolders included), sorted by path. */
export function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.ya?ml$/.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

/** Every non-empty YAML document below `dir`; a parse error throws, naming file and document. */
export function loadManifests(dir: string): Manifest[] {
  const manifests: Manifest[] = [];
  for (const path of yamlFiles(dir)) {
    const file = relative(REPO_ROOT, path);
    parseAllDocuments(readFileSync(path, "utf8")).forEach((document, index) => {
      if (document.errors.length > 0) throw new Error(`${file}#${index}: ${document.errors.map(String).join("; ")}`);
      const doc = document.toJS();
      if (doc !== null && doc !== undefined) manifests.push({ where: `${file}#${index}`, file, index, doc });
    });
  }
  return manifests;
}

/** The manifests of istio/<filter>/, with lookups by file name (inside that folder) and by kind. */
export function istioManifests(filter: string) {
  const dir = join(REPO_ROOT, "istio", filter);
  const manifests = loadManifests(dir);
  return {
    dir,
    manifests,
    inFile: (name: string): Manifest[] => manifests.filter((m) => m.file === `istio/${filter}/${name}`),
    ofKind: (kind: string): Manifest[] => manifests.filter((m) => m.doc.kind === kind),
  };
}

export const modelKey = (doc: Json): string => `${doc?.apiVersion}/${doc?.kind}`;

/** The one document of `list`; fails naming `what` otherwise. */
export function only(list: Manifest[], what: string): Json {
  assert.equal(list.length, 1, `expected exactly one ${what}, found ${list.length}`);
  return list[0]!.doc;
}

/** Istio's CRD schema check of one document (throws on the first violation). */
export function validateSchema(doc: Json): void {
  const Model = MODELS[modelKey(doc)];
  if (!Model) throw new Error(`no Istio schema known for ${modelKey(doc)}: add its model to MODELS`);
  new Model(doc).validate();
}

/** Registers one test per manifest: its apiVersion/kind has a known schema and the document passes it. */
export function schemaValidityTests(manifests: Manifest[]): void {
  for (const m of manifests) {
    it(`${m.where} ${m.doc.kind}/${m.doc.metadata?.name} is valid`, () => {
      assert.ok(MODELS[modelKey(m.doc)], `${m.where}: no Istio schema known for ${modelKey(m.doc)}`);
      validateSchema(m.doc);
    });
  }
}

/** The schema refuses `doc` with `configPatches[index].applyTo` set to a number. */
export function assertRejectsNumericApplyTo(ef: Json, index = 0): void {
  const broken = structuredClone(ef);
  broken.spec.configPatches[index].applyTo = 42;
  assert.throws(() => validateSchema(broken), new RegExp(`configPatches/${index}/applyTo must be string`));
}

/** The schema refuses `configPatches[index].patch.value` set to a string. */
export function assertRejectsStringPatchValue(ef: Json, index: number, value: string): void {
  const broken = structuredClone(ef);
  broken.spec.configPatches[index].patch.value = value;
  assert.throws(() => validateSchema(broken), new RegExp(`configPatches/${index}/patch/value must be object`));
}

/** The schema refuses Envoy's spelling FAIL_CLOSED in a WasmPlugin (Istio's is FAIL_CLOSE). */
export function assertRejectsEnvoyFailStrategy(wp: Json): void {
  const broken = structuredClone(wp);
  broken.spec.failStrategy = "FAIL_CLOSED";
  assert.throws(() => validateSchema(broken), /failStrategy must be equal to one of the allowed values/);
}

/** The schema refuses an unknown traffic mode, and a port given as a string, in `wp.spec.match[0]`. */
export function assertRejectsBadWasmPluginMatch(wp: Json): void {
  const badMode = structuredClone(wp);
  badMode.spec.match[0].mode = "OUTBOUND";
  assert.throws(() => validateSchema(badMode), /match\/0\/mode must be equal to one of the allowed values/);
  const badPort = structuredClone(wp);
  badPort.spec.match[0].ports[0].number = "15006";
  assert.throws(() => validateSchema(badPort), /match\/0\/ports\/0\/number must be integer/);
}

/** The name of the ECDS resource istiod serves for a WasmPlugin. */
export const ecdsName = (wp: Json): string => `${ECDS_PREFIX}${wp.metadata.namespace}.${wp.metadata.name}${ECDS_SUFFIX}`;

/**
 * An ECDS reference to `wp` as the hookups write it: the plugin's resource name, the wasm type,
 * over ADS, and `initial_fetch_timeout: 0s` unless `initialFetchTimeout` is false.
 */
export function assertEcdsReference(reference: Json, wp: Json, options: { ads?: boolean; initialFetchTimeout?: boolean } = {}): void {
  assert.equal(reference.name, ecdsName(wp));
  // The Wasm type, and the network RBAC type of pilot-agent's stand-in for a module it cannot fetch.
  assert.deepEqual(reference.config_discovery.type_urls, [WASM_TYPE, RBAC_TYPE]);
  if (options.ads !== false) assert.deepEqual(reference.config_discovery.config_source.ads, {});
  if (options.initialFetchTimeout !== false) assert.equal(reference.config_discovery.config_source.initial_fetch_timeout, "0s");
}

/** A plain Envoy config from envoy-configs/ (the ones tests/mesh proves in the real Envoy). */
export const plainConfig = (name: string): Json => parse(readFileSync(join(REPO_ROOT, "envoy-configs", name), "utf8"));

// ---------------------------------------------------------------------------------------------
// Finding things inside Envoy config

/** Every object (depth first) inside `value` for which `test` holds, with a path for messages. */
export function findAll(value: Json, test: (node: Json) => boolean, path = ""): { path: string; node: Json }[] {
  const out: { path: string; node: Json }[] = [];
  if (Array.isArray(value)) value.forEach((item, i) => out.push(...findAll(item, test, `${path}[${i}]`)));
  else if (value !== null && typeof value === "object") {
    if (test(value)) out.push({ path, node: value });
    for (const [key, child] of Object.entries(value)) out.push(...findAll(child, test, `${path}.${key}`));
  }
  return out;
}

/** A filter whose typed_config is an inline wasm network filter. */
export const isInlineWasm = (node: Json): boolean => node?.typed_config?.["@type"] === WASM_TYPE;

/** The configPatches of an EnvoyFilter, or the list itself when given a list of patches. */
export const configPatchesOf = (efOrPatches: Json): Json[] => (Array.isArray(efOrPatches) ? efOrPatches : efOrPatches.spec.configPatches);

/** The patches of an EnvoyFilter (or patch list) for one applyTo, optionally one operation. */
export const patchesOf = (ef: Json, applyTo: string, operation?: string): Json[] =>
  configPatchesOf(ef).filter((p: Json) => p.applyTo === applyTo && (operation === undefined || p.patch.operation === operation));

/** Copies of the listeners an EnvoyFilter (or patch list) adds with LISTENER ADD. */
export const addedListeners = (ef: Json): Json[] => patchesOf(ef, "LISTENER", "ADD").map((p) => structuredClone(p.patch.value));

/** Copies of the clusters an EnvoyFilter (or patch list) adds; any CLUSTER patch other than ADD is not modelled and fails. */
export function addedClusters(ef: Json): Json[] {
  return patchesOf(ef, "CLUSTER").map((p) => {
    assert.equal(p.patch.operation, "ADD", "only CLUSTER ADD is modelled");
    return structuredClone(p.patch.value);
  });
}

/** The one cluster called `name`. */
export function clusterNamed(clusters: Json[], name: string): Json {
  const found = clusters.filter((c) => c.name === name);
  assert.equal(found.length, 1, `expected one cluster ${name}`);
  return found[0];
}

/** The cluster an SDS secret config is fetched through. */
export const viaSdsGrpc = (secret: Json): string => secret.sds_config.api_config_source.grpc_services[0].envoy_grpc.cluster_name;

/** A common_tls_context with Istio's SDS secrets: certificate "default" and root "ROOTCA", both via sds-grpc. */
export function assertIstioSdsSecrets(common: Json, where?: string): void {
  const message = where as string; // undefined: assert's own diff message
  assert.deepEqual(common.tls_certificate_sds_secret_configs.map((s: Json) => [s.name, viaSdsGrpc(s)]), [["default", "sds-grpc"]], message);
  const rootCa = common.combined_validation_context.validation_context_sds_secret_config;
  assert.deepEqual([rootCa.name, viaSdsGrpc(rootCa)], ["ROOTCA", "sds-grpc"], message);
}

// ---------------------------------------------------------------------------------------------
// Embedded plugin configurations and the compiled filter (test host)

export interface PluginConfig {
  readonly where: string;
  readonly file: string;
  /** The configuration bytes as Envoy's plugin gets them (JSON text). */
  readonly json: string;
  readonly rootId: string;
  readonly name: string;
  readonly vmId: string;
  readonly failurePolicy: string | undefined;
}

/** istiod's translation of a WasmPlugin into the plugin config Envoy gets (pilot/pkg/model/extensions.go). */
export function istiodPluginConfig(wp: Json, wasm: string): Json {
  const failurePolicy: Record<string, string> = { FAIL_OPEN: "FAIL_OPEN", FAIL_CLOSE: "FAIL_CLOSED", FAIL_RELOAD: "FAIL_RELOAD" };
  return {
    name: `${wp.metadata.namespace}.${wp.metadata.name}`,
    root_id: wp.spec.pluginName,
    configuration: { "@type": STRING_VALUE_TYPE, value: JSON.stringify(wp.spec.pluginConfig ?? {}) },
    ...(wp.spec.failStrategy ? { failure_policy: failurePolicy[wp.spec.failStrategy] } : {}),
    vm_config: { runtime: "envoy.wasm.runtime.v8", code: { local: { filename: wasm } } },
  };
}

/** Every plugin configuration of the manifests: inline wasm filters in EnvoyFilters, and WasmPlugins as istiod translates them. */
export function pluginConfigs(manifests: Manifest[], wasm: string): PluginConfig[] {
  const configs: PluginConfig[] = [];
  for (const m of manifests.filter((m) => m.doc.kind === "EnvoyFilter")) {
    for (const { path, node } of findAll(m.doc.spec, isInlineWasm)) {
      const config = node.typed_config.config;
      const where = `${m.where} spec${path}`;
      assert.equal(config.configuration?.["@type"], STRING_VALUE_TYPE, `${where}: configuration must be a StringValue`);
      assert.equal(typeof config.configuration.value, "string", `${where}: configuration.value must be a string`);
      configs.push({
        where,
        file: m.file,
        json: config.configuration.value,
        rootId: config.root_id,
        name: config.name,
        vmId: config.vm_config?.vm_id ?? "",
        failurePolicy: config.failure_policy,
      });
    }
  }
  for (const m of manifests.filter((m) => m.doc.kind === "WasmPlugin")) {
    const translated = istiodPluginConfig(m.doc, wasm);
    configs.push({
      where: `${m.where} spec.pluginConfig`,
      file: m.file,
      json: translated.configuration.value,
      rootId: translated.root_id,
      name: translated.name,
      vmId: "",
      failurePolicy: translated.failure_policy,
    });
  }
  return configs;
}

/** Every config: root_id `filter`, FAIL_CLOSED as Envoy gets it, and name / vm_id `filter` when inline. */
export function assertPluginConfigsPinned(configs: PluginConfig[], filter: string): void {
  for (const config of configs) {
    assert.equal(config.rootId, filter, `${config.where}: root_id`);
    assert.equal(config.failurePolicy, "FAIL_CLOSED", `${config.where}: failure policy`);
    if (!config.where.includes("pluginConfig")) {
      assert.equal(config.vmId, filter, `${config.where}: vm_id`);
      assert.equal(config.name, filter, `${config.where}: name`);
    }
  }
}

/** Starts the compiled filter in the test host with `config` (or other JSON); fails if it refuses it. */
export async function startFilter(wasm: string, config: PluginConfig, json = config.json): Promise<ProxyWasmHost> {
  const host = await ProxyWasmHost.fromFile(wasm, {
    rootId: config.rootId,
    name: config.name,
    vmId: config.vmId,
    pluginConfiguration: json,
    failurePolicy: "FAIL_CLOSED",
  });
  assert.ok(host.start(), `${config.where}: the filter refused its configuration: ${host.startFailure}`);
  return host;
}

/** Starts the compiled filter with `snapshot`, asserts it refuses it, and returns its log lines (one text). */
export async function refusedSnapshotLog(wasm: string, rootId: string, snapshot: Json): Promise<{ host: ProxyWasmHost; log: string }> {
  const host = await ProxyWasmHost.fromFile(wasm, { rootId, pluginConfiguration: JSON.stringify(snapshot) });
  assert.equal(host.start(), false);
  return { host, log: host.logs().map((entry) => entry.message).join("\n") };
}

/**
 * Builds build/<filter>.wasm when missing; with `rebuildIfStale`, also when older than its sources
 * (tests/host/helpers.ts ensureBuilt: one build at a time across test processes). Without it, the
 * existing build is what is tested (another change may be in flight in assembly/).
 */
export function ensureFilterBuilt(filter: string, options: { rebuildIfStale?: boolean } = {}): void {
  if (options.rebuildIfStale === true) {
    ensureBuilt(filter);
    return;
  }
  if (existsSync(wasmPath(filter))) return;
  execFileSync(process.execPath, ["scripts/build.mjs", filter], { cwd: REPO_ROOT, stdio: "inherit" });
}

// ---------------------------------------------------------------------------------------------
// A small EnvoyFilter patcher (the NETWORK_FILTER semantics these manifests use) and an
// Istio-shaped sidecar to apply it to

export interface Chain {
  name: string;
  filters: Json[];
}
export interface Listener {
  name: string;
  context: "SIDECAR_OUTBOUND" | "SIDECAR_INBOUND";
  chains: Chain[];
}

/** Istio's tcp_proxy on a passthrough-like chain (typed, so a MERGE has something to merge into). */
export const istioTcpProxy = (cluster: string): Json => ({
  name: TCP_PROXY,
  typed_config: { "@type": TCP_PROXY_TYPE, stat_prefix: cluster, cluster },
});

/** The filters of an Istio TCP chain: istio.stats, then tcp_proxy to `cluster`. */
export const istioTcpStack = (cluster: string): Json[] => [{ name: "istio.stats" }, istioTcpProxy(cluster)];

/**
 * The listeners of an Istio sidecar that a NETWORK_FILTER match could hit: virtualOutbound (its
 * blackhole chain and the catch-all chain to PassthroughCluster), then `others`.
 */
export function istioSidecarListeners(others: Listener[]): Listener[] {
  return [
    {
      name: "virtualOutbound",
      context: "SIDECAR_OUTBOUND",
      chains: [
        { name: "virtualOutbound-blackhole", filters: istioTcpStack("BlackHoleCluster") },
        { name: CATCH_ALL_CHAIN, filters: istioTcpStack("PassthroughCluster") },
      ],
    },
    ...others,
  ];
}

/** A per-port outbound TCP listener: the service's chain to `cluster` and, with `passthrough`, Istio's PassthroughFilterChain. */
export function outboundTcpListener(name: string, cluster: string, options: { passthrough?: boolean } = {}): Listener {
  const chains: Chain[] = [{ name: "", filters: istioTcpStack(cluster) }];
  if (options.passthrough === true) chains.push({ name: "PassthroughFilterChain", filters: istioTcpStack("PassthroughCluster") });
  return { name, context: "SIDECAR_OUTBOUND", chains };
}

/**
 * virtualInbound: the chain `0.0.0.0_<port>` to `inbound|<port>||` (after `before`, filters Istio
 * puts ahead of istio.stats) and, with `passthrough`, the InboundPassthroughCluster chain.
 */
export function virtualInboundListener(port: number, options: { before?: Json[]; passthrough?: boolean } = {}): Listener {
  const chains: Chain[] = [{ name: `0.0.0.0_${port}`, filters: [...(options.before ?? []), ...istioTcpStack(`inbound|${port}||`)] }];
  if (options.passthrough === true) chains.push({ name: "virtualInbound", filters: istioTcpStack("InboundPassthroughCluster") });
  return { name: "virtualInbound", context: "SIDECAR_INBOUND", chains };
}

/** A NETWORK_FILTER patch that matches tcp_proxy on virtualOutbound's catch-all chain, outbound. */
export function assertMatchesCatchAllTcpProxy(patch: Json): void {
  assert.equal(patch.match.context, "SIDECAR_OUTBOUND");
  assert.equal(patch.match.listener.name, "virtualOutbound");
  assert.equal(patch.match.listener.filterChain.name, CATCH_ALL_CHAIN);
  assert.equal(patch.match.listener.filterChain.filter.name, TCP_PROXY);
}

/** proto.Merge on the JSON form: messages merge, repeated fields append, scalars overwrite. */
export function protoMerge(target: Json, source: Json): Json {
  for (const [key, value] of Object.entries(source)) {
    const existing = target[key];
    if (Array.isArray(value)) target[key] = [...(Array.isArray(existing) ? existing : []), ...structuredClone(value)];
    else if (value !== null && typeof value === "object" && existing !== null && typeof existing === "object" && !Array.isArray(existing)) {
      protoMerge(existing, value);
    } else target[key] = structuredClone(value);
  }
  return target;
}

/** An EnvoyFilter match context against a listener's: unset and ANY match every one. */
export const contextMatches = (wanted: string | undefined, actual: string): boolean => wanted === undefined || wanted === "ANY" || wanted === actual;

/**
 * Applies the NETWORK_FILTER patches in order (as istiod does within one EnvoyFilter):
 * INSERT_BEFORE, INSERT_AFTER, INSERT_FIRST and MERGE; refuses operations it does not model.
 */
export function applyNetworkFilterPatches(listeners: Listener[], patches: Json[]): void {
  for (const patch of patches) {
    if (patch.applyTo !== "NETWORK_FILTER") continue;
    const match = patch.match ?? {};
    const listenerMatch = match.listener ?? {};
    const chainMatch = listenerMatch.filterChain ?? {};
    const filterMatch = chainMatch.filter ?? {};
    for (const listener of listeners) {
      if (!contextMatches(match.context, listener.context)) continue;
      if (listenerMatch.name !== undefined && listenerMatch.name !== listener.name) continue;
      for (const chain of listener.chains) {
        if (chainMatch.name !== undefined && chainMatch.name !== chain.name) continue;
        const index = chain.filters.findIndex((f) => filterMatch.name === undefined || f.name === filterMatch.name);
        if (index < 0) continue;
        const value = structuredClone(patch.patch.value);
        switch (patch.patch.operation) {
          case "INSERT_BEFORE":
            chain.filters.splice(index, 0, value);
            break;
          case "INSERT_AFTER":
            chain.filters.splice(index + 1, 0, value);
            break;
          case "INSERT_FIRST":
            chain.filters.unshift(value);
            break;
          case "MERGE": {
            // Istio merges typed_config into typed_config when both are typed (listener_patch.go).
            const filter = chain.filters[index];
            assert.ok(filter.typed_config, "MERGE into a filter without typed_config is skipped by Istio");
            assert.equal(value.typed_config["@type"], filter.typed_config["@type"], "MERGE with another type");
            protoMerge(filter.typed_config, value.typed_config);
            break;
          }
          default:
            throw new Error(`patcher: NETWORK_FILTER operation ${patch.patch.operation} not modelled`);
        }
      }
    }
  }
}

/** The chain `chain` of listener `listener`. */
export const chainOf = (listeners: Listener[], listener: string, chain: string): Chain =>
  listeners.find((l) => l.name === listener)!.chains.find((c) => c.name === chain)!;

/** `listeners` after the NETWORK_FILTER patches of each EnvoyFilter (or patch list), in order, with their catch-all chain. */
export function patchCatchAll(listeners: Listener[], ...efs: Json[]): { listeners: Listener[]; chain: Chain } {
  for (const ef of efs) applyNetworkFilterPatches(listeners, configPatchesOf(ef));
  return { listeners, chain: chainOf(listeners, "virtualOutbound", CATCH_ALL_CHAIN) };
}

// ---------------------------------------------------------------------------------------------
// The pinned Envoy's --mode validate on an Istio-shaped sidecar

/** Inline wasm filters pointed at `wasm`; ECDS references to `plugins` resolved the way istiod would. */
export function resolveForEnvoy(value: Json, wasm: string, plugins: Json[] = []): Json {
  const copy = structuredClone(value);
  for (const { node } of findAll(copy, isInlineWasm)) node.typed_config.config.vm_config.code.local.filename = wasm;
  for (const { node } of findAll(copy, (n) => typeof n?.name === "string" && n.name.startsWith(ECDS_PREFIX) && n.config_discovery)) {
    const wp = plugins.find((p) => ecdsName(p) === node.name);
    assert.ok(wp, `no WasmPlugin serves the ECDS resource ${node.name}`);
    delete node.config_discovery;
    node.typed_config = { "@type": WASM_TYPE, config: istiodPluginConfig(wp, wasm) };
  }
  return copy;
}

/** pilot-agent's SDS server, as Istio's bootstrap defines it (a unix socket). */
export const sdsGrpcCluster = (): Json => ({
  name: "sds-grpc",
  type: "STATIC",
  connect_timeout: "1s",
  typed_extension_protocol_options: {
    [HTTP_OPTIONS]: { "@type": `type.googleapis.com/${HTTP_OPTIONS}`, explicit_http_config: { http2_protocol_options: {} } },
  },
  load_assignment: {
    cluster_name: "sds-grpc",
    endpoints: [{ lb_endpoints: [{ endpoint: { address: { pipe: { path: "./var/run/secrets/workload-spiffe-uds/socket" } } } }] }],
  },
});

/** Istio's bootstrap extension (tools/packaging/common/envoy_bootstrap.json). */
export const INTERNAL_LISTENER_EXTENSION = {
  name: "envoy.bootstrap.internal_listener",
  typed_config: { "@type": "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener", buffer_size_kb: 64 },
};

export interface SidecarBootstrapOptions {
  /** The sidecar's node (SDS needs a node identity, as every Istio sidecar has). */
  node: { id: string; cluster: string };
  /** The catch-all chain's filters after the patches (istio.stats, an Istio-only filter, is left out). */
  catchAll: Json[];
  /** Listeners the EnvoyFilters add. */
  listeners?: Json[];
  /** Clusters the EnvoyFilters add. */
  clusters?: Json[];
  /** Istio's internal listener bootstrap extension; default true. */
  internalListenerExtension?: boolean;
  /** build/<filter>.wasm, for every inline wasm filter and resolved ECDS reference. */
  wasm: string;
  /** The WasmPlugins whose ECDS references are resolved inline (validate mode has no istiod). */
  plugins?: Json[];
}

/** An Envoy bootstrap shaped like an Istio sidecar (virtualOutbound, Istio's own clusters) with what the patches add. */
export function sidecarBootstrap(options: SidecarBootstrapOptions): Json {
  return resolveForEnvoy(
    {
      node: options.node,
      ...(options.internalListenerExtension === false ? {} : { bootstrap_extensions: [INTERNAL_LISTENER_EXTENSION] }),
      static_resources: {
        listeners: [
          {
            name: "virtualOutbound",
            address: { socket_address: { address: "0.0.0.0", port_value: 15001 } },
            use_original_dst: true,
            filter_chains: [{ name: CATCH_ALL_CHAIN, filters: options.catchAll.filter((f) => f.name !== "istio.stats") }],
          },
          ...(options.listeners ?? []),
        ],
        clusters: [
          { name: "PassthroughCluster", type: "ORIGINAL_DST", lb_policy: "CLUSTER_PROVIDED", connect_timeout: "10s" },
          { name: "BlackHoleCluster", type: "STATIC", connect_timeout: "10s" },
          sdsGrpcCluster(),
          ...(options.clusters ?? []),
        ],
      },
    },
    options.wasm,
    options.plugins ?? [],
  );
}

/** Writes `bootstrap` under .tmp/ and runs the pinned Envoy's `--mode validate` on it; the output says what Envoy refused. */
export function envoyValidate(name: string, bootstrap: Json): { ok: boolean; output: string } {
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", `istio-${name}-`));
  const path = join(dir, "envoy.yaml");
  writeFileSync(path, stringify(bootstrap));
  try {
    return validateConfig(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The Istio manifests of tunnel_port (istio/tunnel_port/) as a cluster and a sidecar would take them:
// - every YAML document passes Istio's CRD schema (@kubernetes-models/istio), and the schema check
//   really rejects broken manifests;
// - every embedded plugin configuration (inline EnvoyFilter StringValues, WasmPlugin pluginConfig as
//   istiod serialises it) is accepted by build/tunnel_port.wasm in the test host and behaves as the
//   manifests around it expect (cluster names, filter-state keys, this pod's ports);
// - structure: the client filter lands right before tcp_proxy on the outbound catch-all chain only,
//   tcp_proxy gets the tunneling_config, the server side has the 15008 listener, the internal
//   listener with the filter before tcp_proxy, and the clusters; FAIL_CLOSED, root_id and vm_id
//   tunnel_port everywhere; the pieces copied from the plain Envoy configs (proven in the real
//   Envoy) are identical to them; route B (WasmPlugin + hookups) equals route A but for the filter;
// - no manifest mentions the telemetry exchange filters;
// - the patched listeners and clusters, in an Istio-shaped sidecar bootstrap, pass the pinned
//   Envoy's `--mode validate` (which loads the .wasm and runs its configure).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { before, describe, it } from "node:test";
import { WasmPlugin } from "@kubernetes-models/istio/extensions.istio.io/v1alpha1";
import { EnvoyFilter } from "@kubernetes-models/istio/networking.istio.io/v1alpha3";
import { parse, parseAllDocuments, stringify } from "yaml";
import { ProxyWasmHost } from "../../host/index.js";
import { ENVOY_BINARY, validateConfig } from "../support/envoy.js";
import { REPO_ROOT } from "../support/paths.js";

const FILTER = "tunnel_port";
const DIR = join(REPO_ROOT, "istio", FILTER);
const WASM = join(REPO_ROOT, "build", `${FILTER}.wasm`);
const WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm";
const TCP_PROXY_TYPE = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";
const STRING_VALUE_TYPE = "type.googleapis.com/google.protobuf.StringValue";
const CATCH_ALL_CHAIN = "virtualOutbound-catchall-tcp";
const TCP_PROXY = "envoy.filters.network.tcp_proxy";
const WASM_FILTER = "envoy.filters.network.wasm";
const HCM = "envoy.filters.network.http_connection_manager";
const ECDS_PREFIX = "extensions.istio.io/wasmplugin/";
/** Strings no manifest may contain: routing must not depend on Istio's telemetry exchange. */
const FORBIDDEN = [/metadata_exchange/i, /istio-peer-exchange/i, /peer_metadata/i];

type Json = any; // manifests are free-form YAML; each test asserts the shape it relies on

// ---------------------------------------------------------------------------------------------
// The manifests

interface Manifest {
  readonly where: string;
  readonly file: string;
  readonly doc: Json;
}

const MODELS: Record<string, new (data: Json) => { validate(): void }> = {
  "networking.istio.io/v1alpha3/EnvoyFilter": EnvoyFilter,
  "extensions.istio.io/v1alpha1/WasmPlugin": WasmPlugin,
};

const yamlFiles = (): string[] =>
  readdirSync(DIR)
    .filter((name) => /\.ya?ml$/.test(name))
    .sort()
    .map((name) => join(DIR, name));

function loadManifests(): Manifest[] {
  const manifests: Manifest[] = [];
  for (const path of yamlFiles()) {
    const file = relative(REPO_ROOT, path);
    parseAllDocuments(readFileSync(path, "utf8")).forEach((document, index) => {
      if (document.errors.length > 0) throw new Error(`${file}#${index}: ${document.errors.map(String).join("; ")}`);
      const doc = document.toJS();
      if (doc !== null && doc !== undefined) manifests.push({ where: `${file}#${index}`, file, doc });
    });
  }
  return manifests;
}

const manifests = loadManifests();
const modelKey = (doc: Json): string => `${doc?.apiVersion}/${doc?.kind}`;
const inFile = (name: string): Manifest[] => manifests.filter((m) => m.file === `istio/${FILTER}/${name}`);
const ofKind = (kind: string): Manifest[] => manifests.filter((m) => m.doc.kind === kind);

function only(list: Manifest[], what: string): Json {
  assert.equal(list.length, 1, `expected exactly one ${what}, found ${list.length}`);
  return list[0]!.doc;
}

function validateSchema(doc: Json): void {
  const Model = MODELS[modelKey(doc)];
  if (!Model) throw new Error(`no Istio schema known for ${modelKey(doc)}: add its model to MODELS`);
  new Model(doc).validate();
}

const clientEf = () => only(inFile("client-envoyfilter.yaml"), "EnvoyFilter in client-envoyfilter.yaml");
const serverEf = () => only(inFile("server-envoyfilter.yaml"), "EnvoyFilter in server-envoyfilter.yaml");
const hookups = () => inFile("wasmplugin-hookup.yaml").map((m) => m.doc);
const clientHookup = () => hookups().find((d) => d.metadata.name === "tunnel-port-client-ecds");
const serverHookup = () => hookups().find((d) => d.metadata.name.startsWith("tunnel-port-server-ecds"));
const wasmPlugins = () => ofKind("WasmPlugin").map((m) => m.doc);
const wasmPluginOfRole = (role: string): Json => {
  const found = wasmPlugins().filter((wp) => wp.spec.pluginConfig?.role === role);
  assert.equal(found.length, 1, `expected one WasmPlugin with role ${role}`);
  return found[0];
};
const ecdsName = (wp: Json): string => `${ECDS_PREFIX}${wp.metadata.namespace}.${wp.metadata.name}`;

/** The plain Envoy configs these manifests translate (proven in the real Envoy by tests/mesh). */
const plainConfig = (name: string): Json => parse(readFileSync(join(REPO_ROOT, "envoy-configs", name), "utf8"));

// ---------------------------------------------------------------------------------------------
// Finding things inside Envoy config

/** Every object (depth first) inside `value` for which `test` holds, with a path for messages. */
function findAll(value: Json, test: (node: Json) => boolean, path = ""): { path: string; node: Json }[] {
  const out: { path: string; node: Json }[] = [];
  if (Array.isArray(value)) value.forEach((item, i) => out.push(...findAll(item, test, `${path}[${i}]`)));
  else if (value !== null && typeof value === "object") {
    if (test(value)) out.push({ path, node: value });
    for (const [key, child] of Object.entries(value)) out.push(...findAll(child, test, `${path}.${key}`));
  }
  return out;
}

const isInlineWasm = (node: Json): boolean => node?.typed_config?.["@type"] === WASM_TYPE;
const patchesOf = (ef: Json, applyTo: string, operation?: string): Json[] =>
  ef.spec.configPatches.filter((p: Json) => p.applyTo === applyTo && (operation === undefined || p.patch.operation === operation));
const addedListeners = (ef: Json): Json[] => patchesOf(ef, "LISTENER", "ADD").map((p) => structuredClone(p.patch.value));
const addedClusters = (ef: Json): Json[] => patchesOf(ef, "CLUSTER", "ADD").map((p) => structuredClone(p.patch.value));

function listenerNamed(listeners: Json[], name: string): Json {
  const found = listeners.filter((l) => l.name === name);
  assert.equal(found.length, 1, `expected one listener ${name}`);
  return found[0];
}

function clusterNamed(clusters: Json[], name: string): Json {
  const found = clusters.filter((c) => c.name === name);
  assert.equal(found.length, 1, `expected one cluster ${name}`);
  return found[0];
}

/** The 15008 listener and the internal listener of a server-side EnvoyFilter. */
function serverListeners(ef: Json): { connect: Json; internal: Json } {
  const listeners = addedListeners(ef);
  assert.equal(listeners.length, 2, "a socket listener on 15008 and an internal listener");
  const connect = listeners.find((l) => l.address?.socket_address);
  const internal = listeners.find((l) => l.internal_listener !== undefined);
  assert.ok(connect && internal, "one socket listener and one internal listener");
  return { connect, internal };
}

const hcmOf = (listener: Json): Json => {
  const filters = listener.filter_chains[0].filters;
  assert.equal(filters.length, 1);
  assert.equal(filters[0].name, HCM);
  return filters[0].typed_config;
};
const httpFilter = (hcm: Json, name: string): Json => hcm.http_filters.find((f: Json) => f.name === name)?.typed_config;

// ---------------------------------------------------------------------------------------------
// Embedded plugin configurations

interface PluginConfig {
  readonly where: string;
  readonly file: string;
  readonly json: string;
  readonly rootId: string;
  readonly name: string;
  readonly vmId: string;
  readonly failurePolicy: string | undefined;
}

/** istiod's translation of a WasmPlugin into the plugin config Envoy gets (pilot/pkg/model/extensions.go). */
function istiodPluginConfig(wp: Json): Json {
  const failurePolicy: Record<string, string> = { FAIL_OPEN: "FAIL_OPEN", FAIL_CLOSE: "FAIL_CLOSED", FAIL_RELOAD: "FAIL_RELOAD" };
  return {
    name: `${wp.metadata.namespace}.${wp.metadata.name}`,
    root_id: wp.spec.pluginName,
    configuration: { "@type": STRING_VALUE_TYPE, value: JSON.stringify(wp.spec.pluginConfig ?? {}) },
    ...(wp.spec.failStrategy ? { failure_policy: failurePolicy[wp.spec.failStrategy] } : {}),
    vm_config: { runtime: "envoy.wasm.runtime.v8", code: { local: { filename: WASM } } },
  };
}

function pluginConfigs(): PluginConfig[] {
  const configs: PluginConfig[] = [];
  for (const m of ofKind("EnvoyFilter")) {
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
  for (const m of ofKind("WasmPlugin")) {
    const translated = istiodPluginConfig(m.doc);
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

const roleOf = (config: PluginConfig): string => JSON.parse(config.json).role;

async function startFilter(config: PluginConfig): Promise<ProxyWasmHost> {
  const host = await ProxyWasmHost.fromFile(WASM, {
    rootId: config.rootId,
    name: config.name,
    vmId: config.vmId,
    pluginConfiguration: config.json,
    failurePolicy: "FAIL_CLOSED",
  });
  assert.ok(host.start(), `${config.where}: the filter refused its configuration: ${host.startFailure}`);
  return host;
}

/** Only if missing: another change may be in flight in assembly/, and the existing build is what is tested. */
function ensureFilterBuilt(): void {
  if (existsSync(WASM)) return;
  execFileSync(process.execPath, ["scripts/build.mjs", FILTER], { cwd: REPO_ROOT, stdio: "inherit" });
}

// ---------------------------------------------------------------------------------------------
// A small EnvoyFilter patcher (the semantics these manifests use) and an Istio-shaped sidecar

interface Chain {
  name: string;
  filters: Json[];
}
interface Listener {
  name: string;
  context: "SIDECAR_OUTBOUND" | "SIDECAR_INBOUND";
  chains: Chain[];
}

/** Istio's tcp_proxy on a passthrough-like chain (typed, so a MERGE has something to merge into). */
const istioTcpProxy = (cluster: string): Json => ({
  name: TCP_PROXY,
  typed_config: { "@type": TCP_PROXY_TYPE, stat_prefix: cluster, cluster },
});

/** The listeners of an Istio sidecar that a NETWORK_FILTER match could hit. */
function istioSidecarListeners(): Listener[] {
  const stack = (cluster: string) => [{ name: "istio.stats" }, istioTcpProxy(cluster)];
  return [
    {
      name: "virtualOutbound",
      context: "SIDECAR_OUTBOUND",
      chains: [
        { name: "virtualOutbound-blackhole", filters: stack("BlackHoleCluster") },
        { name: CATCH_ALL_CHAIN, filters: stack("PassthroughCluster") },
      ],
    },
    {
      name: "0.0.0.0_80",
      context: "SIDECAR_OUTBOUND",
      chains: [
        { name: "", filters: stack("outbound|80||my-service.default.svc.cluster.local") },
        { name: "PassthroughFilterChain", filters: stack("PassthroughCluster") },
      ],
    },
    {
      name: "virtualInbound",
      context: "SIDECAR_INBOUND",
      chains: [
        { name: "0.0.0.0_9376", filters: stack("inbound|9376||") },
        { name: "virtualInbound", filters: stack("InboundPassthroughCluster") },
      ],
    },
  ];
}

/** proto.Merge on the JSON form: messages merge, repeated fields append, scalars overwrite. */
function protoMerge(target: Json, source: Json): Json {
  for (const [key, value] of Object.entries(source)) {
    const existing = target[key];
    if (Array.isArray(value)) target[key] = [...(Array.isArray(existing) ? existing : []), ...structuredClone(value)];
    else if (value !== null && typeof value === "object" && existing !== null && typeof existing === "object" && !Array.isArray(existing)) {
      protoMerge(existing, value);
    } else target[key] = structuredClone(value);
  }
  return target;
}

const contextMatches = (wanted: string | undefined, actual: string): boolean => wanted === undefined || wanted === "ANY" || wanted === actual;

/** Applies the NETWORK_FILTER patches in order; refuses operations it does not model. */
function applyNetworkFilterPatches(listeners: Listener[], patches: Json[]): void {
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

const chainOf = (listeners: Listener[], listener: string, chain: string): Chain =>
  listeners.find((l) => l.name === listener)!.chains.find((c) => c.name === chain)!;

/** The catch-all chain after the client patches (route A or route B). */
function patchedCatchAll(patches: Json[]): { listeners: Listener[]; chain: Chain } {
  const listeners = istioSidecarListeners();
  applyNetworkFilterPatches(listeners, patches);
  return { listeners, chain: chainOf(listeners, "virtualOutbound", CATCH_ALL_CHAIN) };
}

/** Inline wasm filters pointed at the build output; ECDS references resolved the way istiod would. */
function resolveForEnvoy(value: Json): Json {
  const copy = structuredClone(value);
  for (const { node } of findAll(copy, isInlineWasm)) node.typed_config.config.vm_config.code.local.filename = WASM;
  for (const { node } of findAll(copy, (n) => typeof n?.name === "string" && n.name.startsWith(ECDS_PREFIX) && n.config_discovery)) {
    const wp = wasmPlugins().find((p) => ecdsName(p) === node.name);
    assert.ok(wp, `no WasmPlugin serves the ECDS resource ${node.name}`);
    delete node.config_discovery;
    node.typed_config = { "@type": WASM_TYPE, config: istiodPluginConfig(wp) };
  }
  return copy;
}

const sdsGrpcCluster = (): Json => ({
  // pilot-agent's SDS server, as Istio's bootstrap defines it (a unix socket).
  name: "sds-grpc",
  type: "STATIC",
  connect_timeout: "1s",
  typed_extension_protocol_options: {
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
      "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
      explicit_http_config: { http2_protocol_options: {} },
    },
  },
  load_assignment: {
    cluster_name: "sds-grpc",
    endpoints: [{ lb_endpoints: [{ endpoint: { address: { pipe: { path: "./var/run/secrets/workload-spiffe-uds/socket" } } } }] }],
  },
});

/** Istio's bootstrap extension (tools/packaging/common/envoy_bootstrap.json), here untyped-struct free. */
const INTERNAL_LISTENER_EXTENSION = {
  name: "envoy.bootstrap.internal_listener",
  typed_config: { "@type": "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener", buffer_size_kb: 64 },
};

/**
 * One sidecar that is both client and server (every labelled pod is): the catch-all chain after
 * the client patches, the server's added listeners, Istio's own clusters and every added cluster.
 */
function sidecarBootstrap(client: Json, server: Json, options: { internalListenerExtension?: boolean } = {}): Json {
  const catchAll = patchedCatchAll(client.spec.configPatches).chain.filters.filter((f) => f.name !== "istio.stats");
  return resolveForEnvoy({
    // SDS needs a node identity, as every Istio sidecar has.
    node: { id: "sidecar~10.244.1.21~my-service-0.default~default.svc.cluster.local", cluster: "my-service.default" },
    ...(options.internalListenerExtension === false ? {} : { bootstrap_extensions: [INTERNAL_LISTENER_EXTENSION] }),
    static_resources: {
      listeners: [
        {
          name: "virtualOutbound",
          address: { socket_address: { address: "0.0.0.0", port_value: 15001 } },
          use_original_dst: true,
          filter_chains: [{ name: CATCH_ALL_CHAIN, filters: catchAll }],
        },
        ...addedListeners(server),
      ],
      clusters: [
        { name: "PassthroughCluster", type: "ORIGINAL_DST", lb_policy: "CLUSTER_PROVIDED", connect_timeout: "10s" },
        { name: "BlackHoleCluster", type: "STATIC", connect_timeout: "10s" },
        sdsGrpcCluster(),
        ...addedClusters(client),
        ...addedClusters(server),
      ],
    },
  });
}

function envoyValidate(name: string, bootstrap: Json): { ok: boolean; output: string } {
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", `istio-tunnel-port-${name}-`));
  const path = join(dir, "envoy.yaml");
  writeFileSync(path, stringify(bootstrap));
  try {
    return validateConfig(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------

describe("Istio manifests for tunnel_port (istio/tunnel_port/)", () => {
  before(() => ensureFilterBuilt());

  it("exist: client and server EnvoyFilters, a WasmPlugin per role, their hookups", () => {
    assert.ok(inFile("client-envoyfilter.yaml").length === 1);
    assert.ok(inFile("server-envoyfilter.yaml").length === 1);
    assert.equal(inFile("wasmplugin.yaml").filter((m) => m.doc.kind === "WasmPlugin").length, 2);
    assert.equal(hookups().length, 2);
    assert.ok(clientHookup() && serverHookup());
  });

  it("no manifest mentions the telemetry exchange filters (metadata_exchange, istio-peer-exchange, peer_metadata)", () => {
    for (const path of yamlFiles()) {
      const text = readFileSync(path, "utf8");
      for (const pattern of FORBIDDEN) assert.doesNotMatch(text, pattern, `${relative(REPO_ROOT, path)} mentions ${pattern}`);
    }
  });

  describe("Istio CRD schema (@kubernetes-models/istio)", () => {
    for (const m of manifests) {
      it(`${m.where} ${m.doc.kind}/${m.doc.metadata?.name} is valid`, () => {
        assert.ok(MODELS[modelKey(m.doc)], `${m.where}: no Istio schema known for ${modelKey(m.doc)}`);
        validateSchema(m.doc);
      });
    }

    // The check must be able to fail, on the mistakes people make in these files.
    it("rejects a patch whose applyTo has the wrong type", () => {
      const broken = structuredClone(serverEf());
      broken.spec.configPatches[0].applyTo = 42;
      assert.throws(() => validateSchema(broken), /configPatches\/0\/applyTo must be string/);
    });

    it("rejects a listener patch value that is not an object", () => {
      const broken = structuredClone(serverEf());
      broken.spec.configPatches[1].patch.value = "tunnel_port_inbound_internal";
      assert.throws(() => validateSchema(broken), /configPatches\/1\/patch\/value must be object/);
    });

    it("rejects Envoy's spelling FAIL_CLOSED in a WasmPlugin (Istio's is FAIL_CLOSE)", () => {
      const broken = structuredClone(wasmPluginOfRole("server"));
      broken.spec.failStrategy = "FAIL_CLOSED";
      assert.throws(() => validateSchema(broken), /failStrategy must be equal to one of the allowed values/);
    });

    it("rejects an unknown traffic mode and a port given as a string in a WasmPlugin match", () => {
      const badMode = structuredClone(wasmPluginOfRole("client"));
      badMode.spec.match[0].mode = "OUTBOUND";
      assert.throws(() => validateSchema(badMode), /match\/0\/mode must be equal to one of the allowed values/);
      const badPort = structuredClone(wasmPluginOfRole("client"));
      badPort.spec.match[0].ports[0].number = "15006";
      assert.throws(() => validateSchema(badPort), /match\/0\/ports\/0\/number must be integer/);
    });
  });

  describe("embedded plugin configurations", () => {
    it("are found: one inline filter per EnvoyFilter route-A object, one pluginConfig per WasmPlugin", () => {
      const configs = pluginConfigs();
      const count = (file: string) => configs.filter((c) => c.file === `istio/${FILTER}/${file}`).length;
      assert.equal(count("client-envoyfilter.yaml"), 1);
      assert.equal(count("server-envoyfilter.yaml"), 1);
      assert.equal(count("wasmplugin.yaml"), 2);
      assert.equal(count("wasmplugin-hookup.yaml"), 0, "the hookups must reference the WasmPlugins, not inline the filter");
      assert.deepEqual(configs.map(roleOf).sort(), ["client", "client", "server", "server"]);
    });

    it("every one: root_id tunnel_port, FAIL_CLOSED (as Envoy gets it), vm_id tunnel_port when inline", () => {
      for (const config of pluginConfigs()) {
        assert.equal(config.rootId, FILTER, `${config.where}: root_id`);
        assert.equal(config.failurePolicy, "FAIL_CLOSED", `${config.where}: failure policy`);
        if (!config.where.includes("pluginConfig")) {
          assert.equal(config.vmId, FILTER, `${config.where}: vm_id`);
          assert.equal(config.name, FILTER, `${config.where}: name`);
        }
      }
    });

    it("route A and route B carry the same snapshot per role, and both roles the same mesh", () => {
      const configs = pluginConfigs().map((c) => ({ ...c, parsed: JSON.parse(c.json) }));
      for (const role of ["client", "server"]) {
        const [first, ...rest] = configs.filter((c) => c.parsed.role === role);
        for (const other of rest) assert.deepEqual(other.parsed, first!.parsed, `${other.where} differs from ${first!.where}`);
      }
      const client = configs.find((c) => c.parsed.role === "client")!.parsed;
      const server = configs.find((c) => c.parsed.role === "server")!.parsed;
      assert.deepEqual(server.workloads, client.workloads);
      assert.deepEqual(server.services, client.services);
    });

    for (const config of pluginConfigs()) {
      it(`${config.where}: accepted by build/tunnel_port.wasm`, async () => {
        await startFilter(config);
      });

      if (roleOf(config) === "client") {
        it(`${config.where}: tunnels service and pod connections to the manifest's cluster, plain TCP for the rest`, async () => {
          const host = await startFilter(config);
          const snapshot = JSON.parse(config.json);
          const clusterName = addedClusters(clientEf())[0].name;
          assert.equal(snapshot.tunnelCluster ?? "tunnel_port_hbone", clusterName, "the filter must pick the cluster the manifest adds");
          const connect = (destination: string) => host.connect({ source: "10.244.3.3:40000", destination }).filterState;
          // my-service:80 -> 9376 on pod 0, 9377 on pod 1 (per-endpoint override); round robin.
          const seen = new Set<string>();
          for (let i = 0; i < 2; i++) {
            const state = connect("10.96.10.1:80");
            assert.equal(state.get("envoy.tcp_proxy.cluster"), clusterName);
            assert.equal(state.get("wasm.service_port"), "80");
            const authority = state.get("wasm.authority")!;
            seen.add(authority);
            const pod = authority.split(":")[0];
            assert.equal(state.get("envoy.network.transport_socket.original_dst_address"), `${pod}:${snapshot.tunnelPort ?? 15008}`);
            assert.equal(state.get("envoy.network.upstream_subject_alt_names"), "spiffe://cluster.local/ns/default/sa/my-service");
          }
          assert.deepEqual([...seen].sort(), ["10.244.1.21:9376", "10.244.2.22:9377"]);
          // The pod IP dialled directly on its target port: the service port is recovered.
          const direct = connect("10.244.2.22:9377");
          assert.equal(direct.get("wasm.authority"), "10.244.2.22:9377");
          assert.equal(direct.get("wasm.service_port"), "80");
          // admin:81 -> 9376 on pod 0, carried as service port 81 (the server's RBAC denies it).
          assert.equal(connect("10.96.10.2:81").get("wasm.service_port"), "81");
          // Not in the mesh: no tunnel, plain TCP through tcp_proxy's own cluster.
          const outside = connect("93.184.216.34:443");
          assert.equal(outside.get("envoy.tcp_proxy.disable_tunneling"), "true");
          assert.equal(outside.get("envoy.tcp_proxy.cluster"), undefined);
        });
      } else {
        it(`${config.where}: accepts what this pod serves, refuses the rest, under the manifest's filter-state keys`, async () => {
          const host = await startFilter(config);
          const snapshot = JSON.parse(config.json);
          const { connect } = serverListeners(serverEf());
          // The keys come from the manifest's set_filter_state, so a renamed key fails here.
          const entries = httpFilter(hcmOf(connect), "envoy.filters.http.set_filter_state").on_request_headers;
          const keyOf = (format: string) => entries.find((e: Json) => e.format_string.text_format_source.inline_string === format).object_key;
          const portKey = keyOf("%REQ(X-TUNNEL-SERVICE-PORT)%");
          const peerKey = keyOf("%DOWNSTREAM_PEER_URI_SAN%");
          const appCluster = snapshot.appCluster ?? "tunnel_port_inbound";
          assert.ok(addedClusters(serverEf()).some((c) => c.name === appCluster), "the filter must pick a cluster the manifest adds");
          const peer = "spiffe://cluster.local/ns/default/sa/sleep";
          const tunnel = (authority: string, servicePort: string | undefined, principal: string | undefined) => {
            const filterState: Record<string, string> = {};
            if (servicePort !== undefined) filterState[portKey] = servicePort;
            if (principal !== undefined) filterState[peerKey] = principal;
            return host.connect({ source: "10.244.3.3:50000", destination: authority, filterState });
          };
          const accepted = tunnel(`${snapshot.localWorkload}:9376`, "80", peer);
          assert.equal(accepted.closed, false);
          assert.equal(accepted.filterState.get("envoy.tcp_proxy.cluster"), appCluster);
          assert.equal(accepted.filterState.get("wasm.target_port"), "9376");
          // 81 -> 9376 is served here: the filter accepts it; refusing it is the RBAC example's job.
          assert.equal(tunnel(`${snapshot.localWorkload}:9376`, "81", peer).closed, false);
          assert.equal(tunnel(`${snapshot.localWorkload}:9376`, "80", undefined).closed, true, "no authenticated peer");
          assert.equal(tunnel(`${snapshot.localWorkload}:9376`, undefined, peer).closed, true, "no service port");
          assert.equal(tunnel(`${snapshot.localWorkload}:7777`, "80", peer).closed, true, "a port this pod does not serve");
          assert.equal(tunnel(`${snapshot.localWorkload}:9376`, "82", peer).closed, true, "a service port that does not map here");
          assert.equal(tunnel("10.244.2.22:9377", "80", peer).closed, true, "another pod's authority");
        });
      }
    }

    it("a broken snapshot or a pod missing from it is refused, so the checks can fail", async () => {
      const base = JSON.parse(pluginConfigs().find((c) => roleOf(c) === "server")!.json);
      const broken = structuredClone(base);
      broken.workloads[0].addresses = ["10.244.1.300"];
      const host = await ProxyWasmHost.fromFile(WASM, { rootId: FILTER, pluginConfiguration: JSON.stringify(broken) });
      assert.equal(host.start(), false);
      assert.match(host.logs().map((e) => e.message).join("\n"), /workloads\[0\]\.addresses\[0\]: not an IP address: "10\.244\.1\.300"/);
      const foreign = { ...base, localWorkload: "10.244.9.9" };
      const other = await ProxyWasmHost.fromFile(WASM, { rootId: FILTER, pluginConfiguration: JSON.stringify(foreign) });
      assert.equal(other.start(), false);
      assert.match(other.logs().map((e) => e.message).join("\n"), /localWorkload: no workload has address 10\.244\.9\.9/);
    });
  });

  describe("client-envoyfilter.yaml", () => {
    const filterPatch = () => {
      const found = patchesOf(clientEf(), "NETWORK_FILTER", "INSERT_BEFORE");
      assert.equal(found.length, 1);
      return found[0];
    };

    it("has the three patches: the filter, the tcp_proxy MERGE, the cluster", () => {
      assert.deepEqual(
        clientEf().spec.configPatches.map((p: Json) => `${p.applyTo}/${p.patch.operation}/${p.match.context}`),
        ["NETWORK_FILTER/INSERT_BEFORE/SIDECAR_OUTBOUND", "NETWORK_FILTER/MERGE/SIDECAR_OUTBOUND", "CLUSTER/ADD/SIDECAR_OUTBOUND"],
      );
      assert.ok(Object.keys(clientEf().spec.workloadSelector?.labels ?? {}).length > 0, "no workloadSelector.labels");
    });

    it("configures the wasm filter: role client, FAIL_CLOSED, root_id and vm_id tunnel_port, V8, a local file", () => {
      const value = filterPatch().patch.value;
      assert.equal(value.name, WASM_FILTER);
      const config = value.typed_config.config;
      assert.equal(config.failure_policy, "FAIL_CLOSED");
      assert.equal(config.root_id, FILTER);
      assert.equal(config.vm_config.vm_id, FILTER);
      assert.equal(config.vm_config.runtime, "envoy.wasm.runtime.v8");
      assert.match(config.vm_config.code.local.filename, /^\/.*\/tunnel_port\.wasm$/);
      assert.equal(JSON.parse(config.configuration.value).role, "client");
    });

    it("both NETWORK_FILTER patches match tcp_proxy on the outbound catch-all chain", () => {
      for (const patch of patchesOf(clientEf(), "NETWORK_FILTER")) {
        assert.equal(patch.match.context, "SIDECAR_OUTBOUND");
        assert.equal(patch.match.listener.name, "virtualOutbound");
        assert.equal(patch.match.listener.filterChain.name, CATCH_ALL_CHAIN);
        assert.equal(patch.match.listener.filterChain.filter.name, TCP_PROXY);
      }
    });

    it("applied to an Istio-shaped sidecar: filter right before tcp_proxy on the catch-all chain, nowhere else", () => {
      const { listeners, chain } = patchedCatchAll(clientEf().spec.configPatches);
      assert.deepEqual(chain.filters.map((f) => f.name), ["istio.stats", WASM_FILTER, TCP_PROXY]);
      for (const listener of listeners) {
        for (const other of listener.chains) {
          if (other === chain) continue;
          assert.ok(!other.filters.some((f) => f.name === WASM_FILTER), `also inserted on ${listener.name}/${other.name}`);
          const tcp = other.filters.find((f) => f.name === TCP_PROXY);
          assert.equal(tcp.typed_config.tunneling_config, undefined, `tunneling_config also merged into ${listener.name}/${other.name}`);
        }
      }
    });

    it("the merged tcp_proxy keeps Istio's cluster and tunnels exactly as the proven plain config does", () => {
      const tcp = patchedCatchAll(clientEf().spec.configPatches).chain.filters.find((f) => f.name === TCP_PROXY).typed_config;
      assert.equal(tcp.cluster, "PassthroughCluster");
      assert.equal(tcp.stat_prefix, "PassthroughCluster");
      const plain = plainConfig("tunnel_port_client.yaml").static_resources.listeners[0].filter_chains[0].filters;
      assert.deepEqual(tcp.tunneling_config, plain.find((f: Json) => f.name === TCP_PROXY).typed_config.tunneling_config);
      // The formatters read the keys the filter writes (see the client behaviour test above).
      assert.equal(tcp.tunneling_config.hostname, "%FILTER_STATE(wasm.authority:PLAIN)%");
      assert.deepEqual(tcp.tunneling_config.headers_to_add, [
        { header: { key: "x-tunnel-service-port", value: "%FILTER_STATE(wasm.service_port:PLAIN)%" } },
      ]);
    });

    it("adds the ORIGINAL_DST HTTP/2 cluster the filter picks, over Istio mTLS (SDS default / ROOTCA via sds-grpc, ALPN h2)", () => {
      const clusters = addedClusters(clientEf());
      assert.equal(clusters.length, 1);
      const cluster = clusters[0];
      assert.equal(cluster.name, JSON.parse(filterPatch().patch.value.typed_config.config.configuration.value).tunnelCluster);
      clusterNamed(plainConfig("tunnel_port_client.yaml").static_resources.clusters, cluster.name); // the proven config's name
      assert.equal(cluster.type, "ORIGINAL_DST");
      assert.equal(cluster.lb_policy, "CLUSTER_PROVIDED");
      const http = cluster.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
      assert.deepEqual(http.explicit_http_config, { http2_protocol_options: {} });
      const tls = cluster.transport_socket.typed_config;
      assert.equal(tls["@type"], "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext");
      const common = tls.common_tls_context;
      assert.deepEqual(common.alpn_protocols, ["h2"]);
      const viaSdsGrpc = (secret: Json) => secret.sds_config.api_config_source.grpc_services[0].envoy_grpc.cluster_name;
      assert.deepEqual(common.tls_certificate_sds_secret_configs.map((s: Json) => [s.name, viaSdsGrpc(s)]), [["default", "sds-grpc"]]);
      const rootCa = common.combined_validation_context.validation_context_sds_secret_config;
      assert.deepEqual([rootCa.name, viaSdsGrpc(rootCa)], ["ROOTCA", "sds-grpc"]);
      // The SAN is per connection (the filter's upstream_subject_alt_names), never fixed here.
      assert.equal(common.combined_validation_context.default_validation_context.match_typed_subject_alt_names, undefined);
    });
  });

  describe("server-envoyfilter.yaml", () => {
    const wasmOfInternal = (internal: Json) => internal.filter_chains[0].filters[0];

    it("adds two listeners and two clusters, all on the inbound side", () => {
      assert.deepEqual(
        serverEf().spec.configPatches.map((p: Json) => `${p.applyTo}/${p.patch.operation}/${p.match.context}`),
        ["LISTENER/ADD/SIDECAR_INBOUND", "LISTENER/ADD/SIDECAR_INBOUND", "CLUSTER/ADD/SIDECAR_INBOUND", "CLUSTER/ADD/SIDECAR_INBOUND"],
      );
    });

    it("selects exactly the pod whose address is the server role's localWorkload", () => {
      const ef = serverEf();
      const podName = ef.spec.workloadSelector.labels["statefulset.kubernetes.io/pod-name"];
      assert.ok(podName, "the server side is per pod: select it by a per-pod label");
      const snapshot = JSON.parse(wasmOfInternal(serverListeners(ef).internal).typed_config.config.configuration.value);
      const workload = snapshot.workloads.find((w: Json) => w.uid === `${ef.metadata.namespace}/${podName}`);
      assert.ok(workload, `no workload ${ef.metadata.namespace}/${podName} in the snapshot`);
      assert.ok(workload.addresses.includes(snapshot.localWorkload));
    });

    it("terminates HBONE on 0.0.0.0:15008: mTLS required, Istio's SDS certificates, TLS 1.3, ALPN h2, HTTP/2 CONNECT", () => {
      const { connect } = serverListeners(serverEf());
      assert.deepEqual(connect.address.socket_address, { address: "0.0.0.0", port_value: 15008 });
      assert.equal(connect.filter_chains.length, 1);
      const tls = connect.filter_chains[0].transport_socket.typed_config;
      assert.equal(tls["@type"], "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext");
      assert.equal(tls.require_client_certificate, true);
      const common = tls.common_tls_context;
      assert.deepEqual(common.alpn_protocols, ["h2"]);
      assert.equal(common.tls_params.tls_minimum_protocol_version, "TLSv1_3");
      const viaSdsGrpc = (secret: Json) => secret.sds_config.api_config_source.grpc_services[0].envoy_grpc.cluster_name;
      assert.deepEqual(common.tls_certificate_sds_secret_configs.map((s: Json) => [s.name, viaSdsGrpc(s)]), [["default", "sds-grpc"]]);
      const rootCa = common.combined_validation_context.validation_context_sds_secret_config;
      assert.deepEqual([rootCa.name, viaSdsGrpc(rootCa)], ["ROOTCA", "sds-grpc"]);
      const hcm = hcmOf(connect);
      assert.equal(hcm.codec_type, "HTTP2");
      assert.equal(hcm.http2_protocol_options.allow_connect, true);
      assert.deepEqual(hcm.upgrade_configs, [{ upgrade_type: "CONNECT" }]);
    });

    it("keeps the proven plain config's CONNECT route, RBAC example and set_filter_state sharing, in that filter order", () => {
      const hcm = hcmOf(serverListeners(serverEf()).connect);
      const plainHcm = hcmOf(plainConfig("tunnel_port_server.yaml").static_resources.listeners[0]);
      assert.deepEqual(hcm.http_filters.map((f: Json) => f.name), ["envoy.filters.http.rbac", "envoy.filters.http.set_filter_state", "envoy.filters.http.router"]);
      assert.deepEqual(hcm.http_filters.map((f: Json) => f.name), plainHcm.http_filters.map((f: Json) => f.name));
      assert.deepEqual(hcm.route_config, plainHcm.route_config);
      for (const name of ["envoy.filters.http.rbac", "envoy.filters.http.set_filter_state"]) {
        assert.deepEqual(httpFilter(hcm, name), httpFilter(plainHcm, name), name);
      }
      const rbac = httpFilter(hcm, "envoy.filters.http.rbac").rules;
      assert.equal(rbac.action, "DENY");
      const header = Object.values<Json>(rbac.policies)[0].permissions[0].header;
      assert.equal(header.name, "x-tunnel-service-port");
      const keys = httpFilter(hcm, "envoy.filters.http.set_filter_state").on_request_headers.map((e: Json) => e.object_key);
      assert.deepEqual(keys, [
        "envoy.filters.listener.original_dst.local_ip",
        "envoy.filters.listener.original_dst.remote_ip",
        "io.tunnel_port.service_port",
        "io.tunnel_port.peer_principal",
      ]);
    });

    it("routes CONNECT to the internal listener through the internal cluster", () => {
      const ef = serverEf();
      const { connect, internal } = serverListeners(ef);
      const target = hcmOf(connect).route_config.virtual_hosts[0].routes[0].route.cluster;
      const cluster = clusterNamed(addedClusters(ef), target);
      const endpoint = cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.envoy_internal_address;
      assert.equal(endpoint.server_listener_name, internal.name);
      assert.equal(cluster.transport_socket.name, "envoy.transport_sockets.internal_upstream");
      const plainCluster = clusterNamed(plainConfig("tunnel_port_server.yaml").static_resources.clusters, "tunnel_port_inbound_internal");
      assert.deepEqual(cluster.transport_socket, plainCluster.transport_socket);
    });

    it("internal listener: original_dst, then the wasm filter (role server, FAIL_CLOSED) right before tcp_proxy to BlackHoleCluster", () => {
      const { internal } = serverListeners(serverEf());
      assert.deepEqual(internal.internal_listener, {});
      assert.deepEqual(internal.listener_filters.map((f: Json) => f.name), ["envoy.filters.listener.original_dst"]);
      assert.equal(internal.filter_chains.length, 1);
      const filters = internal.filter_chains[0].filters;
      assert.deepEqual(filters.map((f: Json) => f.name), [WASM_FILTER, TCP_PROXY]);
      const config = filters[0].typed_config.config;
      assert.equal(config.failure_policy, "FAIL_CLOSED");
      assert.equal(config.root_id, FILTER);
      assert.equal(config.vm_config.vm_id, FILTER);
      assert.equal(JSON.parse(config.configuration.value).role, "server");
      assert.equal(filters[1].typed_config.cluster, "BlackHoleCluster");
    });

    it("the application cluster is the one the filter picks: ORIGINAL_DST from 127.0.0.6 (Istio's inbound bind)", () => {
      const ef = serverEf();
      const snapshot = JSON.parse(wasmOfInternal(serverListeners(ef).internal).typed_config.config.configuration.value);
      const app = clusterNamed(addedClusters(ef), snapshot.appCluster ?? "tunnel_port_inbound");
      assert.equal(app.type, "ORIGINAL_DST");
      assert.equal(app.lb_policy, "CLUSTER_PROVIDED");
      assert.equal(app.upstream_bind_config.source_address.address, "127.0.0.6");
    });
  });

  describe("wasmplugin.yaml + wasmplugin-hookup.yaml (route B)", () => {
    it("a NETWORK WasmPlugin per role: FAIL_CLOSE, pluginName tunnel_port, an oci:// or file:// url", () => {
      for (const role of ["client", "server"]) {
        const spec = wasmPluginOfRole(role).spec;
        assert.equal(spec.type, "NETWORK");
        assert.equal(spec.failStrategy, "FAIL_CLOSE");
        assert.equal(spec.pluginName, FILTER);
        assert.match(spec.url, /^(oci|file):\/\//);
        assert.equal(istiodPluginConfig(wasmPluginOfRole(role)).failure_policy, "FAIL_CLOSED");
      }
    });

    it("Istio's own placement is parked on the capture port 15006, which no chain of the example mesh uses", () => {
      const snapshot = JSON.parse(pluginConfigs()[0]!.json);
      const used = new Set<number>([15008]);
      for (const service of snapshot.services) {
        for (const [port, target] of Object.entries<number>(service.ports)) used.add(Number(port)).add(target);
        for (const endpoint of service.endpoints) for (const target of Object.values<number>(endpoint.ports ?? {})) used.add(target);
      }
      for (const [role, mode] of [["client", "CLIENT"], ["server", "SERVER"]]) {
        const match = wasmPluginOfRole(role).spec.match;
        assert.deepEqual(match, [{ mode, ports: [{ number: 15006 }] }], `${role}: match`);
        assert.ok(!used.has(15006));
      }
    });

    it("each plugin selects the same workloads, from the same namespace, as its route-A EnvoyFilter", () => {
      for (const [role, ef] of [["client", clientEf()], ["server", serverEf()]] as const) {
        const wp = wasmPluginOfRole(role);
        assert.deepEqual(wp.spec.selector.matchLabels, ef.spec.workloadSelector.labels, `${role}: selector`);
        assert.equal(wp.metadata.namespace, ef.metadata.namespace, `${role}: namespace`);
      }
    });

    it("client hookup = client-envoyfilter.yaml with the inline filter replaced by the client plugin's ECDS reference", () => {
      const hookup = clientHookup();
      const wp = wasmPluginOfRole("client");
      const expected = structuredClone(clientEf().spec.configPatches);
      const reference = hookup.spec.configPatches[0].patch.value;
      expected[0].patch.value = reference;
      assert.deepEqual(hookup.spec.configPatches, expected);
      assert.equal(reference.name, ecdsName(wp));
      assert.deepEqual(reference.config_discovery.type_urls, [WASM_TYPE]);
      assert.deepEqual(reference.config_discovery.config_source.ads, {});
      assert.equal(reference.config_discovery.config_source.initial_fetch_timeout, "0s");
      assert.deepEqual(hookup.spec.workloadSelector, clientEf().spec.workloadSelector);
      // istiod serves WasmPlugin ECDS resources from the proxy's namespace or the root namespace only.
      assert.ok([hookup.metadata.namespace, "istio-system"].includes(wp.metadata.namespace));
      const names = patchedCatchAll(hookup.spec.configPatches).chain.filters.map((f) => f.name);
      assert.deepEqual(names, ["istio.stats", reference.name, TCP_PROXY]);
    });

    it("server hookup = server-envoyfilter.yaml with the internal listener's filter replaced by the server plugin's ECDS reference", () => {
      const hookup = serverHookup();
      const wp = wasmPluginOfRole("server");
      const expected = structuredClone(serverEf().spec.configPatches);
      const internalIndex = expected.findIndex((p: Json) => p.applyTo === "LISTENER" && p.patch.value.internal_listener !== undefined);
      const reference = hookup.spec.configPatches[internalIndex].patch.value.filter_chains[0].filters[0];
      expected[internalIndex].patch.value.filter_chains[0].filters[0] = reference;
      assert.deepEqual(hookup.spec.configPatches, expected);
      assert.equal(reference.name, ecdsName(wp));
      assert.deepEqual(reference.config_discovery.type_urls, [WASM_TYPE]);
      assert.equal(reference.config_discovery.config_source.initial_fetch_timeout, "0s");
      assert.deepEqual(hookup.spec.workloadSelector, serverEf().spec.workloadSelector);
      assert.ok([hookup.metadata.namespace, "istio-system"].includes(wp.metadata.namespace));
    });
  });

  describe("the pinned Envoy's --mode validate (an Istio-shaped sidecar that is client and server)", () => {
    const skip = existsSync(ENVOY_BINARY) ? false : `no Envoy at ${ENVOY_BINARY} (npm run setup)`;

    it("route A (client-envoyfilter.yaml + server-envoyfilter.yaml) passes", { skip }, () => {
      const result = envoyValidate("route-a", sidecarBootstrap(clientEf(), serverEf()));
      assert.equal(result.ok, true, result.output);
    });

    it("route B (the hookups, with what istiod makes of the WasmPlugins inlined where ECDS would deliver it) passes", { skip }, () => {
      const result = envoyValidate("route-b", sidecarBootstrap(clientHookup(), serverHookup()));
      assert.equal(result.ok, true, result.output);
    });

    it("the check can fail: a broken server snapshot makes Envoy refuse the filter", { skip }, () => {
      const server = structuredClone(serverEf());
      const config = findAll(server.spec, isInlineWasm)[0]!.node.typed_config.config;
      config.configuration.value = config.configuration.value.replace('"localWorkload": "10.244.1.21"', '"localWorkload": "10.244.1.299"');
      const result = envoyValidate("broken", sidecarBootstrap(clientEf(), server));
      assert.equal(result.ok, false);
      assert.match(result.output, /localWorkload: not an IP address: "10\.244\.1\.299"/);
    });

    it("the internal listener needs Istio's bootstrap extension: without it Envoy refuses the config", { skip }, () => {
      const result = envoyValidate("no-internal-listener", sidecarBootstrap(clientEf(), serverEf(), { internalListenerExtension: false }));
      assert.equal(result.ok, false, "validated without envoy.bootstrap.internal_listener");
      assert.match(result.output, /InternalListener bootstrap extension is mandatory/);
    });
  });
});

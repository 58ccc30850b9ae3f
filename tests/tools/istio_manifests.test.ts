// The Istio manifests under istio/ as a cluster and a sidecar would take them:
// - every YAML document passes Istio's CRD schema (@kubernetes-models/istio), and the schema check
//   really rejects a broken manifest;
// - every embedded plugin configuration is accepted by the compiled filter (the test host) and
//   routes the example pods the way the manifests' clusters expect;
// - the wasm filter lands right before tcp_proxy on the outbound catch-all chain only, with
//   FAIL_CLOSED and the passthrough_mtls root_id / vm_id;
// - the patches, applied to an Istio-shaped sidecar config, pass the pinned Envoy's
//   `--mode validate` (which also loads the .wasm and runs its configure).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { before, describe, it } from "node:test";
import { WasmPlugin } from "@kubernetes-models/istio/extensions.istio.io/v1alpha1";
import { DestinationRule } from "@kubernetes-models/istio/networking.istio.io/v1";
import { EnvoyFilter } from "@kubernetes-models/istio/networking.istio.io/v1alpha3";
import { parseAllDocuments, stringify } from "yaml";
import { ProxyWasmHost } from "../../host/index.js";
import { validateConfig } from "../support/envoy.js";
import { REPO_ROOT } from "../support/paths.js";

const ISTIO_DIR = join(REPO_ROOT, "istio", "passthrough_mtls");
const FILTER = "passthrough_mtls";
const WASM = join(REPO_ROOT, "build", `${FILTER}.wasm`);
const WASM_NETWORK_FILTER_TYPE = "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm";
const STRING_VALUE_TYPE = "type.googleapis.com/google.protobuf.StringValue";
const CATCH_ALL_CHAIN = "virtualOutbound-catchall-tcp";
const TCP_PROXY = "envoy.filters.network.tcp_proxy";

// ---------------------------------------------------------------------------------------------
// The manifests

type Json = any; // manifests are free-form YAML; each test asserts the shape it relies on

interface Manifest {
  /** `istio/<path>#<index>` for messages. */
  readonly where: string;
  readonly file: string;
  readonly doc: Json;
}

/** The Istio CRD model class for each apiVersion/kind the manifests may use. */
const MODELS: Record<string, new (data: Json) => { validate(): void }> = {
  "networking.istio.io/v1alpha3/EnvoyFilter": EnvoyFilter,
  "extensions.istio.io/v1alpha1/WasmPlugin": WasmPlugin,
  "networking.istio.io/v1/DestinationRule": DestinationRule,
};

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.ya?ml$/.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

function loadManifests(): Manifest[] {
  const manifests: Manifest[] = [];
  for (const path of yamlFiles(ISTIO_DIR)) {
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
const ofKind = (kind: string): Manifest[] => manifests.filter((m) => m.doc.kind === kind);
const inFile = (name: string): Manifest[] => manifests.filter((m) => m.file === `istio/${FILTER}/${name}`);

function only(list: Manifest[], what: string): Json {
  assert.equal(list.length, 1, `expected exactly one ${what}, found ${list.length}`);
  return list[0]!.doc;
}

function validateSchema(doc: Json): void {
  const Model = MODELS[modelKey(doc)];
  if (!Model) throw new Error(`no Istio schema known for ${modelKey(doc)}: add its model to MODELS`);
  new Model(doc).validate();
}

// ---------------------------------------------------------------------------------------------
// Embedded plugin configurations

interface PluginConfig {
  readonly where: string;
  /** The configuration bytes as Envoy's plugin gets them (JSON text). */
  readonly json: string;
  readonly rootId: string;
  readonly name: string;
  readonly vmId: string;
}

/** Wasm network filters inserted by EnvoyFilter patches (inline typed_config). */
function inlineWasmFilters(): { where: string; patch: Json; config: Json }[] {
  const found: { where: string; patch: Json; config: Json }[] = [];
  for (const m of ofKind("EnvoyFilter")) {
    (m.doc.spec?.configPatches ?? []).forEach((patch: Json, i: number) => {
      const typed = patch?.patch?.value?.typed_config;
      if (typed?.["@type"] === WASM_NETWORK_FILTER_TYPE) found.push({ where: `${m.where} configPatches[${i}]`, patch, config: typed.config });
    });
  }
  return found;
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
  const configs: PluginConfig[] = inlineWasmFilters().map(({ where, config }) => {
    assert.equal(config.configuration?.["@type"], STRING_VALUE_TYPE, `${where}: configuration must be a StringValue`);
    assert.equal(typeof config.configuration.value, "string", `${where}: configuration.value must be a string`);
    return { where, json: config.configuration.value, rootId: config.root_id, name: config.name, vmId: config.vm_config?.vm_id ?? "" };
  });
  for (const m of ofKind("WasmPlugin")) {
    const translated = istiodPluginConfig(m.doc);
    configs.push({ where: `${m.where} spec.pluginConfig`, json: translated.configuration.value, rootId: translated.root_id, name: translated.name, vmId: "" });
  }
  return configs;
}

// ---------------------------------------------------------------------------------------------
// A small EnvoyFilter patcher (the NETWORK_FILTER / CLUSTER semantics these manifests use), and an
// Istio-shaped sidecar to apply it to.

interface Chain {
  name: string;
  filters: Json[];
}
interface Listener {
  name: string;
  context: "SIDECAR_OUTBOUND" | "SIDECAR_INBOUND";
  chains: Chain[];
}

const filterNamed = (name: string, extra: Json = {}): Json => ({ name, ...extra });

/** The listeners of an Istio sidecar that a NETWORK_FILTER match could hit (filters by name only). */
function istioSidecarListeners(): Listener[] {
  const outboundStack = () => [filterNamed("istio.stats"), filterNamed(TCP_PROXY)];
  return [
    {
      name: "virtualOutbound",
      context: "SIDECAR_OUTBOUND",
      chains: [
        { name: "virtualOutbound-blackhole", filters: outboundStack() },
        { name: CATCH_ALL_CHAIN, filters: outboundStack() },
      ],
    },
    {
      name: "0.0.0.0_5432",
      context: "SIDECAR_OUTBOUND",
      chains: [
        { name: "", filters: outboundStack() },
        { name: "PassthroughFilterChain", filters: outboundStack() },
      ],
    },
    {
      name: "virtualInbound",
      context: "SIDECAR_INBOUND",
      chains: [{ name: "0.0.0.0_8080", filters: [filterNamed("istio.metadata_exchange"), filterNamed("istio.stats"), filterNamed(TCP_PROXY)] }],
    },
  ];
}

function contextMatches(wanted: string | undefined, actual: string): boolean {
  return wanted === undefined || wanted === "ANY" || wanted === actual;
}

/** Applies NETWORK_FILTER patches in order; refuses operations this patcher does not model. */
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
          case "INSERT_AFTER":
            chain.filters.splice(index + 1, 0, value);
            break;
          case "INSERT_FIRST":
            chain.filters.unshift(value);
            break;
          default:
            throw new Error(`patcher: NETWORK_FILTER operation ${patch.patch.operation} not modelled`);
        }
      }
    }
  }
}

function addedClusters(patches: Json[]): Json[] {
  return patches
    .filter((p) => p.applyTo === "CLUSTER")
    .map((p) => {
      assert.equal(p.patch.operation, "ADD", "only CLUSTER ADD is modelled");
      return structuredClone(p.patch.value);
    });
}

const chainOf = (listeners: Listener[], listener: string, chain: string): Chain =>
  listeners.find((l) => l.name === listener)!.chains.find((c) => c.name === chain)!;

/** An Envoy bootstrap shaped like an Istio sidecar's outbound side, for `envoy --mode validate`. */
function sidecarBootstrap(catchAllFilters: Json[], extraClusters: Json[]): Json {
  const http2 = {
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
      "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
      explicit_http_config: { http2_protocol_options: {} },
    },
  };
  const tcpProxy = (filter: Json): Json =>
    filter.name !== TCP_PROXY
      ? filter
      : {
          name: TCP_PROXY,
          typed_config: {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
            stat_prefix: "PassthroughCluster",
            cluster: "PassthroughCluster",
          },
        };
  return {
    // SDS needs a node identity, as every Istio sidecar has.
    node: { id: "sidecar~10.244.0.5~client-0.default~default.svc.cluster.local", cluster: "client.default" },
    static_resources: {
      listeners: [
        {
          name: "virtualOutbound",
          address: { socket_address: { address: "127.0.0.1", port_value: 15001 } },
          use_original_dst: true,
          // istio.stats is an Istio-only filter: left out, tcp_proxy gets Istio's passthrough shape.
          filter_chains: [{ name: CATCH_ALL_CHAIN, filters: catchAllFilters.filter((f) => f.name !== "istio.stats").map(tcpProxy) }],
        },
      ],
      clusters: [
        { name: "PassthroughCluster", type: "ORIGINAL_DST", lb_policy: "CLUSTER_PROVIDED", connect_timeout: "10s" },
        {
          // pilot-agent's SDS server, as Istio's bootstrap defines it (a unix socket).
          name: "sds-grpc",
          type: "STATIC",
          connect_timeout: "1s",
          typed_extension_protocol_options: http2,
          load_assignment: {
            cluster_name: "sds-grpc",
            endpoints: [{ lb_endpoints: [{ endpoint: { address: { pipe: { path: "./var/run/secrets/workload-spiffe-uds/socket" } } } }] }],
          },
        },
        ...extraClusters,
      ],
    },
  };
}

/** The local wasm path of every inline wasm filter, pointed at the build output. */
function withBuiltWasm(filters: Json[]): Json[] {
  return filters.map((filter) => {
    const local = filter?.typed_config?.config?.vm_config?.code?.local;
    if (!local) return filter;
    const copy = structuredClone(filter);
    copy.typed_config.config.vm_config.code.local.filename = WASM;
    return copy;
  });
}

function envoyValidate(name: string, bootstrap: Json): { ok: boolean; output: string } {
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", `istio-${name}-`));
  const path = join(dir, "envoy.yaml");
  writeFileSync(path, stringify(bootstrap));
  try {
    return validateConfig(path); // Envoy's output says what it refused
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The compiled filter

function newestSource(dirs: string[]): number {
  let newest = 0;
  for (const dir of dirs) {
    for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
      if (entry.isFile() && entry.name.endsWith(".ts")) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return newest;
}

/** Builds build/passthrough_mtls.wasm when missing or older than its sources (one build at a time). */
function ensureFilterBuilt(): void {
  const sources = [join(REPO_ROOT, "assembly"), join(REPO_ROOT, "filters", FILTER)];
  const stale = () => !existsSync(WASM) || statSync(WASM).mtimeMs < newestSource(sources);
  if (!stale()) return;
  mkdirSync(join(REPO_ROOT, "build"), { recursive: true });
  // The same lock the host tests use: test files run in parallel processes.
  const lock = join(REPO_ROOT, "build/.host-tests-build.lock");
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}; remove it if stale`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    if (stale()) execFileSync(process.execPath, ["scripts/build.mjs", FILTER], { cwd: REPO_ROOT, stdio: "inherit" });
  } finally {
    rmdirSync(lock);
  }
}

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

// ---------------------------------------------------------------------------------------------

describe("Istio manifests (istio/)", () => {
  before(() => ensureFilterBuilt());

  it("exist: an EnvoyFilter and a WasmPlugin for passthrough_mtls", () => {
    assert.ok(manifests.length > 0, "no YAML documents under istio/");
    assert.ok(inFile("envoyfilter.yaml").some((m) => m.doc.kind === "EnvoyFilter"));
    assert.ok(inFile("wasmplugin.yaml").some((m) => m.doc.kind === "WasmPlugin"));
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
      const broken = structuredClone(only(inFile("envoyfilter.yaml"), "EnvoyFilter in envoyfilter.yaml"));
      broken.spec.configPatches[0].applyTo = 42;
      assert.throws(() => validateSchema(broken), /configPatches\/0\/applyTo must be string/);
    });

    it("rejects an unquoted boolean label value in the workloadSelector", () => {
      const broken = structuredClone(only(inFile("envoyfilter.yaml"), "EnvoyFilter in envoyfilter.yaml"));
      broken.spec.workloadSelector.labels = { "mesh.example.com/passthrough-mtls": true };
      assert.throws(() => validateSchema(broken), /workloadSelector\/labels\/.* must be string/);
    });

    it("rejects Envoy's spelling FAIL_CLOSED in a WasmPlugin (Istio's is FAIL_CLOSE)", () => {
      const broken = structuredClone(only(ofKind("WasmPlugin"), "WasmPlugin"));
      broken.spec.failStrategy = "FAIL_CLOSED";
      assert.throws(() => validateSchema(broken), /failStrategy must be equal to one of the allowed values/);
    });

    it("rejects a patch value that is not an object", () => {
      const broken = structuredClone(only(inFile("envoyfilter.yaml"), "EnvoyFilter in envoyfilter.yaml"));
      broken.spec.configPatches[1].patch.value = "outbound_mtls_passthrough";
      assert.throws(() => validateSchema(broken), /configPatches\/1\/patch\/value must be object/);
    });
  });

  describe("embedded plugin configurations", () => {
    it("are found in the EnvoyFilter and in the WasmPlugin, and are the same snapshot", () => {
      const configs = pluginConfigs();
      assert.ok(configs.some((c) => c.where.includes("envoyfilter.yaml")), "no inline wasm config in envoyfilter.yaml");
      assert.ok(configs.some((c) => c.where.includes("wasmplugin.yaml")), "no pluginConfig in wasmplugin.yaml");
      const [first, ...rest] = configs.map((c) => JSON.parse(c.json));
      for (const other of rest) assert.deepEqual(other, first, "the manifests carry different example snapshots");
    });

    for (const config of pluginConfigs()) {
      it(`${config.where}: accepted by the compiled filter`, async () => {
        assert.equal(config.rootId, FILTER, `${config.where}: root_id`);
        await startFilter(config);
      });

      it(`${config.where}: routes the example pods to the manifests' clusters`, async () => {
        const host = await startFilter(config);
        const snapshot = JSON.parse(config.json);
        const mtlsCluster = snapshot.mtlsCluster ?? "outbound_mtls_passthrough";
        const clusterOf = (destination: string) => host.connect({ source: "10.244.0.5:40000", destination }).filterState.get("envoy.tcp_proxy.cluster");
        // An Istio pod that is in no headless service: the added mTLS cluster.
        assert.equal(clusterOf("10.244.1.17:8080"), mtlsCluster);
        // A headless-service member on its target port: Istio's own cluster for that service.
        assert.equal(clusterOf("10.244.3.4:5432"), "outbound|5432||postgres.data.svc.cluster.local");
        // A tlsMode-disabled pod and a non-pod: tcp_proxy's own cluster (no write).
        assert.equal(clusterOf("10.244.2.9:80"), undefined);
        assert.equal(clusterOf("93.184.216.34:443"), undefined);
      });
    }

    it("a broken snapshot is refused, so the check can fail", async () => {
      const config = pluginConfigs()[0]!;
      const snapshot = JSON.parse(config.json);
      snapshot.workloads[0].addresses = ["10.244.1.300"];
      const host = await ProxyWasmHost.fromFile(WASM, { rootId: FILTER, pluginConfiguration: JSON.stringify(snapshot) });
      assert.equal(host.start(), false);
      assert.match(host.startFailure ?? "", /proxy_on_configure returned false/);
      // The canary VM refuses it first, with one line naming the field.
      const lines = host.logs().map((entry) => entry.message).join("\n");
      assert.match(lines, /workloads\[0\]\.addresses\[0\]: not an IP address: "10\.244\.1\.300"/);
    });
  });

  describe("envoyfilter.yaml (self-contained: filter + cluster)", () => {
    const ef = () => only(inFile("envoyfilter.yaml"), "EnvoyFilter in envoyfilter.yaml");
    const filterPatch = () => {
      const patches = ef().spec.configPatches.filter((p: Json) => p.applyTo === "NETWORK_FILTER");
      assert.equal(patches.length, 1);
      return patches[0];
    };

    it("selects sidecars by a workload label", () => {
      const labels = ef().spec.workloadSelector?.labels;
      assert.ok(labels && Object.keys(labels).length > 0, "no workloadSelector.labels");
    });

    it("configures the wasm filter: FAIL_CLOSED, root_id and vm_id passthrough_mtls, V8, a local file", () => {
      const value = filterPatch().patch.value;
      assert.equal(value.name, "envoy.filters.network.wasm");
      assert.equal(value.typed_config["@type"], WASM_NETWORK_FILTER_TYPE);
      const config = value.typed_config.config;
      assert.equal(config.failure_policy, "FAIL_CLOSED");
      assert.equal(config.root_id, FILTER);
      assert.equal(config.name, FILTER);
      assert.equal(config.vm_config.vm_id, FILTER);
      assert.equal(config.vm_config.runtime, "envoy.wasm.runtime.v8");
      assert.match(config.vm_config.code.local.filename, /^\/.*\/passthrough_mtls\.wasm$/);
      assert.equal(config.configuration["@type"], STRING_VALUE_TYPE);
    });

    it("matches tcp_proxy on the outbound catch-all chain, INSERT_BEFORE", () => {
      const patch = filterPatch();
      assert.equal(patch.match.context, "SIDECAR_OUTBOUND");
      assert.equal(patch.match.listener.filterChain.name, CATCH_ALL_CHAIN);
      assert.equal(patch.match.listener.filterChain.filter.name, TCP_PROXY);
      assert.equal(patch.patch.operation, "INSERT_BEFORE");
    });

    it("puts the filter right before tcp_proxy on the catch-all chain, and nowhere else", () => {
      const listeners = istioSidecarListeners();
      applyNetworkFilterPatches(listeners, ef().spec.configPatches);
      const names = chainOf(listeners, "virtualOutbound", CATCH_ALL_CHAIN).filters.map((f) => f.name);
      assert.deepEqual(names, ["istio.stats", "envoy.filters.network.wasm", TCP_PROXY]);
      for (const listener of listeners) {
        for (const chain of listener.chains) {
          if (listener.name === "virtualOutbound" && chain.name === CATCH_ALL_CHAIN) continue;
          assert.ok(!chain.filters.some((f) => f.name === "envoy.filters.network.wasm"), `also inserted on ${listener.name}/${chain.name}`);
        }
      }
    });

    it("adds the ORIGINAL_DST mTLS cluster the filter picks, with Istio's SDS secrets", () => {
      const clusters = addedClusters(ef().spec.configPatches);
      assert.equal(clusters.length, 1);
      const cluster = clusters[0];
      const snapshot = JSON.parse(filterPatch().patch.value.typed_config.config.configuration.value);
      assert.equal(cluster.name, snapshot.mtlsCluster ?? "outbound_mtls_passthrough");
      assert.equal(cluster.type, "ORIGINAL_DST");
      assert.equal(cluster.lb_policy, "CLUSTER_PROVIDED");
      const patch = ef().spec.configPatches.find((p: Json) => p.applyTo === "CLUSTER");
      assert.equal(patch.match.context, "SIDECAR_OUTBOUND");
      const tls = cluster.transport_socket.typed_config;
      assert.equal(tls["@type"], "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext");
      const common = tls.common_tls_context;
      const viaSdsGrpc = (secret: Json) => secret.sds_config.api_config_source.grpc_services[0].envoy_grpc.cluster_name;
      assert.deepEqual(common.tls_certificate_sds_secret_configs.map((s: Json) => [s.name, viaSdsGrpc(s)]), [["default", "sds-grpc"]]);
      const rootCa = common.combined_validation_context.validation_context_sds_secret_config;
      assert.deepEqual([rootCa.name, viaSdsGrpc(rootCa)], ["ROOTCA", "sds-grpc"]);
      assert.deepEqual(common.alpn_protocols, ["istio"]);
    });

    it("applied to an Istio-shaped sidecar, passes the pinned Envoy's --mode validate", () => {
      const listeners = istioSidecarListeners();
      applyNetworkFilterPatches(listeners, ef().spec.configPatches);
      const chain = withBuiltWasm(chainOf(listeners, "virtualOutbound", CATCH_ALL_CHAIN).filters);
      const result = envoyValidate("envoyfilter", sidecarBootstrap(chain, addedClusters(ef().spec.configPatches)));
      assert.equal(result.ok, true, result.output);
    });

    it("the Envoy check can fail: a broken snapshot makes Envoy refuse the filter", () => {
      const listeners = istioSidecarListeners();
      const patches = structuredClone(ef().spec.configPatches);
      const config = patches.find((p: Json) => p.applyTo === "NETWORK_FILTER").patch.value.typed_config.config;
      config.configuration.value = config.configuration.value.replace("10.244.2.9", "10.244.2.999");
      applyNetworkFilterPatches(listeners, patches);
      const chain = withBuiltWasm(chainOf(listeners, "virtualOutbound", CATCH_ALL_CHAIN).filters);
      const result = envoyValidate("envoyfilter-broken", sidecarBootstrap(chain, addedClusters(patches)));
      assert.equal(result.ok, false);
      assert.match(result.output, /not an IP address: "10\.244\.2\.999"/);
    });
  });

  describe("wasmplugin.yaml + cluster.yaml + catchall.yaml (the WasmPlugin route)", () => {
    const wp = () => only(ofKind("WasmPlugin"), "WasmPlugin");
    const clusterEf = () => only(inFile("cluster.yaml"), "EnvoyFilter in cluster.yaml");
    const catchAllEf = () => only(inFile("catchall.yaml"), "EnvoyFilter in catchall.yaml");
    const selectorLabels = (doc: Json) => doc.spec.workloadSelector?.labels ?? doc.spec.selector?.matchLabels;

    it("WasmPlugin: NETWORK, FAIL_CLOSE, root_id passthrough_mtls, a phase, client side only, an oci:// or file:// url", () => {
      const spec = wp().spec;
      assert.equal(spec.type, "NETWORK");
      assert.equal(spec.failStrategy, "FAIL_CLOSE");
      assert.equal(spec.pluginName, FILTER);
      assert.ok(["AUTHN", "AUTHZ", "STATS", "UNSPECIFIED_PHASE"].includes(spec.phase), `phase ${spec.phase}`);
      assert.deepEqual(spec.match, [{ mode: "CLIENT" }]);
      assert.match(spec.url, /^(oci|file):\/\//);
      assert.ok(spec.pluginConfig && typeof spec.pluginConfig === "object");
    });

    it("every manifest selects the same workloads (filter, cluster and hookup land together)", () => {
      const expected = selectorLabels(only(inFile("envoyfilter.yaml"), "EnvoyFilter"));
      for (const m of [...ofKind("EnvoyFilter"), ...ofKind("WasmPlugin")]) {
        assert.deepEqual(selectorLabels(m.doc), expected, `${m.where}: selector`);
      }
    });

    it("cluster.yaml adds exactly envoyfilter.yaml's cluster, and nothing else", () => {
      const efPatches = only(inFile("envoyfilter.yaml"), "EnvoyFilter").spec.configPatches;
      assert.deepEqual(clusterEf().spec.configPatches, efPatches.filter((p: Json) => p.applyTo === "CLUSTER"));
    });

    it("catchall.yaml references the WasmPlugin's ECDS resource right before tcp_proxy on the catch-all chain", () => {
      const patches = catchAllEf().spec.configPatches;
      assert.equal(patches.length, 1);
      const value = patches[0].patch.value;
      assert.equal(value.name, `extensions.istio.io/wasmplugin/${wp().metadata.namespace}.${wp().metadata.name}`);
      assert.deepEqual(value.config_discovery.type_urls, [WASM_NETWORK_FILTER_TYPE]);
      assert.deepEqual(value.config_discovery.config_source.ads, {});
      // istiod serves WasmPlugin ECDS resources only from the proxy's namespace or the root namespace.
      assert.ok([catchAllEf().metadata.namespace, "istio-system"].includes(wp().metadata.namespace));
      const listeners = istioSidecarListeners();
      applyNetworkFilterPatches(listeners, patches);
      const names = chainOf(listeners, "virtualOutbound", CATCH_ALL_CHAIN).filters.map((f) => f.name);
      assert.deepEqual(names, ["istio.stats", value.name, TCP_PROXY]);
      const everywhere = listeners.flatMap((l) => l.chains).filter((c) => c.filters.some((f) => f.name === value.name));
      assert.equal(everywhere.length, 1, "inserted on more than the catch-all chain");
    });

    it("what istiod makes of the WasmPlugin, hooked in by catchall.yaml, passes the pinned Envoy's --mode validate", () => {
      const listeners = istioSidecarListeners();
      applyNetworkFilterPatches(listeners, catchAllEf().spec.configPatches);
      const ecdsName = catchAllEf().spec.configPatches[0].patch.value.name;
      // Envoy would receive this over ECDS; validate mode has no istiod, so resolve it inline.
      const chain = chainOf(listeners, "virtualOutbound", CATCH_ALL_CHAIN).filters.map((f) =>
        f.name === ecdsName ? { name: ecdsName, typed_config: { "@type": WASM_NETWORK_FILTER_TYPE, config: istiodPluginConfig(wp()) } } : f,
      );
      assert.equal(istiodPluginConfig(wp()).failure_policy, "FAIL_CLOSED");
      const result = envoyValidate("wasmplugin", sidecarBootstrap(chain, addedClusters(clusterEf().spec.configPatches)));
      assert.equal(result.ok, true, result.output);
    });
  });

  describe("headless-destinationrule.yaml", () => {
    it("turns on Istio mTLS for every headless service of the example snapshot", () => {
      const snapshot = JSON.parse(pluginConfigs()[0]!.json);
      const headless = (snapshot.services ?? []).filter((s: Json) => s.headless).map((s: Json) => s.hostname);
      assert.ok(headless.length > 0, "the example snapshot has no headless service");
      const rules = ofKind("DestinationRule").map((m) => m.doc.spec);
      for (const hostname of headless) {
        const rule = rules.find((r) => r.host === hostname);
        assert.ok(rule, `no DestinationRule for ${hostname}`);
        assert.equal(rule.trafficPolicy?.tls?.mode, "ISTIO_MUTUAL");
      }
    });
  });
});

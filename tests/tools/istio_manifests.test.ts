// The Istio manifests under istio/ as a cluster and a sidecar would take them:
// - every YAML document passes Istio's CRD schema (@kubernetes-models/istio), and the schema check
//   really rejects a broken manifest;
// - every embedded plugin configuration is accepted by the compiled filter (the test host) and
//   routes the example pods the way the manifests' clusters expect;
// - the wasm filter lands right before tcp_proxy on the outbound catch-all chain only, with
//   FAIL_CLOSED and the passthrough_mtls root_id / vm_id;
// - the patches, applied to an Istio-shaped sidecar config, pass the pinned Envoy's
//   `--mode validate` (which also loads the .wasm and runs its configure).
// Shared machinery (loading, schema, patcher, sidecar bootstrap, Envoy validate): ./istio_support.ts
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import {
  addedClusters,
  assertIstioSdsSecrets,
  assertRejectsEnvoyFailStrategy,
  assertRejectsNumericApplyTo,
  assertRejectsStringPatchValue,
  CATCH_ALL_CHAIN,
  currentHookup,
  RBAC_TYPE,
  ensureFilterBuilt,
  envoyValidate,
  istiodPluginConfig as istioPluginConfigOf,
  istioManifests,
  istioSidecarListeners as sidecarWith,
  type Json,
  type Listener,
  only,
  outboundTcpListener,
  patchCatchAll,
  type PluginConfig,
  pluginConfigs as pluginConfigsOf,
  refusedSnapshotLog,
  schemaValidityTests,
  sidecarBootstrap as istioSidecarBootstrap,
  startFilter as startFilterFrom,
  STRING_VALUE_TYPE,
  TCP_PROXY,
  validateSchema,
  virtualInboundListener,
  WASM_TYPE as WASM_NETWORK_FILTER_TYPE,
  wasmPath,
} from "./istio_support.js";

const FILTER = "passthrough_mtls";
const WASM = wasmPath(FILTER);

// ---------------------------------------------------------------------------------------------
// The manifests and their plugin configurations

const { manifests, inFile, ofKind } = istioManifests(FILTER);
const pluginConfigs = (): PluginConfig[] => pluginConfigsOf(manifests, WASM);
const istiodPluginConfig = (wp: Json): Json => istioPluginConfigOf(wp, WASM);
const startFilter = (config: PluginConfig) => startFilterFrom(WASM, config);

// ---------------------------------------------------------------------------------------------
// The sidecar the patches are applied to

/** The listeners of an Istio sidecar that a NETWORK_FILTER match could hit. */
function istioSidecarListeners(): Listener[] {
  return sidecarWith([
    outboundTcpListener("0.0.0.0_5432", "outbound|5432||postgres.data.svc.cluster.local", { passthrough: true }),
    virtualInboundListener(8080, { before: [{ name: "istio.metadata_exchange" }] }),
  ]);
}

/** The sidecar's listeners after the patches, and its catch-all chain. */
const patchedCatchAll = (patches: Json[]) => patchCatchAll(istioSidecarListeners(), patches);

/** An Envoy bootstrap shaped like an Istio sidecar's outbound side, for `envoy --mode validate`. */
const sidecarBootstrap = (catchAll: Json[], clusters: Json[], plugins: Json[] = []): Json =>
  istioSidecarBootstrap({
    node: { id: "sidecar~10.244.0.5~client-0.default~default.svc.cluster.local", cluster: "client.default" },
    catchAll,
    clusters,
    internalListenerExtension: false,
    wasm: WASM,
    plugins,
  });

// ---------------------------------------------------------------------------------------------

describe("Istio manifests (istio/)", () => {
  before(() => ensureFilterBuilt(FILTER, { rebuildIfStale: true }));

  it("exist: an EnvoyFilter and a WasmPlugin for passthrough_mtls", () => {
    assert.ok(manifests.length > 0, "no YAML documents under istio/");
    assert.ok(inFile("envoyfilter.yaml").some((m) => m.doc.kind === "EnvoyFilter"));
    assert.ok(inFile("wasmplugin.yaml").some((m) => m.doc.kind === "WasmPlugin"));
  });

  describe("Istio CRD schema (@kubernetes-models/istio)", () => {
    schemaValidityTests(manifests);

    // The check must be able to fail, on the mistakes people make in these files.
    it("rejects a patch whose applyTo has the wrong type", () => {
      assertRejectsNumericApplyTo(only(inFile("envoyfilter.yaml"), "EnvoyFilter in envoyfilter.yaml"));
    });

    it("rejects an unquoted boolean label value in the workloadSelector", () => {
      const broken = structuredClone(only(inFile("envoyfilter.yaml"), "EnvoyFilter in envoyfilter.yaml"));
      broken.spec.workloadSelector.labels = { "mesh.example.com/passthrough-mtls": true };
      assert.throws(() => validateSchema(broken), /workloadSelector\/labels\/.* must be string/);
    });

    it("rejects Envoy's spelling FAIL_CLOSED in a WasmPlugin (Istio's is FAIL_CLOSE)", () => {
      assertRejectsEnvoyFailStrategy(only(ofKind("WasmPlugin"), "WasmPlugin"));
    });

    it("rejects a patch value that is not an object", () => {
      assertRejectsStringPatchValue(only(inFile("envoyfilter.yaml"), "EnvoyFilter in envoyfilter.yaml"), 1, "outbound_mtls_passthrough");
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
      const { host, log } = await refusedSnapshotLog(WASM, FILTER, snapshot);
      assert.match(host.startFailure ?? "", /proxy_on_configure returned false/);
      // The canary VM refuses it first, with one line naming the field.
      assert.match(log, /workloads\[0\]\.addresses\[0\]: not an IP address: "10\.244\.1\.300"/);
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
      const { listeners, chain } = patchedCatchAll(ef().spec.configPatches);
      const names = chain.filters.map((f) => f.name);
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
      assertIstioSdsSecrets(common);
      assert.deepEqual(common.alpn_protocols, ["istio"]);
    });

    it("applied to an Istio-shaped sidecar, passes the pinned Envoy's --mode validate", () => {
      const { chain } = patchedCatchAll(ef().spec.configPatches);
      const result = envoyValidate("envoyfilter", sidecarBootstrap(chain.filters, addedClusters(ef().spec.configPatches)));
      assert.equal(result.ok, true, result.output);
    });

    it("the Envoy check can fail: a broken snapshot makes Envoy refuse the filter", () => {
      const patches = structuredClone(ef().spec.configPatches);
      const config = patches.find((p: Json) => p.applyTo === "NETWORK_FILTER").patch.value.typed_config.config;
      config.configuration.value = config.configuration.value.replace("10.244.2.9", "10.244.2.999");
      const { chain } = patchedCatchAll(patches);
      const result = envoyValidate("envoyfilter-broken", sidecarBootstrap(chain.filters, addedClusters(patches)));
      assert.equal(result.ok, false);
      assert.match(result.output, /not an IP address: "10\.244\.2\.999"/);
    });
  });

  describe("wasmplugin.yaml + cluster.yaml + catchall.yaml (the WasmPlugin route)", () => {
    const wp = () => only(ofKind("WasmPlugin"), "WasmPlugin");
    const clusterEf = () => only(inFile("cluster.yaml"), "EnvoyFilter in cluster.yaml");
    // As a 1.30+ proxy gets it (the 1.29 copy keyed on proxyVersion dropped; tests/istio runs istiod).
    const catchAllEf = () => currentHookup(only(inFile("catchall.yaml"), "EnvoyFilter in catchall.yaml"));
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
      assert.equal(value.name, `extensions.istio.io/trafficextension/${wp().metadata.namespace}.${wp().metadata.name}~istio-translated-wasmplugin`);
      assert.deepEqual(value.config_discovery.type_urls, [WASM_NETWORK_FILTER_TYPE, RBAC_TYPE]);
      assert.deepEqual(value.config_discovery.config_source.ads, {});
      // istiod serves WasmPlugin ECDS resources only from the proxy's namespace or the root namespace.
      assert.ok([catchAllEf().metadata.namespace, "istio-system"].includes(wp().metadata.namespace));
      const { listeners, chain } = patchedCatchAll(patches);
      const names = chain.filters.map((f) => f.name);
      assert.deepEqual(names, ["istio.stats", value.name, TCP_PROXY]);
      const everywhere = listeners.flatMap((l) => l.chains).filter((c) => c.filters.some((f) => f.name === value.name));
      assert.equal(everywhere.length, 1, "inserted on more than the catch-all chain");
    });

    it("what istiod makes of the WasmPlugin, hooked in by catchall.yaml, passes the pinned Envoy's --mode validate", () => {
      const { chain } = patchedCatchAll(catchAllEf().spec.configPatches);
      // Envoy would receive the WasmPlugin over ECDS; validate mode has no istiod, so it is resolved inline.
      assert.equal(istiodPluginConfig(wp()).failure_policy, "FAIL_CLOSED");
      const result = envoyValidate("wasmplugin", sidecarBootstrap(chain.filters, addedClusters(clusterEf().spec.configPatches), [wp()]));
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

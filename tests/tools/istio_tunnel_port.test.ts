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
// Shared machinery (loading, schema, patcher, sidecar bootstrap, Envoy validate): ./istio_support.ts
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { before, describe, it } from "node:test";
import { REPO_ROOT } from "../support/paths.js";
import {
  addedClusters,
  addedListeners,
  assertEcdsReference,
  currentHookup,
  assertIstioSdsSecrets,
  assertMatchesCatchAllTcpProxy,
  assertPluginConfigsPinned,
  assertRejectsBadWasmPluginMatch,
  assertRejectsEnvoyFailStrategy,
  assertRejectsNumericApplyTo,
  assertRejectsStringPatchValue,
  clusterNamed,
  ensureFilterBuilt,
  envoyValidate,
  findAll,
  isInlineWasm,
  istiodPluginConfig as istioPluginConfigOf,
  istioManifests,
  istioSidecarListeners as sidecarWith,
  type Json,
  type Listener,
  only,
  outboundTcpListener,
  patchCatchAll,
  patchesOf,
  plainConfig,
  type PluginConfig,
  pluginConfigs as pluginConfigsOf,
  refusedSnapshotLog,
  schemaValidityTests,
  sidecarBootstrap as istioSidecarBootstrap,
  startFilter as startFilterFrom,
  TCP_PROXY,
  virtualInboundListener,
  WASM_FILTER,
  wasmPath,
  yamlFiles as yamlFilesIn,
} from "./istio_support.js";

const FILTER = "tunnel_port";
const WASM = wasmPath(FILTER);
const HCM = "envoy.filters.network.http_connection_manager";
/** Strings no manifest may contain: routing must not depend on Istio's telemetry exchange. */
const FORBIDDEN = [/metadata_exchange/i, /istio-peer-exchange/i, /peer_metadata/i];

// ---------------------------------------------------------------------------------------------
// The manifests

const { dir: DIR, manifests, inFile, ofKind } = istioManifests(FILTER);
const yamlFiles = (): string[] => yamlFilesIn(DIR);

const clientEf = () => only(inFile("client-envoyfilter.yaml"), "EnvoyFilter in client-envoyfilter.yaml");
const serverEf = () => only(inFile("server-envoyfilter.yaml"), "EnvoyFilter in server-envoyfilter.yaml");
const hookups = () => inFile("wasmplugin-hookup.yaml").map((m) => m.doc);
// As a 1.30+ proxy gets them (the 1.29 copies keyed on proxyVersion dropped; tests/istio runs istiod).
const clientHookup = () => currentHookup(hookups().find((d) => d.metadata.name === "tunnel-port-client-ecds"));
const serverHookup = () => currentHookup(hookups().find((d) => d.metadata.name.startsWith("tunnel-port-server-ecds")));
const wasmPlugins = () => ofKind("WasmPlugin").map((m) => m.doc);
const wasmPluginOfRole = (role: string): Json => {
  const found = wasmPlugins().filter((wp) => wp.spec.pluginConfig?.role === role);
  assert.equal(found.length, 1, `expected one WasmPlugin with role ${role}`);
  return found[0];
};

// ---------------------------------------------------------------------------------------------
// Finding things inside Envoy config

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

const istiodPluginConfig = (wp: Json): Json => istioPluginConfigOf(wp, WASM);
const pluginConfigs = (): PluginConfig[] => pluginConfigsOf(manifests, WASM);
const roleOf = (config: PluginConfig): string => JSON.parse(config.json).role;
const startFilter = (config: PluginConfig) => startFilterFrom(WASM, config);

// ---------------------------------------------------------------------------------------------
// The sidecar the patches are applied to

/** The listeners of an Istio sidecar that a NETWORK_FILTER match could hit. */
function istioSidecarListeners(): Listener[] {
  return sidecarWith([
    outboundTcpListener("0.0.0.0_80", "outbound|80||my-service.default.svc.cluster.local", { passthrough: true }),
    virtualInboundListener(9376, { passthrough: true }),
  ]);
}

/** The catch-all chain after the client patches (route A or route B). */
const patchedCatchAll = (patches: Json[]) => patchCatchAll(istioSidecarListeners(), patches);

/**
 * One sidecar that is both client and server (every labelled pod is): the catch-all chain after
 * the client patches, the server's added listeners, Istio's own clusters and every added cluster.
 */
function sidecarBootstrap(client: Json, server: Json, options: { internalListenerExtension?: boolean } = {}): Json {
  return istioSidecarBootstrap({
    node: { id: "sidecar~10.244.1.21~my-service-0.default~default.svc.cluster.local", cluster: "my-service.default" },
    catchAll: patchedCatchAll(client.spec.configPatches).chain.filters,
    listeners: addedListeners(server),
    clusters: [...addedClusters(client), ...addedClusters(server)],
    internalListenerExtension: options.internalListenerExtension,
    wasm: WASM,
    plugins: wasmPlugins(),
  });
}

// ---------------------------------------------------------------------------------------------

describe("Istio manifests for tunnel_port (istio/tunnel_port/)", () => {
  before(() => ensureFilterBuilt(FILTER));

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
    schemaValidityTests(manifests);

    // The check must be able to fail, on the mistakes people make in these files.
    it("rejects a patch whose applyTo has the wrong type", () => {
      assertRejectsNumericApplyTo(serverEf());
    });

    it("rejects a listener patch value that is not an object", () => {
      assertRejectsStringPatchValue(serverEf(), 1, "tunnel_port_inbound_internal");
    });

    it("rejects Envoy's spelling FAIL_CLOSED in a WasmPlugin (Istio's is FAIL_CLOSE)", () => {
      assertRejectsEnvoyFailStrategy(wasmPluginOfRole("server"));
    });

    it("rejects an unknown traffic mode and a port given as a string in a WasmPlugin match", () => {
      assertRejectsBadWasmPluginMatch(wasmPluginOfRole("client"));
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
      assertPluginConfigsPinned(pluginConfigs(), FILTER);
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
            // podIP:targetPort: the CONNECT's :authority (the merged tunneling_config formats it
            // from this key) and the tunnel's address (the added cluster dials it on 15008).
            const authority = state.get("envoy.network.transport_socket.original_dst_address")!;
            seen.add(authority);
            assert.equal(state.get("wasm.authority"), undefined);
            assert.equal(state.get("envoy.network.upstream_subject_alt_names"), "spiffe://cluster.local/ns/default/sa/my-service");
          }
          assert.deepEqual([...seen].sort(), ["10.244.1.21:9376", "10.244.2.22:9377"]);
          // The pod IP dialled directly on its target port: the service port is recovered.
          const direct = connect("10.244.2.22:9377");
          assert.equal(direct.get("envoy.network.transport_socket.original_dst_address"), "10.244.2.22:9377");
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
          const portKey = keyOf("%CEL(request.headers['x-tunnel-service-port'])%");
          const peerKey = keyOf("%DOWNSTREAM_PEER_URI_SAN%");
          const authorityKey = entries.find((e: Json) => e.factory_key === "envoy.string" && e.format_string.text_format_source.inline_string === "%REQ(:AUTHORITY)%").object_key;
          const appCluster = snapshot.appCluster ?? "tunnel_port_inbound";
          assert.ok(addedClusters(serverEf()).some((c) => c.name === appCluster), "the filter must pick a cluster the manifest adds");
          const peer = "spiffe://cluster.local/ns/default/sa/sleep";
          const tunnel = (authority: string, servicePort: string | undefined, principal: string | undefined) => {
            const filterState: Record<string, string> = {};
            if (servicePort !== undefined) filterState[portKey] = servicePort;
            if (principal !== undefined) filterState[peerKey] = principal;
            filterState[authorityKey] = authority;
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
          assert.equal(tunnel(`${snapshot.localWorkload}:9376`, "081", peer).closed, true, "a non-canonical service port");
          assert.equal(tunnel(`${snapshot.localWorkload}:9376`, "81,80", peer).closed, true, "a repeated header, as the CEL formatter joins it");
          assert.equal(tunnel(`${snapshot.localWorkload}:09376`, "80", peer).closed, true, "a non-canonical target port in the authority");
          assert.equal(tunnel("10.244.2.22:9377", "80", peer).closed, true, "another pod's authority");
        });
      }
    }

    it("a broken snapshot or a pod missing from it is refused, so the checks can fail", async () => {
      const base = JSON.parse(pluginConfigs().find((c) => roleOf(c) === "server")!.json);
      const broken = structuredClone(base);
      broken.workloads[0].addresses = ["10.244.1.300"];
      assert.match((await refusedSnapshotLog(WASM, FILTER, broken)).log, /workloads\[0\]\.addresses\[0\]: not an IP address: "10\.244\.1\.300"/);
      const foreign = { ...base, localWorkload: "10.244.9.9" };
      assert.match((await refusedSnapshotLog(WASM, FILTER, foreign)).log, /localWorkload: no workload has address 10\.244\.9\.9/);
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
        assertMatchesCatchAllTcpProxy(patch);
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
      assert.equal(tcp.tunneling_config.hostname, "%FILTER_STATE(envoy.network.transport_socket.original_dst_address:PLAIN)%");
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
      // The filter writes podIP:targetPort (the :authority too); the cluster dials the pods' 15008.
      assert.deepEqual(cluster.original_dst_lb_config, { upstream_port_override: 15008 });
      const http = cluster.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
      assert.deepEqual(http.explicit_http_config, { http2_protocol_options: {} });
      const tls = cluster.transport_socket.typed_config;
      assert.equal(tls["@type"], "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext");
      const common = tls.common_tls_context;
      assert.deepEqual(common.alpn_protocols, ["h2"]);
      assertIstioSdsSecrets(common);
      // The SAN is per connection (the filter's upstream_subject_alt_names), never fixed here.
      assert.equal(common.combined_validation_context.default_validation_context.match_typed_subject_alt_names, undefined);
    });
  });

  describe("server-envoyfilter.yaml", () => {
    const wasmOfInternal = (internal: Json) => internal.filter_chains[0].filters[0];

    it("adds two listeners and two clusters, all on the inbound side, and removes ambient istiod's connect_terminate", () => {
      assert.deepEqual(
        serverEf().spec.configPatches.map((p: Json) => `${p.applyTo}/${p.patch.operation}/${p.match.context}`),
        ["LISTENER/ADD/SIDECAR_INBOUND", "LISTENER/ADD/SIDECAR_INBOUND", "CLUSTER/ADD/SIDECAR_INBOUND", "CLUSTER/ADD/SIDECAR_INBOUND", "LISTENER/REMOVE/SIDECAR_INBOUND"],
      );
      // What the REMOVE does on an ambient-enabled istiod is shown by its own generation (tests/istio).
      assert.equal(serverEf().spec.configPatches[4].match.listener.name, "connect_terminate");
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
      assertIstioSdsSecrets(common);
      const hcm = hcmOf(connect);
      assert.equal(hcm.codec_type, "HTTP2");
      assert.equal(hcm.http2_protocol_options.allow_connect, true);
      assert.deepEqual(hcm.upgrade_configs, [{ upgrade_type: "CONNECT" }]);
    });

    it("keeps the proven plain config's CONNECT route, canonical-port guard, RBAC example and set_filter_state sharing, in that filter order", () => {
      const hcm = hcmOf(serverListeners(serverEf()).connect);
      const plainHcm = hcmOf(plainConfig("tunnel_port_server.yaml").static_resources.listeners[0]);
      assert.deepEqual(hcm.http_filters.map((f: Json) => f.name), ["tunnel_port.guard", "envoy.filters.http.rbac", "envoy.filters.http.set_filter_state", "envoy.filters.http.router"]);
      assert.deepEqual(hcm.http_filters.map((f: Json) => f.name), plainHcm.http_filters.map((f: Json) => f.name));
      assert.deepEqual(hcm.route_config, plainHcm.route_config);
      for (const name of ["tunnel_port.guard", "envoy.filters.http.rbac", "envoy.filters.http.set_filter_state"]) {
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
        "io.tunnel_port.authority",
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
      assertEcdsReference(reference, wp);
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
      assertEcdsReference(reference, wp, { ads: false });
      assert.deepEqual(hookup.spec.workloadSelector, serverEf().spec.workloadSelector);
      assert.ok([hookup.metadata.namespace, "istio-system"].includes(wp.metadata.namespace));
    });
  });

  describe("the pinned Envoy's --mode validate (an Istio-shaped sidecar that is client and server)", () => {
    it("route A (client-envoyfilter.yaml + server-envoyfilter.yaml) passes", () => {
      const result = envoyValidate("tunnel-port-route-a", sidecarBootstrap(clientEf(), serverEf()));
      assert.equal(result.ok, true, result.output);
    });

    it("route B (the hookups, with what istiod makes of the WasmPlugins inlined where ECDS would deliver it) passes", () => {
      const result = envoyValidate("tunnel-port-route-b", sidecarBootstrap(clientHookup(), serverHookup()));
      assert.equal(result.ok, true, result.output);
    });

    it("the check can fail: a broken server snapshot makes Envoy refuse the filter", () => {
      const server = structuredClone(serverEf());
      const config = findAll(server.spec, isInlineWasm)[0]!.node.typed_config.config;
      config.configuration.value = config.configuration.value.replace('"localWorkload": "10.244.1.21"', '"localWorkload": "10.244.1.299"');
      const result = envoyValidate("tunnel-port-broken", sidecarBootstrap(clientEf(), server));
      assert.equal(result.ok, false);
      assert.match(result.output, /localWorkload: not an IP address: "10\.244\.1\.299"/);
    });

    it("the internal listener needs Istio's bootstrap extension: without it Envoy refuses the config", () => {
      const result = envoyValidate("tunnel-port-no-internal-listener", sidecarBootstrap(clientEf(), serverEf(), { internalListenerExtension: false }));
      assert.equal(result.ok, false, "validated without envoy.bootstrap.internal_listener");
      assert.match(result.output, /InternalListener bootstrap extension is mandatory/);
    });
  });
});

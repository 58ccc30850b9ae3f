// The Istio manifests of waypoint_route (istio/waypoint_route/) as a cluster and a sidecar would take them:
// - every YAML document passes Istio's CRD schema (@kubernetes-models/istio), and the schema check
//   really rejects broken manifests;
// - every embedded plugin configuration (the inline EnvoyFilter StringValue, the WasmPlugin's
//   pluginConfig as istiod serialises it) is accepted by build/waypoint_route.wasm in the test host
//   and routes the example mesh the way the manifests around it expect: single HBONE to the local
//   waypoint, double HBONE through the east-west gateway (also after a snapshot push marking the
//   local waypoint unhealthy), pod IPs, errors, plain TCP, with the manifests' cluster names;
// - the manifests' own format strings (relay, internal listener, tunneling_config), evaluated over
//   what the filter wrote, give the outer hop its gateway, identities and authority, and one pool
//   key per tunnel;
// - structure: the filter and the relay land right before tcp_proxy on the outbound catch-all
//   chain only, tcp_proxy gets the tunneling_config, the internal listener and the three clusters
//   are added with Istio's SDS secrets; FAIL_CLOSED, root_id / vm_id waypoint_route; the pieces
//   taken from the plain Envoy config (proven in the real Envoy) are identical to it; no name
//   collides with Istio's own HBONE resources; route B (WasmPlugin + hookup) equals route A but for
//   the filter;
// - the patched sidecar (Istio-shaped bootstrap) passes the pinned Envoy's `--mode validate`, which
//   loads the .wasm and runs its configure; and Envoy refuses what the README says it refuses.
// Shared machinery (loading, schema, patcher, sidecar bootstrap, Envoy validate): ./istio_support.ts
// Run: node --import tsx --test tests/tools/istio_waypoint_route.test.ts
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { before, describe, it } from "node:test";
import { type Connection, type ProxyWasmHost } from "../../host/index.js";
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
  HTTP_OPTIONS,
  isInlineWasm,
  istiodPluginConfig as istioPluginConfigOf,
  istioManifests,
  istioSidecarListeners as sidecarWith,
  type Json,
  type Listener,
  loadManifests,
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
  UPSTREAM_TLS_TYPE,
  validateSchema,
  virtualInboundListener,
  WASM_FILTER,
  wasmPath,
  yamlFiles as yamlFilesIn,
} from "./istio_support.js";

const FILTER = "waypoint_route";
const WASM = wasmPath(FILTER);
const SET_FILTER_STATE = "envoy.filters.network.set_filter_state";
const OPT_IN_LABEL = "mesh.example.com/waypoint-route";
/**
 * Names Istio gives its own HBONE / double-HBONE listeners and clusters (pilot/pkg/networking/core:
 * waypoint.go, cluster_waypoint.go) and its sidecar's fixed ones. An EnvoyFilter ADD with one of
 * these names would duplicate Istio's resource where Istio builds it: Envoy refuses the update.
 */
const ISTIO_RESERVED_NAMES = [
  "connect_originate",
  "inner_connect_originate",
  "outer_connect_originate",
  "connect_terminate",
  "main_internal",
  "encap",
  "virtualOutbound",
  "virtualInbound",
  "PassthroughCluster",
  "InboundPassthroughCluster",
  "BlackHoleCluster",
  "sds-grpc",
  "xds-grpc",
];

// ---------------------------------------------------------------------------------------------
// The manifests

const { dir: DIR, manifests, inFile } = istioManifests(FILTER);
const yamlFiles = (): string[] => yamlFilesIn(DIR);

/** Route A: the self-contained EnvoyFilter. */
const routeA = () => only(inFile("envoyfilter.yaml"), "EnvoyFilter in envoyfilter.yaml");
/** Route B: the WasmPlugin and its hookup EnvoyFilter. */
const wasmPlugin = () => only(inFile("wasmplugin.yaml").filter((m) => m.doc.kind === "WasmPlugin"), "WasmPlugin in wasmplugin.yaml");
// As a 1.30+ proxy gets it (the 1.29 copy keyed on proxyVersion dropped; tests/istio runs istiod).
const hookup = () => currentHookup(only(inFile("wasmplugin.yaml").filter((m) => m.doc.kind === "EnvoyFilter"), "EnvoyFilter in wasmplugin.yaml"));

/** The plain client config these manifests translate (proven in the real Envoy by tests/mesh). */
const plainClient = (): Json => plainConfig("waypoint_route_client.yaml");
const plainCatchAllFilters = (): Json[] => plainClient().static_resources.listeners.find((l: Json) => l.name === "virtualOutbound").filter_chains[0].filters;
const plainListener = (name: string): Json => plainClient().static_resources.listeners.find((l: Json) => l.name === name);
const plainCluster = (name: string): Json => clusterNamed(plainClient().static_resources.clusters, name);

// ---------------------------------------------------------------------------------------------
// Finding things inside Envoy config

/** The one internal listener route A adds (the outer CONNECT). */
function outerListener(ef: Json = routeA()): Json {
  const listeners = addedListeners(ef);
  assert.equal(listeners.length, 1, "one added listener: the internal listener of the outer CONNECT");
  return listeners[0];
}

const filterOf = (filters: Json[], name: string): Json => {
  const found = filters.filter((f) => f.name === name);
  assert.equal(found.length, 1, `expected one ${name}`);
  return found[0].typed_config;
};

/** The relay patch's set_filter_state config (patch (b)). */
function relayOf(ef: Json): Json {
  const found = patchesOf(ef, "NETWORK_FILTER", "INSERT_BEFORE").filter((p) => p.patch.value.name === SET_FILTER_STATE);
  assert.equal(found.length, 1, "one set_filter_state relay");
  return found[0].patch.value.typed_config;
}

/** Istio mTLS from the sidecar's SDS secrets, TLS 1.3, ALPN h2, and no fixed SAN matcher. */
function assertIstioMtls(tls: Json, where: string): void {
  assert.equal(tls["@type"], UPSTREAM_TLS_TYPE, where);
  const common = tls.common_tls_context;
  assert.deepEqual(common.alpn_protocols, ["h2"], `${where}: ALPN`);
  assert.equal(common.tls_params.tls_minimum_protocol_version, "TLSv1_3", where);
  assert.equal(common.tls_params.tls_maximum_protocol_version, "TLSv1_3", where);
  assertIstioSdsSecrets(common, where);
  const rootCa = common.combined_validation_context.validation_context_sds_secret_config;
  for (const secret of [...common.tls_certificate_sds_secret_configs, rootCa]) {
    assert.equal(secret.sds_config.initial_fetch_timeout, "0s", `${where}: ${secret.name} must be waited for`);
  }
  // The SANs are per connection (filter state envoy.network.upstream_subject_alt_names).
  assert.deepEqual(common.combined_validation_context.default_validation_context, {}, `${where}: no fixed SAN matcher`);
  // Nothing read from files: Istio serves the secrets over SDS.
  assert.equal(JSON.stringify(tls).includes("filename"), false, `${where}: file-based certificates`);
}

// ---------------------------------------------------------------------------------------------
// Embedded plugin configurations

const istiodPluginConfig = (wp: Json): Json => istioPluginConfigOf(wp, WASM);
const pluginConfigs = (): PluginConfig[] => pluginConfigsOf(manifests, WASM);
const startFilter = (config: PluginConfig, json = config.json): Promise<ProxyWasmHost> => startFilterFrom(WASM, config, json);

/** The example snapshot, with the named workloads' health changed (a snapshot push). */
function withHealth(json: string, healthy: Record<string, boolean>): string {
  const snapshot = JSON.parse(json);
  for (const w of snapshot.workloads) if (w.uid in healthy) w.healthy = healthy[w.uid];
  return JSON.stringify(snapshot);
}

/** The snapshot's facts the behaviour tests need, read from the snapshot itself. */
function facts(json: string) {
  const snapshot = JSON.parse(json);
  const workload = (uid: string) => {
    const found = snapshot.workloads.find((w: Json) => w.uid === uid);
    assert.ok(found, `no workload ${uid} in the snapshot`);
    return found;
  };
  const service = (hostname: string) => {
    const found = snapshot.services.find((s: Json) => s.hostname === hostname);
    assert.ok(found, `no service ${hostname} in the snapshot`);
    return found;
  };
  const source = snapshot.workloads.find((w: Json) => w.addresses.includes(snapshot.localWorkload));
  assert.ok(source, "localWorkload is not a workload of the snapshot");
  return { snapshot, workload, service, source };
}

// ---------------------------------------------------------------------------------------------
// Envoy's formatter, for the %FILTER_STATE(key:PLAIN)% commands these manifests use

/**
 * Renders `format` over filter state the way Envoy's substitution formatter does for
 * %FILTER_STATE(key:PLAIN)%: a missing key is "-", or "" with omit_empty_values. Any other command
 * fails the test: these manifests use no other, and an unmodelled one must not pass silently.
 */
function render(format: string, state: ReadonlyMap<string, string>, omitEmpty: boolean): string {
  return format.replace(/%([A-Z_]+)(?:\(([^)]*)\))?%/g, (_all, command: string, arg: string | undefined) => {
    assert.equal(command, "FILTER_STATE", `formatter command %${command}% is not modelled`);
    const [key, serialization] = (arg ?? "").split(":");
    assert.equal(serialization, "PLAIN", `%FILTER_STATE(${arg})% must be PLAIN: TYPED renders base64`);
    return state.get(key!) ?? (omitEmpty ? "" : "-");
  });
}

/**
 * network set_filter_state on_new_connection over `state`: the objects it creates (skip_if_empty
 * honoured), keyed by object_key, with their sharing mode and factory.
 */
function applySetFilterState(config: Json, state: ReadonlyMap<string, string>): Map<string, { value: string; shared: string; factory: string }> {
  const out = new Map<string, { value: string; shared: string; factory: string }>();
  for (const entry of config.on_new_connection) {
    const value = render(entry.format_string.text_format_source.inline_string, state, entry.format_string.omit_empty_values === true);
    if (entry.skip_if_empty && value === "") continue;
    out.set(entry.object_key, { value, shared: entry.shared_with_upstream ?? "NONE", factory: entry.factory_key ?? entry.object_key });
  }
  return out;
}

/**
 * What one connection decided by the filter becomes in the manifest's Envoy config: the CONNECT
 * this listener's tcp_proxy opens, and, for double HBONE, what reaches the outer internal listener
 * (relayed by (b)) and what that listener makes of it.
 */
function throughManifest(ef: Json, chainFilters: Json[], conn: Connection) {
  const state = conn.filterState;
  const tcp = filterOf(chainFilters, TCP_PROXY);
  const relayed = applySetFilterState(filterOf(chainFilters, SET_FILTER_STATE), state);
  // Only state shared with upstream reaches the internal listener.
  const upstreamState = new Map([...relayed].filter(([, o]) => o.shared !== "NONE").map(([k, o]) => [k, o.value]));
  const outer = outerListener(ef).filter_chains[0].filters;
  const outerSet = applySetFilterState(filterOf(outer, SET_FILTER_STATE), upstreamState);
  const outerTcp = filterOf(outer, TCP_PROXY);
  return {
    cluster: state.get("envoy.tcp_proxy.cluster") ?? tcp.cluster,
    tunnelling: state.get("envoy.tcp_proxy.disable_tunneling") !== "true",
    connectAuthority: render(tcp.tunneling_config.hostname, state, false),
    relayed,
    poolKey: [...relayed.values()].filter((o) => o.factory === "envoy.hashable_string").map((o) => o.value),
    outer: {
      cluster: outerTcp.cluster,
      nextHop: outerSet.get("envoy.network.transport_socket.original_dst_address")?.value,
      sans: outerSet.get("envoy.network.upstream_subject_alt_names")?.value,
      authority: render(outerTcp.tunneling_config.hostname, upstreamState, false),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The sidecar the patches are applied to

/** The listeners of an Istio sidecar that a NETWORK_FILTER match could hit. */
function istioSidecarListeners(): Listener[] {
  return sidecarWith([
    // A per-service outbound TCP listener (reviews:9080 when it is in the egress scope).
    outboundTcpListener("10.96.20.1_9080", "outbound|9080||reviews.default.svc.cluster.local"),
    outboundTcpListener("0.0.0.0_80", "outbound|80||isolated.default.svc.cluster.local", { passthrough: true }),
    virtualInboundListener(9080, { passthrough: true }),
  ]);
}

/** The catch-all chain after the patches of the given EnvoyFilters, applied in order. */
const patchedCatchAll = (...efs: Json[]) => patchCatchAll(istioSidecarListeners(), ...efs);

/** An Istio-shaped client sidecar with the given EnvoyFilters applied (in order). */
function sidecarBootstrap(efs: Json[], options: { internalListenerExtension?: boolean } = {}): Json {
  return istioSidecarBootstrap({
    node: { id: "sidecar~10.244.1.10~sleep-0.default~default.svc.cluster.local", cluster: "sleep.default" },
    catchAll: patchedCatchAll(...efs).chain.filters,
    listeners: efs.flatMap(addedListeners),
    clusters: efs.flatMap(addedClusters),
    internalListenerExtension: options.internalListenerExtension,
    wasm: WASM,
    plugins: [wasmPlugin()],
  });
}

// ---------------------------------------------------------------------------------------------

describe("Istio manifests for waypoint_route (istio/waypoint_route/)", () => {
  before(() => ensureFilterBuilt(FILTER));

  it("exist: envoyfilter.yaml (route A), wasmplugin.yaml with the WasmPlugin first, then its hookup (route B)", () => {
    assert.deepEqual(
      yamlFiles().map((p) => relative(DIR, p)),
      ["envoyfilter.yaml", "wasmplugin.yaml"],
    );
    assert.deepEqual(inFile("envoyfilter.yaml").map((m) => m.doc.kind), ["EnvoyFilter"]);
    // kubectl applies top to bottom: the plugin exists before anything references it.
    assert.deepEqual(inFile("wasmplugin.yaml").map((m) => m.doc.kind), ["WasmPlugin", "EnvoyFilter"]);
  });

  describe("Istio CRD schema (@kubernetes-models/istio)", () => {
    schemaValidityTests(manifests);

    // The check must be able to fail, on the mistakes people make in these files.
    it("rejects a patch whose applyTo has the wrong type", () => {
      assertRejectsNumericApplyTo(routeA());
    });

    it("rejects a listener patch value that is not an object", () => {
      const index = routeA().spec.configPatches.findIndex((p: Json) => p.applyTo === "LISTENER");
      assertRejectsStringPatchValue(routeA(), index, "waypoint_route_outer");
    });

    it("rejects a workloadSelector label that is not a string (an unquoted number or boolean)", () => {
      const broken = structuredClone(hookup());
      broken.spec.workloadSelector.labels[OPT_IN_LABEL] = true;
      assert.throws(() => validateSchema(broken), /workloadSelector\/labels\/.* must be string/);
    });

    it("rejects Envoy's spelling FAIL_CLOSED in a WasmPlugin (Istio's is FAIL_CLOSE)", () => {
      assertRejectsEnvoyFailStrategy(wasmPlugin());
    });

    it("rejects an unknown plugin type, an unknown traffic mode and a port given as a string", () => {
      const badType = structuredClone(wasmPlugin());
      badType.spec.type = "TCP";
      assert.throws(() => validateSchema(badType), /type must be equal to one of the allowed values/);
      assertRejectsBadWasmPluginMatch(wasmPlugin());
    });
  });

  describe("embedded plugin configurations", () => {
    it("are found: one inline filter in envoyfilter.yaml, one pluginConfig in the WasmPlugin, none inline in the hookup", () => {
      const configs = pluginConfigs();
      assert.deepEqual(
        configs.map((c) => [c.file, c.where.includes("pluginConfig") ? "pluginConfig" : "inline"]),
        [
          [`istio/${FILTER}/envoyfilter.yaml`, "inline"],
          [`istio/${FILTER}/wasmplugin.yaml`, "pluginConfig"],
        ],
      );
    });

    it("every one: root_id waypoint_route, FAIL_CLOSED as Envoy gets it, name and vm_id waypoint_route when inline", () => {
      assertPluginConfigsPinned(pluginConfigs(), FILTER);
    });

    it("route A and route B carry the same snapshot", () => {
      const [a, b] = pluginConfigs().map((c) => JSON.parse(c.json));
      assert.deepEqual(b, a);
    });

    it("name the clusters the manifests add, for both routes", () => {
      for (const config of pluginConfigs()) {
        const snapshot = JSON.parse(config.json);
        const names = addedClusters(routeA()).map((c) => c.name);
        assert.ok(names.includes(snapshot.hboneCluster ?? "waypoint_route_hbone"), `${config.where}: hboneCluster`);
        assert.ok(names.includes(snapshot.doubleHboneCluster ?? "waypoint_route_double_hbone"), `${config.where}: doubleHboneCluster`);
        assert.ok(names.includes(snapshot.plainCluster ?? "waypoint_route_plain"), `${config.where}: plainCluster`);
      }
    });

    for (const config of pluginConfigs()) {
      describe(config.where, () => {
        const ef = config.file.endsWith("envoyfilter.yaml") ? routeA : hookup;
        const chain = () => patchedCatchAll(ef()).chain.filters;
        const { snapshot, workload, service, source } = facts(config.json);
        const connect = (host: ProxyWasmHost, destination: string) => host.connect({ source: `${snapshot.localWorkload}:40000`, destination });
        const counters = (host: ProxyWasmHost) =>
          Object.fromEntries([...host.metrics()].filter(([name, value]) => name.startsWith(`${FILTER}.`) && value > 0));
        const reviews = service("reviews.default.svc.cluster.local");
        const ratings = service("ratings.default.svc.cluster.local");
        const isolated = service("isolated.default.svc.cluster.local");
        const waypointSans = service("waypoint.default.svc.cluster.local").subjectAltNames.join(",");
        const gateway = workload("net2/istio-system/istio-eastwestgateway-0");
        const reviewsVip = `${reviews.vips[0].address}:9080`;

        it("accepted by build/waypoint_route.wasm; its own workload is on net1", async () => {
          await startFilter(config);
          assert.equal(source.network, "net1");
        });

        it("reviews (waypoint with a healthy local instance): single HBONE to it on 15008, :authority VIP:port, the waypoint's SANs", async () => {
          const host = await startFilter(config);
          const conn = connect(host, reviewsVip);
          assert.equal(conn.closed, false);
          const state = conn.filterState;
          assert.equal(state.get("envoy.network.transport_socket.original_dst_address"), `${workload("default/waypoint-0").addresses[0]}:15008`);
          assert.equal(state.get("envoy.network.upstream_subject_alt_names"), waypointSans);
          const out = throughManifest(ef(), chain(), conn);
          assert.equal(out.cluster, "waypoint_route_hbone");
          assert.equal(out.tunnelling, true);
          assert.equal(out.connectAuthority, reviewsVip, "the CONNECT carries the dialled VIP and SERVICE port");
          assert.equal(out.relayed.size, 0, "nothing is relayed for single HBONE");
          assert.deepEqual(counters(host), { "waypoint_route.hbone_waypoint": 1 });
        });

        it("a snapshot push marking the local waypoint unhealthy fails reviews over through net2's east-west gateway (double HBONE)", async () => {
          const host = await startFilter(config);
          assert.equal(connect(host, reviewsVip).filterState.get("envoy.tcp_proxy.cluster"), "waypoint_route_hbone");
          // What a WasmPlugin update delivers over ECDS: a new plugin configuration, new connections only.
          assert.ok(host.reconfigure(withHealth(config.json, { "default/waypoint-0": false })), host.startFailure ?? "");
          const conn = connect(host, reviewsVip);
          assert.equal(conn.closed, false);
          const out = throughManifest(ef(), chain(), conn);
          const authority = `${reviews.hostname}:9080`;
          assert.equal(out.cluster, "waypoint_route_double_hbone");
          assert.equal(out.connectAuthority, authority, "inner CONNECT: <hostname>:<service port>, not the target port, not 15008");
          assert.equal(conn.filterState.get("envoy.network.upstream_subject_alt_names"), waypointSans, "inner TLS: the waypoint's identities");
          // The outer hop, as the relay and the internal listener of the manifest build it.
          assert.equal(out.outer.cluster, "waypoint_route_outer");
          assert.equal(out.outer.nextHop, `${gateway.addresses[0]}:15008`);
          assert.equal(out.outer.sans, gateway.identity, "outer TLS: the gateway's identity");
          assert.equal(out.outer.authority, authority, "outer CONNECT: the same <hostname>:<service port>");
          assert.deepEqual(out.poolKey, [`${gateway.addresses[0]}:15008${authority}${gateway.identity}`]);
          for (const [key, object] of out.relayed) assert.equal(object.shared, "ONCE", `${key} must reach the internal listener`);
          assert.deepEqual(counters(host), { "waypoint_route.hbone_waypoint": 1, "waypoint_route.double_hbone_waypoint": 1 });
          // Healthy again: back to the local waypoint.
          assert.ok(host.reconfigure(config.json));
          assert.equal(connect(host, reviewsVip).filterState.get("envoy.tcp_proxy.cluster"), "waypoint_route_hbone");
        });

        it("no waypoint anywhere healthy: reviews is closed, never sent to its endpoints directly", async () => {
          const host = await startFilter(config, withHealth(config.json, { "default/waypoint-0": false, "net2/default/waypoint-0": false }));
          const conn = connect(host, reviewsVip);
          assert.equal(conn.closed, true);
          assert.deepEqual(conn.filterStateWrites, []);
          assert.deepEqual(counters(host), { "waypoint_route.error_unknown_waypoint": 1 });
        });

        it("ratings (no waypoint, only endpoint on net2): double HBONE to it, inner TLS to its identity", async () => {
          const host = await startFilter(config);
          const conn = connect(host, `${ratings.vips[0].address}:9080`);
          const out = throughManifest(ef(), chain(), conn);
          assert.equal(out.cluster, "waypoint_route_double_hbone");
          assert.equal(out.connectAuthority, `${ratings.hostname}:9080`);
          assert.equal(conn.filterState.get("envoy.network.upstream_subject_alt_names"), workload("net2/default/ratings-0").identity);
          assert.equal(out.outer.nextHop, `${gateway.addresses[0]}:15008`);
          assert.equal(out.outer.authority, `${ratings.hostname}:9080`);
          assert.deepEqual(counters(host), { "waypoint_route.double_hbone_endpoint": 1 });
        });

        it("one pool key per tunnel: reviews and ratings through the same gateway never share an outer tunnel", async () => {
          const host = await startFilter(config, withHealth(config.json, { "default/waypoint-0": false }));
          const keys = [reviewsVip, `${ratings.vips[0].address}:9080`, reviewsVip].map((d) => throughManifest(ef(), chain(), connect(host, d)).poolKey);
          for (const key of keys) assert.equal(key.length, 1, "exactly one hashable object enters the pool key");
          assert.notEqual(keys[0]![0], keys[1]![0]);
          assert.equal(keys[0]![0], keys[2]![0], "the same service and gateway reuse the tunnel");
        });

        it("a pod IP of this network: single HBONE to the pod, :authority podIP:port", async () => {
          const host = await startFilter(config);
          const pod = workload("default/reviews-0").addresses[0];
          const conn = connect(host, `${pod}:9080`);
          const out = throughManifest(ef(), chain(), conn);
          assert.equal(out.cluster, "waypoint_route_hbone");
          assert.equal(out.connectAuthority, `${pod}:9080`);
          assert.equal(conn.filterState.get("envoy.network.transport_socket.original_dst_address"), `${pod}:15008`);
          assert.deepEqual(counters(host), { "waypoint_route.hbone_pod": 1 });
        });

        it("isolated (its only waypoint instance is on net3, which has no gateway): closed, nothing written", async () => {
          const host = await startFilter(config);
          const conn = connect(host, `${isolated.vips[0].address}:80`);
          assert.equal(conn.closed, true);
          assert.deepEqual(conn.filterStateWrites, []);
          assert.deepEqual(counters(host), { "waypoint_route.error_no_valid_destination": 1 });
          const warning = host.logs().find((e) => e.level === "warn" && e.contextId === conn.id);
          assert.match(warning?.message ?? "", /isolated\.default\.svc\.cluster\.local.*error_no_valid_destination/);
        });

        it("anything else: plain TCP through the catch-all's own cluster, no tunnel", async () => {
          const host = await startFilter(config);
          const conn = connect(host, "93.184.216.34:443");
          assert.equal(conn.closed, false);
          const out = throughManifest(ef(), chain(), conn);
          assert.equal(out.cluster, "PassthroughCluster");
          assert.equal(out.tunnelling, false);
          assert.equal(out.relayed.size, 0);
          assert.deepEqual(counters(host), { "waypoint_route.unknown": 1 });
        });

        it("an invalid snapshot push is refused and the previous one stays in force", async () => {
          const host = await startFilter(config);
          const broken = JSON.parse(config.json);
          broken.workloads[2].addresses = ["10.244.1.300"];
          assert.equal(host.reconfigure(JSON.stringify(broken)), false);
          assert.match(host.logs().map((e) => e.message).join("\n"), /workloads\[2\]\.addresses\[0\]: not an IP address: "10\.244\.1\.300"/);
          assert.equal(connect(host, reviewsVip).filterState.get("envoy.tcp_proxy.cluster"), "waypoint_route_hbone");
        });
      });
    }

    it("a broken snapshot, or one without the sidecar's own workload, is refused, so the checks can fail", async () => {
      const base = JSON.parse(pluginConfigs()[0]!.json);
      const broken = structuredClone(base);
      broken.services[0].waypoint = { hostname: "waypoint.default.svc.cluster.local", address: "10.244.1.41" };
      assert.match((await refusedSnapshotLog(WASM, FILTER, broken)).log, /services\[0\]\.waypoint: both "address" and "hostname" are set/);
      const foreign = { ...base, localWorkload: "10.244.9.9" };
      assert.match((await refusedSnapshotLog(WASM, FILTER, foreign)).log, /localWorkload: no workload has address 10\.244\.9\.9/);
    });
  });

  describe("envoyfilter.yaml (route A)", () => {
    const filterPatch = () => {
      const found = patchesOf(routeA(), "NETWORK_FILTER", "INSERT_BEFORE").filter((p) => p.patch.value.name === WASM_FILTER);
      assert.equal(found.length, 1);
      return found[0];
    };

    it("has the eight patches in order: filter, relay, tcp_proxy MERGE, internal listener, four clusters, all outbound", () => {
      assert.deepEqual(
        routeA().spec.configPatches.map((p: Json) => `${p.applyTo}/${p.patch.operation}/${p.match.context}/${p.patch.value.name}`),
        [
          `NETWORK_FILTER/INSERT_BEFORE/SIDECAR_OUTBOUND/${WASM_FILTER}`,
          `NETWORK_FILTER/INSERT_BEFORE/SIDECAR_OUTBOUND/${SET_FILTER_STATE}`,
          `NETWORK_FILTER/MERGE/SIDECAR_OUTBOUND/${TCP_PROXY}`,
          "LISTENER/ADD/SIDECAR_OUTBOUND/waypoint_route_outer",
          "CLUSTER/ADD/SIDECAR_OUTBOUND/waypoint_route_hbone",
          "CLUSTER/ADD/SIDECAR_OUTBOUND/waypoint_route_double_hbone",
          "CLUSTER/ADD/SIDECAR_OUTBOUND/waypoint_route_outer",
          "CLUSTER/ADD/SIDECAR_OUTBOUND/waypoint_route_plain",
        ],
      );
    });

    it("selects by the opt-in label whose value names the snapshot's group: <network>.<zone> of localWorkload", () => {
      const ef = routeA();
      assert.equal(ef.metadata.namespace, "istio-system", "root namespace: applies in every namespace");
      assert.deepEqual(Object.keys(ef.spec.workloadSelector.labels), [OPT_IN_LABEL]);
      const { source } = facts(filterPatch().patch.value.typed_config.config.configuration.value);
      const zone = source.locality.split("/")[1];
      assert.equal(ef.spec.workloadSelector.labels[OPT_IN_LABEL], `${source.network}.${zone}`);
    });

    it("configures the wasm filter: FAIL_CLOSED, root_id and vm_id waypoint_route, V8, a local file", () => {
      const config = filterPatch().patch.value.typed_config.config;
      assert.equal(config.failure_policy, "FAIL_CLOSED");
      assert.equal(config.root_id, FILTER);
      assert.equal(config.vm_config.vm_id, FILTER);
      assert.equal(config.vm_config.runtime, "envoy.wasm.runtime.v8");
      assert.match(config.vm_config.code.local.filename, /^\/.*\/waypoint_route\.wasm$/);
    });

    it("every NETWORK_FILTER patch matches tcp_proxy on the outbound catch-all chain", () => {
      const patches = patchesOf(routeA(), "NETWORK_FILTER");
      assert.equal(patches.length, 3);
      for (const patch of patches) {
        assertMatchesCatchAllTcpProxy(patch);
      }
    });

    it("applied to an Istio-shaped sidecar: filter, then relay, right before tcp_proxy on the catch-all chain, nowhere else", () => {
      const { listeners, chain } = patchedCatchAll(routeA());
      assert.deepEqual(chain.filters.map((f) => f.name), ["istio.stats", WASM_FILTER, SET_FILTER_STATE, TCP_PROXY]);
      for (const listener of listeners) {
        for (const other of listener.chains) {
          if (other === chain) continue;
          assert.deepEqual(other.filters.map((f) => f.name), ["istio.stats", TCP_PROXY], `patched ${listener.name}/${other.name}`);
          const tcp = other.filters.find((f) => f.name === TCP_PROXY);
          assert.equal(tcp.typed_config.tunneling_config, undefined, `tunneling_config also merged into ${listener.name}/${other.name}`);
        }
      }
    });

    it("the merged tcp_proxy keeps Istio's cluster and tunnels exactly as the proven plain config does", () => {
      const tcp = filterOf(patchedCatchAll(routeA()).chain.filters, TCP_PROXY);
      assert.equal(tcp.cluster, "PassthroughCluster");
      assert.equal(tcp.stat_prefix, "PassthroughCluster");
      assert.deepEqual(tcp.tunneling_config, filterOf(plainCatchAllFilters(), TCP_PROXY).tunneling_config);
      assert.deepEqual(tcp.tunneling_config, { hostname: "%FILTER_STATE(wasm.authority:PLAIN)%" });
    });

    it("the relay is the proven plain config's, in the same position (after the filter, before tcp_proxy)", () => {
      assert.deepEqual(relayOf(routeA()), filterOf(plainCatchAllFilters(), SET_FILTER_STATE));
      assert.deepEqual(
        plainCatchAllFilters().map((f: Json) => f.name),
        ["waypoint_route", SET_FILTER_STATE, TCP_PROXY],
      );
      // One hashable object (the pool key); the rest are plain strings.
      const factories = relayOf(routeA()).on_new_connection.map((e: Json) => e.factory_key);
      assert.deepEqual(factories.filter((f: string) => f === "envoy.hashable_string").length, 1);
    });

    it("the internal listener is the proven plain config's (but for its failure-only access log), reached by the double-HBONE cluster", () => {
      const listener = outerListener();
      const plain = plainListener(listener.name);
      assert.ok(plain, `the plain config has no listener ${listener.name}`);
      assert.deepEqual(listener.internal_listener, {});
      assert.equal(listener.traffic_direction, "OUTBOUND");
      assert.equal(listener.address, undefined, "an internal listener has no socket address");
      const filters = listener.filter_chains[0].filters;
      const plainFilters = plain.filter_chains[0].filters;
      assert.deepEqual(filters.map((f: Json) => f.name), plainFilters.map((f: Json) => f.name));
      assert.deepEqual(filterOf(filters, SET_FILTER_STATE), filterOf(plainFilters, SET_FILTER_STATE));
      const { access_log: log, ...tcp } = filterOf(filters, TCP_PROXY);
      const { access_log: _plainLog, ...plainTcp } = filterOf(plainFilters, TCP_PROXY);
      assert.deepEqual(tcp, plainTcp);
      assert.deepEqual(log.map((l: Json) => l.filter), [{ response_flag_filter: {} }], "outer hop failures only");
      const double = clusterNamed(addedClusters(routeA()), "waypoint_route_double_hbone");
      assert.equal(double.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.envoy_internal_address.server_listener_name, listener.name);
    });

    it("the relay feeds the internal listener: every io.waypoint_route.* key it reads is one the relay shares", () => {
      const relayed = new Set(relayOf(routeA()).on_new_connection.filter((e: Json) => e.shared_with_upstream === "ONCE").map((e: Json) => e.object_key));
      const read = JSON.stringify(outerListener()).match(/io\.waypoint_route\.[a-z_]+/g) ?? [];
      assert.ok(read.length >= 3);
      for (const key of read) assert.ok(relayed.has(key), `${key} is read by the internal listener but never relayed`);
    });

    it("adds the four clusters of the proven plain config, the three tunnels with Istio's SDS mTLS instead of files", () => {
      const clusters = addedClusters(routeA());
      assert.deepEqual(clusters.map((c) => c.name), ["waypoint_route_hbone", "waypoint_route_double_hbone", "waypoint_route_outer", "waypoint_route_plain"]);
      // Plain TCP to an endpoint without HBONE: ORIGINAL_DST at the filter's podIP:T, no TLS, as in the plain config.
      const plainTcp = clusterNamed(clusters, "waypoint_route_plain");
      const provenPlain = plainCluster("waypoint_route_plain");
      assert.deepEqual([plainTcp.type, plainTcp.lb_policy], ["ORIGINAL_DST", "CLUSTER_PROVIDED"]);
      assert.deepEqual([plainTcp.type, plainTcp.lb_policy, plainTcp.transport_socket], [provenPlain.type, provenPlain.lb_policy, provenPlain.transport_socket]);
      assert.equal(plainTcp.transport_socket, undefined);
      for (const cluster of clusters.filter((c) => c.name !== "waypoint_route_plain")) {
        const plain = plainCluster(cluster.name);
        assert.equal(cluster.type, plain.type, `${cluster.name}: type`);
        assert.equal(cluster.lb_policy, plain.lb_policy, `${cluster.name}: lb_policy`);
        assert.deepEqual(cluster.typed_extension_protocol_options, plain.typed_extension_protocol_options, `${cluster.name}: HTTP/2 options`);
        assert.deepEqual(cluster.load_assignment, plain.load_assignment, `${cluster.name}: endpoints`);
        assert.equal(cluster.transport_socket.name, plain.transport_socket.name, `${cluster.name}: transport socket`);
        assert.equal(cluster.circuit_breakers.thresholds[0].max_requests, 4294967295, `${cluster.name}: Envoy's 1024 cap lifted`);
      }
      const hbone = clusterNamed(clusters, "waypoint_route_hbone");
      assert.deepEqual([hbone.type, hbone.lb_policy], ["ORIGINAL_DST", "CLUSTER_PROVIDED"]);
      assertIstioMtls(hbone.transport_socket.typed_config, "waypoint_route_hbone");
      const double = clusterNamed(clusters, "waypoint_route_double_hbone");
      assert.equal(double.transport_socket.name, "envoy.transport_sockets.internal_upstream");
      assert.equal(double.transport_socket.typed_config.transport_socket.name, "envoy.transport_sockets.tls");
      assertIstioMtls(double.transport_socket.typed_config.transport_socket.typed_config, "waypoint_route_double_hbone (inner TLS)");
      assert.equal(double.typed_extension_protocol_options[HTTP_OPTIONS].common_http_protocol_options.idle_timeout, "10s");
      const outer = clusterNamed(clusters, "waypoint_route_outer");
      assert.deepEqual([outer.type, outer.lb_policy], ["ORIGINAL_DST", "CLUSTER_PROVIDED"]);
      assert.equal(filterOf(outerListener().filter_chains[0].filters, TCP_PROXY).cluster, outer.name);
      assertIstioMtls(outer.transport_socket.typed_config, "waypoint_route_outer");
    });

    it("no listener or cluster name collides with Istio's own (inner_connect_originate, outer_connect_originate, ...)", () => {
      for (const ef of [routeA(), hookup()]) {
        for (const name of [...addedListeners(ef), ...addedClusters(ef)].map((r) => r.name)) {
          assert.ok(!ISTIO_RESERVED_NAMES.includes(name), `${name} is one of Istio's names`);
          assert.match(name, /^waypoint_route_/, `${name}: keep the waypoint_route_ prefix`);
        }
      }
    });

    it("its opt-in label is not the other suite filters' (they write the same tcp_proxy keys and tunneling_config)", () => {
      const others = ["passthrough_mtls", "tunnel_port"].flatMap((name) => loadManifests(join(REPO_ROOT, "istio", name)));
      const selectors = others.map((m) => m.doc.spec?.workloadSelector?.labels ?? m.doc.spec?.selector?.matchLabels ?? {});
      assert.ok(selectors.length > 0);
      for (const labels of selectors) assert.ok(!(OPT_IN_LABEL in labels), `another suite manifest selects by ${OPT_IN_LABEL}`);
      // Why it matters: two MERGEs into the one catch-all tcp_proxy leave one tunneling_config, the last one's.
      const tunnelPort = loadManifests(join(REPO_ROOT, "istio", "tunnel_port")).find((m) => m.doc.metadata.name === "tunnel-port-client")!.doc;
      const tcp = filterOf(patchedCatchAll(routeA(), tunnelPort).chain.filters, TCP_PROXY);
      assert.notEqual(tcp.tunneling_config.headers_to_add, undefined, "tunnel_port's header leaks into waypoint_route's CONNECTs");
    });
  });

  describe("wasmplugin.yaml (route B)", () => {
    it("a NETWORK WasmPlugin: FAIL_CLOSE, pluginName waypoint_route, an oci:// or file:// url", () => {
      const spec = wasmPlugin().spec;
      assert.equal(spec.type, "NETWORK");
      assert.equal(spec.failStrategy, "FAIL_CLOSE");
      assert.equal(spec.pluginName, FILTER);
      assert.match(spec.url, /^(oci|file):\/\//);
      assert.equal(istiodPluginConfig(wasmPlugin()).failure_policy, "FAIL_CLOSED");
    });

    it("Istio's own placement is parked on the capture port 15006, which no service of the snapshot uses", () => {
      assert.deepEqual(wasmPlugin().spec.match, [{ mode: "CLIENT", ports: [{ number: 15006 }] }]);
      const snapshot = wasmPlugin().spec.pluginConfig;
      const used = new Set<number>([15008]);
      for (const s of snapshot.services) for (const [port, target] of Object.entries<number>(s.ports ?? {})) used.add(Number(port)).add(target);
      assert.ok(!used.has(15006));
    });

    it("selects the same workloads, from the same namespace, as route A", () => {
      const wp = wasmPlugin();
      assert.deepEqual(wp.spec.selector.matchLabels, routeA().spec.workloadSelector.labels);
      assert.deepEqual(hookup().spec.workloadSelector, routeA().spec.workloadSelector);
      assert.equal(wp.metadata.namespace, routeA().metadata.namespace);
      // istiod serves WasmPlugin ECDS resources from the proxy's namespace or the root namespace only.
      assert.ok([hookup().metadata.namespace, "istio-system"].includes(wp.metadata.namespace));
    });

    it("the hookup = envoyfilter.yaml with the inline filter replaced by the plugin's ECDS reference, patch by patch", () => {
      const expected = structuredClone(routeA().spec.configPatches);
      const reference = hookup().spec.configPatches[0].patch.value;
      expected[0].patch.value = reference;
      assert.deepEqual(hookup().spec.configPatches, expected);
      assertEcdsReference(reference, wasmPlugin());
      const names = patchedCatchAll(hookup()).chain.filters.map((f) => f.name);
      assert.deepEqual(names, ["istio.stats", reference.name, SET_FILTER_STATE, TCP_PROXY]);
    });
  });

  describe("the pinned Envoy's --mode validate (an Istio-shaped client sidecar)", () => {
    it("route A (envoyfilter.yaml) passes", () => {
      const result = envoyValidate("waypoint-route-route-a", sidecarBootstrap([routeA()]));
      assert.equal(result.ok, true, result.output);
    });

    it("route B (the hookup, with what istiod makes of the WasmPlugin inlined where ECDS would deliver it) passes", () => {
      const result = envoyValidate("waypoint-route-route-b", sidecarBootstrap([hookup()]));
      assert.equal(result.ok, true, result.output);
    });

    it("the check can fail: a broken snapshot makes Envoy refuse the filter", () => {
      const broken = structuredClone(routeA());
      const config = findAll(broken.spec, isInlineWasm)[0]!.node.typed_config.config;
      config.configuration.value = config.configuration.value.replace('"localWorkload": "10.244.1.10"', '"localWorkload": "10.244.1.299"');
      const result = envoyValidate("waypoint-route-broken", sidecarBootstrap([broken]));
      assert.equal(result.ok, false);
      assert.match(result.output, /localWorkload: not an IP address: "10\.244\.1\.299"/);
    });

    it("both routes on one pod are refused: the listener and clusters would exist twice", () => {
      const result = envoyValidate("waypoint-route-both-routes", sidecarBootstrap([routeA(), hookup()]));
      assert.equal(result.ok, false, "validated with every listener and cluster added twice");
      assert.match(result.output, /duplicate cluster 'waypoint_route_hbone'/);
    });

    it("the internal listener needs Istio's bootstrap extension: without it Envoy refuses the config", () => {
      const result = envoyValidate("waypoint-route-no-internal-listener", sidecarBootstrap([routeA()], { internalListenerExtension: false }));
      assert.equal(result.ok, false, "validated without envoy.bootstrap.internal_listener");
      assert.match(result.output, /InternalListener bootstrap extension is mandatory/);
    });
  });
});

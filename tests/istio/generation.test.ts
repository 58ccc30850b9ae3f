// What istiod's own code generates for a sidecar from this repository's manifests, for each
// supported Istio era (the dump of tests/istio/common/generate_test.go, made by
// scripts/istio-gen.sh): the filter sits on the intended chain at the intended position with its
// configuration and failure policy intact; every ECDS name a hookup references is served; what
// pilot-agent makes of it (module fetched, or a deny RBAC stand-in when it cannot be); and where
// Istio's own traffic simulation sends a pod-IP connection.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../support/paths.js";
import {
  CATCH_ALL,
  chain,
  cluster,
  type Dump,
  ERAS,
  filterNames,
  type Json,
  listener,
  loadDump,
  placements,
  RBAC_TYPE,
  served,
  simulated,
  TCP_PROXY,
  trafficExtensionName,
  WASM_TYPE,
  wasmPluginName,
} from "./dump.js";

const docs = (file: string): Json[] =>
  parseAllDocuments(readFileSync(join(REPO_ROOT, "istio", file), "utf8")).map((d) => d.toJS()).filter(Boolean);
const wasmPlugin = (file: string, name: string): Json => {
  const wp = docs(file).find((d) => d.kind === "WasmPlugin" && d.metadata.name === name);
  assert.ok(wp, `istio/${file}: no WasmPlugin ${name}`);
  return wp;
};

/** The Wasm filter config of an inline filter or a served ECDS resource. */
function wasmConfigOf(typed: Json, where: string): Json {
  assert.equal(typed?.["@type"], WASM_TYPE, `${where}: not a network Wasm filter`);
  return typed.config;
}

/** The plugin configuration JSON a Wasm filter config carries (StringValue). */
const pluginJson = (config: Json): Json => JSON.parse(config.configuration.value);

/** Route B: the hookup filter right before tcp_proxy on the catch-all chain, served, intact. */
function assertHookup(d: Dump, wp: Json, rootId: string, where: { listener: string; chain: string; only?: boolean }, next = TCP_PROXY) {
  const name = trafficExtensionName(wp.metadata.namespace, wp.metadata.name);
  if (where.only) {
    // The plugin's `match` parks Istio's own placement (port 15006): the hookup is the only place.
    assert.deepEqual(placements(d, name).map((p) => `${p.listener}/${p.chain}`), [`${where.listener}/${where.chain}`]);
  }
  const c = chain(listener(d, where.listener), where.chain);
  const names = filterNames(c);
  const at = names.indexOf(name);
  assert.ok(at >= 0, `${d.where}: ${where.listener}/${where.chain} has no ${name}: ${names.join(", ")}`);
  assert.equal(names[at + 1], next, `${d.where}: ${name} must come right before ${next}: ${names.join(", ")}`);
  const reference = c.filters[at].configDiscovery;
  assert.ok(reference.configSource.ads !== undefined, "the hookup asks istiod over ADS");
  assert.equal(reference.configSource.initialFetchTimeout, "0s", "the chain waits for the filter");
  assert.deepEqual([...reference.typeUrls].sort(), [RBAC_TYPE, WASM_TYPE].sort(), "Wasm and pilot-agent's RBAC stand-in");
  assert.ok(d.meta.ecdsRequested.includes(name));
  assert.equal(d.meta.ecdsRequested.some((n) => n.startsWith("extensions.istio.io/wasmplugin/")), false, "no old name on a 1.30+ proxy");

  // Served by istiod, with the plugin's configuration and failure policy.
  const resource = served(d.ecds, name);
  assert.ok(resource, `${d.where}: istiod does not serve ${name} (served: ${d.ecds.map((r) => r.name).join(", ")})`);
  const config = wasmConfigOf(resource.typedConfig, name);
  assert.equal(config.rootId, rootId);
  assert.equal(config.failurePolicy, "FAIL_CLOSED", "failStrategy FAIL_CLOSE becomes failure_policy FAIL_CLOSED");
  assert.equal(config.failOpen, undefined, "no deprecated fail_open");
  assert.deepEqual(pluginJson(config), wp.spec.pluginConfig, "pluginConfig reaches the filter unchanged");
  assert.equal(config.vmConfig.code.remote.httpUri.uri, wp.spec.url.replace(/^oci:\/\//, "oci://"));

  // pilot-agent: fetched -> a local file; not fetchable -> a deny-all network RBAC filter under the
  // same name, which the hookup's type URLs admit.
  const fetched = served(d.ecdsAgent, name);
  assert.match(wasmConfigOf(fetched.typedConfig, name).vmConfig.code.local.filename, new RegExp(`/build/${rootId}\\.wasm$`));
  const failed = served(d.ecdsAgentFetchFailed, name);
  assert.equal(failed.typedConfig["@type"], RBAC_TYPE);
  assert.ok(failed.typedConfig.rules !== undefined && Object.keys(failed.typedConfig.rules.policies ?? {}).length === 0, "deny all: ALLOW rules with no policy");
  assert.ok(reference.typeUrls.includes(failed.typedConfig["@type"]));
  return { name, config };
}

/** Every ECDS name the generated listeners reference is served. */
function assertAllServed(d: Dump) {
  for (const n of d.meta.ecdsRequested) assert.ok(served(d.ecds, n), `${d.where}: ${n} referenced but not served`);
}

/** Route A: the inline Wasm filter right before `next` on the given chain. */
function assertInline(d: Dump, rootId: string, where: { listener: string; chain: string }, next = TCP_PROXY) {
  const c = chain(listener(d, where.listener), where.chain);
  const names = filterNames(c);
  const at = c.filters.findIndex((f: Json) => f.typedConfig?.["@type"] === WASM_TYPE && f.typedConfig.config.rootId === rootId);
  assert.ok(at >= 0, `${d.where}: no inline ${rootId} on ${where.listener}/${where.chain}: ${names.join(", ")}`);
  assert.equal(names[at + 1], next);
  const config = c.filters[at].typedConfig.config;
  assert.equal(config.failurePolicy, "FAIL_CLOSED");
  assert.equal(config.vmConfig.vmId, rootId);
  assert.match(config.vmConfig.code.local.filename, new RegExp(`/${rootId}\\.wasm$`));
  return pluginJson(config);
}

/** Istio's simulation sends a connection to a mesh pod's IP, on a port no service claims, to the catch-all chain. */
function assertPodIpReachesCatchAll(d: Dump) {
  const r = simulated(d, "pod-ip-unknown-port");
  assert.equal(r.error, undefined, JSON.stringify(r));
  assert.equal(r.listener, "virtualOutbound");
  assert.equal(r.filterChain, CATCH_ALL);
  assert.equal(r.cluster, "PassthroughCluster", "tcp_proxy's own cluster; the filter picks its own per connection");
}

function assertSdsTls(c: Json) {
  const ts = c.transportSocket;
  assert.equal(ts.name, "envoy.transport_sockets.tls");
  const common = ts.typedConfig.commonTlsContext;
  assert.equal(common.tlsCertificateSdsSecretConfigs[0].name, "default");
  assert.equal(common.combinedValidationContext.validationContextSdsSecretConfig.name, "ROOTCA");
}

for (const { era, label } of ERAS) {
  describe(`istiod ${label}`, () => {
    describe("passthrough_mtls", () => {
      it("route A: inline filter right before tcp_proxy on the catch-all chain only, FAIL_CLOSED, snapshot intact; mTLS cluster added", () => {
        const d = loadDump(era, "passthrough_mtls", "A");
        const snapshot = assertInline(d, "passthrough_mtls", { listener: "virtualOutbound", chain: CATCH_ALL });
        assert.equal(snapshot.mtlsCluster, "outbound_mtls_passthrough");
        const wasmChains = d.listeners.flatMap((l) =>
          [...(l.filterChains ?? []), ...(l.defaultFilterChain ? [l.defaultFilterChain] : [])]
            .filter((c: Json) => (c.filters ?? []).some((f: Json) => f.typedConfig?.config?.rootId === "passthrough_mtls"))
            .map((c: Json) => `${l.name}/${c.name}`));
        assert.deepEqual(wasmChains, [`virtualOutbound/${CATCH_ALL}`]);
        const c = cluster(d, "outbound_mtls_passthrough");
        assert.equal(c.type, "ORIGINAL_DST");
        assertSdsTls(c);
        assertPodIpReachesCatchAll(d);
      });

      it("route B: the hookup names the 1.30+ ECDS name, istiod serves it, pilot-agent's fail-closed stand-in is admitted", () => {
        const d = loadDump(era, "passthrough_mtls", "B");
        const wp = wasmPlugin("passthrough_mtls/wasmplugin.yaml", "passthrough-mtls");
        assertHookup(d, wp, "passthrough_mtls", { listener: "virtualOutbound", chain: CATCH_ALL });
        assertAllServed(d);
        assertSdsTls(cluster(d, "outbound_mtls_passthrough"));
        assertPodIpReachesCatchAll(d);
      });

      it("route B: Istio itself also places the NETWORK WasmPlugin on a headless service's per-pod listener (destination = pod IP)", () => {
        const d = loadDump(era, "passthrough_mtls", "B");
        const name = trafficExtensionName("istio-system", "passthrough-mtls");
        const where = placements(d, name).map((p) => p.listener).sort();
        assert.ok(where.includes("10.244.3.4_5432") && where.includes("10.244.1.30_5432"), `placed on ${where.join(", ")}`);
        const r = simulated(d, "headless-pod");
        assert.equal(r.listener, "10.244.3.4_5432");
        assert.equal(r.cluster, "outbound|5432||postgres.data.svc.cluster.local");
        // never on the catch-all chain by Istio's own placement: only the hookup's one reference there
        assert.equal(placements(d, name).filter((p) => p.chain === CATCH_ALL).length, 1);
      });

      it("headless service: Istio mTLS to its pods with or without the DestinationRule (auto mTLS under PERMISSIVE)", () => {
        const withDr = cluster(loadDump(era, "passthrough_mtls", "A"), "outbound|5432||postgres.data.svc.cluster.local");
        assertSdsTls(withDr);
        const without = cluster(loadDump(era, "passthrough_mtls", "A-without-destinationrule"), "outbound|5432||postgres.data.svc.cluster.local");
        // Auto mTLS: every endpoint has a sidecar (tlsMode istio), so the cluster's own transport
        // socket is Istio mTLS verifying the service account, no DestinationRule needed.
        assert.equal(without.type, "ORIGINAL_DST");
        assertSdsTls(without);
        assert.deepEqual(without.transportSocket.typedConfig.commonTlsContext.combinedValidationContext.defaultValidationContext.matchSubjectAltNames,
          [{ exact: "spiffe://cluster.local/ns/data/sa/postgres" }]);
      });

      it("a 1.29 proxy on this istiod asks for the old name, which this istiod does not serve (upgrade with revisions)", () => {
        const d = loadDump(era, "passthrough_mtls", "B", "client-proxy-1.29");
        const old = wasmPluginName("istio-system", "passthrough-mtls");
        const names = filterNames(chain(listener(d, "virtualOutbound"), CATCH_ALL));
        assert.ok(names.includes(old) && !names.includes(trafficExtensionName("istio-system", "passthrough-mtls")), names.join(", "));
        assert.ok(d.meta.ecdsRequested.includes(old));
        assert.equal(served(d.ecds, old), undefined);
      });
    });

    describe("tunnel_port", () => {
      it("route A: client filter before tcp_proxy on the catch-all chain; server listener on 15008 and the check on the internal listener", () => {
        const d = loadDump(era, "tunnel_port", "A");
        const snapshot = assertInline(d, "tunnel_port", { listener: "virtualOutbound", chain: CATCH_ALL, only: true });
        assert.equal(snapshot.role, "client");
        assertPodIpReachesCatchAll(d);
        const s = loadDump(era, "tunnel_port", "A", "server");
        const l = listener(s, "tunnel_port_inbound");
        assert.deepEqual(l.address.socketAddress, { address: "0.0.0.0", portValue: 15008 });
        const server = assertInline(s, "tunnel_port", { listener: "tunnel_port_inbound_internal", chain: "tunnel_port_inbound_chain" });
        assert.equal(server.role, "server");
        assert.equal(placements(loadDump(era, "tunnel_port", "A"), "tunnel_port_inbound").length, 0);
      });

      it("route B: client and server hookups served with their plugin configs; all references served", () => {
        const d = loadDump(era, "tunnel_port", "B");
        assertHookup(d, wasmPlugin("tunnel_port/wasmplugin.yaml", "tunnel-port-client"), "tunnel_port", { listener: "virtualOutbound", chain: CATCH_ALL, only: true });
        assertAllServed(d);
        const s = loadDump(era, "tunnel_port", "B", "server");
        assertHookup(s, wasmPlugin("tunnel_port/wasmplugin.yaml", "tunnel-port-server-my-service-0"), "tunnel_port",
          { listener: "tunnel_port_inbound_internal", chain: "tunnel_port_inbound_chain", only: true });
        assertAllServed(s);
      });

      it("ambient-enabled istiod: on the server pod tunnel_port_inbound is the only 15008 listener (Istio's connect_terminate removed there, kept elsewhere)", () => {
        for (const route of ["A", "B"]) {
          const client = loadDump(era, "tunnel_port", route, "client", "ambient");
          assert.equal(client.meta.ambient, true);
          // What an ambient-enabled istiod does on an HBONE-enabled sidecar: its own 15008 listener.
          assert.deepEqual(listener(client, "connect_terminate").address.socketAddress, { address: "0.0.0.0", portValue: 15008 });
          const server = loadDump(era, "tunnel_port", route, "server", "ambient");
          const on15008 = server.listeners.filter((l) => l.address?.socketAddress?.portValue === 15008).map((l) => l.name);
          // Two listeners on one address make Envoy refuse the whole LDS update.
          assert.deepEqual(on15008, ["tunnel_port_inbound"], `${route}: listeners on 15008: ${on15008.join(", ")}`);
        }
      });
    });

    describe("waypoint_route", () => {
      it("route A: filter, then the set_filter_state relay, then tcp_proxy on the catch-all chain; internal listener and clusters added", () => {
        const d = loadDump(era, "waypoint_route", "A");
        assertInline(d, "waypoint_route", { listener: "virtualOutbound", chain: CATCH_ALL }, "envoy.filters.network.set_filter_state");
        const names = filterNames(chain(listener(d, "virtualOutbound"), CATCH_ALL));
        assert.equal(names[names.indexOf("envoy.filters.network.set_filter_state") + 1], TCP_PROXY);
        listener(d, "waypoint_route_outer");
        for (const n of ["waypoint_route_hbone", "waypoint_route_double_hbone", "waypoint_route_outer"]) cluster(d, n);
        assertPodIpReachesCatchAll(d);
      });

      it("route B: the hookup is served with the snapshot; all references served", () => {
        const d = loadDump(era, "waypoint_route", "B");
        assertHookup(d, wasmPlugin("waypoint_route/wasmplugin.yaml", "waypoint-route"), "waypoint_route",
          { listener: "virtualOutbound", chain: CATCH_ALL, only: true }, "envoy.filters.network.set_filter_state");
        assertAllServed(d);
      });
    });
  });
}

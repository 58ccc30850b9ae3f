// What istiod generates for the feed's channel in the mesh, read from its own output (scenario
// mesh_feed/istio of tests/istio/common/generate_test.go: the feed's pod and Service of mesh.go,
// the chart's PeerAuthentication and AuthorizationPolicy rendered by the real Helm, a client with
// passthrough_mtls route B), for every supported era. Every fact the feed's istio-sidecar mode and
// the manifests' meshFeed rely on is asserted here from the generated config:
// - the client's outbound cluster for the feed's Service carries Istio mTLS checking the feed's
//   SPIFFE id, and it is the cluster every shipped manifest's meshFeed names;
// - the feed's inbound chains for the channel port accept only mutual TLS (STRICT), its HTTP
//   connection manager appends the verified certificate to x-forwarded-client-cert
//   (APPEND_FORWARD, URI set), its RBAC admits only the readers' principals on that port;
// - the sidecar connects to the feed from 127.0.0.6, the address the feed's default
//   `channel.sidecarAddresses` admits.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { ISTIO_INBOUND_SOURCES } from "../../feed/src/config.js";
import { REPO_ROOT } from "../support/paths.js";
import { ERAS, loadDump, type Json } from "./dump.js";

const FEED_CLUSTER = "outbound|9443||mesh-feed.mesh-feed.svc.cluster.local";
const FEED_ID = "spiffe://cluster.local/ns/mesh-feed/sa/mesh-feed";
const HCM = "envoy.filters.network.http_connection_manager";

/** Every object of `node` (depth first) for which `pick` holds. */
function findAll(node: Json, pick: (n: Json) => boolean, out: Json[] = []): Json[] {
  if (Array.isArray(node)) node.forEach((n) => findAll(n, pick, out));
  else if (node && typeof node === "object") {
    if (pick(node)) out.push(node);
    Object.values(node).forEach((n) => findAll(n, pick, out));
  }
  return out;
}

/** Every meshFeed of the plugin configurations in a shipped manifest (JSON strings of route A, pluginConfig of route B). */
function meshFeedsIn(file: string): Json[] {
  const docs = parseAllDocuments(readFileSync(join(REPO_ROOT, "istio", file), "utf8")).map((d) => d.toJS());
  const configs = [
    ...findAll(docs, (n) => n.pluginConfig !== undefined).map((n) => n.pluginConfig),
    ...findAll(docs, (n) => n["@type"] === "type.googleapis.com/google.protobuf.StringValue" && typeof n.value === "string").map((n) => JSON.parse(n.value)),
  ];
  return configs.map((c) => c.meshFeed);
}

for (const { era, label } of ERAS) {
  describe(`the feed's channel as istiod ${label} generates it`, () => {
    const client = loadDump(era, "mesh_feed", "istio", "client");
    const feed = loadDump(era, "mesh_feed", "istio", "feed");

    it("the client's outbound cluster for the feed's Service: Istio mTLS to endpoints labelled istio, the feed's SPIFFE id checked", () => {
      const c = client.clusters.find((x: Json) => x.name === FEED_CLUSTER);
      assert.ok(c, `${client.where}: no cluster ${FEED_CLUSTER}`);
      const matches: Json[] = c.transportSocketMatches ?? [];
      const mtls = matches.find((m) => m.match?.tlsMode === "istio");
      assert.ok(mtls, "no transport socket for tlsMode istio endpoints");
      const tls = mtls.transportSocket.typedConfig;
      assert.equal(tls["@type"], "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext");
      const common = tls.commonTlsContext;
      assert.deepEqual(common.tlsCertificateSdsSecretConfigs.map((s: Json) => s.name), ["default"]);
      const sans = findAll(common.combinedValidationContext ?? common.validationContext, (n) => typeof n.exact === "string").map((n) => n.exact);
      assert.deepEqual(sans, [FEED_ID]);
      // The feed's endpoint carries the label that selects it (the injector's tlsMode).
      const cla = client.endpoints.find((e: Json) => e.clusterName === FEED_CLUSTER);
      const eps = findAll(cla, (n) => n.endpoint?.address?.socketAddress !== undefined);
      assert.deepEqual(eps.map((e) => `${e.endpoint.address.socketAddress.address}:${e.endpoint.address.socketAddress.portValue}`), ["10.244.1.50:9443"]);
      assert.ok(eps.every((e) => JSON.stringify(e.metadata ?? {}).includes('"tlsMode":"istio"')));
    });

    it("route B's plugin as pilot-agent hands it to Envoy polls that very cluster, and so does every shipped manifest", () => {
      const wasm = findAll(client.ecdsAgent, (n) => n.vmConfig !== undefined && n.configuration !== undefined);
      assert.ok(wasm.length >= 1, "no Wasm plugin in the client's ECDS");
      for (const w of wasm) assert.equal(JSON.parse(w.configuration.value).meshFeed.cluster, FEED_CLUSTER);
      for (const file of ["passthrough_mtls/envoyfilter.yaml", "passthrough_mtls/wasmplugin.yaml", "tunnel_port/client-envoyfilter.yaml", "tunnel_port/server-envoyfilter.yaml", "tunnel_port/wasmplugin.yaml", "waypoint_route/envoyfilter.yaml", "waypoint_route/wasmplugin.yaml"]) {
        const feeds = meshFeedsIn(file);
        assert.ok(feeds.length >= 1, `${file}: no plugin configuration`);
        for (const f of feeds) assert.equal(f?.cluster, FEED_CLUSTER, `${file}: meshFeed.cluster`);
      }
      // No manifest makes a cluster of its own for the feed: the one above is Istio's.
      assert.equal(client.clusters.filter((x: Json) => x.name === FEED_CLUSTER).length, 1);
    });

    it("every proxy a shipped route configures (both routes, every filter and role) has the cluster its meshFeed names, Istio's own with mTLS", () => {
      const proxies = [
        ["passthrough_mtls", "A", "client"], ["passthrough_mtls", "B", "client"],
        ["tunnel_port", "A", "client"], ["tunnel_port", "A", "server"], ["tunnel_port", "B", "client"], ["tunnel_port", "B", "server"],
        ["waypoint_route", "A", "client"], ["waypoint_route", "B", "client"],
      ] as const;
      for (const [filter, route, proxy] of proxies) {
        const d = loadDump(era, filter, route, proxy);
        // The plugin configurations Envoy runs: inline in the listeners (route A) or over ECDS as pilot-agent hands them (route B).
        const wasm = findAll([d.listeners, d.ecdsAgent], (n) => n.vmConfig !== undefined && typeof n.configuration?.value === "string");
        assert.ok(wasm.length >= 1, `${d.where}: no Wasm plugin`);
        for (const w of wasm) {
          const name = JSON.parse(w.configuration.value).meshFeed?.cluster;
          assert.equal(name, FEED_CLUSTER, `${d.where}: meshFeed.cluster`);
        }
        const c = d.clusters.find((x: Json) => x.name === FEED_CLUSTER);
        assert.ok(c?.transportSocketMatches?.some((m: Json) => m.match?.tlsMode === "istio"), `${d.where}: no Istio mTLS cluster ${FEED_CLUSTER}`);
      }
    });

    it("the feed's inbound chains for the channel port: mutual TLS only, XFCC appended with the URI, RBAC admitting the readers", () => {
      const inbound = feed.listeners.find((l: Json) => l.name === "virtualInbound");
      assert.ok(inbound, `${feed.where}: no virtualInbound`);
      const chains = (inbound.filterChains as Json[]).filter((c) => c.filterChainMatch?.destinationPort === 9443);
      assert.ok(chains.length >= 1, "no chain for the channel port");
      for (const c of chains) {
        // STRICT: every chain of the port terminates TLS and requires the client's certificate.
        assert.equal(c.filterChainMatch.transportProtocol, "tls", `${c.name}: a chain without TLS`);
        const tls = c.transportSocket?.typedConfig;
        assert.equal(tls?.["@type"], "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext", c.name);
        assert.equal(tls.requireClientCertificate, true, c.name);
        const hcm = c.filters.find((f: Json) => f.name === HCM)?.typedConfig;
        assert.ok(hcm, `${c.name}: no HTTP connection manager (the port is HTTP)`);
        assert.equal(hcm.forwardClientCertDetails, "APPEND_FORWARD", c.name);
        assert.equal(hcm.setCurrentClientCertDetails?.uri, true, c.name);
        const rbac = (hcm.httpFilters as Json[]).find((f) => f.name === "envoy.filters.http.rbac")?.typedConfig;
        assert.ok(rbac, `${c.name}: no RBAC filter`);
        const policies = Object.values(rbac.rules?.policies ?? {}) as Json[];
        assert.equal(rbac.rules.action ?? "ALLOW", "ALLOW");
        assert.equal(policies.length, 1, JSON.stringify(rbac.rules));
        // The readers' pattern (cluster.local/ns/default/*, scripts/istio-gen.sh renders the chart
        // with it) as the authenticated (mTLS) principal's prefix, nothing else.
        const authenticated = findAll(policies[0].principals, (n) => n.authenticated !== undefined).map((n) => n.authenticated);
        assert.deepEqual(authenticated, [{ principalName: { prefix: "spiffe://cluster.local/ns/default/" } }]);
        assert.deepEqual(findAll(policies[0].principals, (n) => n.any !== undefined || n.remoteIp !== undefined || n.header !== undefined), []);
        assert.ok(findAll(policies[0].permissions, (n) => n.destinationPort === 9443).length >= 1, "the rule is for the channel port");
      }
      assert.ok(!inbound.filterChains.some((c: Json) => c.filterChainMatch?.destinationPort === 9443 && c.filterChainMatch?.transportProtocol === "raw_buffer"), "a plaintext chain for the channel port");
    });

    it(`the sidecar connects to the feed from ${ISTIO_INBOUND_SOURCES[0]}, the feed's default sidecar address`, () => {
      const c = feed.clusters.find((x: Json) => x.name === "inbound|9443||");
      assert.ok(c, `${feed.where}: no inbound cluster for the channel port`);
      assert.equal(c.upstreamBindConfig?.sourceAddress?.address, ISTIO_INBOUND_SOURCES[0]);
    });
  });
}

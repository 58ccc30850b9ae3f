// The canary, promotion and rollback of docs/upgrades.md as istiod's own code generates them
// (TestGenerateUpgrades in tests/istio/common/upgrade_test.go, run by scripts/istio-gen.sh), for
// every supported era, on passthrough_mtls route B: the main set (cluster.yaml, wasmplugin.yaml,
// catchall.yaml rendered as npm run package renders them) on the old image and the set
// `npm run canary` makes on the new one. sleep-0 carries the opt-in label's main value,
// sleep-canary-0 its canary value. Asserted on what a sidecar receives: which ECDS resources its
// chains reference (and where), the url and sha256 istiod serves under each, and the module
// pilot-agent's own conversion hands Envoy.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CATCH_ALL, ERAS, filterNames, loadDump, placements, served, TCP_PROXY, trafficExtensionName, type Dump, type Json } from "./dump.js";
import { readUpgradeModules, type UpgradeModules } from "./upgrade_inputs.js";

const MAIN = trafficExtensionName("istio-system", "passthrough-mtls");
const CANARY = trafficExtensionName("istio-system", "passthrough-mtls-canary");
const MTLS_CLUSTER = "outbound_mtls_passthrough";

const load = (era: string, route: string, proxy = "client"): Dump => loadDump(era, "passthrough_mtls", route, proxy, "upgrade");

/** The url and sha256 istiod serves in an ECDS resource's Wasm vm_config. */
function remoteCode(d: Dump, name: string): { url: string; sha256: string } {
  const r = served(d.ecds, name);
  assert.ok(r, `${d.where}: ${name} not served`);
  const remote = r.typedConfig.config.vmConfig.code.remote;
  return { url: remote.httpUri.uri, sha256: remote.sha256 };
}

/** The module file pilot-agent's conversion points Envoy at. */
function agentModule(d: Dump, name: string): string {
  const r = served(d.ecdsAgent, name);
  assert.ok(r, `${d.where}: ${name} not in pilot-agent's output`);
  return r.typedConfig.config.vmConfig.code.local.filename;
}

/**
 * The proxy runs exactly one of the two plugins: `own` on the catch-all chain right before
 * tcp_proxy and on the chains Istio builds, `other` nowhere; one mTLS cluster.
 */
function runsOnly(d: Dump, own: string, other: string, release: { url: string; sha256: string; file: string }): void {
  assert.deepEqual(d.meta.ecdsRequested, [own], `${d.where}: requests ${d.meta.ecdsRequested.join(", ")}`);
  assert.deepEqual(placements(d, other), [], `${d.where}: ${other} placed`);
  const at = placements(d, own);
  const catchAll = at.filter((p) => p.chain === CATCH_ALL);
  assert.equal(catchAll.length, 1, `${d.where}: ${own} on the catch-all ${catchAll.length} times`);
  assert.equal(catchAll[0]!.filters[catchAll[0]!.index + 1], TCP_PROXY);
  assert.ok(at.length > 1, `${d.where}: ${own} only on the catch-all (Istio's own chains expected too)`);
  for (const p of at) assert.equal(p.filters.filter((f) => f === MAIN || f === CANARY).length, 1, `${d.where}: ${p.listener}/${p.chain} has ${p.filters.join(", ")}`);
  assert.deepEqual(remoteCode(d, own), { url: release.url, sha256: release.sha256 });
  assert.equal(agentModule(d, own), release.file);
  assert.equal(d.clusters.filter((c: Json) => c.name === MTLS_CLUSTER).length, 1, `${d.where}: ${MTLS_CLUSTER} count`);
}

for (const { era, label } of ERAS) {
  describe(`upgrades on route B, istiod ${label}`, () => {
    const modules: UpgradeModules = readUpgradeModules();

    it("the two releases differ: other bytes, other digests, other urls", () => {
      assert.notEqual(modules.old.sha256, modules.new.sha256);
      assert.notEqual(modules.old.url, modules.new.url);
    });

    it("canary: the main pod runs the main WasmPlugin on the old image, the canary pod only the canary WasmPlugin on the new one", () => {
      runsOnly(load(era, "B-canary"), MAIN, CANARY, modules.old);
      runsOnly(load(era, "B-canary", "client-canary"), CANARY, MAIN, modules.new);
    });

    it("promotion, step 1 (main moved to the new digest, canary still applied): both pods on the new image, each through its own plugin", () => {
      runsOnly(load(era, "B-promoting"), MAIN, CANARY, modules.new);
      runsOnly(load(era, "B-promoting", "client-canary"), CANARY, MAIN, modules.new);
    });

    it("promotion done (canary pods relabelled, canary set deleted): the main plugin on the new image; the same ECDS name as before, so an ECDS update", () => {
      const d = load(era, "B-promoted");
      runsOnly(d, MAIN, CANARY, modules.new);
      // The listeners reference the same name as with the old image: only the ECDS resource changes.
      assert.deepEqual(load(era, "B-canary").meta.ecdsRequested, d.meta.ecdsRequested);
    });

    it("rollback (the main set on the previous digest): the main plugin on the old image again", () => {
      runsOnly(load(era, "B-rolled-back"), MAIN, CANARY, modules.old);
    });

    it("why the canary takes another label value: a second WasmPlugin on a label the main pod also carries lands next to the main one on every chain Istio builds", () => {
      const d = load(era, "B-second-plugin-extra-label");
      const both = d.listeners.flatMap((l: Json) => [...(l.filterChains ?? []), ...(l.defaultFilterChain ? [l.defaultFilterChain] : [])])
        .filter((c: Json) => filterNames(c).includes(MAIN) && filterNames(c).includes(CANARY));
      assert.ok(both.length > 0, `${d.where}: no chain with both plugins`);
      // The catch-all chain has only what the (main) hook-up names.
      const catchAll = placements(d, MAIN).filter((p) => p.chain === CATCH_ALL);
      assert.equal(catchAll.length, 1);
      assert.ok(!catchAll[0]!.filters.includes(CANARY));
    });

    it("a pod left on the canary value after the canary set is deleted matches neither set: no plugin, no mTLS cluster (why promotion relabels before deleting)", () => {
      const d = load(era, "B-promoted", "client-canary");
      assert.deepEqual(d.meta.ecdsRequested, []);
      assert.deepEqual([...placements(d, MAIN), ...placements(d, CANARY)], []);
      assert.equal(d.clusters.filter((c: Json) => c.name === MTLS_CLUSTER).length, 0);
    });
  });
}

// `npm run canary` (scripts/canary.ts) on the shipped route B manifests of every filter: the
// canary set is the twin of each object that selects the filter's opt-in label, on the label's
// canary value, named <name>-canary, with the WasmPlugins on the new image and every ECDS
// reference renamed to the canary plugin's; nothing of route A, nothing still naming the main
// plugin. What istiod makes of it is tests/istio/generation_upgrade.test.ts.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { canaryManifests, optInLabel, ROUTE_B_FILES } from "../../scripts/canary/transform.js";
import { REPO_ROOT, scratchDir } from "../support/paths.js";

const DIGEST = "ab".repeat(32);
const URL = (repository: string) => `oci://registry.example/mesh/${repository}@sha256:${DIGEST}`;

const run = (args: string[]) => spawnSync(process.execPath, ["--import", "tsx", "scripts/canary.ts", ...args], { cwd: REPO_ROOT, encoding: "utf8" });

function objects(text: string): any[] {
  return parseAllDocuments(text).map((d) => d.toJS()).filter(Boolean);
}

function filesOf(filter: string) {
  return ROUTE_B_FILES[filter]!.map((name) => ({ name, text: readFileSync(join(REPO_ROOT, "istio", filter, name), "utf8") }));
}

describe("npm run canary", () => {
  for (const filter of Object.keys(ROUTE_B_FILES)) {
    it(`${filter}: a twin of every object selecting ${optInLabel(filter)}, on the canary value, with the new image and the canary's ECDS names`, () => {
      const label = optInLabel(filter);
      const main = filesOf(filter).flatMap((f) => objects(f.text));
      const selecting = main.filter((o) => (o.spec?.selector?.matchLabels ?? o.spec?.workloadSelector?.labels)?.[label] !== undefined);
      const out = join(scratchDir("canary-"), "canary.yaml");
      const r = run(["--filter", filter, "--url", URL(filter.replaceAll("_", "-")), "--from", join(REPO_ROOT, "istio"), "--out", out]);
      assert.equal(r.status, 0, r.stderr);
      const text = readFileSync(out, "utf8");
      const twins = objects(text);
      assert.deepEqual(twins.map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`), selecting.map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}-canary`));
      for (const [i, twin] of twins.entries()) {
        const selector = twin.spec.selector?.matchLabels ?? twin.spec.workloadSelector?.labels;
        const mainSelector = selecting[i].spec.selector?.matchLabels ?? selecting[i].spec.workloadSelector?.labels;
        assert.equal(selector[label], `${mainSelector[label]}-canary`);
      }
      const plugins = twins.filter((o) => o.kind === "WasmPlugin");
      assert.ok(plugins.length > 0);
      for (const p of plugins) assert.deepEqual([p.spec.url, p.spec.sha256], [URL(filter.replaceAll("_", "-")), DIGEST]);
      // Every config_discovery name in the twins is a canary plugin's, in both of istiod's namings.
      const names = [...text.matchAll(/name: (extensions\.istio\.io\/\S+)/g)].map((m) => m[1]!);
      assert.ok(names.length > 0, "no ECDS reference in the canary set");
      for (const n of names) assert.match(n, /-canary(~istio-translated-wasmplugin)?$/, n);
      for (const p of selecting.filter((o) => o.kind === "WasmPlugin")) {
        const ns = p.metadata.namespace, name = p.metadata.name;
        assert.ok(!text.includes(`${ns}.${name}~`) && !new RegExp(`${ns}\\.${name}$`, "m").test(text), `the main plugin ${ns}/${name} is still named`);
      }
    });
  }

  it("route A's EnvoyFilter is not part of the canary set (passthrough_mtls/envoyfilter.yaml's object is not twinned)", () => {
    const text = canaryManifests({ filter: "passthrough_mtls", files: filesOf("passthrough_mtls"), url: URL("passthrough-mtls") });
    const names = objects(text).map((o) => o.metadata.name);
    assert.deepEqual(names, ["passthrough-mtls-cluster-canary", "passthrough-mtls-canary", "passthrough-mtls-catchall-canary"]);
  });

  it("refuses an image not pinned by digest, and an unknown filter, with one line naming the field", () => {
    const tag = run(["--filter", "passthrough_mtls", "--url", "oci://registry.example/passthrough-mtls:0.2.0", "--from", join(REPO_ROOT, "istio")]);
    assert.equal(tag.status, 1);
    assert.match(tag.stderr, /^canary: --url: "oci:\/\/registry\.example\/passthrough-mtls:0\.2\.0" is not oci:\/\/<registry>\/<repository>@sha256:<64 hex>/);
    assert.equal(tag.stderr.trim().split("\n").length, 1);
    const filter = run(["--filter", "nope", "--url", URL("nope")]);
    assert.equal(filter.status, 1);
    assert.match(filter.stderr, /^canary: --filter: "nope" is not one of passthrough_mtls, tunnel_port, waypoint_route/);
    assert.equal(run(["--filter", "passthrough_mtls"]).status, 2);
  });
});

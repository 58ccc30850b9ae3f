// istioctl 1.31 (the one tests/istio/istioctl.test.ts builds from the pinned module) on the feed
// chart's Istio policy (istio.enabled, as scripts/istio-gen.sh renders it): `istioctl validate`
// accepts the PeerAuthentication and the AuthorizationPolicy, and `istioctl analyze` of them with
// the test mesh (which holds the feed's pod and Service) reports no error and no warning.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments, stringify } from "yaml";
import { REPO_ROOT } from "../support/paths.js";

const ISTIOCTL = join(process.env.ISTIO_BIN_DIR ?? join(REPO_ROOT, ".cache", "istio", "bin"), "istioctl-1.31");
const MESH = join(REPO_ROOT, "build", "istio", "1.31", "sidecar", "mesh.yaml");
const CHART = join(REPO_ROOT, "build", "istio", "feed-chart-istio.yaml");

function istioctl(args: string[]): { status: number | null; output: string } {
  if (!existsSync(ISTIOCTL)) throw new Error(`${ISTIOCTL} is missing: run bash scripts/istio-gen.sh (npm run test:istio does)`);
  const r = spawnSync(ISTIOCTL, args, { encoding: "utf8", cwd: REPO_ROOT });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

describe("istioctl on the feed chart's Istio policy", () => {
  assert.ok(existsSync(CHART), `${CHART} is missing: run bash scripts/istio-gen.sh`);
  const policy = parseAllDocuments(readFileSync(CHART, "utf8")).map((d) => d.toJS()).filter((o) => String(o?.apiVersion).startsWith("security.istio.io/"));
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const file = join(mkdtempSync(join(REPO_ROOT, ".tmp", "feed-policy-")), "policy.yaml");
  writeFileSync(file, policy.map((o) => stringify(o)).join("---\n"));

  it("the chart renders exactly a PeerAuthentication and an AuthorizationPolicy for the feed", () => {
    assert.deepEqual(policy.map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`).sort(), ["AuthorizationPolicy mesh-feed/mesh-feed", "PeerAuthentication mesh-feed/mesh-feed"]);
  });

  it("istioctl validate accepts both", () => {
    const r = istioctl(["validate", "-f", file]);
    assert.equal(r.status, 0, r.output);
    assert.doesNotMatch(r.output, /error|warn/i, r.output);
  });

  it("istioctl analyze of both with the test mesh: no error, no warning", () => {
    const r = istioctl(["analyze", "--use-kube=false", "-A", MESH, file]);
    assert.equal(r.status, 0, r.output);
    assert.doesNotMatch(r.output, /^(Error|Warning)/m, r.output);
  });
});

// istioctl, built from the same pinned module as istiod's generation test (scripts/istio-gen.sh),
// on every manifest under istio/: `istioctl validate -f` accepts each file, and
// `istioctl analyze --use-kube=false -A` over each install route together with the test mesh
// (build/istio/<era>/sidecar/mesh.yaml) reports no error and exactly the warnings istio/README.md
// lists under "istioctl analyze" (each with why it stays).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../support/paths.js";

const ISTIOCTL = join(process.env.ISTIO_BIN_DIR ?? join(REPO_ROOT, ".cache", "istio", "bin"), "istioctl-1.31");
const MESH = join(REPO_ROOT, "build", "istio", "1.31", "sidecar", "mesh.yaml");

function istioctl(args: string[]): { status: number | null; output: string } {
  if (!existsSync(ISTIOCTL)) throw new Error(`${ISTIOCTL} is missing: run bash scripts/istio-gen.sh (npm run test:istio does)`);
  const r = spawnSync(ISTIOCTL, args, { encoding: "utf8", cwd: REPO_ROOT });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

const manifests = readdirSync(join(REPO_ROOT, "istio"), { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
  .map((e) => join(e.parentPath, e.name).slice(REPO_ROOT.length + 1))
  .sort();

/** The install routes (the files applied together), as istio/README.md gives them. */
const ROUTES: Record<string, string[]> = {
  "passthrough_mtls A": ["istio/passthrough_mtls/envoyfilter.yaml", "istio/passthrough_mtls/headless-destinationrule.yaml"],
  "passthrough_mtls B": ["istio/passthrough_mtls/wasmplugin.yaml", "istio/passthrough_mtls/cluster.yaml", "istio/passthrough_mtls/catchall.yaml", "istio/passthrough_mtls/headless-destinationrule.yaml"],
  "tunnel_port A": ["istio/tunnel_port/client-envoyfilter.yaml", "istio/tunnel_port/server-envoyfilter.yaml"],
  "tunnel_port B": ["istio/tunnel_port/wasmplugin.yaml", "istio/tunnel_port/wasmplugin-hookup.yaml"],
  "waypoint_route A": ["istio/waypoint_route/envoyfilter.yaml"],
  "waypoint_route B": ["istio/waypoint_route/wasmplugin.yaml"],
};

/** `| IST0nnn | Kind namespace/name | why |` rows of istio/README.md's "istioctl analyze" table. */
function acceptedWarnings(): Set<string> {
  const readme = readFileSync(join(REPO_ROOT, "istio", "README.md"), "utf8");
  const section = /## istioctl analyze\n([\s\S]*?)(\n## |$)/.exec(readme)?.[1] ?? "";
  const rows = [...section.matchAll(/^\| (IST\d{4}) \| ([^|]+?) \|/gm)].map((m) => `${m[1]} ${m[2].trim()}`);
  return new Set(rows);
}

describe("istioctl 1.31 (release-1.31 branch 2026-08-27), built from the pinned module", () => {
  it("every route's files are a README route and every manifest belongs to one", () => {
    assert.deepEqual([...new Set(Object.values(ROUTES).flat())].sort(), manifests);
  });

  for (const file of manifests) {
    it(`istioctl validate -f ${file}`, () => {
      const r = istioctl(["validate", "-f", file]);
      assert.equal(r.status, 0, r.output);
      assert.doesNotMatch(r.output, /error/i, r.output);
    });
  }

  const found = new Set<string>();
  for (const [route, files] of Object.entries(ROUTES)) {
    it(`istioctl analyze --use-kube=false -A: ${route} with the test mesh: no error; warnings only as listed in istio/README.md`, () => {
      assert.ok(existsSync(MESH), `${MESH} is missing: run bash scripts/istio-gen.sh`);
      const r = istioctl(["analyze", "--use-kube=false", "-A", MESH, ...files]);
      assert.doesNotMatch(r.output, /^Error/m, r.output);
      assert.equal(r.status, 0, r.output);
      const accepted = acceptedWarnings();
      for (const m of r.output.matchAll(/^(Warning|Info) \[(IST\d{4})\] \((\w+) ([^\s)]+)/gm)) {
        const key = `${m[2]} ${m[3]} ${m[4]}`;
        found.add(key);
        if (m[1] === "Warning") assert.ok(accepted.has(key), `unlisted warning: ${m[0]}\n${r.output}`);
      }
    });
  }

  it("istio/README.md lists no warning that analyze no longer reports", () => {
    for (const key of acceptedWarnings()) assert.ok(found.has(key), `README lists ${key}, analyze did not report it`);
  });
});

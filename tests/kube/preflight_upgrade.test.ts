// `npm run preflight -- --upgrade-to <version> [--revision <name>]` against a real kube-apiserver:
// a cluster running Istio 1.29 everywhere (istiod and sidecars), asked about the upgrade before
// it starts. In place to 1.31 would leave the 1.29 sidecars asking for the ECDS name istiod 1.29
// served, which 1.31 does not (istio/README.md, "Route B and the ECDS name, by version"): refused,
// one line per group of sidecars, naming them and what to do. The same upgrade as a new revision,
// or in place within 1.29, is not refused; a target no hook-up matches is.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { DEFAULT_CRDS, startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT } from "../support/paths.js";

function preflight(cluster: KubeCluster, ...args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, ["--import", "tsx", "scripts/preflight.ts", "--kubeconfig", cluster.kubeconfigPath, ...args], { cwd: REPO_ROOT, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const lines = (out: string, level: string) => out.split("\n").filter((l) => l.startsWith(level));

describe("npm run preflight --upgrade-to on a real API server running Istio 1.29", { concurrency: false }, () => {
  let cluster: KubeCluster;

  before(async () => {
    cluster = await startKubeCluster({ name: "preflight-upgrade", crds: [...DEFAULT_CRDS, "envoyfilters.networking.istio.io"] });
    for (const ns of ["istio-system", "apps"]) await cluster.createNamespace(ns);
    const labels = { app: "istiod", "istio.io/rev": "default" };
    await cluster.apply({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { namespace: "istio-system", name: "istiod", labels },
      spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: "discovery", image: "docker.io/istio/pilot:1.29.6" }] } } },
    });
    for (const name of ["cart-0", "cart-1"]) {
      await cluster.apply({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { namespace: "apps", name, labels: { app: "cart" }, annotations: { "sidecar.istio.io/status": '{"containers":["istio-proxy"]}' } },
        spec: { containers: [{ name: "app", image: "registry.invalid/app:1" }, { name: "istio-proxy", image: "docker.io/istio/proxyv2:1.29.6" }] },
      });
    }
  });

  after(async () => {
    await cluster?.stop();
  });

  it("as it runs today: nothing refused", () => {
    const r = preflight(cluster);
    assert.equal(r.code, 0, r.out + r.err);
    assert.match(r.out, /2 sidecar\(s\) of revision default at 1\.29\.6 \(apps\/cart-0, apps\/cart-1\): route B's hook-ups \(\d+ patches\) name what istiod istiod 1\.29\.6 serves/);
  });

  it("an in-place upgrade to 1.31.2: refused before it starts, one line naming the revision, the sidecars and what to do", () => {
    const r = preflight(cluster, "--upgrade-to", "1.31.2");
    assert.equal(r.code, 1, r.out + r.err);
    assert.match(r.out, /^plan {3}Istio 1\.31\.2 in place of revision default: judged as the cluster would be after it/m);
    const refused = lines(r.out, "refuse");
    assert.equal(refused.length, 1, r.out);
    assert.match(refused[0]!, /^refuse 2 sidecar\(s\) of revision default at 1\.29\.6 \(apps\/cart-0, apps\/cart-1\): their hook-up \(istio\/\w+\/[\w-]+\.yaml, proxyVersion .*\) asks for extensions\.istio\.io\/wasmplugin\/istio-system\.[\w-]+, which istiod istiod once upgraded in place to 1\.31\.2 does not serve: their listeners would keep warming until each pod restarts\. Do not upgrade revision default in place: install 1\.31\.2 as a new revision/);
    assert.match(r.out, /1 refusal\(s\)/);
  });

  it("the same upgrade as a new revision: not refused; the sidecars restarted onto it get the hook-up for their new version", () => {
    const r = preflight(cluster, "--upgrade-to", "1.31.2", "--revision", "1-31");
    assert.equal(r.code, 0, r.out + r.err);
    assert.match(r.out, /^plan {3}Istio 1\.31\.2 as a new revision 1-31/m);
    assert.match(r.out, /the new istiod revision 1-31 at 1\.31\.2: would serve WasmPlugins over ECDS as extensions\.istio\.io\/trafficextension\//);
    assert.match(r.out, /sidecars restarted onto revision 1-31 at 1\.31\.2: route B's hook-ups \(\d+ patches\) name what the new istiod revision 1-31 at 1\.31\.2 would serve/);
    // The running revision is judged as it is.
    assert.match(r.out, /2 sidecar\(s\) of revision default at 1\.29\.6 .*name what istiod istiod 1\.29\.6 serves/);
  });

  it("in place within 1.29 (a patch release): not refused", () => {
    const r = preflight(cluster, "--upgrade-to", "1.29.7");
    assert.equal(r.code, 0, r.out + r.err);
    assert.deepEqual(lines(r.out, "refuse"), []);
  });

  it("a new revision whose version no hook-up matches: refused (its sidecars would get no filter)", () => {
    const r = preflight(cluster, "--upgrade-to", "2.0.0", "--revision", "2-0");
    assert.equal(r.code, 1, r.out + r.err);
    assert.match(lines(r.out, "refuse").join("\n"), /sidecars restarted onto revision 2-0 at 2\.0\.0: no hook-up's proxyVersion matches 2\.0\.0/);
  });

  it("a bad --upgrade-to, or --revision alone: exit 2 with one line naming the flag", () => {
    const bad = preflight(cluster, "--upgrade-to", "latest");
    assert.equal(bad.code, 2);
    assert.match(bad.err, /^preflight: --upgrade-to: "latest" is not an Istio version such as 1\.31\.2$/m);
    const alone = preflight(cluster, "--revision", "1-31");
    assert.equal(alone.code, 2);
    assert.match(alone.err, /^preflight: --revision: only with --upgrade-to <version>$/m);
  });
});

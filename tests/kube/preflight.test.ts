// `npm run preflight` against a real kube-apiserver: the command is run as an operator runs it
// (a subprocess with a kubeconfig), on clusters laid out as the situations it must tell apart:
// one Istio version everywhere; an in-place upgrade that leaves 1.29 sidecars on a 1.31 istiod
// (route B's hook-up would ask them for an ECDS name that istiod does not serve); the same
// versions in a revision-based upgrade (each sidecar on its own revision's istiod: fine); a
// proxy version no hook-up matches; a cluster without Istio's CRDs. Its verdicts come from the
// manifests under istio/ themselves (their proxyVersion regexes and ECDS names).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DEFAULT_CRDS, startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT, scratchDir } from "../support/paths.js";

function preflight(cluster: KubeCluster | string): { code: number | null; out: string } {
  const kubeconfig = typeof cluster === "string" ? cluster : cluster.kubeconfigPath;
  const r = spawnSync(process.execPath, ["--import", "tsx", "scripts/preflight.ts", "--kubeconfig", kubeconfig], { cwd: REPO_ROOT, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, out: r.stdout + r.stderr };
}

const lines = (out: string, level: string) => out.split("\n").filter((l) => l.startsWith(level));

function istiod(revision: string, version: string) {
  const name = revision === "default" ? "istiod" : `istiod-${revision}`;
  const labels = { app: "istiod", "istio.io/rev": revision };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { namespace: "istio-system", name, labels },
    spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: "discovery", image: `docker.io/istio/pilot:${version}` }] } } },
  };
}

function sidecarPod(name: string, revision: string, proxyVersion: string) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { namespace: "apps", name, labels: { app: name, "istio.io/rev": revision }, annotations: { "sidecar.istio.io/status": '{"containers":["istio-proxy"]}' } },
    spec: { containers: [{ name: "app", image: "registry.invalid/app:1" }, { name: "istio-proxy", image: `docker.io/istio/proxyv2:${proxyVersion}` }] },
  };
}

describe("npm run preflight on a real API server", { concurrency: false }, () => {
  let cluster: KubeCluster;
  let bare: KubeCluster;

  before(async () => {
    cluster = await startKubeCluster({ name: "preflight", crds: [...DEFAULT_CRDS, "envoyfilters.networking.istio.io"] });
    bare = await startKubeCluster({ name: "preflight-bare", crds: [] });
    for (const ns of ["istio-system", "apps"]) await cluster.createNamespace(ns);
  });

  after(async () => {
    await cluster?.stop();
    await bare?.stop();
  });

  it("one Istio version everywhere: nothing refused, the hook-up named", async () => {
    await cluster.apply(istiod("default", "1.31.2"));
    await cluster.apply(sidecarPod("a-0", "default", "1.31.2"));
    await cluster.apply(sidecarPod("b-0", "default", "1.31.2-distroless"));
    const { code, out } = preflight(cluster);
    assert.equal(code, 0, out);
    assert.deepEqual(lines(out, "refuse"), [], out);
    assert.match(out, /CRD wasmplugins\.extensions\.istio\.io serves v1alpha1/);
    assert.match(out, /istiod istiod \(revision default\) 1\.31\.2: serves WasmPlugins over ECDS as extensions\.istio\.io\/trafficextension\//);
    assert.match(out, /1 sidecar\(s\) of revision default at 1\.31\.2 \(apps\/a-0\): route B's hook-ups \(\d+ patches\) name what istiod istiod 1\.31\.2 serves/);
  });

  it("an in-place upgrade leaving 1.29 sidecars on a 1.31 istiod: refused, saying why and what to do", async () => {
    await cluster.apply(sidecarPod("old-0", "default", "1.29.6"));
    const { code, out } = preflight(cluster);
    assert.equal(code, 1, out);
    const refused = lines(out, "refuse");
    assert.equal(refused.length, 1, out);
    assert.match(refused[0]!, /1 sidecar\(s\) of revision default at 1\.29\.6 \(apps\/old-0\): their hook-up \(istio\/\w+\/[\w-]+\.yaml, proxyVersion .*\) asks for extensions\.istio\.io\/wasmplugin\/.*, which istiod istiod 1\.31\.2 does not serve: their listeners would keep warming/);
    assert.match(refused[0]!, /Upgrade with a new revision/);
    await cluster.objects.delete({ apiVersion: "v1", kind: "Pod", metadata: { namespace: "apps", name: "old-0" } });
  });

  it("the same versions in a revision-based upgrade: each sidecar on its own revision's istiod, nothing refused", async () => {
    await cluster.apply(istiod("1-29", "1.29.6"));
    await cluster.apply(sidecarPod("old-0", "1-29", "1.29.6"));
    const { code, out } = preflight(cluster);
    assert.equal(code, 0, out);
    assert.match(out, /1 sidecar\(s\) of revision 1-29 at 1\.29\.6 \(apps\/old-0\): route B's hook-ups \(\d+ patches\) name what istiod istiod-1-29 1\.29\.6 serves/);
  });

  it("a proxy version no hook-up matches: refused (it would silently get no filter)", async () => {
    await cluster.apply(sidecarPod("next-0", "default", "2.0.0"));
    const { code, out } = preflight(cluster);
    assert.equal(code, 1, out);
    assert.match(lines(out, "refuse").join("\n"), /at 2\.0\.0 \(apps\/next-0\): no hook-up's proxyVersion matches 2\.0\.0/);
  });

  it("a cluster without Istio: the missing CRDs and istiod refused", () => {
    const { code, out } = preflight(bare);
    assert.equal(code, 1, out);
    const refused = lines(out, "refuse").join("\n");
    assert.match(refused, /CRD wasmplugins\.extensions\.istio\.io is missing/);
    assert.match(refused, /CRD envoyfilters\.networking\.istio\.io is missing/);
    assert.match(refused, /no istiod Deployment/);
  });

  it("an unreachable cluster or a bad flag: exit 2 with one line", async () => {
    const stopped = await startKubeCluster({ name: "preflight-gone", crds: [] });
    const kubeconfig = join(scratchDir("preflight-"), "gone.kubeconfig");
    copyFileSync(stopped.kubeconfigPath, kubeconfig);
    await stopped.stop();
    const gone = preflight(kubeconfig);
    assert.equal(gone.code, 2, gone.out);
    assert.match(gone.out, /^preflight: cannot read the cluster at https:\/\/127\.0\.0\.1:\d+/m);
    const r = spawnSync(process.execPath, ["--import", "tsx", "scripts/preflight.ts", "--nope"], { cwd: REPO_ROOT, encoding: "utf8" });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /Unknown option '--nope'/);
  });
});

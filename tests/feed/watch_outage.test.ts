// A cluster's watches through an API server outage, against the real kube-apiserver without the
// Gateway API's CRDs (a cluster that has no Gateways, which the feed allows): while the API
// server is out of reach every kind fails, the optional ones too (a refused connection says
// nothing about a CRD); once it is back, the required kinds are established again and the
// optional ones are found missing (404). Every kind must then count as failing no more: a
// missing optional kind is no failure, as at start. Otherwise the cluster would stay "not
// synced" for ever, and a replica cut off from this API server would never serve its channel
// again (serving_gate.ts waits for every watch of the Lease's cluster).
// Run: node --import tsx --test tests/feed/watch_outage.test.ts
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse, stringify } from "yaml";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { ClusterWatch, loadKubeConfig } from "../../feed/src/watch.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { scratchDir } from "../support/paths.js";
import { eventually, feedKubeconfig } from "./harness.js";
import { Relay } from "./replicas_support.js";

describe("cluster watches through an API server outage, without the optional Gateway API CRDs", () => {
  let cluster: KubeCluster;
  let relay: Relay;
  let watch: ClusterWatch;
  const failing = new Set<string>();
  const everFailed = new Set<string>();
  let synced = false;

  before(async () => {
    cluster = await startKubeCluster({ name: "feed-watch-outage", crds: ["wasmplugins.extensions.istio.io"] });
    const server = new URL(cluster.kubeConfig.getCurrentCluster()?.server ?? "");
    relay = await Relay.start({ host: server.hostname, port: Number(server.port) });
    const kc = parse(readFileSync(await feedKubeconfig(cluster), "utf8")) as { clusters: Array<{ cluster: { server: string } }> };
    for (const c of kc.clusters) c.cluster.server = `https://127.0.0.1:${relay.port}`;
    const path = join(scratchDir("feed-watch-outage-"), "kubeconfig");
    writeFileSync(path, stringify(kc), { mode: 0o600 });
    watch = new ClusterWatch(new ClusterObjects("c1"), loadKubeConfig(path), {
      changed: () => undefined,
      synced: () => (synced = true),
      watchFailed: (_id, kind) => {
        failing.add(kind);
        everFailed.add(kind);
      },
      watchRecovered: (_id, kind) => failing.delete(kind),
      log: () => undefined,
    }, 200);
    await watch.start();
  });

  after(async () => {
    await watch?.stop();
    await relay?.cut();
    await cluster?.stop();
  });

  it("synced at start with the Gateway API kinds missing, none failing", () => {
    assert.equal(synced, true);
    assert.deepEqual([...failing], []);
  });

  it("cut off: every kind fails, the optional ones too; back: none counts as failing", async () => {
    await relay.cut();
    await eventually("every kind fails", 10_000, async () => (["pods", "services", "gateways", "gatewayClasses"].every((k) => failing.has(k)) ? true : undefined), 50);
    await relay.restore();
    await eventually("no kind counts as failing", 15_000, async () => (failing.size === 0 ? true : undefined), 50).catch((error: Error) => {
      throw new Error(`${error.message}: still failing ${[...failing].join(", ")}`);
    });
    assert.ok(everFailed.has("gateways") && everFailed.has("gatewayClasses"));
  });
});

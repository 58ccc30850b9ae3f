// Churn: thousands of pod creations and deletions through a real API server while connections
// flow through passthrough_mtls in the real Envoy, fed by the feed (ECDS file). Eight dialled
// IPs have TLS pods listening; pods holding them come and go at random, between thousands of
// other pods created and deleted. Every connection's outcome (mTLS verifying the pod, or plain)
// must match the API server's state at some moment no longer ago than the debounce cap plus the
// apply margin; at the end, nothing the final state allows is refused, and neither Envoy nor
// the feed refused any snapshot.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EcdsPlugin } from "../support/ecds.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange } from "../support/tcp.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";
import { runFeed, sleep, type FeedRun } from "./harness.js";

const DEBOUNCE_MAX_MS = 1000;
/** Validation, the ECDS file watch and Envoy's reload of the plugin, on a loaded 2-core machine. */
const APPLY_MARGIN_MS = 4000;
const BOUND_MS = DEBOUNCE_MAX_MS + APPLY_MARGIN_MS;
const DIALLED = Array.from({ length: 8 }, (_, i) => `127.0.2.${i + 1}`);
const CHURN_PODS = 2000;
const LABELS = { "security.istio.io/tlsMode": "istio" };
const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;

/** One API write that changes whether `ip` is a mesh pod; both states are acceptable between start and end. */
interface Transition {
  ip: string;
  start: number;
  end: number;
  inMesh: boolean;
}

describe("feed under churn: thousands of pod creations and deletions while connections flow", () => {
  let cluster: KubeCluster;
  let run: FeedRun;
  let envoy: EnvoyProcess;
  let plugin: EcdsPlugin;
  let pods: TlsPod[] = [];

  before(async () => {
    await writeDemoCerts();
    cluster = await startKubeCluster({ name: "feed-churn", apiserverArgs: ["--max-requests-inflight=800", "--max-mutating-requests-inflight=400"] });
    await cluster.createNamespace("default");
    plugin = new EcdsPlugin("envoy-configs/passthrough_mtls_plugin", "passthrough_mtls.yaml");
    run = await runFeed([{ id: "cluster1", cluster }], [{ name: "sidecar", filter: "passthrough_mtls", ecds: { file: join(plugin.dir, "passthrough_mtls.yaml") } }], { debounce: { quietMs: 100, maxMs: DEBOUNCE_MAX_MS } });
    for (const ip of DIALLED) pods.push(await startTlsPod(ip, ip, 8443, CERT_DIR, "pod-a"));
    envoy = await EnvoyProcess.start({ name: "feed-churn", adminPort: 15000, config: plugin.bootstrap(shippedConfig("passthrough_mtls_ecds.yaml")) });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await run?.feed.stop();
    for (const p of pods) await p.close();
    await cluster?.stop();
  });

  it("decides every connection with a snapshot no older than the debounce cap plus the apply margin", async (t) => {
    const transitions: Transition[] = [];
    const holder = new Map<string, string | undefined>(DIALLED.map((ip) => [ip, undefined]));
    let serial = 0;
    let churning = true;
    const toggle = async (ip: string) => {
      const current = holder.get(ip);
      if (current) {
        const start = Date.now();
        await cluster.deletePod("default", current);
        transitions.push({ ip, start, end: Date.now(), inMesh: false });
        holder.set(ip, undefined);
      } else {
        const name = `held-${ip.replaceAll(".", "-")}-${serial++}`;
        await cluster.createPod({ namespace: "default", name, labels: LABELS, serviceAccountName: "httpbin" });
        const start = Date.now();
        await cluster.setPodStatus("default", name, { podIP: ip });
        transitions.push({ ip, start, end: Date.now(), inMesh: true });
        holder.set(ip, name);
      }
    };
    // Background churn: pods created, given an IP, deleted, 16 at a time.
    let created = 0;
    const churn = (async () => {
      const worker = async () => {
        while (created < CHURN_PODS) {
          const i = created++;
          const name = `churn-${i}`;
          await cluster.createPod({ namespace: "default", name, labels: LABELS, serviceAccountName: `sa-${i % 50}` });
          await cluster.setPodStatus("default", name, { podIP: `10.200.${i >> 8}.${i & 255}` });
          await cluster.deletePod("default", name);
        }
      };
      await Promise.all(Array.from({ length: 16 }, worker));
      churning = false;
    })();
    // The dialled IPs' pods come and go at random while the churn runs.
    const toggler = (async () => {
      while (churning) {
        await toggle(DIALLED[Math.floor(Math.random() * DIALLED.length)]);
        await sleep(150 + Math.random() * 300);
      }
    })();
    // Connections flow the whole time, round robin over the dialled IPs.
    const outcomes: Array<{ ip: string; at: number; mtls: boolean }> = [];
    const client = (async () => {
      for (let k = 0; churning; k++) {
        const ip = DIALLED[k % DIALLED.length];
        const at = Date.now();
        const reply = (await exchange(ip, 8443, "hello", 2000, CLIENT_ADDRESS)).received.toString();
        assert.ok(reply === "" || reply === `${ip} peer=${SIDECAR}\nhello`, `unexpected reply from ${ip}: ${JSON.stringify(reply)}`);
        outcomes.push({ ip, at, mtls: reply !== "" });
      }
    })();
    await Promise.all([churn, toggler, client]);

    // Staleness of each outcome: 0 when the API state allowed it at that moment, else the time
    // since the state last moved away from it.
    let worst = 0;
    const stale: string[] = [];
    for (const o of outcomes) {
      const mine = transitions.filter((x) => x.ip === o.ip && x.start <= o.at);
      const last = mine.at(-1);
      const stateNow = last ? last.inMesh : false;
      const allowed = stateNow === o.mtls || (last !== undefined && last.end > o.at);
      if (allowed) continue;
      const away = [...mine].reverse().find((x) => x.inMesh !== o.mtls);
      const staleness = away ? o.at - away.start : Infinity;
      worst = Math.max(worst, staleness);
      if (staleness > BOUND_MS) stale.push(`${o.ip} ${o.mtls ? "mTLS" : "plain"} ${staleness} ms after the change`);
    }
    t.diagnostic(`${CHURN_PODS} churn pods, ${transitions.length} changes of the dialled IPs, ${outcomes.length} connections; worst staleness ${worst} ms (bound ${BOUND_MS} ms)`);
    assert.ok(outcomes.length >= 100, `only ${outcomes.length} connections`);
    assert.ok(transitions.length >= 20, `only ${transitions.length} changes`);
    assert.deepEqual(stale, [], "connections decided by a snapshot older than the bound");

    // The final state: give every dialled IP a pod; after the bound every one is reached over mTLS.
    for (const ip of DIALLED) if (!holder.get(ip)) await toggle(ip);
    await sleep(BOUND_MS);
    for (const ip of DIALLED) assert.equal((await exchange(ip, 8443, "final", 5000, CLIENT_ADDRESS)).received.toString(), `${ip} peer=${SIDECAR}\nfinal`);
    const stats = await envoy.stats();
    assert.equal(stats.get("extension_config_discovery.network_filter.passthrough_mtls.update_rejected") ?? 0, 0);
    assert.ok((stats.get("extension_config_discovery.network_filter.passthrough_mtls.config_reload") ?? 0) >= 5);
    assert.equal(run.feed.controller.metrics.get("feed_render_errors_total", { target: "sidecar" }), undefined);
  });
});

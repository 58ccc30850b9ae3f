// Deltas end to end: a real kube-apiserver, the real feed (its /delta long poll, the shadow VM
// check), and the real Envoy (--concurrency 2) whose passthrough_mtls takes its mesh only from
// `meshFeed` (cluster mesh_feed → the feed's channel, mutual TLS): no ECDS, no snapshot in the
// configuration. The application's connections are captured as a sidecar's are (private
// network namespace: run under scripts/in-netns.sh, as npm run test:feed does).
// Pods are real TLS servers on loopback with test-made SPIFFE certificates; the API server only
// holds their objects (the test writes pod status as a kubelet would).
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startFeed } from "../../feed/src/main.js";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EnvoyProcess } from "../support/envoy.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { freePort } from "../support/ports.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";
import { meshFeedSidecarConfig } from "./delta_envoy_config.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";

const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
const SIDECAR_LABELS = { app: "demo", "security.istio.io/tlsMode": "istio" };
/** Delta debounce + the held poll's answer on a loaded 2-core machine, with a wide margin. */
const BOUND_MS = 7000;
/** After a feed restart the VMs come back on their backoff (unavailable: 500 ms doubling, capped at 5 s; assembly/runtime/feed_retry.ts). */
const RESYNC_MS = 35_000;
const WORKERS = 2;
/** Envoy runs the plugin in each worker and in the main thread: each VM polls on its own. */
const VMS = WORKERS + 1;

function dial(host: string, port: number, payload: string, timeoutMs = 1_000) {
  return exchange(host, port, payload, timeoutMs, CLIENT_ADDRESS);
}

describe("feed deltas → passthrough_mtls in the real Envoy over meshFeed, from a real API server", () => {
  let cluster: KubeCluster;
  let run: FeedRun;
  let envoy: EnvoyProcess;
  let httpbin: TlsPod; // 127.0.0.11:8443, certificate spiffe://cluster.local/ns/default/sa/httpbin
  let plain11: Backend; // 127.0.0.11:8080, plain
  let pod13: TlsPod; // 127.0.0.13:8443, certificate spiffe://cluster.local/ns/default/sa/imposter
  let feedPort: number;
  let restarted: Awaited<ReturnType<typeof startFeed>> | undefined;
  const stat = async (name: string) => (await envoy.stats()).get(name) ?? 0;
  const feedStat = (name: string) => stat(`wasmcustom.passthrough_mtls.feed.${name}`);
  const mtlsTo11 = async () => (await dial("127.0.0.11", 8443, "ping-1")).received.toString() === `httpbin-0 peer=${SIDECAR}\nping-1`;
  const plainTo11 = async () => (await dial("127.0.0.11", 8080, "hello")).received.toString() === "plain-11\nhello";

  before(async () => {
    await writeDemoCerts();
    cluster = await startKubeCluster({ name: "feed-de", crds: [] });
    await cluster.createNamespace("default");
    feedPort = await freePort();
    run = await runFeed([{ id: "cluster1", cluster }], [{ name: "sidecar", filter: "passthrough_mtls" }], { channel: { port: feedPort } });
    httpbin = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
    plain11 = await startBackend("plain-11", "127.0.0.11", 8080);
    pod13 = await startTlsPod("pod-13", "127.0.0.13", 8443, CERT_DIR, "pod-c");
    envoy = await EnvoyProcess.start({ name: "feed-de", adminPort: 15000, concurrency: WORKERS, config: meshFeedSidecarConfig(feedPort, "sidecar") });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await restarted?.stop();
    await run?.feed.stop();
    await cluster?.stop();
    for (const p of [httpbin, plain11, pod13]) await p?.close();
  });

  it("every worker VM loads the feed's full model (empty mesh: 127.0.0.11 in clear)", async () => {
    await eventually("the full model in every worker", BOUND_MS * 2, async () => ((await feedStat("applied_full")) >= VMS ? true : undefined));
    assert.ok(await plainTo11());
  });

  it("a pod created with sidecar labels: new connections to its IP go out over mTLS with its identity", async (t) => {
    const deltas = await feedStat("applied_delta");
    await cluster.createPod({ namespace: "default", name: "httpbin-0", labels: SIDECAR_LABELS, serviceAccountName: "httpbin" });
    const written = Date.now();
    await cluster.setPodStatus("default", "httpbin-0", { podIP: "127.0.0.11" });
    await eventually("mTLS to httpbin-0", BOUND_MS, async () => ((await mtlsTo11()) ? true : undefined));
    t.diagnostic(`API write -> first mTLS connection: ${Date.now() - written} ms`);
    // Every worker decides with it (connections land on either): a run of connections all mTLS.
    for (let i = 0; i < 8; i++) assert.ok(await mtlsTo11(), `connection ${i}`);
    assert.ok((await feedStat("applied_delta")) > deltas, "it came as a delta");
    assert.ok(httpbin.peers.every((p) => p === SIDECAR));
  });

  it("the pod deleted: plain passthrough again", async () => {
    await cluster.deletePod("default", "httpbin-0");
    await eventually("plain passthrough to 127.0.0.11", BOUND_MS, async () => ((await plainTo11()) ? true : undefined));
    for (let i = 0; i < 8; i++) assert.ok(await plainTo11(), `connection ${i}`);
  });

  it("an IP reused by a pod of another service account: the new identity is verified", async () => {
    await cluster.createPod({ namespace: "default", name: "reviews-0", labels: SIDECAR_LABELS, serviceAccountName: "reviews" });
    await cluster.setPodStatus("default", "reviews-0", { podIP: "127.0.0.13" });
    await eventually("reviews-0 in the filter (identity mismatch counted)", BOUND_MS, async () => {
      const before = await stat("cluster.outbound_mtls_passthrough.ssl.fail_verify_san");
      const reply = (await dial("127.0.0.13", 8443, "secret")).received;
      return reply.length === 0 && (await stat("cluster.outbound_mtls_passthrough.ssl.fail_verify_san")) > before ? true : undefined;
    });
    assert.equal(pod13.accepted, 0, "nothing reached the pod presenting the wrong identity");
    await cluster.deletePod("default", "reviews-0");
    await cluster.createPod({ namespace: "default", name: "imposter-0", labels: SIDECAR_LABELS, serviceAccountName: "imposter" });
    await cluster.setPodStatus("default", "imposter-0", { podIP: "127.0.0.13" });
    await eventually("mTLS to imposter-0 with its own identity", BOUND_MS, async () => {
      const reply = (await dial("127.0.0.13", 8443, "now!!")).received.toString();
      return reply === `pod-13 peer=${SIDECAR}\nnow!!` ? true : undefined;
    });
  });

  it("the feed stopped: connections keep flowing on the last model (fail static); restarted (new epoch) with a change missed: each VM repaired by bucket (no full message), decisions follow", async () => {
    await cluster.createPod({ namespace: "default", name: "httpbin-0", labels: SIDECAR_LABELS, serviceAccountName: "httpbin" });
    await cluster.setPodStatus("default", "httpbin-0", { podIP: "127.0.0.11" });
    await eventually("mTLS to httpbin-0", BOUND_MS, async () => ((await mtlsTo11()) ? true : undefined));
    const fulls = await feedStat("applied_full");
    const oldEpoch = await (await fetch(`${run.base}/metrics`)).text().then((m) => m.match(/feed_delta_epoch (\d+)/)?.[1]);
    await run.feed.stop();
    await eventually("the VMs see the feed unavailable", BOUND_MS * 2, async () => ((await feedStat("unavailable")) >= 1 ? true : undefined));
    // Fail static: the model in force stays; new connections are decided with it.
    for (let i = 0; i < 8; i++) assert.ok(await mtlsTo11(), `connection ${i} while the feed is down`);
    // A change while the feed is down reaches nobody...
    await cluster.deletePod("default", "httpbin-0");
    assert.ok(await mtlsTo11(), "still the last model");
    // ... until the feed is back (a new process: a new epoch; each VM sends its bucket digests in
    // a POST through Envoy and gets the buckets that differ: a repair, not a full message).
    restarted = await startFeed(join(run.dir, "feed.yaml"));
    assert.equal(restarted.channelPort, feedPort);
    const newEpoch = await (await fetch(`http://127.0.0.1:${restarted.port}/metrics`)).text().then((m) => m.match(/feed_delta_epoch (\d+)/)?.[1]);
    assert.notEqual(newEpoch, oldEpoch);
    await eventually("every worker repaired", RESYNC_MS, async () => ((await feedStat("applied_repair")) >= VMS ? true : undefined), 200);
    assert.equal(await feedStat("applied_full"), fulls, "no VM needed a full message");
    const metrics = await (await fetch(`http://127.0.0.1:${restarted.port}/metrics`)).text();
    assert.match(metrics, /feed_delta_requests_total\{[^}]*kind="repair"[^}]*\} [1-9]/);
    await eventually("plain passthrough to 127.0.0.11 after the resync", BOUND_MS, async () => ((await plainTo11()) ? true : undefined));
    for (let i = 0; i < 8; i++) assert.ok(await plainTo11(), `connection ${i}`);
    assert.equal(await feedStat("refused"), 0, "the feed never sent a message the filter refused");
  });
});

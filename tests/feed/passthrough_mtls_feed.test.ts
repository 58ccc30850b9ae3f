// The feed end to end: a real kube-apiserver (tests/support/kube.ts), the feed watching it with
// its shipped RBAC, delivering to passthrough_mtls in the real Envoy by ECDS file
// (envoy-configs/passthrough_mtls_ecds.yaml, a private copy of its plugin directory), and the
// application's connections captured as a sidecar's are (private network namespace).
// Pods are real TLS servers on loopback with test-made SPIFFE certificates; the API server only
// holds their objects (no kubelet: the test writes pod status as a kubelet would).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse } from "yaml";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EcdsPlugin } from "../support/ecds.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";

const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
/** The feed's debounce (harness default) plus a margin for validation, the file watch and a loaded 2-core machine. */
const BOUND_MS = 1000 + 6000;
const SIDECAR_LABELS = { app: "demo", "security.istio.io/tlsMode": "istio" };

/**
 * A short timeout: a clear connection to a TLS pod gets no answer, and polling must not wait long
 * on one. Payloads are at least 5 bytes (a TLS record header), so a TLS pod reached in clear
 * fails the handshake at once instead of waiting for the rest of a record.
 */
function dial(host: string, port: number, payload: string, timeoutMs = 1_000) {
  return exchange(host, port, payload, timeoutMs, CLIENT_ADDRESS);
}

describe("feed → passthrough_mtls by ECDS file, from a real API server", () => {
  let cluster: KubeCluster;
  let run: FeedRun;
  let envoy: EnvoyProcess;
  let plugin: EcdsPlugin;
  let httpbin: TlsPod; // 127.0.0.11:8443, certificate spiffe://cluster.local/ns/default/sa/httpbin
  let plain11: Backend; // 127.0.0.11:8080, plain: answers only a connection that arrives in clear
  let pod13: TlsPod; // 127.0.0.13:8443, certificate spiffe://cluster.local/ns/default/sa/imposter
  const counters = async () => {
    const s = await envoy.stats();
    return { mtls: s.get("wasmcustom.passthrough_mtls.mtls") ?? 0, passthrough: s.get("wasmcustom.passthrough_mtls.passthrough") ?? 0, failSan: s.get("cluster.outbound_mtls_passthrough.ssl.fail_verify_san") ?? 0 };
  };

  before(async () => {
    await writeDemoCerts();
    // No Gateway API CRDs on this cluster: the feed runs without them, as istiod does.
    cluster = await startKubeCluster({ name: "feed-pm", crds: [] });
    await cluster.createNamespace("default");
    plugin = new EcdsPlugin("envoy-configs/passthrough_mtls_plugin", "passthrough_mtls.yaml");
    run = await runFeed([{ id: "cluster1", cluster }], [{ name: "sidecar", filter: "passthrough_mtls", ecds: { file: join(plugin.dir, "passthrough_mtls.yaml") } }]);
    httpbin = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
    plain11 = await startBackend("plain-11", "127.0.0.11", 8080);
    pod13 = await startTlsPod("pod-13", "127.0.0.13", 8443, CERT_DIR, "pod-c");
    envoy = await EnvoyProcess.start({ name: "feed-pm", adminPort: 15000, config: plugin.bootstrap(shippedConfig("passthrough_mtls_ecds.yaml")) });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await run?.feed.stop();
    await cluster?.stop();
    for (const p of [httpbin, plain11, pod13]) await p?.close();
  });

  it("starts from the feed's snapshot: an empty mesh, so 127.0.0.11 goes out in clear", async () => {
    const file = parse(readFileSync(join(plugin.dir, "passthrough_mtls.yaml"), "utf8"));
    const served = await fetch(`${run.base}/snapshot/sidecar`);
    assert.equal(served.status, 200);
    assert.equal(file.version_info, served.headers.get("x-feed-version"));
    assert.deepEqual(JSON.parse(await served.text()).workloads, []);
    assert.equal((await dial("127.0.0.11", 8080, "hello")).received.toString(), "plain-11\nhello");
  });

  it("a pod created through the API server with sidecar labels and an IP: new connections to it go out over mTLS verifying its identity", async (t) => {
    await cluster.createPod({ namespace: "default", name: "httpbin-0", labels: SIDECAR_LABELS, serviceAccountName: "httpbin" });
    const written = Date.now();
    await cluster.setPodStatus("default", "httpbin-0", { podIP: "127.0.0.11" });
    const { ms } = await eventually("mTLS to httpbin-0", BOUND_MS, async () => {
      const reply = (await dial("127.0.0.11", 8443, "ping-1")).received.toString();
      return reply === `httpbin-0 peer=${SIDECAR}\nping-1` ? reply : undefined;
    });
    t.diagnostic(`API write -> first mTLS connection: ${Date.now() - written} ms (polling ${ms} ms)`);
    // The same pod's plain port now gets mTLS too (its bytes are not in clear): the plain
    // server cannot answer a TLS client.
    const before = await counters();
    assert.notEqual((await dial("127.0.0.11", 8080, "hello")).received.toString(), "plain-11\nhello");
    assert.equal((await counters()).mtls, before.mtls + 1);
    assert.ok(httpbin.peers.every((p) => p === SIDECAR));
  });

  it("the pod deleted: plain passthrough again", async () => {
    await cluster.deletePod("default", "httpbin-0");
    await eventually("plain passthrough to 127.0.0.11", BOUND_MS, async () => {
      const reply = (await dial("127.0.0.11", 8080, "hello")).received.toString();
      return reply === "plain-11\nhello" ? reply : undefined;
    });
    const c = await counters();
    assert.ok(c.passthrough >= 2);
  });

  it("an IP reused by a pod of another service account: the new pod's identity is verified, the old one's no longer", async () => {
    // reviews-0 holds 127.0.0.13, but the server there presents the imposter identity: refused.
    await cluster.createPod({ namespace: "default", name: "reviews-0", labels: SIDECAR_LABELS, serviceAccountName: "reviews" });
    await cluster.setPodStatus("default", "reviews-0", { podIP: "127.0.0.13" });
    await eventually("reviews-0 in the filter (identity mismatch counted)", BOUND_MS, async () => {
      const before = (await counters()).failSan;
      const reply = (await dial("127.0.0.13", 8443, "secret")).received;
      return reply.length === 0 && (await counters()).failSan > before ? true : undefined;
    });
    assert.equal(pod13.accepted, 0, "nothing reached the pod presenting the wrong identity");
    // reviews-0 is being deleted (Terminating, as with a kubelet that has not finished) and the
    // IP goes to imposter-0, whose service account is the identity the server presents.
    await cluster.deletePod("default", "reviews-0", { graceful: true });
    await cluster.createPod({ namespace: "default", name: "imposter-0", labels: SIDECAR_LABELS, serviceAccountName: "imposter" });
    await cluster.setPodStatus("default", "imposter-0", { podIP: "127.0.0.13" });
    await eventually("mTLS to imposter-0 with its own identity", BOUND_MS, async () => {
      const reply = (await dial("127.0.0.13", 8443, "now!!")).received.toString();
      return reply === `pod-13 peer=${SIDECAR}\nnow!!` ? reply : undefined;
    });
    const snapshot = JSON.parse(await (await fetch(`${run.base}/snapshot/sidecar`)).text());
    assert.deepEqual(
      snapshot.workloads.map((w: { uid: string; identity: string }) => [w.uid, w.identity]),
      [["cluster1//Pod/default/imposter-0", "spiffe://cluster.local/ns/default/sa/imposter"]],
    );
    await cluster.finishPodDeletion("default", "reviews-0");
  });

  it("exposes what it did: metrics with objects seen, versions, render times; no push or render errors", async () => {
    const text = await (await fetch(`${run.base}/metrics`)).text();
    assert.match(text, /feed_objects\{cluster="cluster1",kind="pods"\} \d+/);
    assert.match(text, /feed_snapshot_version\{target="sidecar"\} [1-9]\d*/);
    assert.match(text, /^feed_render_seconds_count [1-9]\d*$/m);
    assert.doesNotMatch(text, /feed_push_errors_total/);
    assert.doesNotMatch(text, /feed_render_errors_total/);
    assert.equal((await fetch(`${run.base}/readyz`)).status, 200);
  });
});

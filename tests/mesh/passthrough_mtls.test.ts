// passthrough_mtls in the real Envoy, running the shipped configs unchanged, with mesh-style
// capture (iptables REDIRECT + original_dst) in a private network namespace. Pods are real TLS
// servers on loopback addresses with test-made SPIFFE certificates (build/certs).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EnvoyProcess } from "../support/envoy.js";
import { pluginConfiguration, shippedConfig } from "../support/envoy_yaml.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { writeDemoCerts, CERT_DIR, DEMO_IDENTITIES } from "../../scripts/demo-certs.js";

const ADMIN_PORT = 15000;
const OUTBOUND_PORT = 15001;
const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;

interface Pods {
  httpbin: TlsPod; // 127.0.0.11:8443, tlsMode istio, identity httpbin (same IP on network "west" too)
  legacy: Backend; // 127.0.0.12:8080, tlsMode disabled
  reviews: TlsPod; // 127.0.0.13:8443, configured as "reviews" but presents "imposter"
  db: TlsPod; // 127.0.0.14:5432, headless service db
  outside: Backend; // 127.0.0.30:9000, not in the mesh
}

async function startPods(): Promise<Pods> {
  await writeDemoCerts();
  return {
    httpbin: await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a"),
    legacy: await startBackend("legacy-0", "127.0.0.12", 8080),
    reviews: await startTlsPod("reviews-0", "127.0.0.13", 8443, CERT_DIR, "pod-c"),
    db: await startTlsPod("db-0", "127.0.0.14", 5432, CERT_DIR, "pod-h"),
    outside: await startBackend("outside", "127.0.0.30", 9000),
  };
}

async function stopPods(pods: Pods | undefined): Promise<void> {
  if (pods) for (const pod of Object.values(pods)) await pod.close();
}

/** The application's connection: from the client address, captured to Envoy. */
function dial(host: string, port: number, payload: string) {
  return exchange(host, port, payload, 10_000, CLIENT_ADDRESS);
}

function counter(stats: Map<string, number>, name: string): number | undefined {
  return stats.get(`wasmcustom.passthrough_mtls.${name}`);
}

describe("passthrough_mtls, direct mode (envoy-configs/passthrough_mtls.yaml)", () => {
  let envoy: EnvoyProcess;
  let pods: Pods;

  before(async () => {
    pods = await startPods();
    envoy = await EnvoyProcess.start({ name: "passthrough-mtls", adminPort: ADMIN_PORT, config: shippedConfig("passthrough_mtls.yaml") });
    captureOutbound(OUTBOUND_PORT);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await stopPods(pods);
  });

  it("upgrades a connection to a mesh pod to mTLS and the pod sees the sidecar's identity", async () => {
    const reply = await dial("127.0.0.11", 8443, "GET / over mTLS");
    assert.equal(reply.received.toString(), `httpbin-0 peer=${SIDECAR}\nGET / over mTLS`);
    assert.deepEqual(pods.httpbin.peers, [SIDECAR]);
  });

  it("refuses a pod whose certificate carries another identity than its own", async () => {
    const reply = await dial("127.0.0.13", 8443, "secret");
    assert.equal(reply.received.length, 0, "no byte may reach or come from the wrong pod");
    assert.equal(pods.reviews.accepted, 0);
  });

  it("passes a tlsMode-disabled pod through in clear", async () => {
    const reply = await dial("127.0.0.12", 8080, "plain bytes");
    // A TLS ClientHello would not echo back as this text: the pod received clear text.
    assert.equal(reply.received.toString(), "legacy-0\nplain bytes");
  });

  it("passes an address that is no pod through in clear", async () => {
    const reply = await dial("127.0.0.30", 9000, "to the outside");
    assert.equal(reply.received.toString(), "outside\nto the outside");
  });

  it("sends a headless-service member through that service's cluster, to exactly that pod, over mTLS", async () => {
    const reply = await dial("127.0.0.14", 5432, "select 1");
    assert.equal(reply.received.toString(), `db-0 peer=${SIDECAR}\nselect 1`);
  });

  it("counts every outcome and the clusters prove the routes", async () => {
    const stats = await envoy.waitForStats((s) => (counter(s, "passthrough") ?? 0) >= 2);
    assert.equal(counter(stats, "mtls"), 2, "httpbin and reviews were mTLS decisions");
    assert.equal(counter(stats, "headless"), 1);
    assert.equal(counter(stats, "passthrough"), 2);
    assert.equal(counter(stats, "plaintext_pod"), 1);
    assert.equal(counter(stats, "local_network_wins"), 1, "httpbin's IP is also a pod on network west");
    assert.equal(counter(stats, "rejected"), 0);
    assert.equal(stats.get("cluster.outbound_mtls_passthrough.upstream_cx_total"), 2);
    assert.equal(stats.get("cluster.outbound|5432||db.default.svc.cluster.local.upstream_cx_total"), 1);
    assert.equal(stats.get("cluster.PassthroughCluster.upstream_cx_total"), 2);
    assert.ok((stats.get("cluster.outbound_mtls_passthrough.ssl.fail_verify_san") ?? 0) + (stats.get("cluster.outbound_mtls_passthrough.upstream_cx_connect_fail") ?? 0) >= 1);
  });
});

describe("passthrough_mtls, subset mode (envoy-configs/passthrough_mtls_subset.yaml)", () => {
  let envoy: EnvoyProcess;
  let pods: Pods;

  before(async () => {
    pods = await startPods();
    envoy = await EnvoyProcess.start({ name: "passthrough-mtls-subset", adminPort: ADMIN_PORT, config: shippedConfig("passthrough_mtls_subset.yaml") });
    captureOutbound(OUTBOUND_PORT);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await stopPods(pods);
  });

  it("runs in subset mode", () => {
    assert.equal(pluginConfiguration("passthrough_mtls_subset.yaml", "passthrough_mtls").mode, "subset");
  });

  it("reaches the right pod over mTLS through the subset load balancer", async () => {
    const reply = await dial("127.0.0.11", 8443, "via subset");
    assert.equal(reply.received.toString(), `httpbin-0 peer=${SIDECAR}\nvia subset`);
  });

  it("refuses a pod presenting another identity, also behind the internal listener", async () => {
    const reply = await dial("127.0.0.13", 8443, "secret");
    assert.equal(reply.received.length, 0);
    assert.equal(pods.reviews.accepted, 0);
  });

  it("reaches a tlsMode-disabled pod in clear through its subset", async () => {
    const reply = await dial("127.0.0.12", 8080, "plain");
    assert.equal(reply.received.toString(), "legacy-0\nplain");
  });

  it("sends a headless-service member through that service's own cluster in this mode too", async () => {
    const reply = await dial("127.0.0.14", 5432, "select 1");
    assert.equal(reply.received.toString(), `db-0 peer=${SIDECAR}\nselect 1`);
  });

  it("keeps the plain passthrough for an address that is no pod", async () => {
    const reply = await dial("127.0.0.30", 9000, "outside");
    assert.equal(reply.received.toString(), "outside\noutside");
  });

  it("balanced on envoy.lb.address: one upstream connection per pod, none to the others", async () => {
    const stats = await envoy.waitForStats((s) => (s.get("cluster.PassthroughCluster.upstream_cx_total") ?? 0) >= 1);
    assert.equal(stats.get("cluster.passthrough_mtls_pods.upstream_cx_total"), 3);
    assert.equal(stats.get("cluster.passthrough_mtls_pods.lb_subsets_selected"), 3);
    assert.equal(stats.get("cluster.PassthroughCluster.upstream_cx_total"), 1);
    assert.equal(stats.get("cluster.outbound|5432||db.default.svc.cluster.local.upstream_cx_total"), 1);
    assert.equal(counter(stats, "mtls"), 2);
    assert.equal(counter(stats, "headless"), 1);
  });
});

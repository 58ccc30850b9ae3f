// Demo scenario: the mesh feed, with passthrough_mtls in the real Envoy taking its snapshot by
// ECDS file. First from files (no cluster needed): a pod's YAML written into the directory the
// feed watches, and the running Envoy sends the next connection to the pod's IP over mTLS
// verifying its identity; the file removed, and the next connection goes out in clear. Then,
// when `npm run setup:kube` has built it, the same through a real kube-apiserver. Last, the
// feed's channel (mutual TLS): a caller without a mesh identity is refused, the sidecar's gets the model.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { EcdsPlugin } from "../../tests/support/ecds.js";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { kubeBinariesReady, startKubeCluster } from "../../tests/support/kube.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { startTlsPod } from "../../tests/support/pods.js";
import { exchange, startBackend } from "../../tests/support/tcp.js";
import { eventually, runFeed, type FeedCluster } from "../../tests/feed/harness.js";
import { channelGet } from "../../tests/support/feed_tls.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../demo-certs.js";

/** The pod as a kubelet would have reported it: the feed reads its status (IP, Ready) from the file as written. */
const POD_YAML = `apiVersion: v1
kind: Pod
metadata:
  namespace: default
  name: httpbin-0
  labels:
    security.istio.io/tlsMode: istio
spec:
  serviceAccountName: httpbin
status:
  phase: Running
  podIP: 127.0.0.11
  conditions:
    - type: Ready
      status: "True"
`;

interface PodSteps {
  /** Adds the pod; returns what was done, for the printout. */
  add(): Promise<string>;
  remove(): Promise<string>;
}

/** The feed (reading `cluster`) delivering to passthrough_mtls in a running Envoy; the pod added, then removed. */
async function followPod(cluster: FeedCluster, pod: PodSteps): Promise<boolean> {
  await writeDemoCerts();
  process.env.FEED_LOG_LEVEL ??= "warn";
  const plugin = new EcdsPlugin("envoy-configs/passthrough_mtls_plugin", "passthrough_mtls.yaml");
  let ok = true;
  const run = await runFeed([cluster], [{ name: "sidecar", filter: "passthrough_mtls", ecds: { file: join(plugin.dir, "passthrough_mtls.yaml") } }]);
  const tls = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
  const plain = await startBackend("plain-8080", "127.0.0.11", 8080);
  const envoy = await EnvoyProcess.start({ name: "demo-feed", adminPort: 15000, config: plugin.bootstrap(shippedConfig("passthrough_mtls_ecds.yaml")) });
  captureOutbound(15001);
  const step = (what: string, seen: string, pass: boolean) => {
    ok &&= pass;
    console.log(`  ${what.padEnd(70)} -> ${seen}${pass ? "" : "   <-- WRONG"}`);
  };
  // A short timeout: a connection that goes out in clear to the TLS port gets no answer.
  const dial = async (port: number) => (await exchange("127.0.0.11", port, "hello", 1000, CLIENT_ADDRESS)).received.toString();
  try {
    const first = await dial(8080);
    step("127.0.0.11:8080 before any pod (plain passthrough)", first.split("\n")[0], first === "plain-8080\nhello");
    const added = await pod.add();
    const since = Date.now();
    const want = `httpbin-0 peer=URI:${DEMO_IDENTITIES.sidecar}\nhello`;
    const mtls = await eventually("mTLS", 15_000, async () => ((await dial(8443)) === want ? true : undefined)).then(() => true, () => false);
    step(added, `${Date.now() - since} ms later: 127.0.0.11:8443 ${mtls ? "mTLS, verified spiffe://cluster.local/ns/default/sa/httpbin" : "NOT mTLS"}`, mtls);
    const removed = await pod.remove();
    const gone = Date.now();
    const clear = await eventually("plain", 15_000, async () => ((await dial(8080)) === "plain-8080\nhello" ? true : undefined)).then(() => true, () => false);
    step(removed, `${Date.now() - gone} ms later: 127.0.0.11:8080 ${clear ? "plain passthrough again" : "STILL mTLS"}`, clear);
    // The filters' channel (/delta) is mutual TLS: only a mesh identity listed as the target's reader gets the model.
    const anonymous = await channelGet(`${run.channel}/delta/sidecar?epoch=0&version=0`, null);
    step("the feed's channel, TLS without a mesh identity", `HTTP ${anonymous.status} ${anonymous.body.toString().trim().slice(0, 40)}`, anonymous.status === 403);
    const reader = await run.get("/delta/sidecar?epoch=0&version=0");
    step("the feed's channel as the sidecar (spiffe://.../sa/sleep, a reader)", `HTTP ${reader.status}, ${reader.headers["x-feed-kind"]} model of ${reader.body.length} bytes`, reader.status === 200);
    const stats = await envoy.stats();
    console.log(`  Envoy: ECDS config_reload ${stats.get("extension_config_discovery.network_filter.passthrough_mtls.config_reload") ?? 0}, update_rejected ${stats.get("extension_config_discovery.network_filter.passthrough_mtls.update_rejected") ?? 0}; operator port: ${run.base}/snapshot/sidecar`);
  } finally {
    releaseCapture();
    await envoy.stop();
    await run.feed.stop();
    await tls.close();
    await plain.close();
  }
  return ok;
}

async function fromFiles(): Promise<boolean> {
  console.log("== the mesh feed: YAML files -> the feed -> passthrough_mtls in the running Envoy (ECDS file)");
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "demo-mesh-"));
  const file = join(dir, "httpbin-0.yaml");
  try {
    return await followPod({ id: "cluster1", files: dir }, {
      add: async () => {
        writeFileSync(file, POD_YAML);
        return `wrote ${relative(REPO_ROOT, file).replace(/demo-mesh-\w+/, "demo-mesh-*")} (pod, IP 127.0.0.11)`;
      },
      remove: async () => {
        rmSync(file);
        return "removed it";
      },
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function fromApiServer(): Promise<boolean> {
  console.log("== the mesh feed: a real API server -> the feed -> passthrough_mtls in the running Envoy (ECDS file)");
  const cluster = await startKubeCluster({ name: "demo-feed" });
  try {
    await cluster.createNamespace("default");
    return await followPod({ id: "cluster1", cluster }, {
      add: async () => {
        await cluster.createPod({ namespace: "default", name: "httpbin-0", labels: { "security.istio.io/tlsMode": "istio" }, serviceAccountName: "httpbin" });
        await cluster.setPodStatus("default", "httpbin-0", { podIP: "127.0.0.11" });
        return "API: pod httpbin-0 created (sa httpbin, tlsMode istio, IP 127.0.0.11)";
      },
      remove: async () => {
        await cluster.deletePod("default", "httpbin-0");
        return "API: pod httpbin-0 deleted";
      },
    });
  } finally {
    await cluster.stop();
  }
}

export async function feedScenario(): Promise<boolean> {
  const files = await fromFiles();
  if (!kubeBinariesReady()) {
    console.log("== the mesh feed from a real API server: not run (no kube-apiserver in .cache/kube/bin); `npm run setup:kube` (~15 min, once) enables it");
    return files;
  }
  return (await fromApiServer()) && files;
}

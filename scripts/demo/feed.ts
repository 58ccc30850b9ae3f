// Demo scenario: the mesh feed. A real kube-apiserver (built by `npm run setup:kube`), the feed
// watching it, and passthrough_mtls in the real Envoy taking its snapshot by ECDS file. A pod is
// created through the API server and the running Envoy sends the next connection to its IP over
// mTLS verifying the pod's identity; the pod is deleted and the next connection goes out in clear.
import { join } from "node:path";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { EcdsPlugin } from "../../tests/support/ecds.js";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { startKubeCluster } from "../../tests/support/kube.js";
import { startTlsPod } from "../../tests/support/pods.js";
import { exchange, startBackend } from "../../tests/support/tcp.js";
import { eventually, runFeed } from "../../tests/feed/harness.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../demo-certs.js";

export async function feedScenario(): Promise<boolean> {
  console.log("== the mesh feed: a real API server -> the feed -> passthrough_mtls in the running Envoy (ECDS file)");
  await writeDemoCerts();
  process.env.FEED_LOG_LEVEL ??= "warn";
  const cluster = await startKubeCluster({ name: "demo-feed" });
  const plugin = new EcdsPlugin("envoy-configs/passthrough_mtls_plugin", "passthrough_mtls.yaml");
  let ok = true;
  const run = await runFeed([{ id: "cluster1", cluster }], [{ name: "sidecar", filter: "passthrough_mtls", ecds: { file: join(plugin.dir, "passthrough_mtls.yaml") } }]);
  const tls = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
  const plain = await startBackend("plain-8080", "127.0.0.11", 8080);
  const envoy = await EnvoyProcess.start({ name: "demo-feed", adminPort: 15000, config: plugin.bootstrap(shippedConfig("passthrough_mtls_ecds.yaml")) });
  captureOutbound(15001);
  const step = (what: string, seen: string, pass: boolean) => {
    ok &&= pass;
    console.log(`  ${what.padEnd(58)} -> ${seen}${pass ? "" : "   <-- WRONG"}`);
  };
  const dial = async (port: number) => (await exchange("127.0.0.11", port, "hello", 5000, CLIENT_ADDRESS)).received.toString();
  try {
    await cluster.createNamespace("default");
    step("127.0.0.11:8080 before any pod (plain passthrough)", (await dial(8080)).split("\n")[0], (await dial(8080)) === "plain-8080\nhello");
    await cluster.createPod({ namespace: "default", name: "httpbin-0", labels: { "security.istio.io/tlsMode": "istio" }, serviceAccountName: "httpbin" });
    const created = Date.now();
    await cluster.setPodStatus("default", "httpbin-0", { podIP: "127.0.0.11" });
    const want = `httpbin-0 peer=URI:${DEMO_IDENTITIES.sidecar}\nhello`;
    const mtls = await eventually("mTLS", 15_000, async () => ((await dial(8443)) === want ? true : undefined)).then(() => true, () => false);
    step(`API: pod httpbin-0 created (sa httpbin, tlsMode istio, IP 127.0.0.11)`, `${Date.now() - created} ms later: 127.0.0.11:8443 ${mtls ? "mTLS, verified spiffe://cluster.local/ns/default/sa/httpbin" : "NOT mTLS"}`, mtls);
    await cluster.deletePod("default", "httpbin-0");
    const deleted = Date.now();
    const clear = await eventually("plain", 15_000, async () => ((await dial(8080)) === "plain-8080\nhello" ? true : undefined)).then(() => true, () => false);
    step("API: pod httpbin-0 deleted", `${Date.now() - deleted} ms later: 127.0.0.11:8080 ${clear ? "plain passthrough again" : "STILL mTLS"}`, clear);
    const stats = await envoy.stats();
    console.log(`  Envoy: ECDS config_reload ${stats.get("extension_config_discovery.network_filter.passthrough_mtls.config_reload") ?? 0}, update_rejected ${stats.get("extension_config_discovery.network_filter.passthrough_mtls.update_rejected") ?? 0}; feed: ${run.base}/snapshot/sidecar`);
  } finally {
    releaseCapture();
    await envoy.stop();
    await run.feed.stop();
    await tls.close();
    await plain.close();
    await cluster.stop();
  }
  return ok;
}

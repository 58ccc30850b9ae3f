// The feed's baseline figures (the baseline the incremental updates must beat):
// for each mesh size, a real kube-apiserver holds N pods (with IPs, in services of 100
// endpoints), the feed runs as its own process watching it and delivering passthrough_mtls's
// snapshot by ECDS file to a real Envoy, and the benchmark measures
//   - propagation: API write (a pod's IP set, or the pod deleted) → the first new connection the
//     filter decides with it (mTLS to that pod, or plain again), p50 / p99;
//   - the controller's CPU and memory per pod (initial sync; resident memory after it);
//   - render time (compute + views + JSON + validation in the compiled filter + delivery) per change;
//   - bytes pushed per change (the whole snapshot: there are no deltas yet) and Envoy's CPU to
//     apply one change (its process CPU over the change, which is the filter re-parsing the
//     snapshot in every VM).
// One JSON line per figure (bench/emit.ts). Runs inside the bench's network namespace.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { emit } from "../emit.js";
import { BulkWriter } from "./writer.js";
import { deltaPropagation } from "./delta_run.js";
import { deltaCosts, wireEncode } from "./delta_micro.js";
import { checkLoop, renderLoop } from "./check_loop.js";
import { feedMemory } from "./memory.js";
import { bundleFeed } from "../../tests/support/feed_runtime.js";
import { resyncBytes } from "./resync.js";
import { cpuMicros, rssMb } from "../envoy/proc.js";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { EcdsPlugin } from "../../tests/support/ecds.js";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { endpointSliceObject, serviceObject, startKubeCluster, type KubeCluster } from "../../tests/support/kube.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { startTlsPod } from "../../tests/support/pods.js";
import { exchange } from "../../tests/support/tcp.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";
import { sleep, waitReady } from "./ready.js";

const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
const ENDPOINTS_PER_SERVICE = 100;


function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** Runs `jobs` with at most `width` in flight. */
async function pool(count: number, width: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await job(next++);
    }),
  );
}

function podIp(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

export const WRITERS = 64;

/**
 * N pods with IPs and sidecar labels, in services of 100 endpoints (EndpointSlices written as
 * the controller would), WRITERS requests in flight over kept-alive connections (writer.ts).
 * `from` (a multiple of 100) grows a mesh populated before up to N pods.
 */
export async function populate(cluster: KubeCluster, writer: BulkWriter, n: number, from = 0): Promise<number> {
  const started = performance.now();
  if (from === 0) await cluster.createNamespace("bench");
  await pool(n - from, WRITERS, async (k) => {
    const i = from + k;
    const name = `p-${i}`;
    await writer.createPod({ namespace: "bench", name, labels: { app: `s-${Math.floor(i / ENDPOINTS_PER_SERVICE)}`, "security.istio.io/tlsMode": "istio" }, serviceAccountName: `sa-${i % 1000}` });
    await writer.setPodStatus("bench", name, { podIP: podIp(i + 256) });
  });
  const first = Math.ceil(from / ENDPOINTS_PER_SERVICE);
  await pool(Math.ceil(n / ENDPOINTS_PER_SERVICE) - first, WRITERS, async (k) => {
    const s = first + k;
    await writer.apply(serviceObject({ namespace: "bench", name: `s-${s}`, selector: { app: `s-${s}` }, ports: [{ name: "http", port: 80, targetPort: 8080 }] }));
    const endpoints: Array<{ addresses: string[]; pod: { name: string } }> = [];
    for (let i = s * ENDPOINTS_PER_SERVICE; i < Math.min(n, (s + 1) * ENDPOINTS_PER_SERVICE); i++) endpoints.push({ addresses: [podIp(i + 256)], pod: { name: `p-${i}` } });
    await writer.apply(endpointSliceObject({ namespace: "bench", name: `s-${s}-1`, service: `s-${s}`, ports: [{ name: "http", port: 8080 }], endpoints }));
  });
  return (performance.now() - started) / 1000;
}

async function metric(base: string, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = new RegExp(`^${name}${labels ? `\\{${labels}\\}` : ""} ([0-9.e+-]+)$`, "m").exec(text);
  return m ? Number(m[1]) : NaN;
}


export async function feedBenchSize(n: number, samples: number): Promise<{ pods: number; cpuSeconds: number; rssMb: number }> {
  await writeDemoCerts();
  const cluster = await startKubeCluster({ name: `bench-feed-${n}`, apiserverArgs: ["--max-requests-inflight=800", "--max-mutating-requests-inflight=400"] });
  let feed: ChildProcess | undefined;
  let envoy: EnvoyProcess | undefined;
  const pod = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
  const writer = await BulkWriter.forCluster(cluster, WRITERS);
  try {
    const populateSeconds = await populate(cluster, writer, n);
    emit({ figure: "feed_populate", pods: n, seconds: +populateSeconds.toFixed(1), podsPerSecond: Math.round(n / populateSeconds), inFlight: WRITERS });
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    // The feed as its image runs it, per pod (memory.ts): what the chart is sized from.
    const memoryDir = mkdtempSync(join(REPO_ROOT, ".tmp", "bench-feed-memory-"));
    for (const target of ["delta", "snapshot"] as const) await feedMemory(cluster, n, target, memoryDir);
    const plugin = new EcdsPlugin("envoy-configs/passthrough_mtls_plugin", "passthrough_mtls.yaml");
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "bench-feed-"));
    const port = 19090;
    const config = {
      wasmDir: join(REPO_ROOT, "build"),
      operator: { address: "127.0.0.1", port },
      clusters: [{ id: "cluster1", kubeconfig: cluster.kubeconfigPath }],
      targets: [{ name: "sidecar", filter: "passthrough_mtls", ecds: { file: join(plugin.dir, "passthrough_mtls.yaml") } }],
    };
    writeFileSync(join(dir, "feed.yaml"), stringify(config));
    const base = `http://127.0.0.1:${port}`;
    const syncStarted = performance.now();
    feed = spawn(process.execPath, ["--import", "tsx", "feed/src/main.ts", "--config", join(dir, "feed.yaml")], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "ignore"] });
    await waitReady(base, feed, 30 * 60_000);
    const syncSeconds = (performance.now() - syncStarted) / 1000;
    const pid = feed.pid!;
    const syncCpu = cpuMicros(pid) / 1e6;
    const rss = rssMb(pid);
    emit({ figure: "feed_controller_sync", pods: n, seconds: +syncSeconds.toFixed(2), cpuSeconds: +syncCpu.toFixed(2), cpuUsPerPod: +((syncCpu * 1e6) / n).toFixed(1), rssMb: +rss.toFixed(1), rssKbPerPod: +((rss * 1024) / n).toFixed(2) });
    envoy = await EnvoyProcess.start({ name: `bench-feed-${n}`, adminPort: 15000, config: plugin.bootstrap(shippedConfig("passthrough_mtls_ecds.yaml")), readyTimeoutMs: 120_000 });
    captureOutbound(15001);
    const latencies: number[] = [];
    const renders: number[] = [];
    const feedCpu: number[] = [];
    const envoyCpu: number[] = [];
    const bytes: number[] = [];
    await cluster.createPod({ namespace: "default", name: "probe", labels: { "security.istio.io/tlsMode": "istio" }, serviceAccountName: "httpbin" }).catch(async () => {
      await cluster.createNamespace("default");
      await cluster.createPod({ namespace: "default", name: "probe", labels: { "security.istio.io/tlsMode": "istio" }, serviceAccountName: "httpbin" });
    });
    for (let s = 0; s < samples; s++) {
      const adding = s % 2 === 0;
      const feedBefore = cpuMicros(pid);
      const envoyBefore = cpuMicros(envoy.child.pid!);
      const versionBefore = await metric(base, "feed_snapshot_version", 'target="sidecar"');
      const renderSumBefore = await metric(base, "feed_render_seconds_sum");
      const renderCountBefore = await metric(base, "feed_render_seconds_count");
      const written = performance.now();
      // Through a kept-alive connection, so the write is not a fresh TLS handshake.
      if (adding) await writer.setPodStatus("default", "probe", { podIP: "127.0.0.11" });
      else await writer.setPodStatus("default", "probe", { phase: "Succeeded", podIP: "127.0.0.11" });
      // Decided with the change: mTLS verifying httpbin (adding) / plain again (removing: the TLS pod gets clear bytes and no reply).
      for (;;) {
        const reply = (await exchange("127.0.0.11", 8443, "hello", 2000, CLIENT_ADDRESS)).received.toString();
        if (adding ? reply === `httpbin-0 peer=${SIDECAR}\nhello` : reply === "") break;
        if (performance.now() - written > 120_000) throw new Error(`sample ${s}: not propagated within 120 s`);
        await sleep(n >= 100_000 ? 50 : 10);
      }
      latencies.push(performance.now() - written);
      // Let Envoy finish loading the change in every VM before reading its CPU.
      await sleep(n >= 100_000 ? 3000 : 500);
      feedCpu.push((cpuMicros(pid) - feedBefore) / 1000);
      envoyCpu.push((cpuMicros(envoy.child.pid!) - envoyBefore) / 1000);
      // The renders of this sample (usually one): the histogram's sum and count moved by them.
      const renderCount = (await metric(base, "feed_render_seconds_count")) - renderCountBefore;
      renders.push((((await metric(base, "feed_render_seconds_sum")) - renderSumBefore) / Math.max(1, renderCount)) * 1000);
      bytes.push(statSync(join(plugin.dir, "passthrough_mtls.yaml")).size);
      if ((await metric(base, "feed_snapshot_version", 'target="sidecar"')) === versionBefore) throw new Error(`sample ${s}: no new version`);
    }
    const median = (v: number[]) => +percentile(v, 50).toFixed(1);
    emit({ figure: "feed_propagation_ms", pods: n, samples, p50: median(latencies), p99: +percentile(latencies, 99).toFixed(1), max: +Math.max(...latencies).toFixed(1) });
    emit({ figure: "feed_render_ms", pods: n, p50: median(renders), max: +Math.max(...renders).toFixed(1) });
    emit({ figure: "feed_change_cost", pods: n, bytesPushed: median(bytes), controllerCpuMs: median(feedCpu), envoyApplyCpuMs: median(envoyCpu) });
    emit({ figure: "feed_controller_memory", pods: n, rssMb: +rssMb(pid).toFixed(1) });
    // The delta path on the same API server, with the snapshot feed and Envoy stopped.
    feed.kill("SIGTERM");
    feed = undefined;
    releaseCapture();
    await envoy.stop();
    envoy = undefined;
    // Each delta sample takes well under a second: 50 of them give the p99 some meaning.
    await deltaPropagation(cluster, writer, n, Math.max(samples, 50), dir);
    return { pods: n, cpuSeconds: syncCpu, rssMb: rss };
  } finally {
    releaseCapture();
    await envoy?.stop();
    feed?.kill("SIGTERM");
    await pod.close();
    writer.close();
    await cluster.stop();
  }
}

export async function feedBench({ quick }: { quick: boolean }): Promise<void> {
  // In-process costs of the delta path and the encoder (delta_micro.ts), then the real runs.
  wireEncode(quick ? 100_000 : 1_000_000, quick ? 1000 : 10_000);
  for (const n of quick ? [1000, 10_000] : [1000, 10_000, 100_000]) {
    const { jsonText, view, mesh } = deltaCosts(n);
    // The same JSON checked on the event loop and in the check worker, and the whole render
    // made at once against in slices (check_loop.ts).
    await checkLoop(n, jsonText);
    await renderLoop(n, view, mesh);
  }
  // What a VM receives after a feed restart, current or k changes behind (resync.ts).
  for (const n of quick ? [10_000] : [10_000, 100_000]) resyncBytes(n, [0, 1, 10, 100, 1000]);
  await feedBenchSizes(quick ? [[1000, 6], [10_000, 6]] : [[1000, 20], [10_000, 20], [100_000, 10]]);
}

async function feedBenchSizes(sizes: number[][]): Promise<void> {
  bundleFeed();
  const runs = [];
  for (const [n, samples] of sizes) runs.push(await feedBenchSize(n, samples));
  // Per pod at 1k is mostly the process's fixed cost (Node, tsx, the client, the wasm host):
  // the marginal cost between sizes is what a pod adds.
  for (let i = 1; i < runs.length; i++) {
    const [a, b] = [runs[i - 1], runs[i]];
    const pods = b.pods - a.pods;
    emit({ figure: "feed_controller_marginal_per_pod", from: a.pods, to: b.pods, cpuUsPerPod: +(((b.cpuSeconds - a.cpuSeconds) * 1e6) / pods).toFixed(1), rssKbPerPod: +(((b.rssMb - a.rssMb) * 1024) / pods).toFixed(2) });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const only = process.argv.find((a) => a.startsWith("--pods="));
  if (only) await feedBenchSize(Number(only.slice(7)), 6);
  else if (process.argv.includes("--sizes")) {
    // e.g. --sizes 1000,10000: those sizes (6 samples each) and the marginal cost between them.
    const list = process.argv[process.argv.indexOf("--sizes") + 1].split(",").map(Number);
    await feedBenchSizes(list.map((n) => [n, 6]));
  }
  else await feedBench({ quick: process.argv.includes("--quick") });
}

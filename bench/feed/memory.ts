// The feed's resident memory per pod against a real kube-apiserver, the figure the chart's
// requests and limits are sized from. One API server is populated in steps (10k, then grown to
// 100k: the populate dominates the run) and at each size the feed starts as its own process,
// lists and watches everything, computes the mesh and serves it, and is measured:
//   feed_memory  rssMb / rssKbPerPod when it turns ready (the initial list's garbage included)
//                and settledRssMb / settledKbPerPod 20 s later; syncSeconds (start → ready);
//                target: "delta" (the /delta channel only, how a large mesh is served) or
//                "snapshot" (also a JSON snapshot rendered, checked in the compiled filter and
//                written as an ECDS file on every change: the small-mesh path); runtime: "chart"
//                (Node run with the chart's `node` settings on the image's jemalloc, as the
//                Deployment runs it) or
//                "node-defaults" (plain `node`, for comparison)
//   feed_populate  how long the API server took to receive the pods of that step
// Runs inside the bench's network namespace:
//   bash scripts/in-netns.sh node --import tsx bench/feed/memory.ts [--sizes 10000,100000] [--targets delta,snapshot] [--runtimes chart,node-defaults]
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { emit } from "../emit.js";
import { rssMb } from "../envoy/proc.js";
import { BulkWriter } from "./writer.js";
import { populate, WRITERS } from "./run.js";
import { startKubeCluster, type KubeCluster } from "../../tests/support/kube.js";
import { EcdsPlugin } from "../../tests/support/ecds.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { feedChannelFiles, SIDECAR_PRINCIPAL } from "../../tests/support/feed_tls.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { sleep, waitReady } from "./ready.js";
import { bundleFeed, chartRuntime, FEED_BUNDLE, preloadMissing, type NodeRuntime } from "../../tests/support/feed_runtime.js";

export type MemoryTarget = "delta" | "snapshot";
export type MemoryRuntime = "chart" | "node-defaults";

const SETTLE_MS = 20_000;

/** Starts the feed on `cluster` with one target of the given kind, measures it, stops it. */
export async function feedMemory(cluster: KubeCluster, pods: number, target: MemoryTarget, dir: string, runtime: MemoryRuntime = "chart"): Promise<{ rssMb: number; settledRssMb: number }> {
  const operatorPort = 19095;
  const config = {
    wasmDir: join(REPO_ROOT, "build"),
    operator: { address: "127.0.0.1", port: operatorPort },
    clusters: [{ id: "cluster1", kubeconfig: cluster.kubeconfigPath }],
    ...(target === "delta"
      ? { channel: { address: "127.0.0.1", port: 19096, ...feedChannelFiles() }, targets: [{ name: "mesh", filter: "passthrough_mtls", readers: [SIDECAR_PRINCIPAL] }] }
      : { targets: [{ name: "sidecar", filter: "passthrough_mtls", ecds: { file: join(new EcdsPlugin("envoy-configs/passthrough_mtls_plugin", "passthrough_mtls.yaml").dir, "passthrough_mtls.yaml") } }] }),
  };
  const file = join(dir, `feed-${target}-${pods}.yaml`);
  writeFileSync(file, stringify(config));
  const started = performance.now();
  const node: NodeRuntime = runtime === "chart" ? chartRuntime() : { args: [], env: {} };
  const feed = spawn(process.execPath, [...node.args, FEED_BUNDLE, "--config", file], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, FEED_LOG_LEVEL: "warn", ...node.env } });
  try {
    await waitReady(`http://127.0.0.1:${operatorPort}`, feed, 30 * 60_000);
    const missing = preloadMissing(feed.pid ?? 0, node);
    if (missing) throw new Error(missing);
    const syncSeconds = (performance.now() - started) / 1000;
    const atReady = rssMb(feed.pid!);
    await sleep(SETTLE_MS);
    const settled = rssMb(feed.pid!);
    const perPod = (mb: number) => +((mb * 1024) / pods).toFixed(2);
    emit({ figure: "feed_memory", pods, target, runtime, syncSeconds: +syncSeconds.toFixed(1), rssMb: +atReady.toFixed(1), rssKbPerPod: perPod(atReady), settledRssMb: +settled.toFixed(1), settledKbPerPod: perPod(settled) });
    return { rssMb: atReady, settledRssMb: settled };
  } finally {
    feed.kill("SIGTERM");
    await new Promise((r) => (feed.exitCode !== null ? r(undefined) : feed.once("exit", r)));
  }
}

/** One API server grown through `sizes` (ascending); the feed measured at each size for each target. */
export async function feedMemoryBench(sizes: number[], targets: MemoryTarget[], runtimes: MemoryRuntime[] = ["chart"]): Promise<void> {
  bundleFeed();
  await writeDemoCerts();
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "bench-feed-memory-"));
  const cluster = await startKubeCluster({ name: "bench-feed-memory", apiserverArgs: ["--max-requests-inflight=800", "--max-mutating-requests-inflight=400"] });
  const writer = await BulkWriter.forCluster(cluster, WRITERS);
  try {
    let have = 0;
    for (const n of sizes) {
      const seconds = await populate(cluster, writer, n, have);
      emit({ figure: "feed_populate", pods: n, from: have, seconds: +seconds.toFixed(1), podsPerSecond: Math.round((n - have) / seconds), inFlight: WRITERS });
      have = n;
      for (const target of targets) for (const runtime of runtimes) await feedMemory(cluster, n, target, dir, runtime);
    }
  } finally {
    writer.close();
    await cluster.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name: string, fallback: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
  await feedMemoryBench(arg("--sizes", "10000,100000").split(",").map(Number), arg("--targets", "delta,snapshot").split(",") as MemoryTarget[], arg("--runtimes", "chart").split(",") as MemoryRuntime[]);
}

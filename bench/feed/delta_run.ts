// Delta propagation against the same real API server as the baseline in run.ts: the
// feed runs as its own process with a target consumed only through GET /delta (no file or
// WasmPlugin delivery, so no JSON render per change), and a client holds a long poll at the
// current version, as a filter's root context does. Per sample: one API write (the probe pod's
// IP set, or phase Succeeded) → the long poll's answer that carries it (a workload upsert with
// 127.0.0.11, or the removal of that workload's id). Figures:
//   feed_delta_propagation_ms  p50 / p99 / max from the write's start to the answer
//   feed_delta_change_cost     bytes of the delta per change (p50), records, feed CPU per change
//   feed_delta_sync            the delta feed's start → ready, its CPU and RSS, its full message size
//   feed_delta_envoy_ms        the real Envoy (--concurrency 2, passthrough_mtls with only
//                              `meshFeed`): API write → the first new connection decided with it
//                              (mTLS verifying the probe's identity / plain again), and → every VM
//                              (2 workers + main) having applied it (its applied_delta counter), p50 / p99
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { decodeMessage, type DecodedMessage } from "../../tests/feed/delta_wire_decode.js";
import type { KubeCluster } from "../../tests/support/kube.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { cpuMicros, rssMb } from "../envoy/proc.js";
import { emit } from "../emit.js";
import type { BulkWriter } from "./writer.js";
import { meshFeedSidecarConfig } from "../../tests/feed/delta_envoy_config.js";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { exchange } from "../../tests/support/tcp.js";
import { DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";
import { channelGet, feedChannelFiles, SIDECAR_PRINCIPAL } from "../../tests/support/feed_tls.js";

const WORKERS = 2;
const VMS = WORKERS + 1;

const PROBE = "127.0.0.11";

function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** GET /delta on the feed's channel (mutual TLS, as the demo sidecar). */
async function get(channel: string, epoch: number, version: number, wait: number): Promise<{ message: DecodedMessage; bytes: number }> {
  const r = await channelGet(`${channel}/delta/mesh?epoch=${epoch}&version=${version}&wait=${wait}`);
  if (r.status !== 200) throw new Error(`GET /delta: HTTP ${r.status}: ${r.body.toString()}`);
  return { message: decodeMessage(r.body), bytes: r.body.length };
}

async function waitReady(base: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`delta feed exited (${child.exitCode})`);
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`delta feed not ready within ${timeoutMs} ms`);
}

/** Runs after run.ts's baseline, on its API server (the probe pod exists there, out of the mesh or in it). */
export async function deltaPropagation(cluster: KubeCluster, writer: BulkWriter, n: number, samples: number, dir: string): Promise<void> {
  const operatorPort = 19091;
  const port = 19092;
  await writeDemoCerts();
  const config = {
    wasmDir: join(REPO_ROOT, "build"),
    operator: { address: "127.0.0.1", port: operatorPort },
    channel: { address: "127.0.0.1", port, ...feedChannelFiles() },
    clusters: [{ id: "cluster1", kubeconfig: cluster.kubeconfigPath }],
    targets: [{ name: "mesh", filter: "passthrough_mtls", readers: [SIDECAR_PRINCIPAL] }],
  };
  const configDir = mkdtempSync(join(dir, "delta-"));
  writeFileSync(join(configDir, "feed.yaml"), stringify(config));
  const base = `http://127.0.0.1:${operatorPort}`;
  const channel = `https://127.0.0.1:${port}`;
  const started = performance.now();
  const feed = spawn(process.execPath, ["--import", "tsx", "feed/src/main.ts", "--config", join(configDir, "feed.yaml")], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "ignore"], env: { ...process.env, FEED_LOG_LEVEL: "warn" } });
  try {
    await waitReady(base, feed, 30 * 60_000);
    const syncSeconds = (performance.now() - started) / 1000;
    const pid = feed.pid!;
    const full = await get(channel, 0, 0, 0);
    emit({ figure: "feed_delta_sync", pods: n, seconds: +syncSeconds.toFixed(2), cpuSeconds: +(cpuMicros(pid) / 1e6).toFixed(2), rssMb: +rssMb(pid).toFixed(1), fullMessageBytes: full.bytes, fullRecords: full.message.records.length });
    let epoch = full.message.epoch;
    let version = full.message.version;
    // Where the probe is now: in the mesh (a workload with its address) or not.
    let probeId = full.message.records.find((r) => r.type === "workload" && r.addresses.includes(PROBE))?.id;
    const latencies: number[] = [];
    const bytes: number[] = [];
    const records: number[] = [];
    const loopCpuBefore = cpuMicros(pid);
    for (let s = 0; s < samples; s++) {
      const adding = probeId === undefined;
      // The long poll is held first (as a VM's is), then the write happens.
      let poll = get(channel, epoch, version, 30);
      await new Promise((r) => setTimeout(r, 50));
      const written = performance.now();
      if (adding) await writer.setPodStatus("default", "probe", { podIP: PROBE });
      else await writer.setPodStatus("default", "probe", { phase: "Succeeded", podIP: PROBE });
      for (;;) {
        const { message, bytes: size } = await poll;
        if (message.kind === 1) throw new Error(`sample ${s}: a full message (epoch ${message.epoch}, version ${message.version}) instead of a delta`);
        epoch = message.epoch;
        version = message.version;
        const hit = adding
          ? message.records.find((r) => r.type === "workload" && r.addresses.includes(PROBE))
          : message.records.find((r) => r.type === "workloadRemove" && r.id === probeId);
        if (hit) {
          latencies.push(performance.now() - written);
          bytes.push(size);
          records.push(message.records.length);
          probeId = adding ? hit.id : undefined;
          break;
        }
        if (performance.now() - written > 120_000) throw new Error(`sample ${s}: not in a delta within 120 s`);
        poll = get(channel, epoch, version, 30);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    // /proc counts CPU in 10 ms ticks: the feed's CPU over all samples, per change.
    const cpuPerChange = (cpuMicros(pid) - loopCpuBefore) / 1000 / samples;
    emit({ figure: "feed_delta_propagation_ms", pods: n, samples, p50: +percentile(latencies, 50).toFixed(1), p99: +percentile(latencies, 99).toFixed(1), max: +Math.max(...latencies).toFixed(1) });
    emit({ figure: "feed_delta_change_cost", pods: n, bytesPerChange: percentile(bytes, 50), recordsPerChange: percentile(records, 50), feedCpuMsPerChange: +cpuPerChange.toFixed(2) });
    await envoyPropagation(port, writer, n, samples);
  } finally {
    feed.kill("SIGTERM");
  }
}

/** API write → the real Envoy's VMs deciding with it, over meshFeed from the delta feed on `feedPort`. */
async function envoyPropagation(feedPort: number, writer: BulkWriter, n: number, samples: number): Promise<void> {
  const sidecar = `URI:${DEMO_IDENTITIES.sidecar}`;
  const envoy = await EnvoyProcess.start({ name: `bench-delta-${n}`, adminPort: 15000, concurrency: WORKERS, config: meshFeedSidecarConfig(feedPort, "mesh", 25), readyTimeoutMs: 120_000 });
  const counter = async (name: string) => (await envoy.stats()).get(`wasmcustom.passthrough_mtls.feed.${name}`) ?? 0;
  try {
    captureOutbound(15001);
    const loadStarted = performance.now();
    while ((await counter("applied_full")) < VMS) {
      if (performance.now() - loadStarted > 600_000) throw new Error("Envoy's VMs did not load the full model within 600 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    const fullLoadSeconds = (performance.now() - loadStarted) / 1000;
    // Where the probe is now (the long-poll samples above left it in or out of the mesh).
    const reply = async () => (await exchange(PROBE, 8443, "hello", 2000, CLIENT_ADDRESS)).received.toString();
    let inMesh = (await reply()) === `httpbin-0 peer=${sidecar}\nhello`;
    const first: number[] = [];
    const all: number[] = [];
    for (let s = 0; s < samples; s++) {
      const adding = !inMesh;
      const before = await counter("applied_delta");
      const written = performance.now();
      if (adding) await writer.setPodStatus("default", "probe", { podIP: PROBE, phase: "Running" });
      else await writer.setPodStatus("default", "probe", { phase: "Succeeded", podIP: PROBE });
      let decided: number | undefined;
      let applied: number | undefined;
      while (decided === undefined || applied === undefined) {
        if (applied === undefined && (await counter("applied_delta")) >= before + VMS) applied = performance.now() - written;
        if (decided === undefined) {
          const r = await reply();
          if (adding ? r === `httpbin-0 peer=${sidecar}\nhello` : r === "") decided = performance.now() - written;
        }
        if (performance.now() - written > 120_000) throw new Error(`sample ${s}: not in Envoy within 120 s`);
      }
      first.push(decided);
      all.push(applied);
      inMesh = adding;
      await new Promise((r) => setTimeout(r, 100));
    }
    const p = (v: number[], q: number) => +percentile(v, q).toFixed(1);
    emit({ figure: "feed_delta_envoy_ms", pods: n, samples, workers: WORKERS, fullLoadSeconds: +fullLoadSeconds.toFixed(2), firstDecidedP50: p(first, 50), firstDecidedP99: p(first, 99), allVmsAppliedP50: p(all, 50), allVmsAppliedP99: p(all, 99), refused: await counter("refused") });
  } finally {
    releaseCapture();
    await envoy.stop();
  }
}

// The feed as the fan-out bench runs it: its own process (feed/src/main.ts), one target
// (`mesh`, passthrough_mtls) served only on the mutual-TLS channel (no file or WasmPlugin
// delivery: no JSON render per change), the demo sidecar as its reader. One departure from the
// defaults, because every bench poller presents the same identity where a real mesh's sidecars
// present one per service account: the per-caller connection cap is the total cap.
import { spawn, type ChildProcess } from "node:child_process";
import { openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { feedChannelFiles, SIDECAR_PRINCIPAL } from "../../tests/support/feed_tls.js";
import { onCpus } from "./fanout_cpus.js";
import { bundleFeed, chartRuntime, FEED_BUNDLE, preloadMissing, type NodeRuntime } from "../../tests/support/feed_runtime.js";

/**
 * How the bench runs the feed: `chart` as its image does (the esbuild bundle under the chart's
 * Node flags, on jemalloc: tests/support/feed_runtime.ts), the figures an operator gets; `tsx`
 * the sources under Node's defaults (the layout of the figures before the bench ran the bundle).
 */
export type FeedRuntime = "chart" | "tsx";

let bundled = false;

/**
 * The command that runs the feed under `runtime`. The bundle is built from the current code once
 * per bench process, so a restart's stop → ready does not count a rebuild.
 */
export function feedCommand(runtime: FeedRuntime): { node: NodeRuntime; entry: string[] } {
  if (runtime === "tsx") return { node: { args: [], env: {} }, entry: ["--import", "tsx", "feed/src/main.ts"] };
  if (!bundled) bundleFeed();
  bundled = true;
  return { node: chartRuntime(), entry: [FEED_BUNDLE] };
}

export const CHANNEL_PORT = 19443;
const OPERATOR_PORT = 19090;
const HEALTH_PORT = 19091;
export const TARGET = "mesh";
const MAX_CONNECTIONS = 10_000;

export interface FeedCluster {
  id: string;
  kubeconfig?: string;
  files?: string;
}

export function writeFeedConfig(dir: string, clusters: FeedCluster[]): string {
  const config = {
    wasmDir: join(REPO_ROOT, "build"),
    operator: { address: "127.0.0.1", port: OPERATOR_PORT },
    health: { address: "127.0.0.1", port: HEALTH_PORT },
    channel: { address: "127.0.0.1", port: CHANNEL_PORT, ...feedChannelFiles(), limits: { maxConnections: MAX_CONNECTIONS, maxConnectionsPerCaller: MAX_CONNECTIONS, maxConnectionsPerPeer: MAX_CONNECTIONS } },
    clusters,
    targets: [{ name: TARGET, filter: "passthrough_mtls", readers: [SIDECAR_PRINCIPAL] }],
    // FANOUT_FEED_DELTA='{"quietMs":30}': the feed's `delta` settings, for experiments (FANOUT.md).
    ...(process.env.FANOUT_FEED_DELTA && { delta: JSON.parse(process.env.FANOUT_FEED_DELTA) as object }),
  };
  const path = join(dir, "feed.yaml");
  writeFileSync(path, stringify(config));
  return path;
}

export class FeedProcess {
  readonly channel = `https://127.0.0.1:${CHANNEL_PORT}`;
  private constructor(
    readonly child: ChildProcess,
    /** performance.now() when spawned, and when /readyz first said ready. */
    readonly spawnedAt: number,
    readonly readyAt: number,
  ) {}

  /** Spawns the feed and resolves once /readyz answers 200 (its stderr goes to `log`). */
  static async start(configPath: string, log: string, timeoutMs: number, cpus?: string, runtime: FeedRuntime = "chart"): Promise<FeedProcess> {
    const { node, entry } = feedCommand(runtime);
    const spawnedAt = performance.now();
    // FANOUT_FEED_PROFILE=<dir>: each feed process writes a V8 CPU profile there when it exits
    // (where the feed's time goes under the fan-out; NODE_OPTIONS does not take --cpu-prof).
    const profile = process.env.FANOUT_FEED_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.FANOUT_FEED_PROFILE}`] : [];
    // FANOUT_FEED_TRACE_GC=<file>: V8's line per collection (--trace-gc, on stdout) appended there.
    const traceGc = process.env.FANOUT_FEED_TRACE_GC;
    if (traceGc) profile.push("--trace-gc");
    // `cpus`: the feed's CPUs (fanout_cpus.ts: all of them, while the driver is on the clients'),
    // taskset exec'ing node so the pid is the feed's.
    const [command, ...args] = onCpus(cpus, [process.execPath, ...profile, ...node.args, ...entry, "--config", configPath]);
    const child = spawn(command, args, {
      cwd: REPO_ROOT,
      env: { ...process.env, ...node.env, FEED_LOG_LEVEL: "warn" },
      stdio: ["ignore", traceGc ? openSync(traceGc, "a") : "ignore", openSync(log, "a")],
    });
    while (performance.now() - spawnedAt < timeoutMs) {
      if (child.exitCode !== null) throw new Error(`the feed exited (${child.exitCode}) before it was ready: see ${log}`);
      let ready = false;
      try {
        ready = (await fetch(`http://127.0.0.1:${HEALTH_PORT}/readyz`)).status === 200;
      } catch {
        /* not listening yet */
      }
      if (ready) {
        const missing = preloadMissing(child.pid ?? 0, node);
        if (missing) {
          child.kill("SIGKILL");
          throw new Error(`${missing}: its figures would not be the image's`);
        }
        return new FeedProcess(child, spawnedAt, performance.now());
      }
      await new Promise((done) => setTimeout(done, 100));
    }
    child.kill("SIGKILL");
    throw new Error(`the feed was not ready within ${timeoutMs} ms: see ${log}`);
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  /**
   * One series of the feed's /metrics, by name and labels in any order (0 when absent, as an
   * unset counter is).
   */
  async metric(name: string, labels: Record<string, string>): Promise<number> {
    return seriesValue(await this.metricsText(), name, labels);
  }

  /**
   * The feed's /metrics text. Each read costs the feed a render of every series and of
   * prom-client's process metrics (which list the process's open descriptors: 2,000+ sockets
   * here), so the bench reads it as rarely as it can (position: one read; converged: one per loop).
   */
  async metricsText(): Promise<string> {
    return (await fetch(`http://127.0.0.1:${OPERATOR_PORT}/metrics`)).text();
  }

  /** The feed's current epoch and version of the target (0/0 before its first version), from one read. */
  async position(): Promise<{ epoch: number; version: number }> {
    const text = await this.metricsText();
    return { epoch: seriesValue(text, "feed_delta_epoch", {}), version: seriesValue(text, "feed_delta_version", { target: TARGET }) };
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const gone = new Promise((done) => this.child.once("exit", done));
    this.child.kill("SIGTERM");
    const kill = setTimeout(() => this.child.kill("SIGKILL"), 5000);
    await gone;
    clearTimeout(kill);
  }
}

/** One series of a /metrics text, by name and labels in any order (0 when absent, as an unset counter is). */
export function seriesValue(text: string, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).sort().join(",");
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m && m[1] === name && (m[2] ?? "").split(",").filter(Boolean).sort().join(",") === want) return Number(m[3]);
  }
  return 0;
}

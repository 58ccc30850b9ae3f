// Instruction counts per connection in the real Envoy, under `valgrind --tool=callgrind`: the same
// binary serving the same fixed connection sequence executes the same instructions whatever else
// the machine does, so these ratios resolve differences of a few percent that the wall-clock and
// /proc A/B figures (ab.ts) cannot on 2 shared cores.
//
// Each topology is the A/B benchmark's own (passthrough_mtls.ts, tunnel_port.ts,
// waypoint_route.ts): the same sidecar configs (with, without, native, noop, A/A control) and
// the same upstreams, which run natively. Only the measured sidecar runs under callgrind, one
// process per config; all sidecars of a topology start together (counts do not depend on timing)
// and are measured one after the other, capture switched to each in turn (capture.ts).
//
// Per sidecar and path: instrumentation on, a warm-up batch (V8 tier-up, TLS session resumption,
// HTTP/2 pools, ORIGINAL_DST hosts), then two measured batches of `connections` each, counters
// zeroed before and dumped after each (callgrind_envoy.ts), so start-up and configuration are
// not in any figure. The client (connection_client.mjs) runs outside valgrind, opening one
// connection at a time. Each batch is checked against the sidecar's stats: every connection must
// have taken the arm's route.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { emit } from "../emit.js";
import { sleep } from "../../tests/support/envoy.js";
import { CallgrindEnvoy, requireValgrind, type ThreadCount } from "./callgrind_envoy.js";
import { TOPOLOGIES, type Delta, type Key, type PathSpec, type RatioSpec, type SidecarSpec, type Topology } from "./callgrind_topologies.js";
import { captureGeneratorTo, GENERATOR_GID, GENERATOR_UID, releaseGeneratorCapture } from "./capture.js";

export interface CallgrindTimings {
  /** Connections per warm-up batch (not counted). */
  warmup: number;
  /** Connections per measured batch; each path is measured twice. */
  connections: number;
  /** Pause after each connection, ms (0: none). */
  pauseMs: number;
}

/**
 * Measured instructions per connection of one path, both batches: the worker thread (it serves
 * every connection; the figure) and all threads (the main thread's share is mostly its timers
 * and the admin requests between batches, so it scales with wall time, not connections).
 */
interface PathResult extends Key {
  runs: [number, number];
  allThreadRuns: [number, number];
  /** Wall seconds of each measured batch. */
  batchSeconds: [number, number];
  wallSeconds: number;
  /** The worker thread's dump of the first measured batch, for callgrind_annotate. */
  dump: string;
  /** Worker instructions per second with no connection. */
  idlePerSecond: number;
  /** Per measured batch: upstream connections opened and TLS handshakes made (all clusters). */
  upstreamConnections: [number, number];
  handshakes: [number, number];
  /** Per measured batch: the worker's event-loop wake-ups (calls of epoll_wait). */
  wakeups: [number, number];
}

interface Batch {
  counts: ThreadCount[];
  /** Wall seconds per connection. */
  seconds: number;
  /** Upstream connections every cluster opened during the batch, and TLS handshakes. */
  upstreamConnections: number;
  handshakes: number;
  wakeups: number;
}

/**
 * Calls of epoll_wait in a callgrind dump: how many times the event loop woke up. The same
 * connections can take more or fewer wake-ups (events that arrive together are handled in one),
 * each costing the loop's own work, so this is what a batch's count moves with besides the
 * connections themselves.
 */
export function epollWaits(file: string): number {
  const names = new Map<string, string>();
  let callee = "";
  let calls = 0;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("cfn=")) {
      const m = /^cfn=\((\d+)\)(?: (.*))?/.exec(line);
      if (m) {
        if (m[2]) names.set(m[1]!, m[2]);
        callee = names.get(m[1]!) ?? "";
      }
    } else if (line.startsWith("fn=")) {
      const m = /^fn=\((\d+)\)(?: (.*))?/.exec(line);
      if (m?.[2]) names.set(m[1]!, m[2]);
    } else if (line.startsWith("calls=") && /(^|[^a-z_])epoll_wait/.test(callee)) {
      calls += Number(line.slice(6).split(" ")[0]);
    }
  }
  return calls;
}


/**
 * Runs `count` connections to host:port as the captured generator user, one at a time. Any
 * failed connection fails the batch, except in a warm-up (`tolerant`): there the first
 * connections may time out while the sidecar, ~50x slower under callgrind, sets up its upstream
 * (seen: 2 of 20 reset while tunnel_port's HTTP/2 pool made its first TLS handshake).
 */
function connectionBatch(host: string, port: number, count: number, pauseMs: number, tolerant = false): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ["bench/envoy/connection_client.mjs", host, String(port), String(count), String(pauseMs)], {
      uid: GENERATOR_UID,
      gid: GENERATOR_GID,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (out += chunk));
    child.on("error", fail);
    child.on("close", (code) => {
      let ok = 0;
      try {
        ok = JSON.parse(out.trim().split("\n").at(-1) ?? "{}").ok ?? 0;
      } catch {
        // not the client's summary line: the batch failed
      }
      if (code === 0 || (tolerant && ok > count / 2)) done();
      else fail(new Error(`connection batch to ${host}:${port}: ${out.trim().slice(0, 400)}`));
    });
  });
}

async function statsDelta(envoy: CallgrindEnvoy, work: () => Promise<ThreadCount[]>): Promise<{ counts: ThreadCount[]; delta: Delta; sum: (pattern: RegExp) => number }> {
  const before = await envoy.stats();
  const counts = await work();
  const after = await envoy.stats();
  const delta: Delta = (name) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  const sum = (pattern: RegExp) => [...after.keys()].filter((name) => pattern.test(name)).reduce((n, name) => n + delta(name), 0);
  return { counts, delta, sum };
}

/**
 * What a batch's cost can jump by without the filter changing: a new pooled upstream
 * connection (a TLS handshake is worth several hundred thousand instructions). Counted per
 * batch so a deviation between the two batches can be traced to it.
 */
const UPSTREAM_CX = /^cluster\.[^ ]*\.upstream_cx_total$/;
const HANDSHAKES = /(^|\.)ssl\.handshake$/;

const CLOSE_PAUSE_MS = 1000;

/**
 * Envoy's own timers, which run as often as the clock says rather than once per connection, set
 * so that none fires during a batch (the same in every arm): the workers touch their watchdog on
 * every guard-dog interval (200 ms by default), and the stats flush timer (5 s) makes every
 * worker merge its histograms. stats_flush_on_admin removes the flush timer (then a flush runs
 * only on an admin /stats request, which the benchmark makes only between batches). ORIGINAL_DST
 * host sweeps: below.
 */
function withQuietTimers(config: any): any {
  const long = "3600s";
  config.watchdogs = { main_thread_watchdog: { miss_timeout: long, megamiss_timeout: long }, worker_watchdog: { miss_timeout: long, megamiss_timeout: long } };
  config.stats_flush_on_admin = true;
  // An ORIGINAL_DST cluster sweeps its hosts every cleanup_interval (5 s) on the main thread and
  // posts the host set to every worker, which rebuilds its copy: worker work by the clock, whose
  // count per batch followed the batch's wall time (load). Hosts a batch uses stay either way.
  for (const cluster of config.static_resources?.clusters ?? []) if (cluster.type === "ORIGINAL_DST") cluster.cleanup_interval = long;
  return config;
}

/**
 * Worker instructions per second while idle (no connection): what is left that scales with wall
 * time rather than connections, to show it is negligible next to a batch.
 */
async function idleRate(envoy: CallgrindEnvoy): Promise<number> {
  await envoy.zero();
  const began = performance.now();
  await sleep(2000);
  const counts = await envoy.dump("idle");
  return worker(counts) / ((performance.now() - began) / 1000);
}

/**
 * Waits until the sidecar has closed the batch's last connection (its outbound listener has no
 * active connection), then a little longer for the deferred deletes that follow a close (the
 * wasm context's proxy_on_delete among them), so every batch ends at the same point.
 */
async function drained(envoy: CallgrindEnvoy, outbound: number): Promise<void> {
  const gauge = `listener.127.0.0.1_${outbound}.downstream_cx_active`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const active = (await envoy.stats()).get(gauge);
    if (active === undefined) throw new Error(`no ${gauge} in the sidecar's stats`);
    if (active === 0) break;
    if (Date.now() > deadline) throw new Error(`${gauge} still ${active} 60 s after the batch`);
    await sleep(100);
  }
  await sleep(300);
}

const total = (counts: ThreadCount[]) => counts.reduce((sum, c) => sum + c.instructions, 0);
/** The worker thread (--concurrency 1) is the one that served the connections: the busiest. */
const busiest = (counts: ThreadCount[]) => counts.reduce((a, b) => (b.instructions > a.instructions ? b : a));
const worker = (counts: ThreadCount[]) => busiest(counts).instructions;

/** One measured batch: zero, connections, dump; the dump's files stay for callgrind_annotate. */
async function measuredBatch(envoy: CallgrindEnvoy, outbound: number, spec: PathSpec, connections: number, pauseMs: number, label: string): Promise<Batch> {
  const began = performance.now();
  const { counts, delta, sum } = await statsDelta(envoy, async () => {
    await envoy.zero();
    await connectionBatch(spec.host, spec.port, connections, pauseMs);
    // A fixed pause, not polling: an admin request in the window would be counted (and /stats
    // makes every worker merge its histograms). The last close takes a few ms under callgrind.
    await sleep(CLOSE_PAUSE_MS);
    return envoy.dump(label);
  });
  const wrong = spec.verify(delta, connections);
  if (wrong) throw new Error(`${spec.filter} ${spec.variant}/${spec.path}: ${wrong}`);
  return { counts, seconds: (performance.now() - began) / 1000 / connections, upstreamConnections: sum(UPSTREAM_CX), handshakes: sum(HANDSHAKES), wakeups: epollWaits(busiest(counts).file) };
}

async function measureSidecar(envoy: CallgrindEnvoy, sidecar: SidecarSpec, timings: CallgrindTimings, log: (m: string) => void): Promise<PathResult[]> {
  const results: PathResult[] = [];
  captureGeneratorTo(sidecar.outbound);
  try {
    await envoy.instrument();
    for (const spec of sidecar.paths) {
      const began = performance.now();
      await connectionBatch(spec.host, spec.port, timings.warmup, timings.pauseMs, true);
      await drained(envoy, sidecar.outbound);
      const batches: Batch[] = [];
      for (const run of [1, 2]) batches.push(await measuredBatch(envoy, sidecar.outbound, spec, timings.connections, timings.pauseMs, `${spec.path}-${run}`));
      const n = timings.connections;
      const pair = (f: (b: Batch) => number): [number, number] => [f(batches[0]!) / n, f(batches[1]!) / n];
      results.push({
        filter: spec.filter, variant: spec.variant, path: spec.path, control: spec.control,
        runs: pair((b) => worker(b.counts)),
        allThreadRuns: pair((b) => total(b.counts)),
        batchSeconds: pair((b) => b.seconds * n),
        wallSeconds: (performance.now() - began) / 1000,
        dump: busiest(batches[0]!.counts).file,
        idlePerSecond: NaN,
        upstreamConnections: [batches[0]!.upstreamConnections, batches[1]!.upstreamConnections],
        handshakes: [batches[0]!.handshakes, batches[1]!.handshakes],
        wakeups: [batches[0]!.wakeups, batches[1]!.wakeups],
      });
      const r = results.at(-1)!;
      log(`callgrind ${sidecar.name} ${spec.path}: worker ${Math.round(r.runs[0])} / ${Math.round(r.runs[1])} instructions per connection, all threads ${Math.round(r.allThreadRuns[0])} / ${Math.round(r.allThreadRuns[1])} (${timings.warmup} + 2 × ${n} connections, ${r.wallSeconds.toFixed(1)} s; upstream connections ${r.upstreamConnections.join(" / ")}, TLS handshakes ${r.handshakes.join(" / ")}, event-loop wake-ups ${r.wakeups.join(" / ")})`);
    }
    const idle = await idleRate(envoy);
    for (const r of results) {
      r.idlePerSecond = idle;
      emitPath(r, timings);
    }
  } finally {
    releaseGeneratorCapture();
  }
  return results;
}

const mean = (pair: [number, number]) => (pair[0] + pair[1]) / 2;
const deviation = (pair: [number, number]) => Math.abs(pair[0] - pair[1]) / mean(pair);
const r4 = (value: number) => Math.round(value * 10000) / 10000;

function emitPath(result: PathResult, timings: CallgrindTimings): void {
  const common = { filter: result.filter, variant: result.variant, path: result.path, control: result.control };
  // What the worker's idle activity could have added to a batch, per connection, as a share.
  const idleShare = (result.idlePerSecond * mean(result.batchSeconds)) / timings.connections / mean(result.runs);
  emit({
    figure: "envoy_instructions",
    ...common,
    metric: "instructions_per_conn",
    value: Math.round(mean(result.runs)),
    unit: "instructions",
    thread: "worker",
    per_run: result.runs.map(Math.round),
    all_threads_value: Math.round(mean(result.allThreadRuns)),
    all_threads_per_run: result.allThreadRuns.map(Math.round),
    connections: timings.connections,
    warmup: timings.warmup,
    runs: 2,
    wall_s: Math.round(result.wallSeconds * 10) / 10,
    worker_idle_per_s: Math.round(result.idlePerSecond),
    idle_share: r4(idleShare),
    dump: result.dump,
  });
  // Repeatability: the two batches of the same process and path.
  emit({
    figure: "envoy_instructions_repeat",
    ...common,
    metric: "instructions_per_conn",
    per_run: result.runs.map(Math.round),
    deviation: r4(deviation(result.runs)),
    all_threads_deviation: r4(deviation(result.allThreadRuns)),
    upstream_cx_per_batch: result.upstreamConnections,
    tls_handshakes_per_batch: result.handshakes,
    wakeups_per_batch: result.wakeups,
    target: "< 0.01",
    met: deviation(result.runs) < 0.01,
  });
}

const sameKey = (a: Key, b: Key) => a.filter === b.filter && a.variant === b.variant && a.path === b.path && !!a.control === !!b.control;

function emitRatio(topology: string, spec: RatioSpec, results: PathResult[]): void {
  const arm = results.find((r) => sameKey(r, spec.arm));
  const base = results.find((r) => sameKey(r, spec.baseline));
  const common = { topology, filter: spec.arm.filter, path: spec.arm.path, variant: spec.arm.variant, baseline: spec.baseline.variant, baseline_filter: spec.baseline.filter, control: spec.arm.control, why: spec.why };
  if (!arm || !base) {
    emit({ figure: "envoy_instructions_ratio", ...common, metric: "instructions_per_conn", error: `not measured: ${!arm ? "arm" : "baseline"} failed (see its error figure)` });
    return;
  }
  const value = mean(arm.runs) / mean(base.runs);
  emit({
    figure: "envoy_instructions_ratio",
    ...common,
    metric: "instructions_per_conn",
    value: r4(value),
    unit: "ratio",
    added_per_conn: Math.round(mean(arm.runs) - mean(base.runs)),
    arm_value: Math.round(mean(arm.runs)),
    baseline_value: Math.round(mean(base.runs)),
    all_threads_value: r4(mean(arm.allThreadRuns) / mean(base.allThreadRuns)),
    target: spec.target === undefined ? undefined : `<= ${spec.target}`,
    met: spec.target === undefined ? undefined : value <= spec.target,
  });
}

async function runTopology(topology: Topology, timings: CallgrindTimings, log: (m: string) => void): Promise<void> {
  const stopBackends = await topology.start();
  const started: CallgrindEnvoy[] = [];
  const results: PathResult[] = [];
  try {
    const began = performance.now();
    // Start-up under valgrind is the slow part (tens of seconds each): all at once.
    const envoys = await Promise.allSettled(topology.sidecars.map((s) => CallgrindEnvoy.start(s.name, withQuietTimers(s.config()), s.admin)));
    envoys.forEach((e) => e.status === "fulfilled" && started.push(e.value));
    log(`callgrind ${topology.name}: ${started.length} of ${topology.sidecars.length} sidecars ready under valgrind after ${((performance.now() - began) / 1000).toFixed(0)} s`);
    for (const [index, sidecar] of topology.sidecars.entries()) {
      const envoy = envoys[index]!;
      try {
        if (envoy.status === "rejected") throw envoy.reason;
        results.push(...(await measureSidecar(envoy.value, sidecar, timings, log)));
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        log(`callgrind ${sidecar.name}: ${message}`);
        for (const spec of sidecar.paths) emit({ figure: "envoy_instructions", filter: spec.filter, variant: spec.variant, path: spec.path, control: spec.control, error: message.slice(0, 2000) });
      } finally {
        if (envoy.status === "fulfilled") await envoy.value.stop();
      }
    }
  } finally {
    for (const envoy of started) await envoy.stop();
    await stopBackends();
  }
  for (const ratio of topology.ratios) emitRatio(topology.name, ratio, results);
}


/**
 * The instruction-count A/B of every topology (or `only` those, and of those only the sidecars
 * named in `sidecars`); one failed topology does not stop the others.
 */
export { TOPOLOGIES };

export async function callgrindBench(timings: CallgrindTimings, log: (m: string) => void, only?: string[], sidecars?: string[]): Promise<void> {
  requireValgrind();
  const began = performance.now();
  for (const [name, make] of Object.entries(TOPOLOGIES)) {
    if (only && !only.includes(name)) continue;
    try {
      const topology = make();
      if (sidecars) topology.sidecars = topology.sidecars.filter((s) => sidecars.includes(s.name));
      await runTopology(topology, timings, log);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      log(`callgrind ${name}: ${message}`);
      emit({ figure: "envoy_instructions", filter: name, error: message.slice(0, 2000) });
    }
  }
  emit({ figure: "envoy_instructions_wall", seconds: Math.round((performance.now() - began) / 1000), warmup: timings.warmup, connections: timings.connections, load_average: Number((await import("node:os")).loadavg()[0]!.toFixed(1)) });
}

/**
 * Two batches of 50 connections after a warm-up of 20 differed by up to 2.4%: the first batch
 * still paid for V8 tiering the wasm callbacks up and for tcmalloc filling its caches. A warm-up
 * of 60 and batches of 100 keep the two within ~1% in --quick; the full run takes four times as
 * many.
 */
/**
 * A pause after each connection. Without it, the next connection arrived while the sidecar was
 * still closing the last one, and how often the two were handled in one event-loop wake-up
 * followed the machine's load: the same 100 connections took 847 wake-ups in one batch and 762
 * in the next (no filter, plain path), and the count moved by 1.5%. With 50 ms every connection
 * is handled alone: wake-ups 925 / 935, counts within 0.2% (docs/envoy-cpu-profile.md).
 */
export const CONNECTION_PAUSE_MS = 50;

export function callgrindTimings(quick: boolean): CallgrindTimings {
  return quick ? { warmup: 60, connections: 100, pauseMs: CONNECTION_PAUSE_MS } : { warmup: 200, connections: 400, pauseMs: CONNECTION_PAUSE_MS };
}

// Alternating A/B runs against sidecar Envoys that all run side by side, only one under load at a
// time: capture is switched to each arm's listener in turn, arms in ABBA order per round (the
// order reverses every round) so slow drift of a shared machine cancels out of the ratios. Per
// arm and round: new connections per second (wrk, `concurrency` connections, one request each),
// TTFB p50/p99 (wrk with one connection at a time), bulk MB/s (iperf3), the sidecar's CPU per
// connection (/proc over the rate run) and, at the end, its memory. Every run is checked against
// the sidecar's own stats (did these connections take the route this arm claims?) before its
// figures count.
import { emit } from "../emit.js";
import { sleep, type EnvoyProcess } from "../../tests/support/envoy.js";
import { captureGeneratorTo, releaseGeneratorCapture } from "./capture.js";
import { iperf3, wrk, type WrkResult } from "./generators.js";
import { cpuMicros, rssMb, withCpu } from "./proc.js";

export type Variant = "without" | "with" | "native";
export type Metric = "conn_rate_per_s" | "ttfb_p50_us" | "ttfb_p99_us" | "bulk_mb_per_s" | "envoy_cpu_us_per_conn" | "envoy_memory_mb";

export interface Arm {
  /** The figure's filter name when it is not the topology's (e.g. the noop filter's arm). */
  filter?: string;
  /**
   * An A/A control: a second sidecar with exactly its baseline's config. Its figures carry
   * `control: true`; its ratios against the baseline show the machine's noise floor.
   */
  control?: boolean;
  variant: Variant;
  /** Which traffic this arm carries (e.g. "plain", "mtls"); ratios compare arms of one path. */
  path: string;
  sidecar: EnvoyProcess;
  /** The sidecar's outbound (capture) port. */
  capturePort: number;
  /** The URL the application dials (captured to the sidecar). */
  url: string;
  bulk: { host: string; port: number };
  /** Checks a run's stats delta; returns what is wrong, or undefined. */
  verify(delta: (name: string) => number, connections: number): string | undefined;
}

export interface AbTimings {
  rounds: number;
  rateSeconds: number;
  ttfbSeconds: number;
  bulkSeconds: number;
  concurrency: number;
}

interface RoundSample {
  conn_rate_per_s: number;
  ttfb_p50_us: number;
  ttfb_p99_us: number;
  bulk_mb_per_s: number;
  envoy_cpu_us_per_conn: number;
  generatorCpuPct: number;
  envoyCpuPct: number;
}

const UNIT: Record<Metric, string> = {
  conn_rate_per_s: "conn/s",
  ttfb_p50_us: "us",
  ttfb_p99_us: "us",
  bulk_mb_per_s: "MB/s",
  envoy_cpu_us_per_conn: "us",
  envoy_memory_mb: "MB",
};

/**
 * Did (nearly) every connection of a run take this route? `name`'s counter must have grown by at
 * least 99% of the connections the generators completed: another route would leave it near 0,
 * and the last connections of a run can still be closing when the stats are read.
 */
export function atLeast(delta: (name: string) => number, name: string, connections: number): string | undefined {
  const seen = delta(name);
  return seen >= Math.floor(connections * 0.99) ? undefined : `${name} grew by ${seen}, expected >= 99% of ${connections}`;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

const round2 = (value: number): number => Math.round(value * 100) / 100;

async function statsDelta(envoy: EnvoyProcess, work: () => Promise<number>): Promise<{ connections: number; delta: (name: string) => number }> {
  const before = await envoy.stats();
  const connections = await work();
  // The last connections close while wrk exits: give Envoy a moment to count them.
  await sleep(150);
  const after = await envoy.stats();
  return { connections, delta: (name) => (after.get(name) ?? 0) - (before.get(name) ?? 0) };
}

async function measureArm(arm: Arm, timings: AbTimings): Promise<RoundSample> {
  captureGeneratorTo(arm.capturePort);
  try {
    const pid = arm.sidecar.child.pid!;
    let rate!: { result: WrkResult; cpuUs: number; wallUs: number };
    let ttfb!: WrkResult;
    const { connections, delta } = await statsDelta(arm.sidecar, async () => {
      rate = await withCpu(pid, () => wrk(arm.url, timings.concurrency, timings.rateSeconds, true));
      ttfb = await wrk(arm.url, 1, timings.ttfbSeconds, true);
      return rate.result.requests + ttfb.requests;
    });
    const wrong = arm.verify(delta, connections);
    if (wrong) throw new Error(`${arm.variant}/${arm.path}: ${wrong}`);
    const bulk = await iperf3(arm.bulk.host, arm.bulk.port, timings.bulkSeconds, true);
    return {
      conn_rate_per_s: rate.result.perSecond,
      ttfb_p50_us: ttfb.p50Us,
      ttfb_p99_us: ttfb.p99Us,
      bulk_mb_per_s: bulk.mbPerSecond,
      envoy_cpu_us_per_conn: rate.cpuUs / rate.result.requests,
      generatorCpuPct: (100 * rate.result.cpuUs) / rate.result.wallUs,
      envoyCpuPct: (100 * rate.cpuUs) / rate.wallUs,
    };
  } finally {
    releaseGeneratorCapture();
  }
}

export interface AbResult {
  /**
   * Per arm (index as given), the sample of every round; null for a round whose run failed its
   * route check (that round is left out of this arm's figures and ratios, see runAb).
   */
  samples: (RoundSample | null)[][];
}

/** The rounds in which both arms have a sample: the pairs a ratio may compare. */
function pairedRounds(a: (RoundSample | null)[], b: (RoundSample | null)[]): [RoundSample, RoundSample][] {
  const pairs: [RoundSample, RoundSample][] = [];
  a.forEach((x, i) => {
    const y = b[i];
    if (x && y) pairs.push([x, y]);
  });
  return pairs;
}

/** Fewer paired rounds than this and a comparison is reported as an error, not a figure. */
function enoughRounds(pairs: number, rounds: number): boolean {
  return pairs > 0 && pairs * 2 >= rounds;
}

const ROUND_METRICS = ["conn_rate_per_s", "ttfb_p50_us", "ttfb_p99_us", "bulk_mb_per_s", "envoy_cpu_us_per_conn"] as const;

/** Runs the arms alternately, emits envoy_ab per round and the medians, then memory. */
export async function runAb(filter: string, arms: Arm[], timings: AbTimings, log: (message: string) => void): Promise<AbResult> {
  const idle = await memoryAllocatedMb(arms);
  const samples: (RoundSample | null)[][] = arms.map(() => []);
  for (let round = 0; round < timings.rounds; round++) {
    const order = arms.map((_, index) => index);
    if (round % 2) order.reverse();
    for (const index of order) {
      const arm = arms[index]!;
      // A run whose connections did not all take the arm's route (seen: Envoy's native mTLS
      // config counting 98.6% of them upstream when the 2 cores were saturated) drops this
      // round for this arm; a topology whose arms fail in most rounds reports errors instead
      // of ratios (emitRatios).
      let sample: RoundSample;
      try {
        sample = await measureArm(arm, timings);
      } catch (e) {
        const error = e instanceof Error ? e.message : String(e);
        log(`${filter} round ${round + 1}/${timings.rounds} ${arm.filter ? `${arm.filter} ` : ""}${arm.variant}/${arm.path}: round dropped: ${error}`);
        emit({ figure: "envoy_ab_dropped_round", filter: arm.filter ?? filter, variant: arm.variant, path: arm.path, round: round + 1, reason: error });
        samples[index]!.push(null);
        continue;
      }
      samples[index]!.push(sample);
      log(`${filter} round ${round + 1}/${timings.rounds} ${arm.filter ? `${arm.filter} ` : ""}${arm.variant}/${arm.path}: ${Math.round(sample.conn_rate_per_s)} conn/s, ttfb p50 ${Math.round(sample.ttfb_p50_us)} us p99 ${Math.round(sample.ttfb_p99_us)} us, bulk ${Math.round(sample.bulk_mb_per_s)} MB/s, ${Math.round(sample.envoy_cpu_us_per_conn)} us CPU/conn`);
      for (const metric of ROUND_METRICS) {
        emit({ figure: "envoy_ab", filter: arm.filter ?? filter, variant: arm.variant, path: arm.path, control: arm.control, metric, value: round2(sample[metric]), unit: UNIT[metric], runs: 1, round: round + 1 });
      }
    }
  }
  arms.forEach((arm, index) => {
    for (const metric of ROUND_METRICS) {
      const values = samples[index]!.flatMap((sample) => (sample ? [sample[metric]] : []));
      if (values.length === 0) {
        emit({ figure: "envoy_ab", filter: arm.filter ?? filter, variant: arm.variant, path: arm.path, control: arm.control, metric, error: "every round of this arm was dropped (envoy_ab_dropped_round)" });
        continue;
      }
      emit({ figure: "envoy_ab", filter: arm.filter ?? filter, variant: arm.variant, path: arm.path, control: arm.control, metric, value: round2(median(values)), unit: UNIT[metric], runs: values.length });
    }
  });
  await emitMemory(filter, arms, idle);
  return { samples };
}

/** /stats server.memory_allocated (bytes tcmalloc hands out) of each sidecar, MB. */
async function memoryAllocatedMb(arms: Arm[]): Promise<Map<EnvoyProcess, number>> {
  const allocated = new Map<EnvoyProcess, number>();
  for (const arm of arms) {
    if (allocated.has(arm.sidecar)) continue;
    allocated.set(arm.sidecar, ((await arm.sidecar.stats()).get("server.memory_allocated") ?? NaN) / (1 << 20));
  }
  return allocated;
}

/**
 * Memory: server.memory_allocated when idle, before any load (the config and the wasm VMs; after
 * the runs it also holds buffers of connections still closing, reported as after_runs_mb), and
 * RSS at the end. The arms' configs differ only by the filter, so idle with − idle without is the
 * wasm VMs' share (the VMs of the main thread and the worker, the module, the plugin config).
 */
async function emitMemory(filter: string, arms: Arm[], idle: Map<EnvoyProcess, number>): Promise<void> {
  const after = await memoryAllocatedMb(arms);
  const without = arms.find((arm) => arm.variant === "without" && !arm.control);
  const seen = new Set<EnvoyProcess>();
  for (const arm of arms) {
    if (seen.has(arm.sidecar)) continue;
    seen.add(arm.sidecar);
    const value = idle.get(arm.sidecar)!;
    const wasmShare = arm.variant === "with" && without ? round2(value - idle.get(without.sidecar)!) : undefined;
    emit({
      figure: "envoy_ab",
      filter: arm.filter ?? filter,
      variant: arm.variant,
      path: arm.path,
      control: arm.control,
      metric: "envoy_memory_mb",
      value: round2(value),
      unit: UNIT.envoy_memory_mb,
      runs: 1,
      after_runs_mb: round2(after.get(arm.sidecar)!),
      rss_mb: round2(rssMb(arm.sidecar.child.pid!)),
      cpu_total_s: round2(cpuMicros(arm.sidecar.child.pid!) / 1e6),
      wasm_share_mb: wasmShare,
    });
  }
}

/**
 * Ratios of `arm` over `baseline`, per round (the two ran back to back) and then the median:
 * connection rate (target >= 0.9), p99 TTFB added in µs (target < 100), bulk (target >= 0.97).
 */
export function emitRatios(filter: string, arms: Arm[], result: AbResult, armIndex: number, baselineIndex: number): void {
  const pairs = pairedRounds(result.samples[armIndex]!, result.samples[baselineIndex]!);
  const perRound = (f: (x: RoundSample, y: RoundSample) => number) => median(pairs.map(([x, y]) => f(x, y)));
  const arm = arms[armIndex]!;
  const common = { filter: arm.filter ?? filter, path: arm.path, variant: arm.variant, baseline: arms[baselineIndex]!.variant, control: arm.control, runs: pairs.length };
  if (!enoughRounds(pairs.length, result.samples[armIndex]!.length)) {
    emit({ figure: "envoy_ab_ratio", ...common, error: `only ${pairs.length} of ${result.samples[armIndex]!.length} rounds passed the route check in both arms (envoy_ab_dropped_round)` });
    return;
  }
  const rate = perRound((x, y) => x.conn_rate_per_s / y.conn_rate_per_s);
  emit({ figure: "envoy_ab_ratio", ...common, metric: "conn_rate_per_s", value: Math.round(rate * 1000) / 1000, unit: "ratio", target: ">= 0.9", met: rate >= 0.9 });
  const addedP99 = perRound((x, y) => x.ttfb_p99_us - y.ttfb_p99_us);
  emit({ figure: "envoy_ab_ratio", ...common, metric: "ttfb_p99_us", value: round2(addedP99), unit: "us", target: "< 100", met: addedP99 < 100 });
  const addedP50 = perRound((x, y) => x.ttfb_p50_us - y.ttfb_p50_us);
  emit({ figure: "envoy_ab_ratio", ...common, metric: "ttfb_p50_us", value: round2(addedP50), unit: "us" });
  const bulk = perRound((x, y) => x.bulk_mb_per_s / y.bulk_mb_per_s);
  emit({ figure: "envoy_ab_ratio", ...common, metric: "bulk_mb_per_s", value: Math.round(bulk * 1000) / 1000, unit: "ratio", target: ">= 0.97", met: bulk >= 0.97 });
  const cpu = perRound((x, y) => x.envoy_cpu_us_per_conn / y.envoy_cpu_us_per_conn);
  emit({ figure: "envoy_ab_ratio", ...common, metric: "envoy_cpu_us_per_conn", value: Math.round(cpu * 1000) / 1000, unit: "ratio" });
}

/**
 * What the per-round ratios of an A/A control (`armIndex`: the same config as `baselineIndex`)
 * spread over: min / median / max over rounds of each targeted comparison, plus CPU per
 * connection (no target; compared in the report with what call stacks predict). Two identical
 * sidecars should read 1 (or +0 µs); how far they stray is the smallest difference the ratios
 * of this machine can resolve. `target_margin` is how far from "no difference" the target
 * allows (0.1 for >= 0.9); `judgeable` says whether every round of the control stayed inside it.
 */
export function emitNoiseFloor(filter: string, arms: Arm[], result: AbResult, armIndex: number, baselineIndex: number): void {
  const pairs = pairedRounds(result.samples[armIndex]!, result.samples[baselineIndex]!);
  const arm = arms[armIndex]!;
  if (!enoughRounds(pairs.length, result.samples[armIndex]!.length)) return;
  const comparisons: { metric: Metric; unit: string; neutral: number; target?: string; margin?: number; f: (x: RoundSample, y: RoundSample) => number }[] = [
    { metric: "conn_rate_per_s", unit: "ratio", neutral: 1, target: ">= 0.9", margin: 0.1, f: (x, y) => x.conn_rate_per_s / y.conn_rate_per_s },
    { metric: "bulk_mb_per_s", unit: "ratio", neutral: 1, target: ">= 0.97", margin: 0.03, f: (x, y) => x.bulk_mb_per_s / y.bulk_mb_per_s },
    { metric: "ttfb_p99_us", unit: "us", neutral: 0, target: "< 100", margin: 100, f: (x, y) => x.ttfb_p99_us - y.ttfb_p99_us },
    { metric: "envoy_cpu_us_per_conn", unit: "ratio", neutral: 1, f: (x, y) => x.envoy_cpu_us_per_conn / y.envoy_cpu_us_per_conn },
  ];
  for (const c of comparisons) {
    const perRound = pairs.map(([x, y]) => c.f(x, y));
    const digits = c.unit === "us" ? round2 : (value: number) => Math.round(value * 1000) / 1000;
    const deviation = Math.max(...perRound.map((value) => Math.abs(value - c.neutral)));
    emit({
      figure: "envoy_noise_floor",
      filter: arm.filter ?? filter,
      topology: filter,
      path: arm.path,
      variant: arm.variant,
      baseline: arms[baselineIndex]!.variant,
      control: true,
      metric: c.metric,
      unit: c.unit,
      min: digits(Math.min(...perRound)),
      median: digits(median(perRound)),
      max: digits(Math.max(...perRound)),
      rounds: perRound.length,
      per_round: perRound.map(digits),
      max_deviation: digits(deviation),
      target: c.target,
      target_margin: c.margin,
      judgeable: c.margin === undefined ? undefined : deviation < c.margin,
    });
  }
}

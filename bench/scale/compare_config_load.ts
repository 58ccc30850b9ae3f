// The JSON configuration load of two builds side by side in one process: pods_curve.ts's
// `config_load` (a fresh VM's instantiate + on_vm_start + on_configure of a generated mesh
// snapshot, which the streaming JSON reader of assembly/json reads window by window) for
// `before`, `after` and `before_again` (the before build once more: the A/A control, the noise
// of a ratio taken this way). Each round configures one VM of each build on the same snapshot,
// in an order that rotates from round to round, and drops it; every figure is the lower quartile
// of its rounds (vm.ts: lowQuartile; another process can only slow a configure down). A VM of
// each build is first checked to take every route on the snapshot (checkRoutes), so both read the
// same configuration to the same model. The timed configure is configureVm's (same host options,
// host functions wrapped the same way) without the connection stream it draws afterwards.
// Times, each over the configure: the main thread's CPU time (/proc/thread-self/schedstat: the
// guest code, the host's JavaScript, V8's work on that thread), the process's CPU time (adds
// V8's compiler and GC threads) and wall time. On the shared machine wall time is mostly waiting
// for a core (a configure of 0.6 s CPU took 1.5-5 s), so the main thread's CPU time is the figure to read.
// Figures (bench/emit.ts): compare_config_load (per filter and build), compare_after_before
// (of config_load_thread_cpu_ms, config_load_cpu_ms and config_load_ms: after ÷ before next to
// before_again ÷ before).
//
// Not part of `npm run bench` (a clean clone has one build). Usage:
//   node --import tsx bench/scale/compare_config_load.ts BEFORE_BUILD_DIR AFTER_BUILD_DIR \
//     [--pods 100000] [--rounds 15] [--warmup 2] [--filters passthrough_mtls,...]
import { existsSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { ProxyWasmHost } from "../../host/index.js";
import { emit } from "../emit.js";
import { withHostCallTiming } from "../lib/host_call_timer.js";
import { buildSnapshot, type Snapshot } from "../lib/mesh_snapshot.js";
import type { Subject } from "./subjects.js";
import { BUILDS, intOption, readCompareArgs, type Build } from "./compare_args.js";
import { checkRoutes, configureVm, log, lowQuartile, round } from "./vm.js";

interface Options {
  readonly dirs: Record<Build, string>;
  readonly pods: number;
  readonly rounds: number;
  readonly warmUp: number;
  readonly filters: readonly Subject[];
}

function readOptions(argv: readonly string[]): Options {
  const args = readCompareArgs(argv, "compare_config_load.ts BEFORE_BUILD_DIR AFTER_BUILD_DIR [--pods N] [--rounds N] [--warmup N] [--filters a,b]", ["pods", "rounds", "warmup"]);
  return {
    dirs: args.dirs,
    pods: intOption(args, "pods", 100_000, 1_000),
    rounds: intOption(args, "rounds", 15, 1),
    warmUp: intOption(args, "warmup", 2, 0),
    filters: args.filters,
  };
}

const SCHEDSTAT = "/proc/thread-self/schedstat";
const HAS_SCHEDSTAT = existsSync(SCHEDSTAT);

/** CPU time of the calling (main) thread in ns, from the kernel's scheduler statistics; NaN without them. */
function threadCpuNs(): number {
  if (!HAS_SCHEDSTAT) return NaN;
  return Number(readFileSync(SCHEDSTAT, "utf8").split(" ")[0]);
}

/** One configure as configureVm times it (vm.ts); wall and CPU ms, or the failure. */
function configureOnce(wasm: Uint8Array, subject: Subject, snapshot: Snapshot): { ms: number; cpuMs: number; threadMs: number; error?: string } {
  const host = ProxyWasmHost.fromBytes(wasm, {
    rootId: subject.rootId,
    pluginConfiguration: snapshot.config,
    measureGuestTime: true,
    canary: false,
    logLevel: "warn",
  });
  const threadBefore = threadCpuNs();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const ok = withHostCallTiming(() => host.start());
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpuBefore);
  const threadMs = (threadCpuNs() - threadBefore) / 1e6;
  return { ms, cpuMs: (used.user + used.system) / 1000, threadMs, error: ok ? undefined : host.startFailure || "configure failed" };
}

function compare(subject: Subject, options: Options): void {
  const filter = subject.name;
  const snapshot = buildSnapshot(options.pods, subject.own);
  const wasm = Object.fromEntries(BUILDS.map((b) => [b, new Uint8Array(readFileSync(join(options.dirs[b], basename(subject.wasm))))])) as Record<Build, Uint8Array>;
  const wall: Record<Build, number[]> = { before: [], after: [], before_again: [] };
  const cpu: Record<Build, number[]> = { before: [], after: [], before_again: [] };
  const thread: Record<Build, number[]> = { before: [], after: [], before_again: [] };
  for (const build of BUILDS.slice(0, 2)) {
    const { vm, error } = configureVm(wasm[build], subject, snapshot);
    if (vm === undefined) throw new Error(`${filter} ${build} (${options.dirs[build]}) at ${options.pods} pods: configure failed: ${error}`);
    const wrong = checkRoutes(vm, snapshot);
    if (wrong !== undefined) throw new Error(`${filter} ${build} at ${options.pods} pods: ${wrong}`);
  }
  // Untimed warm-up rounds first: V8 tiers a module's hot functions up while it runs (shared by
  // its instances), so early configures of a build measure its compile tiers, not its code.
  for (let r = -options.warmUp; r < options.rounds; r++) {
    for (let k = 0; k < BUILDS.length; k++) {
      const build = BUILDS[(r + options.warmUp + k) % BUILDS.length]!;
      const { ms, cpuMs, threadMs, error } = configureOnce(wasm[build], subject, snapshot);
      if (error !== undefined) throw new Error(`${filter} ${build} at ${options.pods} pods, round ${r}: configure failed: ${error}`);
      if (r < 0) continue;
      wall[build].push(ms);
      cpu[build].push(cpuMs);
      thread[build].push(threadMs);
    }
  }
  const ms = Object.fromEntries(BUILDS.map((b) => [b, lowQuartile(wall[b])])) as Record<Build, number>;
  const cpuMs = Object.fromEntries(BUILDS.map((b) => [b, lowQuartile(cpu[b])])) as Record<Build, number>;
  const threadMs = Object.fromEntries(BUILDS.map((b) => [b, lowQuartile(thread[b])])) as Record<Build, number>;
  for (const build of BUILDS) {
    emit({
      figure: "compare_config_load",
      filter,
      pods: options.pods,
      config_bytes: snapshot.config.length,
      build,
      rounds: options.rounds,
      thread_cpu_ms: round(threadMs[build], 1),
      cpu_ms: round(cpuMs[build], 1),
      ms: round(ms[build], 1),
    });
  }
  const ratios = [["config_load_thread_cpu_ms", threadMs], ["config_load_cpu_ms", cpuMs], ["config_load_ms", ms]] as const;
  for (const [of, values] of ratios) {
    emit({ figure: "compare_after_before", filter, of, pods: options.pods, value: round(values.after / values.before), aa_control: round(values.before_again / values.before) });
  }
  log(`${filter} ${options.pods} pods configure, main-thread CPU ms: ${BUILDS.map((b) => `${b} ${round(threadMs[b], 1)}`).join(", ")} (process CPU ${BUILDS.map((b) => round(cpuMs[b], 1)).join(" / ")}, wall ${BUILDS.map((b) => round(ms[b], 1)).join(" / ")})`);
}

const options = readOptions(process.argv.slice(2));
const began = performance.now();
for (const subject of options.filters) compare(subject, options);
log(`compare_config_load done in ${Math.round((performance.now() - began) / 1000)} s`);

// Two builds of the filters side by side in one process: the same host, the same snapshots, the
// same connection streams, batches taken in turns, so that a change to the filters (not the
// machine's load at the moment) is what a ratio shows. Written for issue 15 ("decision cost and
// the 20k-open-connection ratio unchanged"): `before` is a checkout of the commit before the
// mutable mesh model, built in its own worktree; `after` is this one.
//
// Per filter (the subjects of subjects.ts), three VMs per configuration: `before`, `after`, and
// `before_again` (a second VM of the before build: the A/A control, i.e. the run-to-run noise of
// a ratio taken this way). Each round times one batch of every VM, in an order that rotates from
// round to round (so no VM always runs right after the same other one), and every cost is the
// lower quartile of its batches (vm.ts: lowQuartile).
// - decision cost at each size: the three 1k-pod VMs are kept and timed in turns with the three
//   VMs of every larger size, which gives the per-size cost and the size ÷ 1k ratio of each
//   build (pods_curve.ts's scale_cost_ratio) from the same rounds;
// - open connections: a loaded and an idle 1k-pod VM per build, timed in turns at 0 and at 20k
//   held connections; ratio = (loaded ÷ idle at 20k) ÷ (loaded ÷ idle at 0), as in
//   open_connections.ts.
// Figures (one JSON line each, bench/emit.ts; BENCH_RESULTS picks the results file):
// compare_decision_cost (per build and size), compare_scale_ratio, compare_open_ratio,
// compare_route_cost (guest code per route at the largest size), and compare_after_before
// (after ÷ before next to before_again ÷ before, the A/A control, for each of them).
//
// Not part of `npm run bench`: a clean clone has no second build. Usage:
//   node --import tsx bench/scale/compare_builds.ts BEFORE_BUILD_DIR AFTER_BUILD_DIR \
//     [--sizes 1000,100000,1000000] [--rounds 300] [--filters passthrough_mtls,...] [--open 20000]
import { readFileSync } from "node:fs";
import { basename, join } from "node:path";
import type { Connection } from "../../host/index.js";
import { emit } from "../emit.js";
import { buildSnapshot, type Snapshot } from "../lib/mesh_snapshot.js";
import { openUntil } from "./open_connections.js";
import type { Subject } from "./subjects.js";
import { BUILDS, intOption, readCompareArgs, type Build } from "./compare_args.js";
import type { ConnectOptions } from "../../host/index.js";
import { hostCallTimer } from "../lib/host_call_timer.js";
import { drawConnections } from "./subjects.js";
import { checkRoutes, configureVm, guestBatch, log, lowQuartile, round, vmBatch, type Vm } from "./vm.js";

interface Options {
  readonly dirs: Record<Build, string>;
  readonly sizes: readonly number[];
  readonly rounds: number;
  readonly batch: number;
  readonly warmUp: number;
  readonly open: number;
  readonly filters: readonly Subject[];
}

function readOptions(argv: readonly string[]): Options {
  const args = readCompareArgs(argv, "compare_builds.ts BEFORE_BUILD_DIR AFTER_BUILD_DIR [--sizes 1000,100000] [--rounds N] [--filters a,b] [--open N]", ["sizes", "rounds", "open"]);
  const sizes = (args.values.sizes ?? "1000,100000").split(",").map(Number);
  if (sizes.some((n) => !Number.isInteger(n) || n < 100) || sizes[0] !== 1_000) throw new Error("--sizes: integers ≥ 100, starting with 1000");
  return {
    dirs: args.dirs,
    sizes,
    rounds: intOption(args, "rounds", 300, 1),
    batch: 25,
    warmUp: 5_000,
    open: intOption(args, "open", 20_000, 0),
    filters: args.filters,
  };
}

type Trio = Record<Build, Vm>;

function wasmOf(dir: string, subject: Subject): Uint8Array {
  return new Uint8Array(readFileSync(join(dir, basename(subject.wasm))));
}

let trios = 0;

/**
 * One VM per build on `snapshot`, each checked to take every route; throws naming the build.
 * The creation order rotates from trio to trio: in a first run the earliest-made VM of a process
 * that had already run other filters stayed ~25% slower for its whole life (its A/A twin showed
 * it), so no build may always be the first one made.
 */
function trio(subject: Subject, snapshot: Snapshot, options: Options): Trio {
  const out: Partial<Trio> = {};
  const first = trios++ % BUILDS.length;
  for (let k = 0; k < BUILDS.length; k++) {
    const build = BUILDS[(first + k) % BUILDS.length]!;
    const { vm, ms, error } = configureVm(wasmOf(options.dirs[build], subject), subject, snapshot);
    if (vm === undefined) throw new Error(`${subject.name} ${build} (${options.dirs[build]}) at ${snapshot.pods} pods: configure failed: ${error}`);
    const wrong = checkRoutes(vm, snapshot);
    if (wrong !== undefined) throw new Error(`${subject.name} ${build} at ${snapshot.pods} pods: ${wrong}`);
    log(`${subject.name} ${build} ${snapshot.pods} pods: configured in ${Math.round(ms)} ms, ${(vm.host.guestMemoryBytes / 1048576).toFixed(1)} MiB`);
    vmBatch(vm, options.warmUp);
    out[build] = vm;
  }
  return out as Trio;
}

/** `rounds` rounds over `vms`, each round one batch of each in a rotated order; lower quartiles. */
function inTurns(vms: readonly Vm[], rounds: number, batch: number, time: (vm: Vm, n: number) => number): number[] {
  const series = vms.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < vms.length; k++) {
      const i = (r + k) % vms.length;
      series[i]!.push(time(vms[i]!, batch));
    }
  }
  return series.map(lowQuartile);
}

/** Guest code alone (vm.ts: guestBatch) over a fixed list of connections, µs per connection. */
function guestList(vm: Vm, connections: readonly ConnectOptions[]): number {
  const { host } = vm;
  const guestBefore = host.guestTimeNs;
  const hostBefore = hostCallTimer.ns;
  hostCallTimer.enabled = true;
  try {
    for (const options of connections) host.connect(options).end();
  } finally {
    hostCallTimer.enabled = false;
  }
  vm.made += connections.length;
  return Number(host.guestTimeNs - guestBefore - (hostCallTimer.ns - hostBefore)) / 1000 / connections.length;
}

/**
 * Guest code per route at the largest size, in turns: which decision a change in the mixed
 * figure comes from (found the double membership walk of passthrough_mtls's headless route).
 */
function routeCosts(subject: Subject, snapshot: Snapshot, vms: Trio, options: Options): void {
  const list = BUILDS.map((b) => vms[b]);
  for (const route of subject.routes) {
    const batches = Array.from({ length: 40 }, (_, k) => drawConnections(subject, snapshot, options.batch, route, 100 + k));
    let n = 0;
    const costs = inTurns(list, options.rounds, options.batch, (vm) => guestList(vm, batches[Math.floor(n++ / list.length) % batches.length]!));
    const values = Object.fromEntries(BUILDS.map((b, i) => [b, costs[i]!])) as Record<Build, number>;
    emit({ figure: "compare_route_cost", filter: subject.name, pods: snapshot.pods, route: route.name, ...Object.fromEntries(BUILDS.map((b) => [`${b}_guest_us`, round(values[b])])) });
    afterBefore(subject.name, "route_cost_guest", { pods: snapshot.pods, route: route.name }, values);
  }
}

function afterBefore(filter: string, figure: string, extra: Record<string, unknown>, values: Record<Build, number>): void {
  emit({
    figure: "compare_after_before",
    filter,
    of: figure,
    ...extra,
    value: round(values.after / values.before),
    aa_control: round(values.before_again / values.before),
  });
}

function decisionCosts(subject: Subject, options: Options): void {
  const filter = subject.name;
  const [smallest, ...larger] = options.sizes;
  const small = trio(subject, buildSnapshot(smallest!, subject.own), options);
  const smallVms = BUILDS.map((b) => small[b]);
  const phases = larger.length === 0 ? [undefined] : larger;
  for (const pods of phases) {
    const bigSnapshot = pods === undefined ? undefined : buildSnapshot(pods, subject.own);
    const big = bigSnapshot === undefined ? undefined : trio(subject, bigSnapshot, options);
    const vms = big === undefined ? smallVms : [...smallVms, ...BUILDS.map((b) => big[b])];
    const costs = inTurns(vms, options.rounds, options.batch, vmBatch);
    const guest = inTurns(vms, options.rounds, options.batch, guestBatch);
    const at = (offset: number) => Object.fromEntries(BUILDS.map((b, i) => [b, costs[offset + i]!])) as Record<Build, number>;
    const guestAt = (offset: number) => Object.fromEntries(BUILDS.map((b, i) => [b, guest[offset + i]!])) as Record<Build, number>;
    const sizes = big === undefined ? [smallest!] : [smallest!, pods!];
    sizes.forEach((size, s) => {
      const vm = at(s * BUILDS.length);
      const g = guestAt(s * BUILDS.length);
      for (const build of BUILDS) {
        emit({ figure: "compare_decision_cost", filter, pods: size, alongside_pods: pods, build, vm_us: round(vm[build]), guest_us: round(g[build]) });
      }
      afterBefore(filter, "decision_cost_vm", { pods: size, alongside_pods: pods }, vm);
      afterBefore(filter, "decision_cost_guest", { pods: size, alongside_pods: pods }, g);
      log(`${filter} ${size} pods: ${BUILDS.map((b) => `${b} ${round(vm[b])} us (guest ${round(g[b])})`).join(", ")}`);
    });
    if (big !== undefined) {
      const ratio = Object.fromEntries(BUILDS.map((b, i) => [b, costs[BUILDS.length + i]! / costs[i]!])) as Record<Build, number>;
      emit({ figure: "compare_scale_ratio", filter, pods, baseline_pods: smallest, ...Object.fromEntries(BUILDS.map((b) => [b, round(ratio[b])])) });
      afterBefore(filter, "scale_cost_ratio", { pods, baseline_pods: smallest }, ratio);
      if (pods === larger[larger.length - 1]) routeCosts(subject, bigSnapshot!, big, options);
      for (const build of BUILDS) if (big[build].host.failed) throw new Error(`${filter} ${build} at ${pods} pods: the VM trapped: ${big[build].host.trapMessage}`);
    }
  }
}

function openRatio(subject: Subject, options: Options): void {
  const filter = subject.name;
  const snapshot = buildSnapshot(1_000, subject.own);
  const loaded = trio(subject, snapshot, options);
  const idle = trio(subject, snapshot, options);
  // loaded before, idle before, loaded after, idle after, ...: each pair side by side in a round.
  const vms = BUILDS.flatMap((b) => [loaded[b], idle[b]]);
  const relative = (costs: number[]) => Object.fromEntries(BUILDS.map((b, i) => [b, costs[2 * i]! / costs[2 * i + 1]!])) as Record<Build, number>;
  const atZero = relative(inTurns(vms, options.rounds, options.batch, vmBatch));
  const held: Connection[] = [];
  for (const build of BUILDS) openUntil(loaded[build], held, options.open);
  const atOpen = relative(inTurns(vms, options.rounds, options.batch, vmBatch));
  const ratio = Object.fromEntries(BUILDS.map((b) => [b, atOpen[b] / atZero[b]])) as Record<Build, number>;
  for (const build of BUILDS) {
    const live = loaded[build].host.liveContexts - 1;
    if (live < options.open) throw new Error(`${filter} ${build}: only ${live} of ${options.open} connections stayed open`);
    if (loaded[build].host.failed) throw new Error(`${filter} ${build}: the VM trapped: ${loaded[build].host.trapMessage}`);
  }
  for (const connection of held) connection.end();
  emit({ figure: "compare_open_ratio", filter, open: options.open, baseline_open: 0, ...Object.fromEntries(BUILDS.map((b) => [b, round(ratio[b])])) });
  afterBefore(filter, "open_connections_ratio", { open: options.open }, ratio);
  log(`${filter} ${options.open} open ÷ 0 open: ${BUILDS.map((b) => `${b} ${round(ratio[b])}`).join(", ")}`);
}

const options = readOptions(process.argv.slice(2));
const began = performance.now();
for (const subject of options.filters) {
  decisionCosts(subject, options);
  openRatio(subject, options);
}
log(`compare_builds done in ${Math.round((performance.now() - began) / 1000)} s`);

// Per filter, against the number of pods in the configuration (1k, 10k, 100k, 1M; quick: up to
// 100k): decision cost per connection (inside the VM and guest code alone), VM linear memory per
// pod after configure, and configuration load time / throughput. Every larger size alternates
// its batches with the 1k VM's, so the cost ratio compares moments with the same machine load
// (the machine is shared; a drift of tens of percent between moments is normal). Costs are
// lower quartiles of batch times (vm.ts: lowQuartile).
import { emit } from "../emit.js";
import { buildSnapshot, type Snapshot } from "../lib/mesh_snapshot.js";
import { footprint } from "./footprint.js";
import { drawConnections, type Subject } from "./subjects.js";
import { checkRoutes, configureVm, guestBatch, listBatch, log, lowQuartile, round, vmBatch, type Vm } from "./vm.js";

export const MEMORY_TARGET_BYTES_PER_POD = 64;
export const COST_RATIO_TARGET = 2;
const ROUTE_SAMPLES = 40;

export interface CurveOptions {
  readonly sizes: readonly number[];
  readonly batch: number;
  readonly rounds: number;
  readonly warmUp: number;
  /** The size whose snapshot also gives the configuration-footprint figure. */
  readonly footprintPods: number;
}

/** Configure `subject` with a `pods`-pod snapshot and emit its load and memory figures. */
function load(wasm: Uint8Array, subject: Subject, pods: number, options: CurveOptions): { vm?: Vm; snapshot: Snapshot } {
  const t = performance.now();
  const snapshot = buildSnapshot(pods, subject.own);
  const buildMs = performance.now() - t;
  if (pods === options.footprintPods) footprint(subject, snapshot);
  const configBytes = snapshot.config.length;
  const { vm, ms, error } = configureVm(wasm, subject, snapshot);
  const filter = subject.name;
  if (vm === undefined) {
    log(`${filter} ${pods} pods: CONFIGURE FAILED after ${Math.round(ms)} ms: ${error}`);
    emit({ figure: "config_load", filter, pods, config_bytes: configBytes, error });
    emit({ figure: "scale_vm_memory", filter, pods, error });
    return { snapshot };
  }
  const memory = vm.host.guestMemoryBytes;
  log(
    `${filter} ${pods} pods: ${(configBytes / 1e6).toFixed(1)} MB config (generated in ${Math.round(buildMs)} ms), ` +
      `configured in ${Math.round(ms)} ms, linear memory ${(memory / 1048576).toFixed(1)} MiB`,
  );
  emit({ figure: "config_load", filter, pods, config_bytes: configBytes, ms: round(ms, 1), mb_per_s: round(configBytes / 1e6 / (ms / 1000), 1) });
  const perPod = memory / pods;
  emit({
    figure: "scale_vm_memory",
    filter,
    pods,
    bytes_per_pod: round(perPod, 1),
    linear_memory_bytes: memory,
    target: MEMORY_TARGET_BYTES_PER_POD,
    met: perPod <= MEMORY_TARGET_BYTES_PER_POD,
  });
  const wrong = checkRoutes(vm, snapshot);
  if (wrong !== undefined) {
    log(`${filter} ${pods} pods: ROUTE CHECK FAILED: ${wrong}`);
    emit({ figure: "scale_decision_cost", filter, pods, error: `route check failed: ${wrong}` });
    return { snapshot };
  }
  return { vm, snapshot };
}

interface Measured {
  readonly vm: number;
  readonly guest: number;
  /** Ratios to the baseline's batches taken in turns with these (NaN without a baseline). */
  readonly vmRatio: number;
  readonly guestRatio: number;
}

/** Batches of one VM, or of a VM and the baseline taken in turns; lower quartiles (see vm.ts). */
function measure(vm: Vm, baseline: Vm | undefined, options: CurveOptions): Measured {
  vmBatch(vm, options.warmUp);
  if (baseline) vmBatch(baseline, options.batch);
  const series = { vm: [] as number[], guest: [] as number[], baseVm: [] as number[], baseGuest: [] as number[] };
  for (let r = 0; r < options.rounds; r++) {
    series.vm.push(vmBatch(vm, options.batch));
    if (baseline) series.baseVm.push(vmBatch(baseline, options.batch));
    series.guest.push(guestBatch(vm, options.batch));
    if (baseline) series.baseGuest.push(guestBatch(baseline, options.batch));
  }
  const vmCost = lowQuartile(series.vm);
  const guest = lowQuartile(series.guest);
  return { vm: vmCost, guest, vmRatio: vmCost / lowQuartile(series.baseVm), guestRatio: guest / lowQuartile(series.baseGuest) };
}

/** Cost of each route alone, so the mixed figure can be read: which decision costs what. */
function routeCosts(vm: Vm, snapshot: Snapshot, options: CurveOptions): void {
  for (const route of vm.subject.routes) {
    const connections = drawConnections(vm.subject, snapshot, options.batch, route, 23);
    const samples = Array.from({ length: ROUTE_SAMPLES }, () => listBatch(vm, connections));
    emit({ figure: "scale_route_cost", filter: vm.subject.name, pods: vm.pods, route: route.name, vm_us: round(lowQuartile(samples)) });
  }
}

/** Runs the curve for one filter; returns the 1k-pod VM (for the open-connections figures). */
export function podsCurve(wasm: Uint8Array, subject: Subject, options: CurveOptions): Vm | undefined {
  const filter = subject.name;
  const [smallest, ...larger] = options.sizes;
  const { vm: baseline, snapshot: smallSnapshot } = load(wasm, subject, smallest!, options);
  if (baseline !== undefined) {
    const alone = measure(baseline, undefined, options);
    routeCosts(baseline, smallSnapshot, options);
    emit({ figure: "scale_decision_cost", filter, pods: baseline.pods, vm_us: round(alone.vm), guest_us: round(alone.guest) });
    log(`${filter} ${baseline.pods} pods: ${round(alone.vm)} us in the VM, ${round(alone.guest)} us guest code`);
  }
  const largest = larger[larger.length - 1];
  for (const pods of larger) {
    const { vm } = load(wasm, subject, pods, options);
    if (vm === undefined) {
      if (pods === largest) emit({ figure: "scale_cost_ratio", filter, pods, error: `no measurement at ${pods} pods (see config_load / scale_decision_cost)` });
      continue;
    }
    const m = measure(vm, baseline, options);
    emit({ figure: "scale_decision_cost", filter, pods, vm_us: round(m.vm), guest_us: round(m.guest) });
    log(`${filter} ${pods} pods: ${round(m.vm)} us in the VM, ${round(m.guest)} us guest code (x${round(m.vmRatio)} / x${round(m.guestRatio)} the 1k VM alongside)`);
    if (vm.host.failed) emit({ figure: "scale_decision_cost", filter, pods, error: `the VM trapped: ${vm.host.trapMessage}` });
    if (pods === largest) {
      if (baseline === undefined) {
        emit({ figure: "scale_cost_ratio", filter, pods, error: `the ${smallest}-pod baseline did not configure` });
      } else {
        const value = m.vmRatio;
        emit({
          figure: "scale_cost_ratio",
          filter,
          pods,
          baseline_pods: baseline.pods,
          value: round(value),
          guest_only: round(m.guestRatio),
          target: COST_RATIO_TARGET,
          met: value <= COST_RATIO_TARGET,
        });
      }
    }
  }
  return baseline;
}

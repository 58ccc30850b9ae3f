// Per filter, decision cost per connection against the number of connections already open on
// the same VM (0, 1k, 5k, 10k, 20k; quick: 0 and 20k), 1k pods. A second, idle VM (no
// connection held) is timed in turns with the loaded one, and the ratio is taken against it at
// each level, so machine-load drift between levels cancels:
//   open_connections_ratio = (loaded at 20k / idle alongside) / (loaded at 0 / idle alongside),
// each cost the lower quartile of its batch times (vm.ts: lowQuartile).
import type { Connection } from "../../host/index.js";
import { emit } from "../emit.js";
import { buildSnapshot } from "../lib/mesh_snapshot.js";
import type { Subject } from "./subjects.js";
import { configureVm, log, lowQuartile, round, vmBatch, type Vm } from "./vm.js";

export const OPEN_RATIO_TARGET = 1.5;
const WARM_UP = 5_000;

export interface OpenOptions {
  readonly levels: readonly number[];
  readonly batch: number;
  readonly rounds: number;
}

/** Holds connections of the mixed stream until `level` contexts are open (closed ones do not count). */
export function openUntil(vm: Vm, held: Connection[], level: number): void {
  const { host, mixed } = vm;
  for (let guard = 0; host.liveContexts - 1 < level && guard < level * 4; guard++) {
    const connection = host.connect(mixed[vm.made % mixed.length]);
    vm.made++;
    if (!connection.closed) held.push(connection);
  }
}

export function openConnections(wasm: Uint8Array, subject: Subject, idle: Vm | undefined, options: OpenOptions): void {
  const filter = subject.name;
  const snapshot = buildSnapshot(idle?.pods ?? 1_000, subject.own);
  const { vm: loaded, error } = configureVm(wasm, subject, snapshot);
  if (loaded === undefined || idle === undefined) {
    const why = error ?? "the 1k-pod VM did not configure";
    emit({ figure: "open_connections_cost", filter, error: why });
    emit({ figure: "open_connections_ratio", filter, error: why });
    return;
  }
  vmBatch(loaded, WARM_UP); // JIT tiers and allocator growth before the first level
  const held: Connection[] = [];
  const relative = new Map<number, number>();
  for (const level of options.levels) {
    openUntil(loaded, held, level);
    const mine: number[] = [];
    const theirs: number[] = [];
    for (let r = 0; r < options.rounds; r++) {
      mine.push(vmBatch(loaded, options.batch));
      theirs.push(vmBatch(idle, options.batch));
    }
    const open = loaded.host.liveContexts - 1;
    const [cost, idleCost] = [lowQuartile(mine), lowQuartile(theirs)];
    relative.set(level, cost / idleCost);
    emit({ figure: "open_connections_cost", filter, open: level, live_contexts: open, vm_us: round(cost), idle_vm_us: round(idleCost) });
    log(`${filter} ${open} open: ${round(cost)} us in the VM (idle VM alongside: ${round(idleCost)} us)`);
  }
  if (loaded.host.failed) emit({ figure: "open_connections_cost", filter, error: `the VM trapped: ${loaded.host.trapMessage}` });
  for (const connection of held) connection.end();
  const first = options.levels[0]!;
  const last = options.levels[options.levels.length - 1]!;
  const value = relative.get(last)! / relative.get(first)!;
  emit({ figure: "open_connections_ratio", filter, open: last, baseline_open: first, value: round(value), target: OPEN_RATIO_TARGET, met: value <= OPEN_RATIO_TARGET });
}

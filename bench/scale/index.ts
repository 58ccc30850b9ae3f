// Host scale curves for every filter (see pods_curve.ts, open_connections.ts, footprint.ts):
// the compiled filters in the proxy-wasm host, configured with generated mesh snapshots.
import { readFile } from "node:fs/promises";
import { openConnections } from "./open_connections.js";
import { podsCurve } from "./pods_curve.js";
import { meshUpdateBench } from "./mesh_update.js";
import { meshCraftedBench } from "./mesh_crafted.js";
import { SUBJECTS } from "./subjects.js";
import { log } from "./vm.js";

// Small batches, many rounds: a batch of 25 connections spends well under 1 ms in the VM, short
// next to a scheduler time slice, so on a loaded machine (2 cores, load 10 measured while
// writing this) most batches still run undisturbed and the lower quartile finds them
// (vm.ts: lowQuartile). Batches of 1,000 were hit almost every time and moved ratios by 2-4x.
export async function scaleBench({ quick }: { quick: boolean }): Promise<void> {
  const began = performance.now();
  const curve = quick
    ? { sizes: [1_000, 10_000, 100_000], batch: 25, rounds: 100, warmUp: 3_000, footprintPods: 100_000 }
    : { sizes: [1_000, 10_000, 100_000, 1_000_000], batch: 25, rounds: 200, warmUp: 10_000, footprintPods: 100_000 };
  const open = quick
    ? { levels: [0, 20_000], batch: 25, rounds: 100 }
    : { levels: [0, 1_000, 5_000, 10_000, 20_000], batch: 25, rounds: 150 };
  for (const subject of SUBJECTS) {
    const wasm = new Uint8Array(await readFile(subject.wasm));
    const baseline = podsCurve(wasm, subject, curve);
    openConnections(wasm, subject, baseline, open);
  }
  // The mesh model's update path (issue 15): full loads, delta batches, memory under churn.
  await meshUpdateBench({ quick });
  // The decoder's worst inputs (largest lists, maximum declared limits) against ordinary full
  // messages of the same size: time and memory per byte.
  await meshCraftedBench({ quick });
  log(`done in ${Math.round((performance.now() - began) / 1000)} s`);
}

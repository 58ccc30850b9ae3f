// The snapshot path's filter check, on the event loop and in the feed's check worker
// (feed/src/check_worker.ts), for the same rendered JSON. One JSON line per size:
//   feed_check_event_loop   onLoopMs: the compiled filter configured on the event loop (every
//                           timer, poll and request waits that long); workerMs: the same check
//                           awaited from the worker; maxLoopGapMs: the longest the event loop did
//                           not turn meanwhile (a 1 ms timer's largest gap: the text's copy to the
//                           worker and the machine's scheduling); the best of 3 rounds each
//   feed_render_event_loop  the whole snapshot render (view, JSON, digest, check) of the same
//                           mesh: wholeOnLoopMs, the view (view.ts) and the JSON made at once
//                           on the event loop, as the feed did before; slicedMs, the render as
//                           the feed makes it now (render_slices.ts: each object's JSON in
//                           slices on the event loop, the join, digest and check in the worker),
//                           awaited; maxLoopGapMs the longest the event loop did not turn
//                           meanwhile; the best of 3 rounds each
import { join } from "node:path";
import { WorkerValidator } from "../../feed/src/check_worker.js";
import { FilterValidator } from "../../feed/src/validate.js";
import type { NetworkView } from "../../feed/src/delta/network_view.js";
import type { ComputedMesh } from "../../feed/src/mesh_model.js";
import { renderPluginConfig } from "../../feed/src/render.js";
import { viewFor } from "../../feed/src/view.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { emit } from "../emit.js";

const wasmFor = (f: string) => join(REPO_ROOT, "build", `${f}.wasm`);
const round = (x: number) => Math.round(x * 10) / 10;

export async function checkLoop(pods: number, jsonText: string, rounds = 3): Promise<void> {
  const here = new FilterValidator(wasmFor);
  const worker = new WorkerValidator(wasmFor);
  let onLoopMs = Infinity;
  let workerMs = Infinity;
  let maxLoopGapMs = Infinity;
  try {
    if (!(await worker.check("passthrough_mtls", '{"workloads":[],"services":[]}')).ok) throw new Error("the check worker refused an empty mesh");
    for (let r = 0; r < rounds; r++) {
      const t = performance.now();
      const a = here.check("passthrough_mtls", jsonText);
      onLoopMs = Math.min(onLoopMs, performance.now() - t);
      const inWorker = await loopGap(() => worker.check("passthrough_mtls", jsonText));
      const b = inWorker.result;
      workerMs = Math.min(workerMs, inWorker.ms);
      maxLoopGapMs = Math.min(maxLoopGapMs, inWorker.maxGapMs);
      if (!a.ok || !b.ok) throw new Error(`the bench mesh was refused: ${a.error ?? b.error}`);
    }
  } finally {
    await worker.stop();
  }
  const [load1] = (await import("node:os")).loadavg();
  emit({ figure: "feed_check_event_loop", pods, jsonBytes: Buffer.byteLength(jsonText), onLoopMs: round(onLoopMs), workerMs: round(workerMs), maxLoopGapMs: round(maxLoopGapMs), load1: round(load1) });
}

/** The longest the event loop does not turn while `work` runs (a 1 ms timer's largest gap). */
async function loopGap<T>(work: () => Promise<T>): Promise<{ result: T; ms: number; maxGapMs: number }> {
  let last = performance.now();
  let gap = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    gap = Math.max(gap, now - last);
    last = now;
  }, 1);
  const t = performance.now();
  const result = await work();
  const ms = performance.now() - t;
  clearInterval(timer);
  return { result, ms, maxGapMs: Math.max(gap, performance.now() - last) };
}

export async function renderLoop(pods: number, view: NetworkView, mesh: ComputedMesh, rounds = 3): Promise<void> {
  const worker = new WorkerValidator(wasmFor);
  let wholeOnLoopMs = Infinity;
  let slicedMs = Infinity;
  let maxLoopGapMs = Infinity;
  let jsonBytes = 0;
  try {
    for (let r = 0; r < rounds; r++) {
      const t = performance.now();
      const whole = renderPluginConfig("passthrough_mtls", view.network, {}, viewFor(mesh, view.network).snapshot);
      wholeOnLoopMs = Math.min(wholeOnLoopMs, performance.now() - t);
      const sliced = await loopGap(() => worker.render("passthrough_mtls", view.network, {}, view));
      if (!sliced.result.verdict.ok) throw new Error(`the bench mesh was refused: ${sliced.result.verdict.error}`);
      if (sliced.result.rendered?.digest !== whole.digest) throw new Error("the sliced render differs from the whole one");
      jsonBytes = whole.bytes;
      slicedMs = Math.min(slicedMs, sliced.ms);
      maxLoopGapMs = Math.min(maxLoopGapMs, sliced.maxGapMs);
    }
  } finally {
    await worker.stop();
  }
  const [load1] = (await import("node:os")).loadavg();
  emit({ figure: "feed_render_event_loop", pods, jsonBytes, wholeOnLoopMs: round(wholeOnLoopMs), slicedMs: round(slicedMs), maxLoopGapMs: round(maxLoopGapMs), load1: round(load1) });
}

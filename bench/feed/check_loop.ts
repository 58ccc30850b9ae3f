// The snapshot path's filter check, on the event loop and in the feed's check worker
// (feed/src/check_worker.ts), for the same rendered JSON. One JSON line per size:
//   feed_check_event_loop   onLoopMs: the compiled filter configured on the event loop (every
//                           timer, poll and request waits that long); workerMs: the same check
//                           awaited from the worker; maxLoopGapMs: the longest the event loop did
//                           not turn meanwhile (a 1 ms timer's largest gap: the text's copy to the
//                           worker and the machine's scheduling); the best of 3 rounds each
import { join } from "node:path";
import { WorkerValidator } from "../../feed/src/check_worker.js";
import { FilterValidator } from "../../feed/src/validate.js";
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
      let t = performance.now();
      const a = here.check("passthrough_mtls", jsonText);
      onLoopMs = Math.min(onLoopMs, performance.now() - t);
      let last = performance.now();
      let gap = 0;
      const timer = setInterval(() => {
        const now = performance.now();
        gap = Math.max(gap, now - last);
        last = now;
      }, 1);
      t = performance.now();
      const b = await worker.check("passthrough_mtls", jsonText);
      workerMs = Math.min(workerMs, performance.now() - t);
      clearInterval(timer);
      maxLoopGapMs = Math.min(maxLoopGapMs, Math.max(gap, performance.now() - last));
      if (!a.ok || !b.ok) throw new Error(`the bench mesh was refused: ${a.error ?? b.error}`);
    }
  } finally {
    await worker.stop();
  }
  const [load1] = (await import("node:os")).loadavg();
  emit({ figure: "feed_check_event_loop", pods, jsonBytes: Buffer.byteLength(jsonText), onLoopMs: round(onLoopMs), workerMs: round(workerMs), maxLoopGapMs: round(maxLoopGapMs), load1: round(load1) });
}

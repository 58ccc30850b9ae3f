// A fuzz worker process (forked by parallel.ts): runs each chunk it is sent and answers with
// the chunk's report. One session (VMs) per target, reused across that target's chunks.
import { readFileSync } from "node:fs";
import type { Job } from "./parallel.js";
import { runCases } from "./run.js";
import { FuzzSession } from "./session.js";
import { targetByName } from "./targets.js";

const sessions = new Map<string, FuzzSession>();
const modules = new Map<string, Uint8Array>();

process.on("message", (job: Job) => {
  const target = targetByName(job.target);
  let wasm = modules.get(target.filter);
  if (wasm === undefined) {
    wasm = new Uint8Array(readFileSync(new URL(`../../build/${target.filter}.wasm`, import.meta.url)));
    modules.set(target.filter, wasm);
  }
  let session = sessions.get(job.target);
  const fresh = session === undefined;
  if (session === undefined) {
    session = new FuzzSession(target, wasm);
    sessions.set(job.target, session);
  }
  const warmup = fresh ? Math.min(job.warmup, job.count) : 0;
  process.send!(runCases({ target, wasm, seed: job.seed, start: job.start, count: job.count, warmup, save: job.save, session }));
});
process.send!("ready");

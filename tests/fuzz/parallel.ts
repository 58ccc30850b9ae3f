// Spreads a fuzz run over worker processes (one per core by default): the cases of every target
// are cut into chunks, interleaved, and handed to whichever worker is free. A worker keeps one
// session (its VMs) per target across chunks, so only its first chunk of a target warms up.
// Used by scripts/fuzz.ts (the long run) and tests/fuzz/fuzz.test.ts (the bounded slice).
import { fork } from "node:child_process";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { memoryProblem, type RunReport } from "./run.js";
import type { Target } from "./targets.js";

export interface Job {
  readonly target: string;
  readonly start: number;
  readonly count: number;
  readonly seed: number;
  readonly save: boolean;
  /** Cases before the memory baseline, in the first chunk of a target in a worker. */
  readonly warmup: number;
}

export interface ParallelOptions {
  readonly targets: readonly Target[];
  readonly cases: number;
  /** First case index (default 0): cases first..first+cases-1 run. */
  readonly first?: number;
  readonly seed: number;
  readonly jobs?: number;
  readonly chunk?: number;
  readonly save?: boolean;
  readonly warmup?: number;
  /** Called after each chunk (progress output). */
  readonly onChunk?: (report: RunReport) => void;
}

/** Chunks merged, and how many of them grew a VM (and were then run a second time). */
export type MergedReport = RunReport & { chunks: number; growthChunks: number };

export interface ParallelResult {
  readonly reports: Map<string, MergedReport>;
  /** Every problem: oracle failures (with the saved file) and memory growth. */
  readonly problems: string[];
  readonly wallSeconds: number;
}

const WORKER = fileURLToPath(new URL("./worker.ts", import.meta.url));

function merge(into: MergedReport, report: RunReport): void {
  into.chunks++;
  if (report.replay) into.growthChunks++;
  into.cases += report.cases;
  into.configCases += report.configCases;
  into.accepted += report.accepted;
  into.connectionCases += report.connectionCases;
  into.traps += report.traps;
  into.seconds += report.seconds;
  into.failures.push(...report.failures);
  for (const [k, v] of Object.entries(report.outcomes)) into.outcomes[k] = (into.outcomes[k] ?? 0) + v;
  into.memory.connectionEnd = Math.max(into.memory.connectionEnd, report.memory.connectionEnd);
  into.memory.configEnd = Math.max(into.memory.configEnd, report.memory.configEnd);
}

export async function runParallel(options: ParallelOptions): Promise<ParallelResult> {
  const chunk = options.chunk ?? 50_000;
  const queue: Job[] = [];
  const first = options.first ?? 0;
  for (let start = 0; start < options.cases; start += chunk) {
    for (const t of options.targets) {
      queue.push({
        target: t.name,
        start: first + start,
        count: Math.min(chunk, options.cases - start),
        seed: options.seed,
        save: options.save ?? true,
        warmup: options.warmup ?? 20_000,
      });
    }
  }
  const reports = new Map<string, MergedReport>();
  const problems: string[] = [];
  const started = Date.now();
  const workers = Math.max(1, Math.min(options.jobs ?? availableParallelism(), queue.length));
  await Promise.all(
    Array.from(
      { length: workers },
      () =>
        new Promise<void>((resolve, reject) => {
          const child = fork(WORKER, [], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
          let current: Job | undefined;
          const next = () => {
            current = queue.shift();
            if (current) child.send(current);
            else child.disconnect();
          };
          child.on("message", (message: RunReport | "ready") => {
            if (message !== "ready") {
              const memory = memoryProblem(message);
              if (memory) problems.push(memory);
              for (const f of message.failures) problems.push(`${f.target} case ${f.index}: ${f.problem}${f.file ? ` (saved: ${f.file})` : ""}`);
              options.onChunk?.(message);
              const merged = reports.get(message.target);
              if (merged) merge(merged, message);
              else reports.set(message.target, { ...message, failures: [...message.failures], chunks: 1, growthChunks: message.replay ? 1 : 0 });
            }
            next();
          });
          child.on("exit", (code, signal) => {
            // A worker that dies (a crash, the JS heap limit) loses its chunk: a problem, not a pass.
            if (current !== undefined || (code !== 0 && code !== null) || signal !== null) {
              const job = current ? `${current.target} cases ${current.start}..${current.start + current.count - 1}` : "no chunk";
              problems.push(`fuzz worker died (status ${code}, signal ${signal}) while running ${job}`);
            }
            resolve();
          });
          child.on("error", reject);
        }),
    ),
  );
  return { reports, problems, wallSeconds: (Date.now() - started) / 1000 };
}

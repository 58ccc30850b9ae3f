// npm run fuzz: the long fuzz run (docs/fuzzing.md). Every target (probe, passthrough_mtls,
// tunnel_port client and server, waypoint_route) gets --cases seeded cases, in chunks spread
// over one worker process per core; each worker reuses its VMs across the chunks of a target.
// Prints one JSON line per target ({"figure":"fuzz", ...}) and one per problem; failing cases
// are saved under tests/fuzz/regressions/<target>/. Exit status 1 on any problem, 2 on a usage
// error.
//   tsx scripts/fuzz.ts [--cases N] [--filter NAME] [--seed S] [--jobs J] [--chunk C] [--no-save]
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { memoryProblem, runCases, type RunReport } from "../tests/fuzz/run.js";
import { FuzzSession } from "../tests/fuzz/session.js";
import { TARGETS, targetByName, type Target } from "../tests/fuzz/targets.js";

interface Job {
  readonly target: string;
  readonly start: number;
  readonly count: number;
  readonly seed: number;
  readonly save: boolean;
}

const WARMUP = 20_000;

function usage(message: string): never {
  console.error(`fuzz: ${message}\nusage: tsx scripts/fuzz.ts [--cases N] [--filter NAME] [--seed S] [--jobs J] [--chunk C] [--no-save]`);
  process.exit(2);
}

function parseArgs(argv: string[]) {
  const options = {
    cases: 1_000_000,
    filter: undefined as string | undefined,
    seed: process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31),
    jobs: availableParallelism(),
    chunk: 50_000,
    save: true,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) usage(`${flag} needs a value`);
      return v;
    };
    const integer = (v: string) => {
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < 0) usage(`${flag}: not a non-negative integer: ${v}`);
      return n;
    };
    if (flag === "--cases") options.cases = integer(value());
    else if (flag === "--filter") options.filter = value();
    else if (flag === "--seed") options.seed = integer(value());
    else if (flag === "--jobs") options.jobs = Math.max(1, integer(value()));
    else if (flag === "--chunk") options.chunk = Math.max(1, integer(value()));
    else if (flag === "--no-save") options.save = false;
    else usage(`unknown argument ${flag}`);
  }
  if (!Number.isSafeInteger(options.seed)) usage(`FUZZ_SEED is not an integer: ${process.env.FUZZ_SEED}`);
  return options;
}

/** --filter takes a target name or a filter name (tunnel_port = both roles). */
function selectTargets(filter: string | undefined): Target[] {
  if (filter === undefined) return [...TARGETS];
  const selected = TARGETS.filter((t) => t.name === filter || t.filter === filter);
  if (selected.length === 0) usage(`unknown filter ${filter}; known: ${TARGETS.map((t) => t.name).join(", ")}`);
  return selected;
}

// ---- worker: runs the chunks it is sent, one session per target --------------------------------

function worker(): void {
  const sessions = new Map<string, FuzzSession>();
  process.on("message", (job: Job) => {
    const target = targetByName(job.target);
    const wasm = new Uint8Array(readFileSync(`build/${target.filter}.wasm`));
    let session = sessions.get(job.target);
    const fresh = session === undefined;
    if (session === undefined) {
      session = new FuzzSession(target, wasm);
      sessions.set(job.target, session);
    }
    const report = runCases({ target, wasm, seed: job.seed, start: job.start, count: job.count, warmup: fresh ? Math.min(WARMUP, job.count) : 0, save: job.save, session });
    process.send!(report);
  });
  process.send!("ready");
}

// ---- parent: hands chunks to the workers and merges their reports ----------------------------

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const targets = selectTargets(options.filter);
  console.log(JSON.stringify({ fuzz: "start", seed: options.seed, cases_per_target: options.cases, targets: targets.map((t) => t.name), jobs: options.jobs }));
  // interleave targets so every worker keeps a session per target and the load stays even
  const jobs: Job[] = [];
  for (let start = 0; start < options.cases; start += options.chunk) {
    for (const t of targets) jobs.push({ target: t.name, start, count: Math.min(options.chunk, options.cases - start), seed: options.seed, save: options.save });
  }
  const merged = new Map<string, RunReport & { chunks: number }>();
  const problems: string[] = [];
  const started = Date.now();
  const script = fileURLToPath(import.meta.url);
  await Promise.all(
    Array.from({ length: Math.min(options.jobs, jobs.length) }, () =>
      new Promise<void>((resolve, reject) => {
        const child = fork(script, ["--worker"], { execArgv: ["--import", "tsx"] });
        const next = () => {
          const job = jobs.shift();
          if (job) child.send(job);
          else child.disconnect();
        };
        child.on("message", (message: RunReport | "ready") => {
          if (message !== "ready") {
            const report = message;
            const memory = memoryProblem(report);
            if (memory) problems.push(memory);
            for (const f of report.failures) problems.push(`${f.target} case ${f.index}: ${f.problem}${f.file ? ` (saved: ${f.file})` : ""}`);
            const m = merged.get(report.target);
            if (!m) merged.set(report.target, { ...report, chunks: 1 });
            else {
              m.chunks++;
              m.cases += report.cases;
              m.configCases += report.configCases;
              m.accepted += report.accepted;
              m.connectionCases += report.connectionCases;
              m.traps += report.traps;
              m.seconds += report.seconds;
              m.failures.push(...report.failures);
              for (const [k, v] of Object.entries(report.outcomes)) m.outcomes[k] = (m.outcomes[k] ?? 0) + v;
              m.memory.connectionEnd = Math.max(m.memory.connectionEnd, report.memory.connectionEnd);
              m.memory.configEnd = Math.max(m.memory.configEnd, report.memory.configEnd);
            }
          }
          next();
        });
        child.on("exit", (code) => (code === 0 || code === null ? resolve() : reject(new Error(`fuzz worker exited with ${code}`))));
        child.on("error", reject);
      }),
    ),
  );
  const wall = (Date.now() - started) / 1000;
  for (const [name, m] of merged) {
    console.log(
      JSON.stringify({
        figure: "fuzz",
        target: name,
        cases: m.cases,
        config_cases: m.configCases,
        configs_accepted: m.accepted,
        connection_cases: m.connectionCases,
        outcomes: m.outcomes,
        problems: m.failures.length,
        traps: m.traps,
        cpu_seconds: Number(m.seconds.toFixed(1)),
        cases_per_cpu_second: Math.round(m.cases / m.seconds),
        vm_memory_bytes: { connection: m.memory.connectionEnd, config: m.memory.configEnd },
      }),
    );
  }
  for (const p of problems.slice(0, 200)) console.log(JSON.stringify({ problem: p }));
  console.log(JSON.stringify({ fuzz: "end", seed: options.seed, wall_seconds: Number(wall.toFixed(1)), problems: problems.length }));
  process.exitCode = problems.length ? 1 : 0;
}

if (process.argv.includes("--worker")) worker();
else await main();

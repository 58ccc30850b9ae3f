// npm run fuzz: the long fuzz run (docs/fuzzing.md). Every target (probe, passthrough_mtls,
// tunnel_port client and server, waypoint_route) gets --cases seeded cases, in chunks spread
// over one worker process per core (tests/fuzz/parallel.ts); each worker reuses its VMs across
// the chunks of a target.
// Prints one JSON line per target ({"figure":"fuzz", ...}) and one per problem; failing cases
// are saved under tests/fuzz/regressions/<target>/. Exit status 1 on any problem, 2 on a usage
// error.
//   tsx scripts/fuzz.ts [--cases N] [--first I] [--filter NAME] [--seed S] [--jobs J] [--chunk C] [--no-save]
//   (--first: start at case I, to rerun a range of a run exactly)
//   tsx scripts/fuzz.ts --replay tests/fuzz/regressions/<target>/<file>.json   (one saved case)
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { caseFromJson } from "../tests/fuzz/cases.js";
import { runParallel } from "../tests/fuzz/parallel.js";
import { replay, type Regression } from "../tests/fuzz/run.js";
import { TARGETS, targetByName, type Target } from "../tests/fuzz/targets.js";

function usage(message: string): never {
  console.error(
    `fuzz: ${message}\nusage: tsx scripts/fuzz.ts [--cases N] [--first I] [--filter NAME] [--seed S] [--jobs J] [--chunk C] [--no-save]\n` +
      "       tsx scripts/fuzz.ts --replay <saved case .json>",
  );
  process.exit(2);
}

function parseArgs(argv: string[]) {
  const options = {
    cases: 1_000_000,
    first: 0,
    filter: undefined as string | undefined,
    seed: process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31),
    jobs: availableParallelism(),
    chunk: 50_000,
    save: true,
    replay: undefined as string | undefined,
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
    else if (flag === "--first") options.first = integer(value());
    else if (flag === "--filter") options.filter = value();
    else if (flag === "--seed") options.seed = integer(value());
    else if (flag === "--jobs") options.jobs = Math.max(1, integer(value()));
    else if (flag === "--chunk") options.chunk = Math.max(1, integer(value()));
    else if (flag === "--no-save") options.save = false;
    else if (flag === "--replay") options.replay = value();
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

/** Replays one saved case in fresh VMs: prints the problem it still shows, or that it passes. */
function replayFile(file: string): void {
  const regression = caseFromJson(JSON.parse(readFileSync(file, "utf8"))) as Regression;
  const wasm = new Uint8Array(readFileSync(`build/${targetByName(regression.target).filter}.wasm`));
  const problem = replay(regression, wasm);
  console.log(JSON.stringify({ replay: file, target: regression.target, saved_problem: regression.problem, problem: problem ?? null }));
  process.exitCode = problem ? 1 : 0;
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  if (options.replay !== undefined) return replayFile(options.replay);
  const targets = selectTargets(options.filter);
  console.log(JSON.stringify({ fuzz: "start", seed: options.seed, cases_per_target: options.cases, targets: targets.map((t) => t.name), jobs: options.jobs }));
  const done = new Map<string, number>();
  const onChunk = (r: { target: string; cases: number; failures: unknown[] }) => {
    done.set(r.target, (done.get(r.target) ?? 0) + r.cases);
    console.error(`fuzz: ${r.target} ${done.get(r.target)}/${options.cases}${r.failures.length ? `, ${r.failures.length} problem(s) in this chunk` : ""}`);
  };
  const result = await runParallel({ targets, cases: options.cases, first: options.first, seed: options.seed, jobs: options.jobs, chunk: options.chunk, save: options.save, onChunk });
  for (const [name, m] of result.reports) {
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
        chunks_that_grew_a_vm: `${m.growthChunks}/${m.chunks}`,
      }),
    );
  }
  for (const p of result.problems.slice(0, 200)) console.log(JSON.stringify({ problem: p }));
  const total = [...result.reports.values()].reduce((n, m) => n + m.cases, 0);
  console.log(
    JSON.stringify({
      fuzz: "end",
      seed: options.seed,
      cases: total,
      wall_seconds: Number(result.wallSeconds.toFixed(1)),
      cases_per_second: Math.round(total / result.wallSeconds),
      problems: result.problems.length,
    }),
  );
  process.exitCode = result.problems.length ? 1 : 0;
}

await main();

// Runs a range of seeded cases against one target and reports counts, outcomes, problems and
// the VMs' memory after warm-up and at the end. A failing case is saved as a regression file
// (tests/fuzz/regressions/<target>/...) that the bounded test replays. Used by scripts/fuzz.ts
// (one call per chunk, in several processes) and by tests/fuzz/fuzz.test.ts.
import { mkdirSync, readdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { caseFromJson, caseToJson, generateCase, type FuzzCase } from "./cases.js";
import { caseSeed, Rng } from "./rng.js";
import { FuzzSession } from "./session.js";
import { targetByName, type Target } from "./targets.js";

export const REGRESSIONS_DIR = new URL("./regressions/", import.meta.url).pathname;

export interface Failure {
  readonly target: string;
  readonly index: number;
  readonly problem: string;
  readonly file?: string;
}

export interface RunReport {
  readonly target: string;
  readonly seed: number;
  cases: number;
  configCases: number;
  accepted: number;
  connectionCases: number;
  outcomes: Record<string, number>;
  failures: Failure[];
  traps: number;
  /** Linear memory (bytes) of the connection and configuration VMs after warm-up and at the end. */
  memory: { connectionAfterWarmup: number; connectionEnd: number; configAfterWarmup: number; configEnd: number };
  /**
   * When a VM grew after the baseline, the cases after the baseline run again (up to three
   * more passes, until one does not grow): both VMs' memory before and after the last pass.
   */
  replay?: { connectionBefore: number; connectionAfter: number; configBefore: number; configAfter: number; cases: number };
  seconds: number;
}

export interface RunOptions {
  readonly target: Target;
  readonly wasm: Uint8Array;
  readonly seed: number;
  /** First case index and how many cases (case i uses caseSeed(seed, i)). */
  readonly start: number;
  readonly count: number;
  /** Cases before the memory baseline is taken. */
  readonly warmup: number;
  /** Save failing cases (default true). */
  readonly save?: boolean;
  /** Where to save them (default REGRESSIONS_DIR). */
  readonly regressionsDir?: string;
  /** Reuse a session (same process, same target). */
  readonly session?: FuzzSession;
}

/** A problem's shape without its numbers: at most a few saved files per shape and run. */
const signature = (problem: string) => problem.replace(/\d+/g, "N").slice(0, 90);

export function runCases(options: RunOptions): RunReport {
  const { target, seed } = options;
  const session = options.session ?? new FuzzSession(target, options.wasm);
  const report: RunReport = {
    target: target.name,
    seed,
    cases: 0,
    configCases: 0,
    accepted: 0,
    connectionCases: 0,
    outcomes: {},
    failures: [],
    traps: 0,
    memory: { connectionAfterWarmup: 0, connectionEnd: 0, configAfterWarmup: 0, configEnd: 0 },
    seconds: 0,
  };
  const saved = new Map<string, number>();

  const started = process.hrtime.bigint();
  const trapsBefore = session.traps;
  for (let i = options.start; i < options.start + options.count; i++) {
    if (report.cases === options.warmup) {
      const m = session.memory();
      report.memory.connectionAfterWarmup = m.connection;
      report.memory.configAfterWarmup = m.config;
    }
    const c = generateCase(target, session.configBase, new Rng(caseSeed(seed, i)));
    const result = session.run(c);
    report.cases++;
    if (c.kind === "config") {
      report.configCases++;

      if (result.accepted) report.accepted++;
    } else {
      report.connectionCases++;
      if (result.outcome) report.outcomes[result.outcome] = (report.outcomes[result.outcome] ?? 0) + 1;
    }
    if (result.problem) {
      const key = signature(result.problem);
      const count = saved.get(key) ?? 0;
      saved.set(key, count + 1);
      const file = options.save !== false && count < 3 ? saveRegression(options.regressionsDir ?? REGRESSIONS_DIR, target, seed, i, result.problem, c, session.baseBytes) : undefined;
      report.failures.push({ target: target.name, index: i, problem: result.problem, ...(file ? { file } : {}) });
    }
  }
  const m = session.memory();
  report.memory.connectionEnd = m.connection;
  report.memory.configEnd = m.config;
  if (report.cases <= options.warmup) {
    report.memory.connectionAfterWarmup = m.connection;
    report.memory.configAfterWarmup = m.config;
  }
  const grew = report.memory.configEnd > report.memory.configAfterWarmup || report.memory.connectionEnd > report.memory.connectionAfterWarmup;
  if (grew && report.traps === 0) {
    // Growth or high-water mark? The same cases once more: a VM that keeps nothing per case has
    // already grown to what they need (garbage included) and must not grow again.
    // The allocator may need two passes to settle (fragmentation, grow-by-current-size), so up
    // to three: memory that still grows in the third pass grows with every pass.
    const first = options.start + Math.min(options.warmup, options.count);
    let before = session.memory();
    let after = before;
    for (let pass = 0; pass < 3; pass++) {
      before = after;
      for (let i = first; i < options.start + options.count; i++) session.run(generateCase(target, session.configBase, new Rng(caseSeed(seed, i))));
      after = session.memory();
      if (after.connection === before.connection && after.config === before.config) break;
    }
    report.replay = {
      connectionBefore: before.connection,
      connectionAfter: after.connection,
      configBefore: before.config,
      configAfter: after.config,
      cases: options.start + options.count - first,
    };
  }
  report.traps = session.traps - trapsBefore;
  report.seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return report;
}

/**
 * Memory oracle: no growth after warm-up, unless a trap replaced a VM (the trap is reported).
 * Linear memory never shrinks and keeps the high-water mark of the most demanding case seen:
 * what a configuration needs depends on its content (20,000 workloads need more than a 1 MB
 * string), and a filter that allocates per connection (probe) peaks with the garbage between
 * two collections; the allocator may take two passes over the same cases to settle. So a VM
 * may grow to what new cases need, but must stop growing when the same cases run again, at the
 * latest in the third extra pass: a VM that keeps something per case would keep growing.
 */
export function memoryProblem(report: RunReport): string | undefined {
  const r = report.replay;
  if (report.traps > 0 || r === undefined) return undefined;
  const m = report.memory;
  if (r.connectionAfter > r.connectionBefore) {
    return `${report.target}: connection VM grew from ${m.connectionAfterWarmup} to ${m.connectionEnd} bytes after warm-up, and again from ${r.connectionBefore} to ${r.connectionAfter} in the last of up to three more passes over the same ${r.cases} cases`;
  }
  if (r.configAfter > r.configBefore) {
    return `${report.target}: configuration VM grew from ${m.configAfterWarmup} to ${m.configEnd} bytes after warm-up, and again from ${r.configBefore} to ${r.configAfter} in the last of up to three more passes over the same ${r.cases} cases`;
  }
  return undefined;
}

// ---- saved regressions -------------------------------------------------------------------------

export interface Regression {
  readonly target: string;
  readonly seed: number;
  readonly index: number;
  readonly problem: string;
  /** The configuration the connection VM ran with (base64 JSON), for connection cases. */
  readonly baseConfig: Uint8Array;
  readonly case: FuzzCase;
}

function saveRegression(root: string, target: Target, seed: number, index: number, problem: string, c: FuzzCase, baseConfig: Uint8Array): string {
  const dir = join(root, target.name);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `seed${seed}-case${index}.json`);
  const body = { target: target.name, seed, index, problem, baseConfig, case: c };
  writeFileSync(file, JSON.stringify(caseToJson(body), null, 1) + "\n");
  return file;
}

export function loadRegressions(root = REGRESSIONS_DIR): { file: string; regression: Regression }[] {
  if (!existsSync(root)) return [];
  const out: { file: string; regression: Regression }[] = [];
  for (const dir of readdirSync(root, { withFileTypes: true })) {
    if (!dir.isDirectory()) continue;
    for (const name of readdirSync(join(root, dir.name)).sort()) {
      if (!name.endsWith(".json")) continue;
      const file = join(root, dir.name, name);
      out.push({ file, regression: caseFromJson(JSON.parse(readFileSync(file, "utf8"))) as Regression });
    }
  }
  return out;
}

/** Replays one saved case in fresh VMs; returns the problem it still shows, or undefined. */
export function replay(regression: Regression, wasm: Uint8Array): string | undefined {
  const base = JSON.parse(new TextDecoder().decode(regression.baseConfig)) as Record<string, unknown>;
  const session = new FuzzSession(targetByName(regression.target), wasm, base);
  return session.run(regression.case).problem;
}

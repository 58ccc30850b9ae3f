// Every benchmark figure is one JSON line on stdout, so runs can be diffed and charted, and the
// same line is appended to build/bench/results.jsonl, which the report (bench/report/) is
// rendered from. `npm run bench` truncates that file when it starts (startResults).
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/** BENCH_RESULTS names another file, for a part run alone beside a full run (callgrind_run.ts). */
export const RESULTS_FILE = process.env.BENCH_RESULTS ?? "build/bench/results.jsonl";

export function startResults(file = RESULTS_FILE): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, "");
}

export function emit(figure: Record<string, unknown>): void {
  const clean = Object.fromEntries(Object.entries(figure).filter(([, value]) => value !== undefined));
  const line = `${JSON.stringify(clean)}\n`;
  process.stdout.write(line);
  mkdirSync(dirname(RESULTS_FILE), { recursive: true });
  appendFileSync(RESULTS_FILE, line);
}

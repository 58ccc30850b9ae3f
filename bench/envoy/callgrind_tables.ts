// Markdown tables for docs/envoy-cpu-profile.md from one or two instruction-count runs.
//
//   npx tsx bench/envoy/callgrind_tables.ts RUN_A.jsonl [RUN_B.jsonl]
//
// Each file is a results file of bench/envoy/callgrind.ts (`npm run bench` writes
// build/bench/results.jsonl; `callgrind_run.ts` with BENCH_RESULTS writes another). Prints:
//   - every ratio of each run, side by side, with its target and verdict;
//   - what one Envoy filter-state object and one wasm property cost on the plain path;
//   - the two batches of every arm (repeatability), with the event-loop wake-ups per batch.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { fixed } from "./number_format.js";

type Figure = Record<string, unknown>;

export function load(file: string): Figure[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Figure);
}

const armKey = (f: Figure) => JSON.stringify([f.filter, f.variant, f.path, !!f.control]);
const ratioKey = (f: Figure) => JSON.stringify([f.filter, f.path, f.variant, f.baseline_filter, f.baseline, !!f.control]);

function byKey(figures: Figure[], figure: string, key: (f: Figure) => string, measured: boolean): Map<string, Figure> {
  return new Map(figures.filter((f) => f.figure === figure && (!measured || "value" in f)).map((f) => [key(f), f]));
}

/** An instruction count, rounded half to even, with thousands separators. */
const n = (value: unknown) => fixed(value as number, 0, { grouped: true });

export function tables(runs: Figure[][]): string[] {
  const names = ["run 1", "run 2"].slice(0, runs.length);
  const out: string[] = [];
  out.push("| arm ÷ baseline | path | " + names.map((name) => `${name}: arm vs baseline (ratio)`).join(" | ") + " | target |");
  out.push("|---|---|" + "---|".repeat(runs.length) + "---|");
  const allRatios = runs.map((r) => byKey(r, "envoy_instructions_ratio", ratioKey, true));
  for (const [k, first] of allRatios[0] ?? []) {
    const cells = allRatios.map((ratios) => {
      const f = ratios.get(k);
      return f ? `${n(f.arm_value)} vs ${n(f.baseline_value)} (**${fixed(f.value as number, 3)}**)` : "not measured";
    });
    const { filter, variant, baseline_filter: baseFilter, baseline, control } = first;
    // the baseline's filter is named only when it is another filter's arm
    const label = `${control ? "control" : filter} ${variant} ÷ ${baseFilter !== filter ? baseFilter : ""} ${baseline}`.replaceAll("  ", " ");
    out.push(`| ${label} | ${first.path} | ${cells.join(" | ")} | ${first.target ?? "-"} |`);
  }

  out.push("");
  out.push("Per-value cost on the plain path (fixtures, instructions per connection over newconn_min):");
  runs.forEach((run, i) => {
    const arms = byKey(run, "envoy_instructions", armKey, true);
    const arm = (filter: string, variant: string) => arms.get(armKey({ filter, variant, path: "plain" }))?.value as number | undefined;
    const base = arm("fixture_newconn_min", "with");
    const fs = arm("fixture_newconn_fs", "with");
    const prop = arm("fixture_newconn_prop", "with");
    const without = arm("passthrough_mtls", "without");
    if (base !== undefined && fs !== undefined && prop !== undefined && without !== undefined) {
      out.push(
        `- ${names[i]}: without ${n(without)}, newconn_min ${n(base)} (+${n(base - without)}), ` +
          `one set_envoy_filter_state +${n(fs - base)}, one set_property +${n(prop - base)}`,
      );
    }
  });

  out.push("");
  out.push("| arm | path | " + names.map((name) => `${name}: batch 1 / batch 2 (deviation; wake-ups)`).join(" | ") + " |");
  out.push("|---|---|" + "---|".repeat(runs.length));
  const repeats = runs.map((r) => byKey(r, "envoy_instructions_repeat", armKey, false));
  for (const [k, first] of repeats[0] ?? []) {
    const cells = repeats.map((rep) => {
      const f = rep.get(k);
      if (!f) return "not measured";
      const perRun = f.per_run as number[];
      const wake = f.wakeups_per_batch as number[] | undefined;
      const wakeText = wake && wake.length > 0 ? `; ${wake[0]} / ${wake[1]}` : "";
      return `${n(perRun[0])} / ${n(perRun[1])} (${fixed((f.deviation as number) * 100, 2)}%${wakeText})`;
    });
    out.push(`| ${first.control ? "control" : first.filter} ${first.variant} | ${first.path} | ${cells.join(" | ")} |`);
  }
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("usage: npx tsx bench/envoy/callgrind_tables.ts RUN_A.jsonl [RUN_B.jsonl]");
    process.exit(2);
  }
  for (const line of tables(files.map(load))) console.log(line);
}

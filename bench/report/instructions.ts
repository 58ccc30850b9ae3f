// The real-Envoy instruction counts (bench/envoy/callgrind.ts): instructions per connection of
// the sidecar's worker thread under callgrind, per arm and path, the ratios against the native
// config (or no filter), their targets, and how well two batches of the same arm agree.
import { FLOOR_FIXTURE } from "../envoy/floors.js";
import { measured, named, num, str, type Figure, type Results } from "./results.js";

const NOT_MEASURED = "not measured";

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

const int = (value: unknown): string => {
  const n = num(value);
  return n === undefined ? NOT_MEASURED : Math.round(n).toLocaleString("en-US");
};
const ratio = (value: unknown): string => {
  const n = num(value);
  return n === undefined ? NOT_MEASURED : n.toFixed(3);
};
const pct = (value: unknown): string => {
  const n = num(value);
  return n === undefined ? NOT_MEASURED : `${(n * 100).toFixed(2)}%`;
};

/** "passthrough_mtls / plain", "control (A/A) / plain". */
export function instructionArm(f: Figure): string {
  return `${f.control ? "control (A/A)" : str(f.filter)} / ${str(f.path)}`;
}

function verdict(f: Figure): string {
  if (f.error !== undefined) return "failed";
  if (typeof f.met !== "boolean") return "no target";
  return f.met ? "**met**" : "**missed**";
}

/**
 * A missed target's floor: the path's floor fixture against the same baseline (FLOOR_FIXTURE),
 * and what the filter adds on top of it, when both were measured in this run.
 */
function floorNote(f: Figure, ratios: Figure[]): string {
  const fixture = FLOOR_FIXTURE[`${str(f.filter)}/${str(f.path)}`];
  if (fixture === undefined || f.met !== false) return "";
  const floor = ratios.find((r) => r.filter === fixture && r.path === f.path && r.baseline === f.baseline && r.baseline_filter === f.baseline_filter && r.error === undefined);
  if (floor === undefined) return "";
  const over = (num(f.value) ?? NaN) / (num(floor.value) ?? NaN);
  return `: floor ${ratio(floor.value)} (\`${fixture}\`, the least a wasm filter doing this job costs in Envoy), the filter ×${over.toFixed(3)} over it`;
}

/** Rows for the Targets table: each instruction ratio that has a target (or failed). */
export function instructionTargetRows(results: Results): string[][] {
  const ratios = named(results, "envoy_instructions_ratio");
  return ratios
    .filter((f) => f.target !== undefined || f.error !== undefined)
    .map((f) => [
      `${str(f.filter)} (${str(f.path)})`,
      `real Envoy, instructions per connection (callgrind), ${str(f.variant)} ÷ ${str(f.baseline)} (target ${str(f.target)})`,
      f.error !== undefined ? "failed" : ratio(f.value),
      verdict(f) + floorNote(f, ratios),
    ]);
}

/**
 * The paths outside 1%, with what each batch opened upstream (a new pooled connection or TLS
 * handshake explains a jump) and how often the worker's event loop woke up (the same connections
 * in more wake-ups cost more: the loop's own work per wake-up).
 */
function missedRepeats(repeats: Figure[]): string {
  const missed = repeats.filter((f) => f.met === false);
  if (missed.length === 0) return "";
  const perBatch = (value: unknown) => (Array.isArray(value) ? value.map(int).join(" / ") : NOT_MEASURED);
  const rows = missed.map((f) => `${instructionArm(f)} ${str(f.variant)} ${pct(f.deviation)} (upstream connections ${perBatch(f.upstream_cx_per_batch)}, TLS handshakes ${perBatch(f.tls_handshakes_per_batch)}, event-loop wake-ups ${perBatch(f.wakeups_per_batch)})`);
  return ` Outside 1%: ${rows.join("; ")}.`;
}

export function instructionsSection(results: Results): string {
  const heading = "### Instructions per connection (callgrind)";
  const arms = named(results, "envoy_instructions");
  const ratios = named(results, "envoy_instructions_ratio");
  if (arms.length === 0 && ratios.length === 0) return `${heading}\n\nInstruction counts (\`envoy_instructions\`): ${NOT_MEASURED} in this run.`;
  const wall = named(results, "envoy_instructions_wall").at(-1);
  const intro =
    "Each arm's sidecar runs under `valgrind --tool=callgrind` and serves the same fixed sequence of connections, opened one at a time by a client outside valgrind; " +
    "counting starts after start-up, configuration and a warm-up batch, and each path is measured in two batches. The figure is the worker thread's instructions per connection " +
    "(the thread that serves every connection; the main thread's timers run by the clock, not per connection). Instructions do not depend on what else the machine runs, so these " +
    "ratios resolve the few percent that the wall-clock figures below cannot." +
    (wall ? ` This part took ${int(wall.seconds)} s of wall time (${int(wall.warmup)} warm-up + 2 × ${int(wall.connections)} measured connections per path; load average ${str(wall.load_average)} at its end).` : "");
  const armRows = arms.map((f) =>
    f.error !== undefined
      ? [instructionArm(f), str(f.variant), "failed", "", "", ""]
      : [
          instructionArm(f),
          str(f.variant),
          int(f.value),
          Array.isArray(f.per_run) ? f.per_run.map(int).join(" / ") : NOT_MEASURED,
          int(f.all_threads_value),
          pct(f.idle_share),
        ],
  );
  const ratioRows = ratios.map((f) =>
    f.error !== undefined
      ? [instructionArm(f), `${str(f.variant)} ÷ ${str(f.baseline)}`, "failed", "", "", str(f.why)]
      : [instructionArm(f), `${str(f.variant)} ÷ ${str(f.baseline)}`, ratio(f.value), `${(num(f.added_per_conn) ?? 0) >= 0 ? "+" : ""}${int(f.added_per_conn)}`, f.target === undefined ? "-" : `${str(f.target)}: ${verdict(f)}`, str(f.why)],
  );
  const repeats = measured(results, "envoy_instructions_repeat");
  const worst = repeats.reduce<Figure | undefined>((a, b) => ((num(b.deviation) ?? 0) > (num(a?.deviation) ?? -1) ? b : a), undefined);
  const repeatLine = worst
    ? `Repeatability (\`envoy_instructions_repeat\`): the two batches of an arm differ by at most ${pct(worst.deviation)} (${instructionArm(worst)}, ${str(worst.variant)}); ` +
      `${repeats.filter((f) => f.met === true).length} of ${repeats.length} paths agree within 1%.` +
      missedRepeats(repeats)
    : `Repeatability (\`envoy_instructions_repeat\`): ${NOT_MEASURED}.`;
  return [
    heading,
    intro,
    table(["arm / path", "variant", "instructions per connection (worker)", "batch 1 / batch 2", "all threads", "idle share"], armRows),
    "`idle share`: what the worker does with no connection at all (measured for 2 s after the batches), scaled to a batch's wall time, as a share of the figure: how much of it is not per-connection work.",
    table(["arm / path", "ratio", "value", "instructions added per connection", "target", "compares"], ratioRows),
    repeatLine,
    "Where the difference goes, per path, from the call graph: [docs/envoy-cpu-profile.md](envoy-cpu-profile.md).",
  ].join("\n\n");
}

// docs/benchmarks.md from the figures: the machine, every target (met / missed / not measured),
// then one table per figure family with every expected cell present: a figure that is missing
// reads "not measured", one that failed reads "failed" with its error listed below the table.
import { ENVOY_METRICS, type Chart } from "./charts.js";
import { CONTROL_LABEL, envoyValues, isControl, VARIANTS } from "./envoy_values.js";
import { instructionsSection, instructionTargetRows } from "./instructions.js";
import { measured, named, num, str, type Figure, type Results } from "./results.js";

export const FILTERS = ["passthrough_mtls", "tunnel_port_client", "tunnel_port_server", "waypoint_route"];
const FULL_SIZES = [1_000, 10_000, 100_000, 1_000_000];
const FULL_OPEN = [0, 1_000, 5_000, 10_000, 20_000];
const NOT_MEASURED = "not measured";

function fmt(value: number | undefined, digits = 3): string {
  if (value === undefined) return NOT_MEASURED;
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString("en-US");
  return String(Number(value.toPrecision(digits)));
}

function pods(n: number): string {
  return n >= 1_000_000 ? `${n / 1_000_000}M` : n >= 1_000 ? `${n / 1_000}k` : String(n);
}

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

function median(values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** The figure of `name` matching `key`, or why there is none: "failed" (error) or not measured. */
function cell(results: Results, name: string, key: Record<string, unknown>, field: string, digits = 3): string {
  const all = named(results, name).filter((f) => Object.entries(key).every(([k, v]) => f[k] === v));
  const good = all.find((f) => f.error === undefined && num(f[field]) !== undefined);
  if (good) return fmt(num(good[field]), digits);
  return all.some((f) => f.error !== undefined) ? "failed" : NOT_MEASURED;
}

function verdict(f: Figure | undefined): string {
  if (f === undefined) return NOT_MEASURED;
  if (f.error !== undefined || typeof f.met !== "boolean") return "failed";
  return f.met ? "**met**" : "**missed**";
}

/** A real-Envoy ratio's verdict; the A/A control's says it is two identical sidecars, not a filter. */
function envoyVerdict(f: Figure): string {
  if (f.target === undefined && f.error === undefined) return "no target";
  return isControl(f) ? `${verdict(f)} by two identical sidecars (noise; see Noise floor)` : verdict(f);
}

const envoyFilter = (f: Figure): string => (isControl(f) ? CONTROL_LABEL : str(f.filter));

function runSection(results: Results): string {
  const run = named(results, "run").at(-1);
  if (run === undefined) return "Machine: not recorded (the results file has no `run` figure).";
  const rows = [
    ["date (UTC)", str(run.date)],
    ["run", run.quick ? "`npm run bench -- --quick` (quick: fewer sizes and levels)" : "`npm run bench` (full)"],
    ["CPU", `${str(run.cpu)}, ${str(run.cores)} cores`],
    ["memory", `${str(run.memory_gb)} GB`],
    ["OS", str(run.os)],
    ["Node.js (V8: the host-emulator figures)", str(run.node)],
    ["Envoy (the real-Envoy figures)", str(run.envoy)],
    ["load average at start (1, 5, 15 min)", Array.isArray(run.load_average) ? run.load_average.join(", ") : ""],
  ];
  const end = named(results, "run_end").at(-1);
  if (end) rows.push(["duration", `${fmt(num(end.seconds))} s`]);
  return table(["", ""], rows);
}

function targetsSection(results: Results): string {
  const rows: string[][] = [];
  const lastOf = (name: string, filter: string) => named(results, name).filter((f) => f.filter === filter).at(-1);
  for (const filter of FILTERS) {
    const ratio = lastOf("scale_cost_ratio", filter);
    rows.push([filter, `decision cost at ${ratio && num(ratio.pods) ? pods(num(ratio.pods)!) : "1M"} / 1k pods ≤ 2`, ratio?.error ? "failed" : fmt(num(ratio?.value)), verdict(ratio)]);
    const memory = measured(results, "scale_vm_memory").filter((f) => f.filter === filter).sort((a, b) => (num(a.pods) ?? 0) - (num(b.pods) ?? 0)).at(-1);
    rows.push([
      filter,
      `VM memory ≤ 64 B/pod${memory ? ` (at ${pods(num(memory.pods) ?? 0)} pods)` : ""}`,
      memory ? `${fmt(num(memory.bytes_per_pod))} B` : NOT_MEASURED,
      verdict(memory ?? lastOf("scale_vm_memory", filter)),
    ]);
    const open = lastOf("open_connections_ratio", filter);
    rows.push([filter, "cost with 20k open / 0 open ≤ 1.5", open?.error ? "failed" : fmt(num(open?.value)), verdict(open)]);
  }
  for (const f of named(results, "envoy_ab_ratio").filter((x) => x.target !== undefined || x.error !== undefined)) {
    const unit = str(f.unit) === "us" ? " µs" : "";
    const where = `${envoyFilter(f)}${f.path ? ` (${str(f.path)})` : ""}`;
    const compared = f.variant ? `, ${str(f.variant)} vs ${str(f.baseline)}` : "";
    rows.push([where, `real Envoy: ${str(f.metric)}${compared} (target ${str(f.target)}${unit})`, f.error ? "failed" : `${fmt(num(f.value))}${unit}`, envoyVerdict(f)]);
  }
  if (!named(results, "envoy_ab_ratio").some((f) => !isControl(f))) rows.push(["all", "real Envoy with/without ratios", NOT_MEASURED, NOT_MEASURED]);
  rows.push(...instructionTargetRows(results));
  if (named(results, "envoy_instructions_ratio").length === 0) rows.push(["all", "real Envoy instructions per connection (callgrind) ratios", NOT_MEASURED, NOT_MEASURED]);
  for (const f of named(results, "vm_cost_ratio_open_vs_idle").filter((x) => x.target !== undefined)) {
    rows.push([str(f.runtime), `runtime (no-op filter): cost with ${fmt(num(f.open_connections))} open / 0 open ≤ 1.5`, fmt(num(f.value)), verdict(f)]);
  }
  return table(["filter", "target", "measured", "verdict"], rows);
}

function sizesOf(results: Results, name: string, field: string, full: number[]): number[] {
  const seen = new Set(named(results, name).map((f) => num(f[field])).filter((n): n is number => n !== undefined));
  return [...new Set([...full, ...seen])].sort((a, b) => a - b);
}

function scaleSection(results: Results): string {
  const sizes = sizesOf(results, "scale_decision_cost", "pods", FULL_SIZES);
  const cost = table(
    ["filter", ...sizes.map((n) => `${pods(n)} pods: VM / guest µs`)],
    FILTERS.map((filter) => [filter, ...sizes.map((n) => `${cell(results, "scale_decision_cost", { filter, pods: n }, "vm_us")} / ${cell(results, "scale_decision_cost", { filter, pods: n }, "guest_us")}`)]),
  );
  const memory = table(
    ["filter", ...sizes.map((n) => `${pods(n)} pods: B/pod`)],
    FILTERS.map((filter) => [filter, ...sizes.map((n) => cell(results, "scale_vm_memory", { filter, pods: n }, "bytes_per_pod"))]),
  );
  const load = table(
    ["filter", ...sizes.map((n) => `${pods(n)} pods: MB / ms / MB/s`)],
    FILTERS.map((filter) => [
      filter,
      ...sizes.map((n) => {
        const bytes = cell(results, "config_load", { filter, pods: n }, "config_bytes");
        const mb = bytes === NOT_MEASURED || bytes === "failed" ? bytes : fmt(Number(bytes.replaceAll(",", "")) / 1e6);
        return `${mb} / ${cell(results, "config_load", { filter, pods: n }, "ms")} / ${cell(results, "config_load", { filter, pods: n }, "mb_per_s")}`;
      }),
    ]),
  );
  const levels = sizesOf(results, "open_connections_cost", "open", FULL_OPEN);
  const open = table(
    ["filter", ...levels.map((n) => `${fmt(n)} open: µs`)],
    FILTERS.map((filter) => [filter, ...levels.map((n) => cell(results, "open_connections_cost", { filter, open: n }, "vm_us"))]),
  );
  const routeFigures = measured(results, "scale_route_cost");
  const routes = table(
    ["filter", "pods", "µs inside the VM per route"],
    FILTERS.map((filter) => {
      const of = routeFigures.filter((f) => f.filter === filter);
      const at = of.length ? pods(num(of[0]!.pods) ?? 0) : NOT_MEASURED;
      return [filter, at, of.length ? of.map((f) => `${str(f.route)} ${fmt(num(f.vm_us))}`).join(", ") : NOT_MEASURED];
    }),
  );
  return [
    "### Decision cost per connection vs pods",
    "µs per connection (context create → on_new_connection → close → done/log/delete) over a mixed stream of the filter's routes, the lower quartile of batches of 25 connections (on a shared machine another process only ever slows a batch down): inside the VM (guest code plus the host emulator's handling of the host calls it makes) / guest code alone. Each larger size is timed in turns with the 1k-pod VM; the ratio targets divide such paired figures.",
    cost,
    "Each route alone, on the smallest configuration (the mixed figure above weights them; routes that pick an endpoint of a service rank its endpoints):",
    routes,
    "### VM linear memory per pod after configure",
    "Linear memory never shrinks, so this is configure's peak: the mesh model, the build's spare (1/16 and 256 KB) and ~0.5 MB of fixed cost (the runtime, the windows the configuration is read through: it is never whole in linear memory), which dominates at 1k and 10k pods. The filters share one mesh model (tunnel_port's own pod-membership index, 8 B/pod, is gone since the model became mutable: it asks the model's memberships). What the build keeps per pod is in assembly/mesh/README.md; what each per-pod memory figure of the project measures, in docs/memory.md.",
    memory,
    "### Configuration load (one VM; Envoy also runs a canary VM, so about twice this)",
    "Plugin configuration size / load time (instantiate + configure) / throughput (10^6 bytes per second).",
    load,
    "### Decision cost vs connections already open (1k pods)",
    open,
  ].join("\n\n");
}

function footprintSection(results: Results): string {
  const rows = FILTERS.map((filter) => {
    const f = named(results, "config_footprint").find((x) => x.filter === filter);
    if (f === undefined) return [filter, NOT_MEASURED, NOT_MEASURED, NOT_MEASURED, ""];
    if (f.error !== undefined) return [filter, "failed", "failed", "failed", str(f.error)];
    const note = f.applies
      ? `${fmt(num(f.headless_pods))} headless pods of ${pods(num(f.pods) ?? 0)}: plugin total ${fmt((num(f.plugin_bytes_total) ?? NaN) / 1e6)} MB (every pod) vs ${fmt((num(f.listener_bytes_total) ?? NaN) / 1e6)} MB of listeners (headless pods only)`
      : `does not apply: ${str(f.reason)}`;
    return [filter, fmt(num(f.plugin_bytes_per_pod)), f.applies ? fmt(num(f.listener_bytes_per_pod)) : "n/a", f.applies ? fmt(num(f.ratio)) : "n/a", note];
  });
  return table(["filter", "plugin config B/pod", "per-pod listener B (protobuf)", "listener / plugin", "notes"], rows);
}

function runtimeSection(results: Results): string {
  const runtimes = [...new Set(named(results, "vm_us_per_connection").map((f) => str(f.runtime)))];
  if (runtimes.length === 0) return `Runtime overhead (no-op filter, this runtime vs stock @solo-io/proxy-runtime): ${NOT_MEASURED}.`;
  const levels = [...new Set(named(results, "vm_us_per_connection").map((f) => num(f.open_connections) ?? 0))].sort((a, b) => a - b);
  return table(
    ["runtime", ...levels.map((n) => `${fmt(n)} open: µs in the VM`), "ratio (each level against an idle VM timed alongside)"],
    runtimes.map((runtime) => [
      runtime,
      ...levels.map((n) => cell(results, "vm_us_per_connection", { runtime, open_connections: n }, "value")),
      cell(results, "vm_cost_ratio_open_vs_idle", { runtime }, "value"),
    ]),
  );
}

function envoySection(results: Results): string {
  const values = envoyValues(results);
  const ratios = named(results, "envoy_ab_ratio");
  const parts: string[] = [];
  const errors = named(results, "envoy_ab").filter((f) => f.error !== undefined);
  const failedFilters = [...new Set(errors.filter((f) => f.filter !== undefined).map((f) => str(f.filter)))];
  // An error without a filter means the bench itself did not run: say so in words.
  for (const f of errors.filter((x) => x.filter === undefined)) parts.push(`Real-Envoy A/B: ${NOT_MEASURED} (${str(f.error)}).`);
  if (values.length === 0 && failedFilters.length === 0) {
    if (errors.length === 0) parts.push(`Real-Envoy A/B (\`envoy_ab\`): ${NOT_MEASURED} in this run.`);
  } else {
    const rows: string[][] = [];
    const has = (filter: string, path: string, metric: string) => values.some((v) => v.filter === filter && v.path === path && v.metric === metric);
    const groups = [...new Set(values.map((v) => `${v.filter}\u0000${v.path}`))].map((x) => x.split("\u0000") as [string, string]);
    // Every filter gets a memory row (a whole-sidecar figure), measured or not.
    for (const filter of new Set(values.map((v) => v.filter))) {
      if (!groups.some(([f, p]) => f === filter && p === "") && !values.some((v) => v.filter === filter && v.metric === "envoy_memory_mb")) groups.push([filter, ""]);
    }
    for (const [filter, path] of groups) {
      // A path shows every per-connection metric; the whole-sidecar group only what it has (memory).
      const metrics = Object.keys(ENVOY_METRICS).filter((m) => (path ? m !== "envoy_memory_mb" || has(filter, path, m) : has(filter, path, m) || m === "envoy_memory_mb"));
      for (const metric of metrics) {
        const cells = VARIANTS.map((variant) => {
          const v = values.find((x) => x.filter === filter && x.path === path && x.variant === variant && x.metric === metric);
          return v ? `${fmt(v.value)}${v.runs > 1 ? ` (median of ${v.runs})` : ""}` : NOT_MEASURED;
        });
        const control = values.some((v) => v.filter === filter && v.control);
        rows.push([control ? CONTROL_LABEL : filter, path || "whole sidecar", ENVOY_METRICS[metric]!, ...cells]);
      }
    }
    for (const filter of failedFilters) rows.push([filter, "-", "failed (see Failed measurements)", "failed", "failed", "failed"]);
    parts.push(table(["filter", "path", "metric", "without the filter", "with the filter", "native (Envoy-only equivalent)"], rows));
  }
  parts.push(
    ratios.length
      ? table(
          ["filter", "path", "compared", "metric", "value", "target", "verdict"],
          ratios.map((f) => [
            envoyFilter(f),
            str(f.path) || "-",
            f.variant ? `${str(f.variant)} / ${str(f.baseline)}${isControl(f) ? " (A/A)" : ""}` : "-",
            str(f.metric),
            f.error ? "failed" : `${fmt(num(f.value))} ${str(f.unit)}`,
            str(f.target) || "-",
            envoyVerdict(f),
          ]),
        )
      : `Ratios (\`envoy_ab_ratio\`): ${NOT_MEASURED}.`,
  );
  parts.push(noiseFloorSection(results));
  const headroom = named(results, "envoy_generator_headroom");
  parts.push(
    headroom.length
      ? table(
          ["filter", "tool", "metric", "direct", "through Envoy", "generator CPU %", "Envoy CPU %"],
          headroom.map((f) =>
            f.error
              ? [str(f.filter) || "-", "failed", "-", "-", "-", "-", "-"]
              : [str(f.filter) || "-", str(f.tool), str(f.metric), fmt(num(f.direct_value)), fmt(num(f.through_envoy_value)), fmt(num(f.generator_cpu_pct)), fmt(num(f.envoy_cpu_pct))],
          ),
        )
      : `Load-generator headroom (\`envoy_generator_headroom\`): ${NOT_MEASURED}.`,
  );
  const big = named(results, "envoy_100k_pods");
  parts.push(
    big.length
      ? table(
          ["pods", "config MB", "load ms", "Envoy memory MB", "connections ok / tried"],
          big.map((f) =>
            f.error
              ? [str(f.pods) || "-", "failed", "failed", "failed", "failed"]
              : [fmt(num(f.pods)), fmt((num(f.config_bytes) ?? NaN) / 1e6), fmt(num(f.load_ms)), fmt(num(f.envoy_memory_mb)), `${str(f.connections_ok)} / ${str(f.connections_tried)}`],
          ),
        )
      : `Real Envoy with a 100k-pod configuration (\`envoy_100k_pods\`): ${NOT_MEASURED}.`,
  );
  return parts.join("\n\n");
}

const NOISE_METRICS: Readonly<Record<string, string>> = {
  conn_rate_per_s: "connection rate, control / without",
  bulk_mb_per_s: "bulk throughput, control / without",
  ttfb_p99_us: "p99 TTFB, control − without (µs)",
  envoy_cpu_us_per_conn: "sidecar CPU per connection, control / without",
};

/** "±12%" for a ratio's deviation from 1, "710 µs" for a difference. */
function deviation(f: Figure | undefined): string {
  const value = num(f?.max_deviation);
  if (f === undefined || value === undefined) return NOT_MEASURED;
  return str(f.unit) === "us" ? `${fmt(value)} µs` : `±${fmt(value * 100)}%`;
}

function margin(f: Figure): string {
  const value = num(f.target_margin);
  if (value === undefined) return "-";
  return str(f.unit) === "us" ? `${fmt(value)} µs` : `${fmt(value * 100)}%`;
}

/**
 * The A/A control's per-round spread (`envoy_noise_floor`): the smallest difference the
 * wall-clock ratios resolve on this machine, against what each target allows and what the call
 * stacks of docs/envoy-cpu-profile.md say the filters cost.
 */
function noiseFloorSection(results: Results): string {
  const floors = measured(results, "envoy_noise_floor");
  const heading = "### Noise floor (A/A control)";
  if (floors.length === 0) return `${heading}

Noise floor (\`envoy_noise_floor\`, the A/A control arm): ${NOT_MEASURED}.`;
  const rounds = Math.max(...floors.map((f) => num(f.rounds) ?? 0));
  const byMetric = (metric: string) => floors.find((f) => f.metric === metric);
  const rows = Object.entries(NOISE_METRICS).map(([metric, label]) => {
    const f = byMetric(metric);
    if (f === undefined) return [label, NOT_MEASURED, NOT_MEASURED, NOT_MEASURED, NOT_MEASURED, NOT_MEASURED];
    const unit = str(f.unit) === "us" ? " µs" : "";
    const spread = `${fmt(num(f.min), 4)} / ${fmt(num(f.median), 4)} / ${fmt(num(f.max), 4)}${unit}`;
    const oneRound = (num(f.rounds) ?? 0) <= 1;
    let judged: string;
    if (typeof f.judgeable === "boolean") {
      judged = f.judgeable
        ? oneRound
          ? `one round stayed inside the ${margin(f)} margin: the spread needs the full run's rounds`
          : `yes: identical sidecars stayed inside the ${margin(f)} margin`
        : `**no**: identical sidecars strayed ${deviation(f)}, beyond the ${margin(f)} margin`;
    } else if (metric === "envoy_cpu_us_per_conn") {
      const dev = num(f.max_deviation);
      const versus = dev === undefined ? "" : dev < 0.05 ? "both exceed this spread" : dev < 0.1 ? "×1.10 exceeds this spread, ×1.05 does not" : "**neither** exceeds this spread";
      judged = `no target; call stacks predict ×1.05 (noop) and ×1.10 (passthrough_mtls plain): ${versus}`;
    } else judged = "-";
    return [label, str(f.target) ? `${str(f.target)}${unit}` : "-", spread, String(num(f.rounds) ?? ""), deviation(f), judged];
  });
  const single = rounds <= 1 ? " This run had one round: each figure is a single sample, not a spread; the full run (five rounds) measures the spread." : "";
  const said = (metric: string) => deviation(byMetric(metric));
  return [
    heading,
    "A second sidecar in the passthrough_mtls topology carries exactly the \"without\" config (no wasm filter; figures under filter `control`, `control: true`) and runs in the same ABBA rotation, next to \"without\" as \"with\" (plain path) is. " +
      "Two identical Envoys should read 1.00 (or +0 µs): how far their per-round ratios stray is the smallest difference the wall-clock ratios above can resolve on this machine. " +
      "A target whose margin (≥ 0.9: 10%; ≥ 0.97: 3%; < 100 µs) lies inside that spread cannot be judged here: a filter that cost nothing would miss it in some rounds and meet it in others." +
      single,
    `In this run, identical sidecars differed by up to ${said("conn_rate_per_s")} in connection rate, ${said("bulk_mb_per_s")} in bulk throughput and ${said("ttfb_p99_us")} in p99 TTFB, over ${rounds} round${rounds === 1 ? "" : "s"}.`,
    table(["comparison", "target", "per round: min / median / max", "rounds", "largest deviation from identical", "can the target be judged here?"], rows),
    "What the ratios would have to resolve is small. [The Envoy CPU profile](envoy-cpu-profile.md) splits the sidecar's CPU per connection from call stacks: +13 µs/conn for an empty wasm filter (noop) and +27 µs for passthrough_mtls on the plain path, ×1.05 / ×1.10 of ~285 µs/conn. " +
      "That is the difference these wall-clock ratios would have to resolve on two shared cores; the last row shows how far even the sidecar's CPU per connection, the steadiest A/B figure, strays between identical sidecars. The call stacks are the measurement that resolves it.",
  ].join("\n\n");
}

function errorsSection(results: Results): string {
  const failed = results.figures.filter((f) => f.error !== undefined);
  const lines = [
    ...failed.map((f) => `- \`${f.figure}\`${f.filter ? ` ${str(f.filter)}` : ""}${f.pods ? ` at ${pods(num(f.pods) ?? 0)} pods` : ""}: ${str(f.error)}`),
    ...results.unreadable.map((u) => `- results file ${u}`),
  ];
  return lines.length ? lines.join("\n") : "None.";
}

export function renderMarkdown(results: Results, charts: readonly Chart[], chartDir: string): string {
  const images = charts.map((c) => `![${c.title}](${chartDir}/${c.file})`).join("\n\n");
  return [
    "# Benchmarks",
    "",
    "Generated by `npm run bench` (or `tsx bench/report/render.ts` from an existing `build/bench/results.jsonl`); do not edit by hand. " +
      "Host figures run the compiled filters in the proxy-wasm test host on Node's V8 (the engine Envoy embeds); real-Envoy figures run Envoy itself on loopback. " +
      "The machine is shared: single figures move by tens of percent between runs, ratios are measured side by side in one run.",
    "",
    "## Machine and run",
    runSection(results),
    "",
    "## Targets",
    targetsSection(results),
    "",
    "## Host scale curves",
    scaleSection(results),
    "",
    "## Configuration footprint",
    "Plugin-configuration bytes per pod (the whole mesh snapshot in JSON divided by its workload entries) against the listener Istio builds today for each pod of a headless service, which passthrough_mtls makes unnecessary.",
    "",
    footprintSection(results),
    "",
    "## Runtime overhead (no-op filter)",
    runtimeSection(results),
    "",
    "## Real Envoy",
    instructionsSection(results),
    "",
    envoySection(results),
    "",
    "## Charts",
    images || `No chart: nothing was measured.`,
    "",
    "## Failed measurements",
    errorsSection(results),
    "",
  ].join("\n");
}

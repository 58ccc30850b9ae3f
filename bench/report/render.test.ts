// The report says what was measured and what was not: a missing figure reads "not measured", a
// failed one "failed" with its error listed, targets read met/missed from the figures, unreadable
// lines are reported, and only charts of measured figures are written (stale ones removed),
// each with an explicit size and a white background; the A/A control arm is labelled and its
// noise floor (envoy_noise_floor) tabled against the targets.
// Run: node --import tsx --test bench/report/render.test.ts
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { renderReport } from "./render.js";

const FIGURES = [
  { figure: "run", date: "2026-01-01T00:00:00.000Z", quick: true, cpu: "Test CPU", cores: 2, node: "v20.0.0", envoy: "1.39.3" },
  { figure: "scale_decision_cost", filter: "passthrough_mtls", pods: 1000, vm_us: 14.5, guest_us: 5.25 },
  { figure: "scale_decision_cost", filter: "passthrough_mtls", pods: 10000, vm_us: 15.5, guest_us: 5.75 },
  { figure: "scale_vm_memory", filter: "passthrough_mtls", pods: 10000, bytes_per_pod: 470.5, target: 64, met: false },
  { figure: "scale_vm_memory", filter: "waypoint_route", pods: 10000, bytes_per_pod: 50.5, target: 64, met: true },
  { figure: "scale_cost_ratio", filter: "passthrough_mtls", pods: 10000, value: 1.07, target: 2, met: true },
  { figure: "scale_cost_ratio", filter: "tunnel_port_client", pods: 10000, error: "the 1000-pod baseline did not configure" },
  // The real-Envoy bench emits each round, then the median of the rounds (no `round`).
  { figure: "envoy_ab", filter: "passthrough_mtls", variant: "without", path: "plain", metric: "conn_rate_per_s", value: 1234, unit: "1/s", runs: 1, round: 1 },
  { figure: "envoy_ab", filter: "passthrough_mtls", variant: "without", path: "plain", metric: "conn_rate_per_s", value: 9000, unit: "1/s", runs: 3 },
  { figure: "envoy_ab", filter: "passthrough_mtls", variant: "with", path: "plain", metric: "conn_rate_per_s", value: 8000, unit: "1/s", runs: 3 },
  { figure: "envoy_ab", filter: "waypoint_route", error: "Envoy exited with code 1" },
  // The A/A control arm: a second sidecar with exactly the "without" config.
  { figure: "envoy_ab", filter: "control", control: true, variant: "without", path: "plain", metric: "conn_rate_per_s", value: 8500, unit: "1/s", runs: 3 },
  { figure: "envoy_ab_ratio", filter: "control", control: true, path: "plain", variant: "without", baseline: "without", metric: "conn_rate_per_s", value: 0.876, unit: "ratio", target: ">= 0.9", met: false, runs: 3 },
  { figure: "envoy_noise_floor", filter: "control", topology: "passthrough_mtls", path: "plain", variant: "without", baseline: "without", control: true, metric: "conn_rate_per_s", unit: "ratio", min: 0.812, median: 0.876, max: 1.187, rounds: 3, per_round: [0.812, 0.876, 1.187], max_deviation: 0.188, target: ">= 0.9", target_margin: 0.1, judgeable: false },
  { figure: "envoy_noise_floor", filter: "control", topology: "passthrough_mtls", path: "plain", variant: "without", baseline: "without", control: true, metric: "ttfb_p99_us", unit: "us", min: -20, median: 10, max: 40, rounds: 3, per_round: [-20, 10, 40], max_deviation: 40, target: "< 100", target_margin: 100, judgeable: true },
];

// The instruction-count A/B (bench/envoy/callgrind.ts).
const INSTRUCTIONS = [
  { figure: "envoy_instructions", filter: "passthrough_mtls", variant: "without", path: "plain", metric: "instructions_per_conn", value: 113047, unit: "instructions", thread: "worker", per_run: [113992, 112102], all_threads_value: 113392, connections: 100, warmup: 60, runs: 2, idle_share: 0.0001 },
  { figure: "envoy_instructions", filter: "passthrough_mtls", variant: "with", path: "plain", metric: "instructions_per_conn", value: 149308, unit: "instructions", thread: "worker", per_run: [148623, 149993], all_threads_value: 149610, connections: 100, warmup: 60, runs: 2, idle_share: 0.0001 },
  { figure: "envoy_instructions", filter: "tunnel_port", variant: "with", path: "hbone", error: "connection batch to 127.10.0.2:80: timeout" },
  { figure: "envoy_instructions_repeat", filter: "passthrough_mtls", variant: "without", path: "plain", per_run: [113992, 112102], deviation: 0.0167, target: "< 0.01", met: false, upstream_cx_per_batch: [100, 101], tls_handshakes_per_batch: [0, 1], wakeups_per_batch: [847, 762] },
  { figure: "envoy_instructions_repeat", filter: "passthrough_mtls", variant: "with", path: "plain", per_run: [148623, 149993], deviation: 0.0092, target: "< 0.01", met: true },
  { figure: "envoy_instructions_ratio", topology: "passthrough_mtls", filter: "passthrough_mtls", path: "plain", variant: "with", baseline: "without", baseline_filter: "passthrough_mtls", value: 1.3208, unit: "ratio", added_per_conn: 36261, arm_value: 149308, baseline_value: 113047, target: "<= 1.05", met: false, why: "the decision vs no filter" },
  { figure: "envoy_instructions_ratio", topology: "tunnel_port", filter: "tunnel_port", path: "hbone", variant: "with", baseline: "native", error: "not measured: arm failed (see its error figure)" },
  { figure: "envoy_instructions_ratio", topology: "passthrough_mtls", filter: "fixture_newconn_min", path: "plain", variant: "with", baseline: "without", baseline_filter: "passthrough_mtls", value: 1.175, unit: "ratio", added_per_conn: 19716, arm_value: 132110, baseline_value: 112394, why: "the floor" },
  { figure: "envoy_instructions_wall", seconds: 420, warmup: 60, connections: 100, load_average: 33.9 },
];

async function render(lines: string[]): Promise<{ markdown: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), "bench-report-"));
  const results = join(dir, "results.jsonl");
  writeFileSync(results, lines.join("\n") + "\n");
  mkdirSync(join(dir, "bench"));
  writeFileSync(join(dir, "bench", "stale.svg"), "<svg/>");
  await renderReport(results, join(dir, "benchmarks.md"), join(dir, "bench"));
  return { markdown: readFileSync(join(dir, "benchmarks.md"), "utf8"), dir };
}

const row = (markdown: string, ...cells: string[]) =>
  markdown.split("\n").find((line) => line.startsWith("|") && cells.every((c) => line.includes(c)));

describe("benchmark report", () => {
  it("tables every expected cell: measured values, 'not measured' and 'failed'", async () => {
    const { markdown } = await render(FIGURES.map((f) => JSON.stringify(f)));
    const cost = row(markdown, "| passthrough_mtls |", "14.5 / 5.25");
    assert.ok(cost, "the passthrough_mtls cost row");
    assert.ok(cost.includes("15.5 / 5.75"));
    assert.ok(cost.includes("not measured / not measured"), "the 100k and 1M columns were not measured");
    assert.ok(row(markdown, "| tunnel_port_server |", "not measured"), "a filter with no figure at all still has its row");
    assert.ok(row(markdown, "tunnel_port_client", "decision cost", "failed"));
    assert.ok(markdown.includes("the 1000-pod baseline did not configure"), "the error is listed");
    assert.ok(markdown.includes("Test CPU, 2 cores"));
  });

  it("reads targets as met or missed from the figures", async () => {
    const { markdown } = await render(FIGURES.map((f) => JSON.stringify(f)));
    assert.ok(row(markdown, "passthrough_mtls", "VM memory", "**missed**"));
    assert.ok(row(markdown, "waypoint_route", "VM memory", "**met**"));
    assert.ok(row(markdown, "passthrough_mtls", "decision cost at 10k / 1k", "**met**"));
    assert.ok(row(markdown, "real Envoy with/without ratios", "not measured"));
  });

  it("tables the real-Envoy A/B figures present and marks the others not measured", async () => {
    const { markdown } = await render(FIGURES.map((f) => JSON.stringify(f)));
    const rate = row(markdown, "passthrough_mtls", "| plain |", "connections per second");
    assert.ok(rate?.includes("9,000 (median of 3)") && rate.includes("8,000"), String(rate));
    assert.ok(!markdown.includes("1,234"), "a single round is not reported when the median is there");
    assert.ok(row(markdown, "passthrough_mtls", "| plain |", "bulk throughput", "not measured"));
    assert.ok(row(markdown, "passthrough_mtls", "whole sidecar", "Envoy memory", "not measured"));
    assert.ok(row(markdown, "waypoint_route", "failed"));
    assert.ok(markdown.includes("Envoy exited with code 1"));
  });

  it("labels the A/A control arm and tables its noise floor against the targets", async () => {
    const { markdown } = await render(FIGURES.map((f) => JSON.stringify(f)));
    const label = "control (A/A: the same config twice)";
    assert.ok(row(markdown, label, "| plain |", "connections per second", "8,500 (median of 3)"), "the control's values, in the without column");
    assert.ok(row(markdown, label, "without / without (A/A)", "0.876 ratio", "**missed** by two identical sidecars"), "the control's ratio, labelled");
    assert.ok(row(markdown, label, "real Envoy: conn_rate_per_s", "two identical sidecars"), "the control in the targets, not read as a filter's miss");
    assert.ok(markdown.includes("### Noise floor (A/A control)"));
    const rate = row(markdown, "connection rate, control / without");
    assert.ok(rate?.includes("0.812 / 0.876 / 1.187") && rate.includes("±18.8%") && rate.includes("**no**") && rate.includes("10%"), String(rate));
    const p99 = row(markdown, "p99 TTFB, control − without");
    assert.ok(p99?.includes("-20 / 10 / 40 µs") && p99.includes("yes"), String(p99));
    assert.ok(row(markdown, "bulk throughput, control / without", "not measured"), "a missing noise-floor metric reads not measured");
    assert.ok(markdown.includes("up to ±18.8% in connection rate"));
    assert.ok(markdown.includes("(envoy-cpu-profile.md)") && markdown.includes("+13 µs/conn"), "links the call-stack profile");
  });

  it("tables instructions per connection, their ratios against the targets and the repeatability, and charts them", async () => {
    const { markdown, dir } = await render([...FIGURES, ...INSTRUCTIONS].map((f) => JSON.stringify(f)));
    assert.ok(markdown.includes("### Instructions per connection (callgrind)"));
    assert.ok(row(markdown, "passthrough_mtls / plain", "| with |", "149,308", "148,623 / 149,993"), "an arm's value and both batches");
    assert.ok(row(markdown, "tunnel_port / hbone", "| with |", "failed"), "a failed arm reads failed");
    assert.ok(row(markdown, "passthrough_mtls / plain", "with ÷ without", "1.321", "+36,261", "<= 1.05: **missed**"), "the ratio with its verdict");
    assert.ok(row(markdown, "passthrough_mtls (plain)", "instructions per connection (callgrind), with ÷ without", "1.321", "**missed**"), "the ratio in the targets");
    assert.ok(row(markdown, "passthrough_mtls (plain)", "with ÷ without", "**missed**: floor 1.175 (`fixture_newconn_min`", "the filter ×1.124 over it"), "a missed target names its floor");
    assert.ok(row(markdown, "tunnel_port (hbone)", "instructions per connection", "failed"), "a failed ratio in the targets");
    assert.ok(markdown.includes("differ by at most 1.67% (passthrough_mtls / plain, without); 1 of 2 paths agree within 1%"), "the worst repeatability");
    assert.ok(markdown.includes("Outside 1%: passthrough_mtls / plain without 1.67% (upstream connections 100 / 101, TLS handshakes 0 / 1, event-loop wake-ups 847 / 762)"), "what each missed batch opened upstream");
    assert.ok(markdown.includes("This part took 420 s of wall time"));
    assert.match(readFileSync(join(dir, "bench", "envoy_instructions.svg"), "utf8"), /instructions per connection/);
  });

  it("says the instruction counts were not measured when callgrind did not run", async () => {
    const { markdown, dir } = await render(FIGURES.map((f) => JSON.stringify(f)));
    assert.ok(markdown.includes("Instruction counts (`envoy_instructions`): not measured in this run."));
    assert.ok(row(markdown, "real Envoy instructions per connection (callgrind) ratios", "not measured"));
    assert.equal(existsSync(join(dir, "bench", "envoy_instructions.svg")), false);
  });

  it("says the noise floor was not measured when the control did not run", async () => {
    const { markdown } = await render(FIGURES.filter((f) => f.figure !== "envoy_noise_floor").map((f) => JSON.stringify(f)));
    assert.ok(markdown.includes("Noise floor (`envoy_noise_floor`, the A/A control arm): not measured."));
  });

  it("says in words when the real-Envoy bench did not run at all", async () => {
    const { markdown } = await render([JSON.stringify(FIGURES[0]), JSON.stringify({ figure: "envoy_ab", error: "bench/envoy/ is missing" })]);
    assert.ok(markdown.includes("Real-Envoy A/B: not measured (bench/envoy/ is missing)."));
    assert.equal(row(markdown, "failed (see Failed measurements)"), undefined);
    assert.ok(row(markdown, "real Envoy with/without ratios", "not measured"));
  });

  it("reports unreadable lines instead of dropping them", async () => {
    const { markdown } = await render([JSON.stringify(FIGURES[0]), "{not json", "[1,2]"]);
    assert.ok(markdown.includes("line 2: not JSON"));
    assert.ok(markdown.includes("line 3: not a figure"));
  });

  it("writes charts only for measured figures, sized, titled, on white, and removes stale ones", async () => {
    const { dir } = await render(FIGURES.map((f) => JSON.stringify(f)));
    assert.equal(existsSync(join(dir, "bench", "stale.svg")), false);
    assert.equal(existsSync(join(dir, "bench", "open_connections.svg")), false, "no open-connections figure, no chart");
    for (const file of ["decision_cost.svg", "vm_memory.svg", "envoy_conn_rate_per_s.svg"]) {
      const svg = readFileSync(join(dir, "bench", file), "utf8");
      assert.match(svg, /^<svg[^>]* width="\d+" height="\d+"/, file);
      assert.match(svg, /<rect width="\d+" height="\d+" fill="white"\/>/, file);
    }
    assert.match(readFileSync(join(dir, "bench", "decision_cost.svg"), "utf8"), /Decision cost per connection/);
    assert.match(readFileSync(join(dir, "benchmarks.md"), "utf8"), /!\[[^\]]+\]\(bench\/decision_cost\.svg\)/);
  });
});

// SVG charts of the figures, drawn with vega-lite (spec) and vega (headless render). Every chart
// has an explicit size, a white background, a title and units on its axes, so it reads the same
// in a browser and on a GitHub repository page. A chart is drawn only from figures that were
// measured; the tables say "not measured" for the rest.
import * as vega from "vega";
import * as vl from "vega-lite";
import { envoyValues, VARIANTS } from "./envoy_values.js";
import { instructionArm } from "./instructions.js";
import { measured, num, str, type Results } from "./results.js";

type Row = Record<string, string | number>;
export interface Chart {
  /** File name under docs/bench/. */
  readonly file: string;
  readonly title: string;
  readonly svg: string;
}

const WIDTH = 560;
const HEIGHT = 320;
const FONT = "Helvetica, Arial, sans-serif";

async function draw(title: string, values: Row[], spec: Record<string, unknown>): Promise<string> {
  const full = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: { text: title, fontSize: 15, anchor: "start" },
    width: WIDTH,
    height: HEIGHT,
    background: "white",
    padding: 12,
    config: { font: FONT, axis: { labelFontSize: 11, titleFontSize: 12 }, legend: { labelFontSize: 11, titleFontSize: 12, labelLimit: 260 } },
    data: { values },
    ...spec,
  };
  const compiled = vl.compile(full as unknown as vl.TopLevelSpec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: "none" });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

const logX = (field: string, title: string) => ({ field, type: "quantitative", title, scale: { type: "log" }, axis: { format: "~s" } });
const color = (field: string, title: string) => ({ field, type: "nominal", title });

async function decisionCost(results: Results): Promise<Chart | undefined> {
  const values = measured(results, "scale_decision_cost").flatMap((f) => [
    { filter: str(f.filter), pods: num(f.pods) ?? 0, measure: "inside the VM", us: num(f.vm_us) ?? NaN },
    { filter: str(f.filter), pods: num(f.pods) ?? 0, measure: "guest code alone", us: num(f.guest_us) ?? NaN },
  ]).filter((r) => Number.isFinite(r.us));
  if (values.length === 0) return undefined;
  const title = "Decision cost per connection vs pods in the configuration (host, V8)";
  return {
    file: "decision_cost.svg",
    title,
    svg: await draw(title, values, {
      encoding: {
        x: logX("pods", "pods in the configuration (log scale)"),
        y: { field: "us", type: "quantitative", title: "µs per connection" },
        color: color("filter", "filter"),
      },
      layer: [
        // Dashes tell the two times apart; points are drawn apart so the legend shows dashes.
        { mark: { type: "line", strokeWidth: 2 }, encoding: { strokeDash: { field: "measure", type: "nominal", title: "time", legend: { symbolType: "stroke", symbolSize: 400, symbolStrokeWidth: 2 } } } },
        { mark: { type: "point", filled: true, size: 40 } },
      ],
    }),
  };
}

async function vmMemory(results: Results): Promise<Chart | undefined> {
  const values = measured(results, "scale_vm_memory")
    .map((f) => ({ filter: str(f.filter), pods: num(f.pods) ?? 0, bytes: num(f.bytes_per_pod) ?? NaN }))
    .filter((r) => Number.isFinite(r.bytes));
  if (values.length === 0) return undefined;
  const title = "VM linear memory per pod after configure (target ≤ 64 B)";
  return {
    file: "vm_memory.svg",
    title,
    svg: await draw(title, values, {
      layer: [
        {
          mark: { type: "line", point: true },
          encoding: {
            x: logX("pods", "pods in the configuration (log scale)"),
            y: { field: "bytes", type: "quantitative", title: "bytes per pod", scale: { type: "log" } },
            color: color("filter", "filter"),
          },
        },
        { data: { values: [{ target: 64 }] }, mark: { type: "rule", color: "#d62728", strokeDash: [6, 4] }, encoding: { y: { field: "target", type: "quantitative" } } },
        {
          data: { values: [{ target: 64, label: "target 64 B/pod" }] },
          mark: { type: "text", color: "#d62728", align: "left", dx: 4, dy: -7, x: 0 },
          encoding: { y: { field: "target", type: "quantitative" }, text: { field: "label" } },
        },
      ],
    }),
  };
}

async function openConnections(results: Results): Promise<Chart | undefined> {
  const values = measured(results, "open_connections_cost")
    .map((f) => ({ filter: str(f.filter), open: num(f.open) ?? 0, us: num(f.vm_us) ?? NaN }))
    .filter((r) => Number.isFinite(r.us));
  if (values.length === 0) return undefined;
  const title = "Decision cost per connection vs connections already open (1k pods)";
  return {
    file: "open_connections.svg",
    title,
    svg: await draw(title, values, {
      mark: { type: "line", point: true },
      encoding: {
        x: { field: "open", type: "quantitative", title: "connections open on the same VM", axis: { format: ",d" } },
        y: { field: "us", type: "quantitative", title: "µs per connection, inside the VM" },
        color: color("filter", "filter"),
      },
    }),
  };
}

async function configLoad(results: Results): Promise<Chart | undefined> {
  const values = measured(results, "config_load")
    .map((f) => ({ filter: str(f.filter), mb: (num(f.config_bytes) ?? NaN) / 1e6, ms: num(f.ms) ?? NaN }))
    .filter((r) => Number.isFinite(r.mb) && Number.isFinite(r.ms));
  if (values.length === 0) return undefined;
  const title = "Configuration load time vs configuration size (one VM, no canary)";
  return {
    file: "config_load.svg",
    title,
    svg: await draw(title, values, {
      mark: { type: "line", point: true },
      encoding: {
        x: { field: "mb", type: "quantitative", title: "plugin configuration (MB, log scale)", scale: { type: "log" } },
        y: { field: "ms", type: "quantitative", title: "load time (ms, log scale)", scale: { type: "log" } },
        color: color("filter", "filter"),
      },
    }),
  };
}

async function footprint(results: Results): Promise<Chart | undefined> {
  const values: Row[] = [];
  for (const f of measured(results, "config_footprint")) {
    const plugin = num(f.plugin_bytes_per_pod);
    const listener = num(f.listener_bytes_per_pod);
    if (plugin !== undefined) values.push({ filter: str(f.filter), what: "plugin configuration per pod (JSON)", bytes: plugin });
    if (listener !== undefined) values.push({ filter: str(f.filter), what: "Istio per-pod listener it replaces (protobuf, lower bound)", bytes: listener });
  }
  if (values.length === 0) return undefined;
  const title = "Configuration bytes per pod: plugin vs per-pod listeners";
  return {
    file: "footprint.svg",
    title,
    svg: await draw(title, values, {
      encoding: {
        y: { field: "filter", type: "nominal", title: null },
        yOffset: { field: "what" },
        x: { field: "bytes", type: "quantitative", title: "bytes per pod" },
      },
      layer: [
        { mark: "bar", encoding: { color: { field: "what", type: "nominal", title: null, legend: { orient: "bottom", direction: "vertical", labelLimit: 600 } } } },
        { mark: { type: "text", align: "left", dx: 4 }, encoding: { text: { field: "bytes", type: "quantitative", format: ",.0f" } } },
      ],
    }),
  };
}

export const ENVOY_METRICS: Readonly<Record<string, string>> = {
  conn_rate_per_s: "connections per second",
  ttfb_p50_us: "time to first byte, p50 (µs)",
  ttfb_p99_us: "time to first byte, p99 (µs)",
  bulk_mb_per_s: "bulk throughput (MB/s)",
  envoy_cpu_us_per_conn: "Envoy CPU per connection (µs)",
  envoy_memory_mb: "Envoy memory (MB)",
};

async function envoyAb(results: Results): Promise<Chart[]> {
  const charts: Chart[] = [];
  const all = envoyValues(results);
  for (const [metric, label] of Object.entries(ENVOY_METRICS)) {
    const values = all
      .filter((v) => v.metric === metric)
      .map((v) => {
        const filter = v.control ? "control (A/A)" : v.filter;
        return { measured: v.path ? `${filter} / ${v.path}` : filter, variant: v.variant, value: v.value };
      });
    if (values.length === 0) continue;
    const title = `Real Envoy, with and without the filter: ${label}`;
    charts.push({
      file: `envoy_${metric}.svg`,
      title,
      svg: await draw(title, values, {
        encoding: {
          x: { field: "measured", type: "nominal", title: "filter / path", axis: { labelAngle: 0, labelLimit: 0, labelExpr: "split(datum.label, ' / ')" } },
          xOffset: { field: "variant", sort: VARIANTS },
          y: { field: "value", type: "quantitative", title: label },
        },
        layer: [
          { mark: "bar", encoding: { color: { field: "variant", type: "nominal", title: "variant", sort: VARIANTS } } },
          { mark: { type: "text", dy: -6 }, encoding: { text: { field: "value", type: "quantitative", format: ",.3~r" } } },
        ],
      }),
    });
  }
  return charts;
}

/** Instructions per connection (worker thread, callgrind) per arm, grouped by filter / path. */
async function instructions(results: Results): Promise<Chart | undefined> {
  const values = measured(results, "envoy_instructions")
    .filter((f) => num(f.value) !== undefined)
    .map((f) => ({ measured: instructionArm(f), variant: str(f.variant), value: num(f.value)! }));
  if (values.length === 0) return undefined;
  const title = "Real Envoy under callgrind: instructions per connection (worker thread)";
  return {
    file: "envoy_instructions.svg",
    title,
    svg: await draw(title, values, {
      encoding: {
        y: { field: "measured", type: "nominal", title: "filter / path", axis: { labelLimit: 0 } },
        yOffset: { field: "variant", sort: VARIANTS },
        x: { field: "value", type: "quantitative", title: "instructions per connection", axis: { format: "~s" } },
      },
      layer: [
        { mark: "bar", encoding: { color: { field: "variant", type: "nominal", title: "variant", sort: VARIANTS } } },
        { mark: { type: "text", align: "left", dx: 4 }, encoding: { text: { field: "value", type: "quantitative", format: ",.0f" } } },
      ],
    }),
  };
}

export async function drawCharts(results: Results): Promise<Chart[]> {
  const single = await Promise.all([decisionCost(results), vmMemory(results), openConnections(results), configLoad(results), footprint(results), instructions(results)]);
  return [...single.filter((c): c is Chart => c !== undefined), ...(await envoyAb(results))];
}

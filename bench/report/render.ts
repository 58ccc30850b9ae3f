// Renders docs/benchmarks.md and the SVG charts under docs/bench/ from a results file.
// Runs alone on an existing file: `tsx bench/report/render.ts [results.jsonl]`
// (default build/bench/results.jsonl); `npm run bench` calls renderReport() at its end.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { drawCharts } from "./charts.js";
import { renderMarkdown } from "./markdown.js";
import { readResults } from "./results.js";

export const REPORT_FILE = "docs/benchmarks.md";
export const CHART_DIR = "docs/bench";

export async function renderReport(resultsFile = "build/bench/results.jsonl", reportFile = REPORT_FILE, chartDir = CHART_DIR): Promise<void> {
  const results = readResults(resultsFile);
  const charts = await drawCharts(results);
  mkdirSync(chartDir, { recursive: true });
  // Charts of figures this run did not produce would describe another run: remove them.
  for (const file of readdirSync(chartDir)) if (file.endsWith(".svg")) rmSync(join(chartDir, file));
  for (const chart of charts) writeFileSync(join(chartDir, chart.file), chart.svg);
  writeFileSync(reportFile, renderMarkdown(results, charts, "bench"));
  process.stderr.write(`[report] ${reportFile} and ${charts.length} charts in ${chartDir}/ from ${results.figures.length} figures\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await renderReport(process.argv[2]);
}

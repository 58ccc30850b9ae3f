// `npm run bench [-- --quick]`: benchmarks, never timed tests. Prints one JSON line per figure
// (also appended to build/bench/results.jsonl, truncated here first), then renders
// docs/benchmarks.md and the charts under docs/bench/ from that file.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { emit, startResults } from "./emit.js";
import { runFigure } from "./report/machine.js";
import { renderReport } from "./report/render.js";
import { runtimeOverhead } from "./runtime_overhead.js";
import { scaleBench } from "./scale/index.js";
import { envoyBench } from "./envoy/index.js";
import { feedBench } from "./feed/run.js";
import { fanoutBench } from "./feed/fanout.js";
import { abuseBench } from "./feed/abuse.js";
import { SUBJECTS } from "./scale/subjects.js";

const quick = process.argv.includes("--quick");
const began = performance.now();

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { stdio: ["ignore", "ignore", "inherit"] });
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} failed`);
}

startResults();
emit(runFigure(quick));
// `npm run bench` builds the filters first; build them here only when run directly without.
if (![...SUBJECTS.map((s) => s.wasm), "build/noop.wasm"].every((wasm) => existsSync(wasm))) run(process.execPath, ["scripts/build.mjs"]);
run(process.execPath, ["bench/stock-runtime/build.mjs"]); // the stock-runtime baseline
await runtimeOverhead(quick);
await scaleBench({ quick });
// The real Envoy, side by side with and without each filter (bench/envoy/README.md).
await envoyBench({ quick });
// The mesh feed against a real API server and Envoy (bench/feed/README.md).
await feedBench({ quick });
// The feed under never-reading clients and a flood of full-message polls (bench/feed/README.md).
await abuseBench(quick ? { clients: 300, seconds: 10 } : {});
// Thousands of long pollers against the feed: restart convergence, propagation under churn.
await fanoutBench({ quick });
emit({ figure: "run_end", seconds: Math.round((performance.now() - began) / 1000) });
await renderReport();

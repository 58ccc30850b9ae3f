// `npm run bench [-- --quick]`: benchmarks, never timed tests. Prints one JSON line per figure.
import { spawnSync } from "node:child_process";
import { runtimeOverhead } from "./runtime_overhead.js";

const quick = process.argv.includes("--quick");

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { stdio: ["ignore", "ignore", "inherit"] });
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} failed`);
}

// Build what is measured: the filters and the stock runtime baseline.
run(process.execPath, ["scripts/build.mjs"]);
run(process.execPath, ["bench/stock-runtime/build.mjs"]);
await runtimeOverhead(quick);
await (await import("./passthrough_mtls.js")).passthroughMtlsBench(quick);

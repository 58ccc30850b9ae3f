// The instruction-count benchmark alone (callgrind.ts), inside the private network namespace:
//   bash scripts/in-netns.sh npx tsx bench/envoy/callgrind_run.ts [--quick] [--only passthrough_mtls,tunnel_port] [--connections N] [--warmup N] [--pause MS] [--sidecars pt-without,pt-with]
import { callgrindBench, callgrindTimings } from "./callgrind.js";

function arg(name: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? process.argv[at + 1] : undefined;
}
const timings = callgrindTimings(process.argv.includes("--quick"));
if (arg("connections")) timings.connections = Number(arg("connections"));
if (arg("warmup")) timings.warmup = Number(arg("warmup"));
if (arg("pause")) timings.pauseMs = Number(arg("pause"));
await callgrindBench(timings, (m) => process.stderr.write(`[envoy-bench] ${m}\n`), arg("only")?.split(","), arg("sidecars")?.split(","));

// Runs the real-Envoy benchmark alone: bash scripts/in-netns.sh npx tsx bench/envoy/run.ts [--quick]
import { envoyBench } from "./index.js";

await envoyBench({ quick: process.argv.includes("--quick") });

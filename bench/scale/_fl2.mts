import { Session } from "node:inspector/promises";
import { writeFileSync } from "node:fs";
import { loaded, timeBatches, lowQuartile } from "./mesh_update.ts";
const sizes = process.argv.slice(2).map(Number);
const res: Record<number, number> = {};
for (const pods of sizes) {
  const { vm, churn, loadMs } = await loaded(pods);
  timeBatches(vm, churn, 100);
  const session = new Session();
  if (process.env.PROF) { session.connect(); await session.post("Profiler.enable"); await session.post("Profiler.start"); }
  const t = timeBatches(vm, churn, Number(process.env.BATCHES ?? 1000));
  if (process.env.PROF) { const { profile } = await session.post("Profiler.stop"); writeFileSync(`/tmp/delta_${pods}.cpuprofile`, JSON.stringify(profile)); }
  res[pods] = lowQuartile(t);
  console.log(pods, "load", loadMs.toFixed(0), "delta lq ms", lowQuartile(t).toFixed(3));
}
console.log("ratio", (res[sizes[sizes.length - 1]] / res[sizes[0]]).toFixed(2));

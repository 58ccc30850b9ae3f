// `npm run soak`: the long reliability runs, outside `npm test`. One JSON line per
// figure; exits non-zero when any soak failed.
//   host:  1,000,000 connections through each filter in the proxy-wasm host emulator; the VM's
//          linear memory must not grow after warm-up (scripts/soak/host.ts).
//   envoy: 100,000 connections through each filter's topology in the real Envoy; Envoy's memory
//          must stay stable and no connection may fail (scripts/soak/envoy.ts). Needs the private
//          network namespace `npm run soak` runs in (scripts/in-netns.sh) for traffic capture.
// `--only host` or `--only envoy` runs one half.
import { hostSoak } from "./soak/host.js";
import { envoySoak } from "./soak/envoy.js";

const onlyIndex = process.argv.indexOf("--only");
const only = onlyIndex >= 0 ? process.argv[onlyIndex + 1] : undefined;
if (only !== undefined && only !== "host" && only !== "envoy") {
  console.error(`soak: --only takes "host" or "envoy", not ${JSON.stringify(only)}`);
  process.exit(2);
}

const started = Date.now();
let ok = true;
if (only !== "envoy") ok = (await hostSoak()) && ok;
if (only !== "host") ok = (await envoySoak()) && ok;
const minutes = ((Date.now() - started) / 60000).toFixed(1);
console.error(`soak: ${ok ? "passed" : "FAILED"} in ${minutes} min`);
process.exit(ok ? 0 : 1);

// `npm run canary -- --filter <filter> --url oci://<registry>/<repository>@sha256:<digest> [--from build/manifests/istio] [--out <file>]`
// Writes the canary set of one filter's route B install (scripts/canary/transform.ts): the twin
// of its WasmPlugin(s) and EnvoyFilters on the canary value of the opt-in label, pulling the new
// image. Reads the manifests npm run package rendered (images pinned), so the main set and its
// canary come from the same files. docs/upgrades.md is the procedure around it.
// Exit 0: written; 1: refused (one line naming the field); 2: usage.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { canaryManifests, ROUTE_B_FILES } from "./canary/transform.js";

const ROOT = join(import.meta.dirname, "..");
const USAGE = "usage: npm run canary -- --filter <passthrough_mtls|tunnel_port|waypoint_route> --url oci://<registry>/<repository>@sha256:<digest> [--from build/manifests/istio] [--out <file>]";

function main(): number {
  let values;
  try {
    ({ values } = parseArgs({ options: { filter: { type: "string" }, url: { type: "string" }, from: { type: "string", default: join(ROOT, "build", "manifests", "istio") }, out: { type: "string" } }, strict: true }));
  } catch (error) {
    console.error(`canary: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (!values.filter || !values.url) {
    console.error(`canary: --filter and --url are required\n${USAGE}`);
    return 2;
  }
  const names = ROUTE_B_FILES[values.filter];
  if (!names) {
    console.error(`canary: --filter: "${values.filter}" is not one of ${Object.keys(ROUTE_B_FILES).join(", ")}`);
    return 1;
  }
  const out = values.out ?? join(ROOT, "build", "manifests", "canary", values.filter, "canary.yaml");
  try {
    const files = names.map((name) => ({ name, text: readFileSync(join(values.from!, values.filter!, name), "utf8") }));
    const text = canaryManifests({ filter: values.filter, files, url: values.url });
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, text);
  } catch (error) {
    console.error(`canary: ${(error as Error).message}`);
    return 1;
  }
  console.log(`canary: wrote ${out}`);
  return 0;
}

process.exitCode = main();

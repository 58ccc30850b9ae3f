// `npm run push:images -- --registry <registry>`: pushes every image of build/images/ (built by
// npm run package) as <registry>/<repository>:<version> and checks the stored digests. Credentials
// are crane's (docker's config.json; `crane auth login`). Exit status: 0 pushed, 1 failed, 2 usage.
import { parseArgs } from "node:util";
import { pushImages } from "./push.js";

try {
  const { values } = parseArgs({ options: { registry: { type: "string" } } });
  const registry = values.registry ?? process.env.MESH_FILTERS_REGISTRY;
  if (registry === undefined) {
    console.error("usage: npm run push:images -- --registry host[:port][/path]");
    process.exitCode = 2;
  } else {
    for (const p of pushImages(registry)) console.log(`pushed ${p.tagged} = ${p.pinned}`);
  }
} catch (error) {
  console.error(`push:images: ${(error as Error).message}`);
  process.exitCode = 1;
}

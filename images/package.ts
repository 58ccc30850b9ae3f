// `npm run package [-- --registry <registry>]`: builds every packaged filter's OCI image from
// build/<filter>.wasm into build/images/ (layout, .digest, index.json), and with a registry renders
// the manifests an operator applies into build/manifests/, pinned by those digests. The registry
// may also come from the environment (MESH_FILTERS_REGISTRY). Exit status: 0 done, 1 failed, 2 usage.
import { rmSync } from "node:fs";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { IMAGES_DIR, packageImages, REPO_ROOT } from "./images.js";
import { checkRegistry, MANIFESTS_DIR, renderManifests } from "./render.js";

function main(): number {
  let registry: string | undefined;
  try {
    const { values } = parseArgs({ options: { registry: { type: "string" } } });
    registry = values.registry ?? process.env.MESH_FILTERS_REGISTRY;
    if (registry !== undefined) checkRegistry(registry);
  } catch (error) {
    console.error(`package: ${(error as Error).message}`);
    console.error("usage: npm run package [-- --registry host[:port][/path]]");
    return 2;
  }
  const index = packageImages();
  for (const [filter, image] of Object.entries(index.images)) {
    console.log(`package: ${filter} ${image.tag} ${image.digest} (${relative(REPO_ROOT, join(IMAGES_DIR, image.layout))}, module ${image.moduleBytes} bytes)`);
  }
  console.log(`package: digests in ${relative(REPO_ROOT, IMAGES_DIR)}/<filter>.digest and index.json`);
  // Manifests rendered by an earlier run pin the digests of that run: never leave them behind.
  rmSync(MANIFESTS_DIR, { recursive: true, force: true });
  if (registry === undefined) {
    console.log("package: no --registry (or MESH_FILTERS_REGISTRY): manifests not rendered (build/manifests removed)");
    return 0;
  }
  const files = renderManifests(registry, index);
  console.log(`package: ${files.length} manifests for ${registry} in ${relative(REPO_ROOT, MANIFESTS_DIR)}/`);
  return 0;
}

try {
  process.exitCode = main();
} catch (error) {
  console.error(`package: ${(error as Error).message}`);
  process.exitCode = 1;
}

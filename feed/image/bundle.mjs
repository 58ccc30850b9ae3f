// Makes the feed image's build context, build/feed-image/: the feed compiled to one JavaScript
// file (esbuild bundles feed/src/main.ts with the host and every npm package it imports, so the
// image needs neither tsx nor node_modules, and a read-only root filesystem costs nothing), the
// compiled filters the feed checks each snapshot with, and the Dockerfile.
//   node feed/image/bundle.mjs        (after `npm run build`, which makes build/<filter>.wasm)
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const out = join(root, "build/feed-image");
// The filters a target may name (feed/src/config.ts); the feed loads <filter>.wasm from wasmDir.
const FILTERS = ["passthrough_mtls", "tunnel_port", "waypoint_route"];

for (const filter of FILTERS) {
  if (!existsSync(join(root, "build", `${filter}.wasm`))) {
    console.error(`feed image: build/${filter}.wasm is missing: run npm run build first`);
    process.exit(1);
  }
}
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "app/wasm"), { recursive: true });
const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;
// feed_build_info's labels (feed/src/feed_metrics.ts): the release and the commit built.
let revision = "unknown";
try {
  revision = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
} catch {
  // Not a git checkout: the label says unknown.
}
await build({
  entryPoints: [join(root, "feed/src/main.ts")],
  outfile: join(out, "app/main.mjs"),
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  // CommonJS packages in the bundle call require() for Node's own modules; ESM has no require.
  banner: { js: 'import { createRequire as __feedRequire } from "node:module"; const require = __feedRequire(import.meta.url);' },
  legalComments: "linked",
  logLevel: "warning",
  define: { FEED_BUILD_VERSION: JSON.stringify(version), FEED_BUILD_REVISION: JSON.stringify(revision) },
});
for (const filter of FILTERS) copyFileSync(join(root, "build", `${filter}.wasm`), join(out, "app/wasm", `${filter}.wasm`));
copyFileSync(join(root, "feed/image/Dockerfile"), join(out, "Dockerfile"));
console.log(`feed image context in build/feed-image (mesh-feed ${version})`);

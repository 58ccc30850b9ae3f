// Prints the `### Images` block of a release for CHANGELOG.md: every plugin image's tag, manifest
// digest and plugin.wasm sha256, read from build/images/index.json (written by `npm run package`),
// and the feed image's digest when given. How a release is cut: docs/releases.md.
//
//   npm run --silent release:notes -- [--version X.Y.Z] [--images build/images] [--feed-digest sha256:...]
//
// --version defaults to package.json's; an index built for another version is refused.
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { IMAGES_DIR, packageVersion, readImageIndex } from "../images/images.js";
import { imagesBlock } from "./lib/changelog.js";

function main(): void {
  const { values } = parseArgs({
    options: {
      version: { type: "string" },
      images: { type: "string" },
      "feed-digest": { type: "string" },
    },
    strict: true,
  });
  const index = readImageIndex(values.images ? resolve(values.images) : IMAGES_DIR);
  process.stdout.write(imagesBlock(index, values.version ?? packageVersion(), values["feed-digest"]));
}

try {
  main();
} catch (error) {
  console.error(`release-notes: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}

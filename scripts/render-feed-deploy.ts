// Splits `helm template`'s output (stdin) into one file per chart template under the directory
// given, in the order helm printed them, with a header saying where the file comes from. A file
// naming a plugin image placeholder is marked as a template for `npm run package`.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PLACEHOLDER_REFERENCE, TEMPLATE_MARKER } from "../images/render.js";

const out = process.argv[2];
if (!out) {
  console.error("usage: render-feed-deploy.ts <out-dir> < helm-template-output");
  process.exit(2);
}
const files = new Map<string, string[]>();
for (const doc of readFileSync(0, "utf8").split(/^---\s*$/m)) {
  const source = /^# Source: mesh-feed\/templates\/(\S+\.yaml)$/m.exec(doc)?.[1];
  if (!source) continue;
  const body = doc.replace(/^# Source: .*\n/m, "").trim();
  if (body === "") continue;
  files.set(source, [...(files.get(source) ?? []), body]);
}
for (const [file, docs] of files) {
  const text = docs.join("\n---\n") + "\n";
  PLACEHOLDER_REFERENCE.lastIndex = 0;
  const header = [
    ...(PLACEHOLDER_REFERENCE.test(text) ? [TEMPLATE_MARKER] : []),
    `# Rendered from charts/mesh-feed/templates/${file} by scripts/render-feed-deploy.sh: edit the chart, not this file.`,
  ];
  writeFileSync(join(out, file), header.join("\n") + "\n" + text);
}
console.log(`rendered ${[...files.keys()].join(", ")} into ${out}`);

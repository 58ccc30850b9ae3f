// The manifests an operator applies, rendered from the committed templates with the images pinned
// by digest. A filter's image digest changes with every change to the filter, so committed
// manifests cannot carry it without going stale: istio/ and feed/deploy/ hold templates whose
// image references are placeholders (`oci://REGISTRY/<repository>:VERSION`, files marked with
// TEMPLATE_MARKER), and `npm run package -- --registry <registry>` writes the applyable copies
// under build/manifests/, each reference replaced by `oci://<registry>/<repository>@sha256:<digest>`
// plus the WasmPlugin's `sha256` field (pilot-agent refuses a pulled image whose digest differs).
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { digestHex, REPO_ROOT, type ImageIndex } from "./images.js";

/** The line that marks a committed file as a template (never applied as is). */
export const TEMPLATE_MARKER =
  "# TEMPLATE: apply the copy `npm run package -- --registry <registry>` renders under build/manifests/ (docs/install.md), not this file.";

/** The placeholder image reference of the templates. */
export const PLACEHOLDER_REFERENCE = /oci:\/\/REGISTRY\/([a-z0-9][a-z0-9-]*):VERSION/g;

/** The template trees, relative to the repository root; each renders to build/manifests/<name>. */
export const TEMPLATE_TREES = [
  { from: "istio", to: "istio" },
  { from: "feed/deploy", to: "feed" },
] as const;

export const MANIFESTS_DIR = join(REPO_ROOT, "build", "manifests");

/**
 * A registry host with an optional port and path, as `crane push` and a WasmPlugin url take it:
 * `ghcr.io/acme/mesh-filters`, `registry.internal:5000`. No scheme, tag or digest.
 */
const REGISTRY = /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(\/[a-z0-9]+([._-][a-z0-9]+)*)*$/;

/** The registry as given, or a one-line error naming the field. */
export function checkRegistry(registry: string): string {
  if (!REGISTRY.test(registry)) {
    throw new Error(`--registry: "${registry}" is not host[:port][/path] in lower case (no scheme, tag or digest), e.g. ghcr.io/acme/mesh-filters`);
  }
  return registry;
}

/** One template's text with its image references pinned (and its marker replaced). */
export function renderText(text: string, source: string, registry: string, index: ImageIndex): string {
  const byRepository = new Map(Object.values(index.images).map((image) => [image.repository, image]));
  const lines: string[] = [];
  for (const line of text.split("\n")) {
    if (line === TEMPLATE_MARKER) {
      lines.push(`# Rendered by npm run package from ${source} for ${registry}: images pinned by digest. Apply this file.`);
      continue;
    }
    const url = /^(\s*)url: (oci:\/\/\S+)\s*$/.exec(line);
    const rendered = line.replace(PLACEHOLDER_REFERENCE, (_whole, repository: string) => {
      const image = byRepository.get(repository);
      if (!image) throw new Error(`${source}: no image is built for repository "${repository}" (images: ${[...byRepository.keys()].join(", ")})`);
      return `oci://${registry}/${repository}@${image.digest}`;
    });
    lines.push(rendered);
    // A WasmPlugin's url: the digest again in `sha256`, which pilot-agent compares with the pulled
    // manifest's (the url's digest alone is checked by the registry client).
    if (url && rendered !== line) {
      const digest = /@(sha256:[0-9a-f]{64})$/.exec(rendered.trim())?.[1] ?? "";
      lines.push(`${url[1]}sha256: ${digestHex(digest)}`);
    }
  }
  return lines.join("\n");
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".yaml"))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

/** Renders every template tree into `outDir` (default build/manifests); returns the files written. */
export function renderManifests(registry: string, index: ImageIndex, outDir = MANIFESTS_DIR, root = REPO_ROOT): string[] {
  checkRegistry(registry);
  const written: string[] = [];
  for (const tree of TEMPLATE_TREES) {
    const base = join(root, tree.from);
    for (const file of yamlFiles(base)) {
      const source = relative(root, file);
      const target = join(outDir, tree.to, relative(base, file));
      mkdirSync(join(target, ".."), { recursive: true });
      writeFileSync(target, renderText(readFileSync(file, "utf8"), source, registry, index));
      written.push(target);
    }
  }
  return written;
}

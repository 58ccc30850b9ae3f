// The plugin images: which filters are packaged, what their repositories are called, and how one
// image is built (the Go tool images/wasm-image, built by scripts/images-setup.sh) and recorded
// under build/images/. Used by `npm run package`, `npm run push:images` and the tests.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The filters shipped as images; probe is the demonstration filter the tests run in Envoy. */
export const PACKAGED_FILTERS = ["passthrough_mtls", "tunnel_port", "waypoint_route", "probe"] as const;
export type PackagedFilter = (typeof PACKAGED_FILTERS)[number];

/** Where `npm run package` writes: one OCI layout per filter, its digest, and index.json. */
export const IMAGES_DIR = join(REPO_ROOT, "build", "images");

/** The tools scripts/images-setup.sh links into this checkout. */
export const TOOLS_DIR = join(REPO_ROOT, "build", "tools");

/**
 * The image repository of a filter: its name with dashes, as the Kubernetes objects that pull it
 * are named (WasmPlugin `passthrough-mtls` pulls `<registry>/passthrough-mtls`).
 */
export function repositoryOf(filter: string): string {
  return filter.replaceAll("_", "-");
}

/** The release version (package.json): the images' tag and `org.opencontainers.image.version`. */
export function packageVersion(root = REPO_ROOT): string {
  return JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;
}

/** What wasm-image reports for one built image. */
export interface BuiltImage {
  name: string;
  version: string;
  /** The manifest digest, `sha256:<64 hex>`: what a WasmPlugin pins. */
  digest: string;
  layerDigest: string;
  /** sha256 of plugin.wasm itself (what an http(s) url's `sha256` would be). */
  moduleSha256: string;
  moduleBytes: number;
}

/** One image as build/images/index.json records it. */
export interface ImageRecord extends BuiltImage {
  repository: string;
  tag: string;
  /** The OCI layout directory, relative to index.json's directory (so the index is reproducible too). */
  layout: string;
}

export interface ImageIndex {
  version: string;
  images: Record<string, ImageRecord>;
}

export function tool(name: "crane" | "wasm-image" | "wasm-fetch"): string {
  const path = join(TOOLS_DIR, name);
  if (!existsSync(path)) {
    const part = name === "wasm-fetch" ? "fetcher" : "tools";
    throw new Error(`${path} is missing: run \`bash scripts/images-setup.sh ${part}\` (npm run package does it)`);
  }
  return path;
}

/** Builds the image of one module into the OCI layout `out` (re-created). */
export function buildImage(wasm: string, filter: string, version: string, out: string): BuiltImage {
  const stdout = execFileSync(tool("wasm-image"), ["-wasm", wasm, "-name", filter, "-version", version, "-out", out], {
    encoding: "utf8",
  });
  return JSON.parse(stdout) as BuiltImage;
}

/**
 * Builds every packaged filter's image from build/<filter>.wasm into `dir` (default build/images):
 * `<filter>/` (OCI layout), `<filter>.digest` (one line, the manifest digest) and index.json.
 */
export function packageImages(options: { dir?: string; wasmDir?: string; version?: string } = {}): ImageIndex {
  const dir = options.dir ?? IMAGES_DIR;
  const wasmDir = options.wasmDir ?? join(REPO_ROOT, "build");
  const version = options.version ?? packageVersion();
  mkdirSync(dir, { recursive: true });
  const index: ImageIndex = { version, images: {} };
  for (const filter of PACKAGED_FILTERS) {
    const wasm = join(wasmDir, `${filter}.wasm`);
    if (!existsSync(wasm)) throw new Error(`${wasm} is missing: run npm run build first`);
    const layout = join(dir, filter);
    const built = buildImage(wasm, filter, version, layout);
    writeFileSync(join(dir, `${filter}.digest`), `${built.digest}\n`);
    index.images[filter] = { ...built, repository: repositoryOf(filter), tag: version, layout: relative(dir, layout) };
  }
  writeFileSync(join(dir, "index.json"), `${JSON.stringify(index, null, 2)}\n`);
  return index;
}

/** build/images/index.json, checked against the .digest files next to it. */
export function readImageIndex(dir = IMAGES_DIR): ImageIndex {
  const path = join(dir, "index.json");
  if (!existsSync(path)) throw new Error(`${path} is missing: run npm run package`);
  const index = JSON.parse(readFileSync(path, "utf8")) as ImageIndex;
  for (const filter of PACKAGED_FILTERS) {
    const record = index.images[filter];
    if (!record) throw new Error(`${path}: no image for ${filter}: run npm run package`);
    const recorded = readFileSync(join(dir, `${filter}.digest`), "utf8").trim();
    if (recorded !== record.digest) throw new Error(`${path}: ${filter}.digest says ${recorded}, index.json ${record.digest}: run npm run package`);
  }
  return index;
}

/** `sha256:<hex>` → `<hex>`: a WasmPlugin's `sha256` field takes the bare hex. */
export function digestHex(digest: string): string {
  const match = /^sha256:([0-9a-f]{64})$/.exec(digest);
  if (!match) throw new Error(`digest: "${digest}" is not sha256:<64 hex digits>`);
  return match[1];
}

// Same sources, same image: the filters compiled again from their sources and packaged twice give
// byte-identical OCI layouts whose digests are the ones `npm run package` recorded in
// build/images/. The layer is checked field by field (owner, mode, mtime, gzip header), since any
// of them taken from the build machine would make the digest differ between two builds.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { before, describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import { buildImage, packageImages, PACKAGED_FILTERS, readImageIndex, REPO_ROOT, type ImageIndex } from "../../images/images.js";
import { scratchDir } from "../support/paths.js";

/** Compiles filters/<filter>/index.ts with build.mjs's release flags into `outDir`. */
function compile(filter: string, outDir: string): Promise<void> {
  const args = ["node_modules/assemblyscript/bin/asc.js", `filters/${filter}/index.ts`, "--config", "asconfig.json", "--target", "release", "--outFile", join(outDir, `${filter}.wasm`)];
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("exit", (code) => (code === 0 ? done() : fail(new Error(`asc ${filter}: exit ${code}\n${stderr}`))));
  });
}

/** Every file of a directory tree as path → bytes. */
function tree(dir: string): Map<string, Buffer> {
  const files = readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
  return new Map(files.map((e) => [relative(dir, join(e.parentPath, e.name)), readFileSync(join(e.parentPath, e.name))]));
}

/** The entries of a (POSIX ustar) tar archive: the header fields a build could leak into. */
function tarEntries(archive: Buffer): { name: string; mode: number; uid: number; gid: number; mtime: number; size: number; uname: string; type: string }[] {
  const field = (block: Buffer, at: number, length: number) => block.subarray(at, at + length).toString("latin1").replace(/\0.*$/s, "");
  const octal = (block: Buffer, at: number, length: number) => parseInt(field(block, at, length).trim() || "0", 8);
  const entries = [];
  for (let offset = 0; offset + 512 <= archive.length; ) {
    const block = archive.subarray(offset, offset + 512);
    if (block.every((b) => b === 0)) break;
    const size = octal(block, 124, 12);
    entries.push({
      name: field(block, 0, 100),
      mode: octal(block, 100, 8),
      uid: octal(block, 108, 8),
      gid: octal(block, 116, 8),
      size,
      mtime: octal(block, 136, 12),
      type: field(block, 156, 1),
      uname: field(block, 265, 32),
    });
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  return entries;
}

describe("plugin images are reproducible", () => {
  let recorded: ImageIndex;
  let compiled: string;
  let first: ImageIndex;
  let second: ImageIndex;
  let firstDir: string;
  let secondDir: string;

  before(async () => {
    recorded = readImageIndex();
    compiled = scratchDir("recompiled-");
    // Two compiles at a time (the machine's cores); each asc run is mostly one thread.
    const queue: string[] = [...PACKAGED_FILTERS];
    const worker = async () => {
      for (let filter = queue.shift(); filter; filter = queue.shift()) await compile(filter, compiled);
    };
    await Promise.all([worker(), worker()]);
    firstDir = scratchDir("images-a-");
    secondDir = scratchDir("images-b-");
    first = packageImages({ dir: firstDir, wasmDir: compiled, version: recorded.version });
    second = packageImages({ dir: secondDir, wasmDir: compiled, version: recorded.version });
  });

  it("compiling the sources again gives the modules npm run build made", () => {
    for (const filter of PACKAGED_FILTERS) {
      assert.deepEqual(readFileSync(join(compiled, `${filter}.wasm`)), readFileSync(join(REPO_ROOT, "build", `${filter}.wasm`)), filter);
    }
  });

  it("two builds give byte-identical layouts, and the digests npm run package recorded", () => {
    assert.deepEqual(tree(firstDir), tree(secondDir));
    for (const filter of PACKAGED_FILTERS) {
      assert.equal(first.images[filter].digest, second.images[filter].digest, filter);
      assert.equal(first.images[filter].digest, recorded.images[filter].digest, `${filter}: build/images/${filter}.digest is stale (run npm run package)`);
      assert.equal(readFileSync(join(firstDir, `${filter}.digest`), "utf8"), `${recorded.images[filter].digest}\n`);
    }
  });

  it("the layer holds one file, plugin.wasm, with no owner, time or name from the build machine", () => {
    for (const filter of PACKAGED_FILTERS) {
      const image = first.images[filter];
      const blob = readFileSync(join(firstDir, filter, "blobs", "sha256", image.layerDigest.slice("sha256:".length)));
      // gzip header: magic, deflate, no FNAME/FCOMMENT/FEXTRA flags, MTIME 0.
      assert.deepEqual([...blob.subarray(0, 3)], [0x1f, 0x8b, 8], filter);
      assert.equal(blob[3], 0, `${filter}: gzip flags (a file name or comment would be stored)`);
      assert.equal(blob.readUInt32LE(4), 0, `${filter}: gzip MTIME`);
      const entries = tarEntries(gunzipSync(blob));
      assert.deepEqual(entries, [
        { name: "plugin.wasm", mode: 0o444, uid: 0, gid: 0, size: image.moduleBytes, mtime: 0, type: "0", uname: "" },
      ], filter);
    }
  });

  it("a module that differs by one byte gives another digest", () => {
    const module = readFileSync(join(compiled, "probe.wasm"));
    const changed = Buffer.from(module);
    changed[changed.length - 1] ^= 0xff;
    const path = join(scratchDir("changed-"), "probe.wasm");
    writeFileSync(path, changed);
    const built = buildImage(path, "probe", recorded.version, join(scratchDir("changed-image-"), "probe"));
    assert.notEqual(built.digest, first.images.probe.digest);
    assert.notEqual(built.moduleSha256, first.images.probe.moduleSha256);
  });
});

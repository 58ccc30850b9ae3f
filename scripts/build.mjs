#!/usr/bin/env node
// Compiles every filter under filters/ to build/<name>.wasm and every test fixture under
// tests/fixtures/ to build/fixtures/<name>.wasm (release flags from asconfig.json).
// Usage: node scripts/build.mjs [--target debug] [name ...]
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

const args = process.argv.slice(2);
const targetIndex = args.indexOf("--target");
const target = targetIndex >= 0 ? args[targetIndex + 1] : "release";
const only = args.filter((arg, i) => !arg.startsWith("--") && (targetIndex < 0 || i !== targetIndex + 1));

function entries(dir, outDir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(dir, d.name, "index.ts")))
    .map((d) => ({ name: d.name, source: join(dir, d.name, "index.ts"), out: join(outDir, `${d.name}.wasm`) }));
}

const all = [...entries("filters", "build"), ...entries("tests/fixtures", "build/fixtures")];
const selected = only.length ? all.filter((e) => only.includes(e.name)) : all;
if (only.length && selected.length !== only.length) {
  console.error(`build: unknown filter in ${only.join(", ")}; known: ${all.map((e) => e.name).join(", ")}`);
  process.exit(2);
}
mkdirSync("build/fixtures", { recursive: true });
for (const entry of selected) {
  const result = spawnSync(
    process.execPath,
    ["node_modules/assemblyscript/bin/asc.js", entry.source, "--config", "asconfig.json", "--target", target, "--outFile", entry.out],
    { stdio: "inherit" },
  );
  if (result.status !== 0) {
    console.error(`build: ${entry.name} failed`);
    process.exit(result.status ?? 1);
  }
  console.log(`built ${entry.out}`);
}

#!/usr/bin/env node
// Builds the STOCK @solo-io/proxy-runtime 0.1.8 "context runtime" with a no-op filter, for the
// runtime benchmark (our thin runtime vs. the published one).
//
//   1. copies node_modules/@solo-io/proxy-runtime/assembly/*.ts to build/stock-runtime/
//      (generated; build/ is git-ignored),
//   2. applies the compile-only fixes listed in COMPILE_FIXES below (each must match exactly
//      once, so a different runtime version fails loudly instead of being half-patched) and
//      writes the resulting diff to build/stock-runtime.diff for review,
//   3. compiles bench/stock-runtime/noop_filter.ts to build/bench/stock_noop.wasm,
//   4. checks the module: only env.proxy_* imports, the ABI marker and malloc are exported.
//
// Usage (from anywhere): node bench/stock-runtime/build.mjs
// Then:                  node bench/stock-runtime/verify.mjs   (lifecycle simulation + timing)
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
process.chdir(ROOT); // every path below (and asc's --use internal name) is relative to the repo root

const PKG_DIR = "node_modules/@solo-io/proxy-runtime";
const SRC_DIR = join(PKG_DIR, "assembly");
const OUT_DIR = "build/stock-runtime";
const ENTRY = "bench/stock-runtime/noop_filter.ts";
const WASM = "build/bench/stock_noop.wasm";
const EXPECTED_VERSION = "0.1.8";

// The complete patch. Each entry: file, exact text, replacement, and why it is needed to compile.
// Nothing else in the runtime is touched: its debug logging, context map, CHECK_RESULT traps and
// buffer handling stay exactly as published.
const COMPILE_FIXES = [
  {
    file: "malloc.ts",
    // AS 0.27 has no ~lib/rt/index-full (the ARC runtime is gone); runtime helpers are global builtins.
    from: 'import {\n  __retain,\n  __release,\n} from "rt/index-full";\n',
    to: "// [stock-runtime build] ARC import removed: __pin/__unpin below are AS 0.27 builtins.\n",
  },
  {
    file: "malloc.ts",
    // __retain no longer exists; __pin is the tracing-GC way to keep the host's block alive until free().
    from: "return __retain(ptr);",
    to: "return __pin(ptr);",
  },
  {
    file: "malloc.ts",
    // __release no longer exists; __unpin is __pin's counterpart (the object is then ordinary GC garbage).
    from: "__release(ptr);",
    to: "__unpin(ptr);",
  },
  {
    file: "runtime.ts",
    // ~lib/bindings/wasi_unstable is gone from AS 0.27's std; declare the very same import locally.
    from: 'import { proc_exit } from "bindings/wasi_unstable";',
    to:
      "// [stock-runtime build] ~lib/bindings/wasi_unstable no longer exists; same import, declared here.\n" +
      "// @ts-ignore: decorator\n" +
      '@external("wasi_unstable", "proc_exit")\n' +
      "declare function proc_exit(rval: u32): void;",
  },
];

function fail(message) {
  console.error(`stock-runtime build: ${message}`);
  process.exit(1);
}

// 1. Copy.
const version = JSON.parse(readFileSync(join(PKG_DIR, "package.json"), "utf8")).version;
if (version !== EXPECTED_VERSION) fail(`expected @solo-io/proxy-runtime ${EXPECTED_VERSION}, found ${version}`);
rmSync(OUT_DIR, { recursive: true, force: true });
mkdirSync(OUT_DIR, { recursive: true });
const sources = readdirSync(SRC_DIR).filter((name) => name.endsWith(".ts"));
for (const name of sources) copyFileSync(join(SRC_DIR, name), join(OUT_DIR, name));
console.log(`copied ${sources.join(", ")} -> ${OUT_DIR}/`);

// 2. Patch.
for (const fix of COMPILE_FIXES) {
  const path = join(OUT_DIR, fix.file);
  const text = readFileSync(path, "utf8");
  const count = text.split(fix.from).length - 1;
  if (count !== 1) fail(`${fix.file}: expected exactly one match for ${JSON.stringify(fix.from)}, found ${count}`);
  writeFileSync(path, text.replace(fix.from, () => fix.to));
}
console.log(`applied ${COMPILE_FIXES.length} compile-only fixes (see bench/stock-runtime/README.md)`);
const diff = spawnSync("diff", ["-ru", "-x", "tsconfig.json", SRC_DIR, OUT_DIR], { encoding: "utf8" });
if (diff.status === 1) {
  writeFileSync("build/stock-runtime.diff", diff.stdout);
  console.log("patch as a diff: build/stock-runtime.diff");
}

// 3. Compile. --config points at an empty config: asc otherwise merges the repo's asconfig.json,
// whose `use abort=` names our own runtime's handler (and whose target would override nothing
// we pass, but would be applied silently).
mkdirSync(dirname(WASM), { recursive: true });
const ascArgs = [
  "node_modules/assemblyscript/bin/asc.js",
  ENTRY,
  "--config", "bench/stock-runtime/asconfig.json",
  "--outFile", WASM,
  "--optimizeLevel", "3",
  "--converge",
  "--noAssert",
  "--runtime", "incremental",
  "--exportStart", "_initialize",
  "--use", "abort=bench/stock-runtime/abort/stockAbort",
];
console.log(`node ${ascArgs.join(" ")}`);
const asc = spawnSync(process.execPath, ascArgs, { stdio: "inherit" });
if (asc.status !== 0) fail(`asc failed (exit ${asc.status})`);

// 4. Check the module's interface.
const bytes = readFileSync(WASM);
const module = new WebAssembly.Module(bytes);
const imports = WebAssembly.Module.imports(module);
const exports = WebAssembly.Module.exports(module);
console.log(`built ${WASM}: ${statSync(WASM).size} bytes`);
console.log(`imports (${imports.length}):`);
for (const i of imports) console.log(`  ${i.module}.${i.name} (${i.kind})`);
console.log(`exports (${exports.length}):`);
for (const e of exports) console.log(`  ${e.name} (${e.kind})`);

const problems = [];
for (const i of imports) {
  if (i.module !== "env" || !i.name.startsWith("proxy_")) problems.push(`forbidden import ${i.module}.${i.name}`);
}
for (const name of ["abort", "seed", "trace"]) {
  if (imports.some((i) => i.module === "env" && i.name === name)) problems.push(`imports env.${name}`);
}
const exported = new Set(exports.map((e) => e.name));
for (const name of ["proxy_abi_version_0_2_0", "malloc", "memory", "_initialize", "proxy_on_context_create"]) {
  if (!exported.has(name)) problems.push(`does not export ${name}`);
}
if (problems.length) fail(problems.join("; "));
console.log("interface OK: only env.proxy_* imports (no env.abort/seed/trace); exports the 0.2.0 ABI marker and malloc");
console.log(`(build/stock-runtime sources: ${relative(ROOT, resolve(OUT_DIR))})`);

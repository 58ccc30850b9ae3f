// The feed's modules form no import circle: two modules that import each other (even for a type
// only) cannot be read, tested or moved one without the other, and a value import in a circle
// can see the other module half-initialised. The graph is every relative import, `import type`,
// re-export and dynamic import between the TypeScript files under feed/src, as TypeScript's own
// pre-processor lists them.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, it } from "node:test";
import ts from "typescript";
import { REPO_ROOT, scratchDir } from "../support/paths.js";

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) files.push(...sourceFiles(p));
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")) files.push(p);
  }
  return files.sort();
}

/** The file a relative specifier names (`./x.js` is `./x.ts`, as tsx resolves it), if it is under `root`. */
function resolveImport(root: string, from: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined; // a package or node: built-in
  const base = resolve(dirname(from), specifier);
  for (const candidate of [base.replace(/\.js$/, ".ts"), `${base}.ts`, join(base, "index.ts")]) {
    if (candidate.startsWith(root + "/") && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** Every module under `root` and the modules under `root` it imports. */
function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(root)) {
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets = info.importedFiles.map((f) => resolveImport(root, file, f.fileName)).filter((t): t is string => t !== undefined);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Each circle found, as `a → b → a` (paths relative to `root`); empty when the graph has none. */
function importCycles(graph: Map<string, string[]>, root: string): string[] {
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const cycles: string[] = [];
  const visit = (file: string): void => {
    path.push(file);
    onPath.add(file);
    for (const next of graph.get(file) ?? []) {
      if (onPath.has(next)) cycles.push([...path.slice(path.indexOf(next)), next].map((f) => relative(root, f)).join(" → "));
      else if (!done.has(next)) visit(next);
    }
    path.pop();
    onPath.delete(file);
    done.add(file);
  };
  for (const file of graph.keys()) if (!done.has(file)) visit(file);
  return cycles;
}

describe("import graph", () => {
  const FEED = join(REPO_ROOT, "feed", "src");

  it("feed/src has no import circle", () => {
    const graph = importGraph(FEED);
    // The graph is the real one: files in subfolders, type-only imports and `..` imports are in it.
    assert.ok(graph.size > 20, `${graph.size} modules`);
    assert.ok(graph.get(join(FEED, "compute.ts"))?.includes(join(FEED, "compute_service.ts")), "compute.ts imports compute_service.ts");
    assert.ok(graph.get(join(FEED, "delta", "channel.ts"))?.includes(join(FEED, "mesh_model.ts")), "a type-only import from a subfolder");
    assert.deepEqual(importCycles(graph, FEED), []);
  });

  it("finds a circle through a type-only import and a re-export, and none once it is cut", () => {
    const dir = scratchDir("import-cycles-");
    writeFileSync(join(dir, "a.ts"), 'import type { B } from "./b.js";\nexport interface A { b?: B }\n');
    writeFileSync(join(dir, "b.ts"), 'export * from "./c.js";\nexport interface B { n: number }\n');
    writeFileSync(join(dir, "c.ts"), 'import { x } from "node:fs";\nexport type { A } from "./a.js";\nexport const y = x;\n');
    assert.deepEqual(importCycles(importGraph(dir), dir), ["a.ts → b.ts → c.ts → a.ts"]);
    writeFileSync(join(dir, "c.ts"), 'import { x } from "node:fs";\nexport const y = x;\n');
    assert.deepEqual(importCycles(importGraph(dir), dir), []);
  });
});

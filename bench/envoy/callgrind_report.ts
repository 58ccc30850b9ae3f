// Splits the callgrind dumps of bench/envoy/callgrind.ts into instructions per connection by layer.
//
//   npx tsx bench/envoy/callgrind_report.ts [build/bench/results.jsonl] [--envoy .venv/envoy] [--top 12]
//   npx tsx bench/envoy/callgrind_report.ts --regions [--envoy .venv/envoy]
//
// For every `envoy_instructions` figure of the results file it reads the worker thread's dump of
// the first measured batch (`dump`), runs `callgrind_annotate` on it (exclusive and inclusive
// cost per function) and names and layers each function from the stripped binary
// (callgrind_layers.ts). Code outside every mapped file is V8's JIT output (the wasm module and
// V8's wrappers); tcmalloc is its own section (google_malloc).
//
// Prints, per ratio of the results file, each layer's exclusive instructions per connection for
// the arm and its baseline and their difference, and the Envoy wasm Context methods with the
// largest inclusive cost (where Envoy enters the wasm machinery and serves host calls).
// `--regions` prints the runs of named functions that the layers' address ranges come from.
import { existsSync, readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { annotate } from "./callgrind_annotate.js";
import { Layers, OTHER, SYSTEM } from "./callgrind_layers.js";
import { fixed } from "./number_format.js";

export interface Figure {
  figure?: string;
  [field: string]: unknown;
}

/** Instructions per connection of one dump, by layer (exclusive), and of each wasm entry (inclusive). */
export interface Split {
  byLayer: Map<string, number>;
  entries: Map<string, number>;
}

const WASM_ENTRY = ["Envoy::Extensions::Common::Wasm::Context::", "Envoy::Extensions::NetworkFilters::Wasm::"];

export function split(layers: Layers, dump: string, connections: number): Split {
  const byLayer = new Map<string, number>();
  for (const { cost, address, obj } of annotate(dump, false)) {
    // A function callgrind could name is in a library with symbols, never in the stripped envoy.
    const layer = address !== undefined ? layers.classify(address, obj).layer : obj.includes("libc") ? SYSTEM : OTHER;
    byLayer.set(layer, (byLayer.get(layer) ?? 0) + cost / connections);
  }
  const entries = new Map<string, number>();
  for (const { cost, address, obj } of annotate(dump, true)) {
    if (address === undefined) continue;
    const { name } = layers.classify(address, obj);
    if (WASM_ENTRY.some((prefix) => name.startsWith(prefix))) entries.set(name, Math.max(entries.get(name) ?? 0, cost / connections));
  }
  return { byLayer, entries };
}

/** One arm of a results file: filter / variant / path / control. */
const armKey = (filter: unknown, variant: unknown, path: unknown, control: unknown) => JSON.stringify([filter, variant, path, !!control]);

export function readFigures(file: string): Figure[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as Figure);
}

/** The report as markdown lines. */
export function report(layers: Layers, figures: Figure[], top: number): string[] {
  const arms = figures.filter((f) => f.figure === "envoy_instructions" && typeof f.dump === "string" && existsSync(f.dump));
  const ratios = figures.filter((f) => f.figure === "envoy_instructions_ratio" && "value" in f);
  const data = new Map<string, Split>();
  for (const f of arms) data.set(armKey(f.filter, f.variant, f.path, f.control), split(layers, f.dump as string, f.connections as number));
  const biggest = (layer: string) => Math.max(...[...data.values()].map((d) => d.byLayer.get(layer) ?? 0));
  const names = [...new Set([...data.values()].flatMap((d) => [...d.byLayer.keys()]))].sort((a, b) => biggest(b) - biggest(a));
  const out: string[] = [];
  for (const r of ratios) {
    const arm = data.get(armKey(r.filter, r.variant, r.path, r.control));
    const base = data.get(armKey(r.baseline_filter ?? r.filter, r.baseline, r.path, false));
    if (!arm || !base) continue;
    out.push("");
    out.push(
      `## ${r.filter} / ${r.path}: ${r.variant} ÷ ${r.baseline} = ${fixed(r.value as number, 3)} ` +
        `(${fixed(r.arm_value as number, 0, { grouped: true })} vs ${fixed(r.baseline_value as number, 0, { grouped: true })} instructions per connection, worker)`,
    );
    out.push(`| layer (exclusive) | ${r.variant} | ${r.baseline} | difference |`);
    out.push("|---|---|---|---|");
    for (const layer of names) {
      const a = arm.byLayer.get(layer) ?? 0;
      const b = base.byLayer.get(layer) ?? 0;
      // leave out layers that are small in the arm and barely differ
      if (Math.abs(a - b) < 50 && a < 1000) continue;
      out.push(`| ${layer} | ${fixed(a, 0, { grouped: true })} | ${fixed(b, 0, { grouped: true })} | ${fixed(a - b, 0, { grouped: true, signed: true })} |`);
    }
    if (arm.entries.size > 0) {
      out.push("");
      out.push(`wasm Context methods, inclusive per connection (${r.variant}):`);
      for (const [name, cost] of [...arm.entries].sort((x, y) => y[1] - x[1]).slice(0, top)) out.push(`  ${fixed(cost, 0, { grouped: true }).padStart(10)}  ${name}`);
    }
  }
  return out;
}

function arg(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 && process.argv[at + 1] ? process.argv[at + 1]! : fallback;
}

function main(): void {
  const envoy = arg("envoy", ".venv/envoy");
  if (process.argv.includes("--regions")) {
    for (const r of new Layers(envoy).regions()) {
      console.log(`0x${r.low.toString(16)} 0x${r.high.toString(16)} ${String(r.count).padStart(5)} named functions  ${r.layer}`);
    }
    return;
  }
  const args = process.argv.slice(2);
  const valued = new Set(["--envoy", "--top"]);
  const results = args.find((a, i) => !a.startsWith("--") && !valued.has(args[i - 1] ?? "")) ?? "build/bench/results.jsonl";
  for (const line of report(new Layers(envoy), readFigures(results), Number(arg("top", "12")))) console.log(line);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) main();

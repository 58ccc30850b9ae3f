// Splits the perf profiles written by `bench/envoy/profile.sh perf` into µs per connection.
//
//   npx tsx bench/envoy/profile_report.ts [build/profile ...] [--envoy .venv/envoy] [--top 25]
//
// Several directories (one per perf run) give medians with their spread. The pinned Envoy is
// stripped, so its functions are named from the binary itself (symbolize.ts): bounds from
// .eh_frame, names of virtual functions from vtables + RTTI ("Class::vslot[k]"); addresses in
// .text that no FDE covers are V8's embedded builtins (emitted as raw code without unwind info);
// '[JIT]' / anonymous executable memory is V8-generated code (the wasm module's functions and
// V8's wrappers around them). A sample is 'wasm plumbing' when any frame of its call chain (frame
// pointers) is JIT code, a V8 builtin or a function of a wasm / V8 / proxy-wasm class; the rest
// is split by DSO. Writes every figure to <first directory>/report.json.
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { fixed } from "./number_format.js";
import { perfSamples } from "./perf_script.js";
import { libraryAt } from "./envoy_regions.js";
import { NO_UNWIND_INFO, Symbolizer } from "./symbolize.js";

const WASM_CLASS = /(Envoy::Extensions::Common::Wasm|Envoy::Extensions::NetworkFilters::Wasm|proxy_wasm|\bv8::|\bwasm::)/;

// The region of an address in the binary: a library range (envoy_regions.ts), V8's embedded
// builtins (inside V8's range, without unwind info) or tcmalloc (its own section).
const REGION_OF_LIBRARY = { "wasm host": "wasm host: Envoy wasm extension + proxy-wasm-cpp-host", "V8 wasm C API": "V8 wasm C API", V8: "V8 runtime/compiler" } as const;
const PLUMBING = new Set(["wasm host: Envoy wasm extension + proxy-wasm-cpp-host", "V8 wasm C API", "V8 builtins (embedded blob)", "V8 runtime/compiler", "JIT"]);

// Where Envoy enters the wasm machinery (outermost wasm frame of a sample), named from the call
// stacks of this binary: Context vslot[53] is called by the network filter manager when the
// connection starts and calls onCreate (proxy_on_context_create) and proxy_on_new_connection;
// vslot[73] is called from the connection's close event and runs the close callbacks,
// proxy_on_done and proxy_on_log; vslot[24] is called from the socket teardown (proxy_on_delete).
const PHASES = new Map([
  ["Envoy::Extensions::Common::Wasm::Context::vslot[53]", "open: Context::onNewConnection (context_create, new_connection, its host calls)"],
  ["Envoy::Extensions::Common::Wasm::Context::vslot[73]", "close: Context::onEvent (close callbacks, done, log)"],
  ["Envoy::Extensions::Common::Wasm::Context::vslot[24] (+1 vtables)", "teardown: delete"],
]);
const LAYER = new Map([
  ["JIT", "JIT code (guest + V8 wrappers)"],
  ["V8 wasm C API", "V8 C API (call in / callback out)"],
  ["V8 runtime/compiler", "V8 runtime"],
  ["V8 builtins (embedded blob)", "V8 runtime"],
  ["wasm host: Envoy wasm extension + proxy-wasm-cpp-host", "Envoy wasm host + proxy-wasm-cpp-host"],
  ["envoy (rest)", "Envoy (rest)"],
]);
const layerOf = (region: string) => LAYER.get(region) ?? region;

function region(sym: Symbolizer, addr: number): string {
  const library = libraryAt(addr);
  if (library === "V8" && sym.function(addr).start === NO_UNWIND_INFO) return "V8 builtins (embedded blob)";
  if (library) return REGION_OF_LIBRARY[library];
  const malloc = sym.elf.sections.get("google_malloc");
  if (malloc && malloc.addr <= addr && addr < malloc.addr + malloc.size) return "tcmalloc";
  return "envoy (rest)";
}

/** What a frame's DSO is: the envoy binary, V8's JIT code, the kernel, or a library by file name. */
export function dsoKind(dso: string): string {
  if (dso.endsWith("/envoy")) return "envoy";
  if (dso.includes("JIT") || dso.includes("anon") || dso.startsWith("[unknown") || dso.startsWith("//") || /perf-\d+\.map/.test(dso)) return "jit";
  if (dso.includes("kernel")) return "kernel";
  return dso.slice(dso.lastIndexOf("/") + 1);
}

type Counts = Record<string, number>;
const add = (c: Counts, key: string, value: number) => (c[key] = (c[key] ?? 0) + value);

/** One arm's figures, µs per connection. */
export interface ArmReport {
  arm: string;
  connections: number;
  cpu_us_per_conn_proc: number;
  sampled_us_per_conn: number;
  self: Counts;
  region: Counts;
  thread: Counts;
  split: Counts;
  entry: Counts;
  plumbing_self: Counts;
  phase: Counts;
  layer: Counts;
  plumbing_total: number;
  totals?: Counts;
}

export async function analyze(sym: Symbolizer, armDir: string, arm: string): Promise<ArmReport> {
  const meta = JSON.parse(readFileSync(join(armDir, `${arm}.json`), "utf8")) as { connections: number; cpuUs: number };
  const conns = meta.connections;
  const per = (ns: number) => ns / 1000 / conns; // the period is ns of cpu-clock
  const perAll = (c: Counts): Counts => Object.fromEntries(Object.entries(c).map(([k, v]) => [k, per(v)]));
  const [self, byRegion, byThread, split, entry, plumbingFn, phase, layer]: [Counts, Counts, Counts, Counts, Counts, Counts, Counts, Counts] = [{}, {}, {}, {}, {}, {}, {}, {}];
  const cache = new Map<number, [string, string]>();

  /** Region and function name of one frame. */
  const name = (addr: number, s: string, dso: string): [string, string] => {
    const kind = dsoKind(dso);
    if (kind === "envoy") {
      let named = cache.get(addr);
      if (!named) {
        const reg = region(sym, addr);
        named = [reg, reg.startsWith("V8 builtins") ? reg : sym.function(addr).name];
        cache.set(addr, named);
      }
      return named;
    }
    if (kind === "jit") return ["JIT", "[JIT: wasm code + V8 wrappers]"];
    return [kind, `${s} [${kind}]`];
  };

  let total = 0;
  for await (const { comm, period, frames } of perfSamples(join(armDir, `${arm}.perf.data`))) {
    total += period;
    add(byThread, comm.startsWith("wrk:") ? "worker" : comm, period);
    if (frames.length === 0) continue;
    const named = frames.map((f) => name(f.addr, f.sym, f.dso));
    const [reg0, fn0] = named[0]!;
    add(self, fn0, period);
    add(byRegion, reg0, period);
    let outermost = -1;
    named.forEach(([reg, fn], i) => {
      if (PLUMBING.has(reg) || WASM_CLASS.test(fn)) outermost = i;
    });
    if (outermost >= 0) {
      // the outermost plumbing frame is where Envoy entered the wasm machinery
      const outer = named[outermost]![1];
      add(entry, outer, period);
      add(phase, PHASES.get(outer) ?? "other entry", period);
      add(layer, layerOf(reg0), period);
      add(split, "under wasm plumbing, leaf in " + reg0, period);
      add(plumbingFn, `${fn0} {${reg0.split(":")[0]}}`, period);
    } else {
      add(split, "not under wasm plumbing, leaf in " + reg0, period);
      add(layer, "not wasm: " + layerOf(reg0), period);
    }
  }
  return {
    arm,
    connections: conns,
    cpu_us_per_conn_proc: meta.cpuUs / conns,
    sampled_us_per_conn: per(total),
    self: perAll(self),
    region: perAll(byRegion),
    thread: perAll(byThread),
    split: perAll(split),
    entry: perAll(entry),
    plumbing_self: perAll(plumbingFn),
    phase: perAll(phase),
    layer: perAll(layer),
    plumbing_total: per(Object.values(phase).reduce((a, b) => a + b, 0)),
  };
}

const cell = (text: string) => text.replaceAll("|", "/");

/** One run's rows of every arm, keys sorted by the largest increase over the `base` arm. */
function table(title: string, rows: Record<string, Counts>, arms: string[], top?: number, base = "without"): string[] {
  const increase = (k: string) => Math.max(...arms.map((a) => (rows[a]![k] ?? 0) - (rows[base]?.[k] ?? 0)));
  let keys = [...new Set(arms.flatMap((a) => Object.keys(rows[a]!)))].sort((x, y) => increase(y) - increase(x));
  if (top) keys = keys.slice(0, top);
  return [
    "",
    `## ${title} (µs per connection)`,
    `| ${["what", ...arms].join(" | ")} |`,
    "|" + "---|".repeat(arms.length + 1),
    ...keys.map((k) => `| ${[[...cell(k)].slice(0, 110).join(""), ...arms.map((a) => fixed(rows[a]![k] ?? 0, 1))].join(" | ")} |`),
  ];
}

/** "median [min–max]" of values, or the value alone. */
export function spread(values: number[]): string {
  const v = [...values].sort((a, b) => a - b);
  const half = Math.floor(v.length / 2);
  const mid = v.length % 2 ? v[half]! : (v[half - 1]! + v[half]!) / 2;
  return v.length > 1 ? `${fixed(mid, 1)} [${fixed(v[0]!, 1)}–${fixed(v.at(-1)!, 1)}]` : fixed(mid, 1);
}

type CountsKey = "totals" | "phase" | "layer";

/** median [min–max] over runs of runs[i][arm][key][row]. */
function summary(title: string, runs: Record<string, ArmReport>[], arms: string[], key: CountsKey, rows?: string[]): string[] {
  const value = (run: Record<string, ArmReport>, a: string, r: string) => run[a]![key]?.[r] ?? 0;
  const total = (r: string) => runs.reduce((sum, run) => sum + arms.reduce((s, a) => s + value(run, a, r), 0), 0);
  const ordered = rows ?? [...new Set(runs.flatMap((run) => arms.flatMap((a) => Object.keys(run[a]![key] ?? {}))))].sort((x, y) => total(y) - total(x));
  return [
    "",
    `## ${title} (µs per connection, median [min–max] of ${runs.length} runs)`,
    `| ${["what", ...arms].join(" | ")} |`,
    "|" + "---|".repeat(arms.length + 1),
    ...ordered.map((r) => `| ${[r, ...arms.map((a) => spread(runs.map((run) => value(run, a, r))))].join(" | ")} |`),
  ];
}

const ARM_ORDER = ["without", "bare", "callbacks", "getprop", "setprop", "hostcalls", "newconn", "newconn_hostcalls", "newconn_min", "filterstate", "noop", "passthrough", "mtls_with", "mtls_native"];
const TOTALS = ["CPU/conn (/proc, under perf)", "sampled", "wasm plumbing (stacks)", "not wasm plumbing"];

function arg(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 && process.argv[at + 1] ? process.argv[at + 1]! : fallback;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const given = args.filter((a) => !a.startsWith("--") && existsSync(a) && statSync(a).isDirectory());
  const dirs = given.length > 0 ? given : ["build/profile"];
  const top = Number(arg("top", "25"));
  const arms = ARM_ORDER.filter((a) => dirs.every((d) => existsSync(join(d, `${a}.perf.data`))));
  const sym = new Symbolizer(arg("envoy", ".venv/envoy"));
  console.log(`symbolizer: ${sym.starts.length} functions (FDEs), ${sym.vtables.size} named through vtables; runs: ${dirs.join(", ")}`);
  const runs: Record<string, ArmReport>[] = [];
  for (const d of dirs) {
    const run: Record<string, ArmReport> = {};
    for (const a of arms) {
      const r = await analyze(sym, d, a);
      r.totals = {
        [TOTALS[0]!]: r.cpu_us_per_conn_proc,
        [TOTALS[1]!]: r.sampled_us_per_conn,
        [TOTALS[2]!]: r.plumbing_total,
        [TOTALS[3]!]: r.sampled_us_per_conn - r.plumbing_total,
      };
      run[a] = r;
    }
    runs.push(run);
  }
  const lines = [
    ...summary("totals", runs, arms, "totals", TOTALS),
    ...summary("wasm plumbing by phase (outermost wasm frame)", runs, arms, "phase"),
    ...summary("by layer of the sampled instruction (wasm plumbing first, then the rest)", runs, arms, "layer"),
  ];
  if (runs.length === 1) {
    const only = runs[0]!;
    const pick = (field: "thread" | "entry" | "plumbing_self" | "self") => Object.fromEntries(arms.map((a) => [a, only[a]![field]]));
    lines.push(
      ...table("by thread", pick("thread"), arms),
      ...table("wasm plumbing by its outermost plumbing frame (where Envoy enters it)", pick("entry"), arms, top),
      ...table("wasm plumbing: self time by function", pick("plumbing_self"), arms, top),
      ...table("self time by function, sorted by the largest increase over 'without'", pick("self"), arms, top),
    );
  }
  for (const line of lines) console.log(line);
  writeFileSync(join(dirs[0]!, "report.json"), JSON.stringify(runs, null, 1));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await main();

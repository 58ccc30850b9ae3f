// The ELF reader and symbolizer against the real pinned Envoy binary (.venv/envoy, stripped: no
// symbol table, so every name here comes from .eh_frame, .dynsym or vtables + RTTI).
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { join } from "node:path";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { JIT, Layers, LOAD_BASE, SYSTEM, WASM_HOST } from "./callgrind_layers.js";
import { libraryAt } from "./envoy_regions.js";
import { lastAtOrBelow, NO_UNWIND_INFO, type Symbolizer } from "./symbolize.js";

const WASM_CONTEXT = "Envoy::Extensions::Common::Wasm::Context";

describe("symbolizer on the pinned Envoy binary", () => {
  let layers: Layers;
  let sym: Symbolizer;
  before(() => {
    layers = new Layers(join(REPO_ROOT, ".venv/envoy"));
    sym = layers.sym;
  });

  it("finds .eh_frame function bounds, sorted, one of which covers the entry point", () => {
    assert.ok(sym.starts.length > 100_000, `only ${sym.starts.length} FDEs`);
    for (let i = 1; i < sym.starts.length; i++) assert.ok(sym.starts[i - 1]! <= sym.starts[i]!, `FDE ${i} out of order`);
    const entry = sym.elf.entry;
    const i = lastAtOrBelow(sym.starts, entry);
    assert.ok(i >= 0 && sym.starts[i]! <= entry && entry < sym.ends[i]!, `no FDE covers the entry point ${entry.toString(16)}`);
    const text = sym.elf.section(".text");
    assert.ok(text.addr <= entry && entry < text.addr + text.size, "the entry point is in .text");
    assert.equal(sym.function(entry).start, sym.starts[i]);
  });

  it("names the virtual functions of Envoy's wasm Context class through its vtable and RTTI, demangled", () => {
    const slots = [...sym.vtables.values()].flat().filter((s) => s.cls === WASM_CONTEXT);
    assert.ok(slots.length > 50, `${slots.length} vtable slots of ${WASM_CONTEXT}`);
    const first = [...sym.vtables].find(([, s]) => s[0]!.cls === WASM_CONTEXT && s[0]!.slot === 0);
    assert.ok(first, "slot 0 of the Context vtable");
    assert.match(sym.function(first[0]).name, /^Envoy::Extensions::Common::Wasm::Context::vslot\[0\]/);
    // a function inside it (past its first instruction) has the same name
    assert.equal(sym.function(first[0] + 1).name, sym.function(first[0]).name);
    // callgrind prints the file address of code in the envoy object, the mapped one of code in none
    assert.deepEqual(layers.classify(first[0], "/work/.venv/envoy"), { layer: WASM_HOST, name: sym.function(first[0]).name });
    assert.deepEqual(layers.classify(first[0] + LOAD_BASE, "???"), { layer: WASM_HOST, name: sym.function(first[0]).name });
  });

  it("names the functions the binary exports (tcmalloc's malloc) by their dynamic symbol", () => {
    const malloc = [...sym.exported].find(([, name]) => name === "malloc");
    assert.ok(malloc, "malloc in .dynsym");
    assert.deepEqual(sym.function(malloc[0]), { start: malloc[0], name: "malloc" });
    assert.equal(layers.classify(malloc[0] + LOAD_BASE, "???").layer, "tcmalloc");
  });

  it("has library ranges that fit the pinned binary: V8's classes, the wasm host's classes and the builtins blob inside them", () => {
    const outside = (pattern: RegExp, library: string) =>
      [...sym.vtables].filter(([fn, slots]) => pattern.test(slots[0]!.cls) && libraryAt(fn) !== library).map(([fn, slots]) => `${slots[0]!.cls} at ${fn.toString(16)}`);
    assert.deepEqual(outside(/^v8::/, "V8").slice(0, 5), []);
    assert.deepEqual(outside(/^(proxy_wasm::|Envoy::Extensions::Common::Wasm::Context$)/, "wasm host").slice(0, 5), []);
    // V8's embedded builtins: the only long stretch of .text without unwind info
    let covered = sym.text[0];
    const stretches: [number, number][] = [];
    sym.starts.forEach((start, i) => {
      if (start - covered > 1_000_000) stretches.push([covered, start]);
      covered = Math.max(covered, sym.ends[i]!);
    });
    assert.equal(stretches.length, 1, `stretches without unwind info: ${JSON.stringify(stretches)}`);
    const [low, high] = stretches[0]!;
    assert.equal(libraryAt(low), "V8");
    assert.equal(libraryAt(high - 1), "V8");
    assert.equal(sym.function(low + 16).start, NO_UNWIND_INFO);
  });

  it("puts code outside the binary in the JIT layer and libc's code with the system libraries", () => {
    assert.equal(layers.classify(0x4_0000_0000, "???").layer, JIT);
    assert.equal(layers.classify(0x5000, "/usr/lib/x86_64-linux-gnu/libc.so.6").layer, SYSTEM);
  });
});

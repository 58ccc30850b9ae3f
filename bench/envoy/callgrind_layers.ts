// Puts each function of a callgrind dump of the stripped Envoy into a layer (wasm host, V8, TLS,
// HTTP, ...). A function is placed by the library range it lies in (envoy_regions.ts), else by
// its own class (its vtable slot names it), else by the class of the nearest named functions
// around it (the linker keeps a library's code together): the layers are inferred, and the report
// says so.
import { basename } from "node:path";
import { libraryAt } from "./envoy_regions.js";
import { lastAtOrBelow, Symbolizer } from "./symbolize.js";

/**
 * Where valgrind maps the PIE envoy binary (its first mapping, /proc/<pid>/maps under valgrind).
 * callgrind names an unnamed function of a known object by its address in that object's file, so
 * only code valgrind attributes to no object ("???": tcmalloc's google_malloc section, V8's JIT
 * code) carries the mapped address. Measured on 1.40.0 under valgrind 3.19: of the functions a
 * dump gives the envoy object, 99.9% start exactly at an FDE start as printed and ~9% once shifted
 * by this base; of the "???" functions inside the binary's range, 100% once shifted.
 */
export const LOAD_BASE = 0x108000;

export const WASM_HOST = "wasm host (Envoy wasm extension + proxy-wasm-cpp-host)";
export const V8 = "V8 (C API, runtime, builtins)";
export const OTHER = "Envoy (other)";
export const JIT = "JIT (wasm module + V8 wrappers)";
export const SYSTEM = "libc / system libraries";

/** A class name's layer: the first pattern it matches. */
const LAYERS: [RegExp, string][] = [
  [/Envoy::Extensions::(Common|NetworkFilters)::Wasm|proxy_wasm/, WASM_HOST],
  [/\bv8::|\bwasm::|cppgc|\bheap::base/, V8],
  [/\bbssl::|TransportSockets::Tls|Ssl::|\bssl_|Tls::/, "TLS (Envoy TLS transport socket + BoringSSL)"],
  [/ConnPool|Http2::|Http1::|Http::|nghttp2|oghttp2|http2::|quiche|Tcp::ConnectionPool/, "HTTP codecs and connection pools"],
  [/FilterState|StreamInfo|Router::|Formatter|AccessLog/, "filter state, stream info, access logs"],
  [/Network::|Event::|TcpProxy|Upstream::|Listener|Server::/, "Envoy connection handling (network, dispatcher, tcp_proxy, upstream)"],
  [/Stats::/, "stats"],
];

/** A library range's layer (envoy_regions.ts): the V8 C API counts as V8. */
const RANGE_LAYER = { "wasm host": WASM_HOST, "V8 wasm C API": V8, V8 } as const;

export function layerOfName(name: string): string {
  for (const [pattern, layer] of LAYERS) if (pattern.test(name)) return layer;
  return OTHER;
}

/** A shared library's layer: the C runtime together, anything else by its file name. */
function libraryLayer(obj: string): string {
  const base = basename(obj);
  return ["libc", "ld-", "libm", "libpthread"].some((p) => base.startsWith(p)) ? SYSTEM : base;
}

export class Layers {
  readonly sym: Symbolizer;
  /** tcmalloc's own section of the binary. */
  private readonly malloc: [number, number];
  /** Starts of the vtable-named functions in address order, and each one's layer. */
  readonly namedStarts: number[];
  readonly namedLayers: string[];
  /** The highest function end: above it (plus a margin) is memory no file maps, V8's JIT code. */
  private readonly high: number;

  constructor(envoy: string) {
    this.sym = new Symbolizer(envoy);
    const gm = this.sym.elf.sections.get("google_malloc");
    this.malloc = gm ? [gm.addr, gm.addr + gm.size] : [0, 0];
    const named = [...this.sym.vtables].map(([start, slots]) => ({ start, layer: layerOfName(slots[0]!.cls) })).sort((a, b) => a.start - b.start);
    this.namedStarts = named.map((n) => n.start);
    this.namedLayers = named.map((n) => n.layer);
    this.high = this.sym.ends.reduce((a, b) => Math.max(a, b), 0);
  }

  /** Layer and function name of an unnamed callgrind function: its address as callgrind prints it and its object file. */
  classify(address: number, obj: string): { layer: string; name: string } {
    if (obj && obj !== "???" && !obj.endsWith("/envoy")) return { layer: libraryLayer(obj), name: basename(obj) };
    const vaddr = obj.endsWith("/envoy") ? address : address - LOAD_BASE;
    if (!(vaddr >= 0 && vaddr < this.high + 0x100000)) return { layer: JIT, name: "[JIT]" };
    if (this.malloc[0] <= vaddr && vaddr < this.malloc[1]) return { layer: "tcmalloc", name: "tcmalloc" };
    const { start, name } = this.sym.function(vaddr);
    const library = libraryAt(vaddr);
    if (library) return { layer: RANGE_LAYER[library], name };
    const slots = this.sym.vtables.get(start);
    if (slots && slots.length > 0) return { layer: layerOfName(slots[0]!.cls), name };
    const i = lastAtOrBelow(this.namedStarts, vaddr);
    const around = new Set([i, i + 1].filter((j) => j >= 0 && j < this.namedLayers.length).map((j) => this.namedLayers[j]!));
    if (around.size === 1) return { layer: [...around][0]!, name };
    return { layer: OTHER, name };
  }

  /** Runs of consecutive vtable-named functions of one layer: the evidence for envoy_regions.ts. */
  regions(): { low: number; high: number; layer: string; count: number }[] {
    const runs: { low: number; high: number; layer: string; count: number }[] = [];
    this.namedStarts.forEach((start, i) => {
      const layer = this.namedLayers[i]!;
      const last = runs.at(-1);
      if (last && last.layer === layer) {
        last.high = start;
        last.count++;
      } else runs.push({ low: start, high: start, layer, count: 1 });
    });
    return runs.filter((r) => r.count >= 5 && (r.layer === WASM_HOST || r.layer === V8));
  }
}

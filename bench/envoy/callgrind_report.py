#!/usr/bin/env python3
"""Splits the callgrind dumps of bench/envoy/callgrind.ts into instructions per connection by layer.

usage: python3 bench/envoy/callgrind_report.py build/bench/results.jsonl [--envoy .venv/envoy] [--top 12]

For every `envoy_instructions` figure of the results file it reads the worker thread's dump of
the first measured batch (`dump`), runs `callgrind_annotate` on it (exclusive and inclusive
cost per function) and names each function the way bench/envoy/profile_report.py does for perf
(the pinned Envoy is stripped): function bounds from .eh_frame, names of virtual functions from
vtables + RTTI. Each function is put in a layer by its own class, or else by the class of the
nearest named function around it (the linker keeps a library's code together), so the layers are
inferred, and say so. Code outside every mapped file is V8's JIT output (the wasm module and
V8's wrappers). tcmalloc is its own section (google_malloc).

Prints, per path, each layer's exclusive instructions per connection for every arm and the
difference of each arm from its baseline (the ratios of the benchmark), and the Envoy wasm
Context methods with the largest inclusive cost (where Envoy enters the wasm machinery and
serves host calls).
"""
import bisect
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_report import Elf, Symbolizer  # noqa: E402

# Where valgrind maps the PIE envoy binary (its first mapping, /proc/<pid>/maps under valgrind).
LOAD_BASE = 0x108000

LAYERS = [
    (re.compile(r"Envoy::Extensions::(Common|NetworkFilters)::Wasm|proxy_wasm"), "wasm host (Envoy wasm extension + proxy-wasm-cpp-host)"),
    (re.compile(r"\bv8::|\bwasm::|cppgc|\bheap::base"), "V8 (C API, runtime, builtins)"),
    (re.compile(r"\bbssl::|TransportSockets::Tls|Ssl::|\bssl_|Tls::"), "TLS (Envoy TLS transport socket + BoringSSL)"),
    (re.compile(r"ConnPool|Http2::|Http1::|Http::|nghttp2|oghttp2|http2::|quiche|Tcp::ConnectionPool"), "HTTP codecs and connection pools"),
    (re.compile(r"FilterState|StreamInfo|Router::|Formatter|AccessLog"), "filter state, stream info, access logs"),
    (re.compile(r"Network::|Event::|TcpProxy|Upstream::|Listener|Server::"), "Envoy connection handling (network, dispatcher, tcp_proxy, upstream)"),
    (re.compile(r"Stats::"), "stats"),
]
OTHER = "Envoy (other)"
WASM_HOST = LAYERS[0][1]
V8 = LAYERS[1][1]
# Address ranges (file addresses) of the pinned Envoy 1.40.0 binary where the named functions of
# one library cluster (python3 bench/envoy/callgrind_report.py --regions prints the runs they come
# from): every function inside belongs to that library, named or not.
REGIONS = [
    (0x2C7B800, 0x2CA5E00, WASM_HOST),
    (0x2CA5E00, 0x2CB0620, V8),  # the V8 wasm C API
    (0x2F3E8D0, 0x2FA9060, WASM_HOST),
    (0x2FAF7F0, 0x4446D70, V8),  # runtime, compiler and the embedded builtins
]


class Layers:
    def __init__(self, envoy):
        self.sym = Symbolizer(envoy)
        elf = Elf(envoy)
        gm = elf.sections.get("google_malloc")
        self.malloc = (gm["addr"], gm["addr"] + gm["size"]) if gm else (0, 0)
        # Named functions in address order, each with its layer, for the neighbour rule.
        named = []
        for start, names in self.sym.vt.items():
            layer = self.layer_of_name(names[0][0])
            named.append((start, layer))
        named.sort()
        self.named_starts = [s for s, _ in named]
        self.named_layers = [l for _, l in named]
        self.high = max(self.sym.ends)

    @staticmethod
    def layer_of_name(name):
        for pattern, layer in LAYERS:
            if pattern.search(name):
                return layer
        return OTHER

    def classify(self, address, obj):
        """(layer, function name) of a callgrind function address in object `obj`."""
        if obj and obj != "???" and not obj.endswith("/envoy"):
            base = os.path.basename(obj)
            return ("libc / system libraries" if base.startswith(("libc", "ld-", "libm", "libpthread")) else base), base
        vaddr = address - LOAD_BASE
        if not (0 <= vaddr < self.high + 0x100000):
            return "JIT (wasm module + V8 wrappers)", "[JIT]"
        if self.malloc[0] <= vaddr < self.malloc[1]:
            return "tcmalloc", "tcmalloc"
        start, name = self.sym.function(vaddr)
        for lo, hi, layer in REGIONS:
            if lo <= vaddr < hi:
                return layer, name
        names = self.sym.vt.get(start)
        if names:
            return self.layer_of_name(names[0][0]), name
        i = bisect.bisect_right(self.named_starts, vaddr) - 1
        around = {self.named_layers[j] for j in (i, i + 1) if 0 <= j < len(self.named_layers)}
        if len(around) == 1:
            return next(iter(around)), name
        return OTHER, name


LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S*):(\S+)\s+\[(.*)\]\s*$")


def annotate(path, inclusive):
    out = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100", path], capture_output=True, text=True).stdout
    rows = []
    for line in out.split("\n"):
        m = LINE.match(line)
        if not m:
            continue
        cost = int(m.group(1).replace(",", ""))
        fn, obj = m.group(3), m.group(4)
        hexaddr = re.fullmatch(r"0x([0-9a-f]+)", fn)
        rows.append((cost, int(hexaddr.group(1), 16) if hexaddr else None, fn, obj))
    return rows


def split(layers, dump, connections):
    by_layer = defaultdict(float)
    for cost, address, fn, obj in annotate(dump, False):
        layer = layers.classify(address, obj)[0] if address is not None else ("libc / system libraries" if "libc" in obj else OTHER)
        by_layer[layer] += cost / connections
    entries = defaultdict(float)
    for cost, address, fn, obj in annotate(dump, True):
        if address is None:
            continue
        layer, name = layers.classify(address, obj)
        if name.startswith("Envoy::Extensions::Common::Wasm::Context::") or name.startswith("Envoy::Extensions::NetworkFilters::Wasm::"):
            entries[name] = max(entries[name], cost / connections)
    return by_layer, entries


def print_regions(envoy):
    """Runs of consecutive vtable-named functions of one layer: the evidence for REGIONS."""
    layers = Layers(envoy)
    runs = []
    for start, layer in zip(layers.named_starts, layers.named_layers):
        if runs and runs[-1][2] == layer:
            runs[-1][1] = start
            runs[-1][3] += 1
        else:
            runs.append([start, start, layer, 1])
    for lo, hi, layer, count in runs:
        if count >= 5 and layer in (WASM_HOST, V8):
            print(f"{lo:#x} {hi:#x} {count:5d} named functions  {layer}")


def main():
    args = sys.argv[1:]
    if "--regions" in args:
        return print_regions(args[args.index("--envoy") + 1] if "--envoy" in args else ".venv/envoy")
    results = next((a for a in args if not a.startswith("--")), "build/bench/results.jsonl")
    envoy = args[args.index("--envoy") + 1] if "--envoy" in args else ".venv/envoy"
    top = int(args[args.index("--top") + 1]) if "--top" in args else 12
    figures = [json.loads(l) for l in open(results) if l.strip()]
    arms = [f for f in figures if f.get("figure") == "envoy_instructions" and "dump" in f and os.path.exists(f["dump"])]
    ratios = [f for f in figures if f.get("figure") == "envoy_instructions_ratio" and "value" in f]
    layers = Layers(envoy)
    key = lambda f: (f["filter"], f["variant"], f["path"], bool(f.get("control")))
    data = {key(f): split(layers, f["dump"], f["connections"]) for f in arms}
    names = sorted({l for by, _ in data.values() for l in by}, key=lambda l: -max(by.get(l, 0) for by, _ in data.values()))
    for r in ratios:
        arm = (r["filter"], r["variant"], r["path"], bool(r.get("control")))
        base = (r.get("baseline_filter", r["filter"]), r["baseline"], r["path"], False)
        if arm not in data or base not in data:
            continue
        a, b = data[arm][0], data[base][0]
        print(f"\n## {r['filter']} / {r['path']}: {r['variant']} ÷ {r['baseline']} = {r['value']:.3f} ({r['arm_value']:,} vs {r['baseline_value']:,} instructions per connection, worker)")
        print("| layer (exclusive) | " + f"{r['variant']} | {r['baseline']} | difference |")
        print("|---|---|---|---|")
        for l in names:
            if abs(a.get(l, 0) - b.get(l, 0)) < 50 and a.get(l, 0) < 1000:
                continue
            print(f"| {l} | {a.get(l, 0):,.0f} | {b.get(l, 0):,.0f} | {a.get(l, 0) - b.get(l, 0):+,.0f} |")
        entries = data[arm][1]
        if entries:
            print(f"\nwasm Context methods, inclusive per connection ({r['variant']}):")
            for name, cost in sorted(entries.items(), key=lambda e: -e[1])[:top]:
                print(f"  {cost:>10,.0f}  {name}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Splits the perf profiles written by `bench/envoy/profile.sh perf` into µs per connection.

usage: python3 bench/envoy/profile_report.py build/profile [--envoy .venv/envoy] [--top 25]

The pinned Envoy binary is stripped, so functions are recovered from the binary itself:
  * function boundaries from .eh_frame_hdr / .eh_frame (one FDE per function);
  * names of virtual functions from vtables + RTTI: every R_X86_64_RELATIVE relocation that
    points at a typeinfo object starts a vtable; the slots after it are that class's virtual
    functions ("Class::vslot[k]", demangled with c++filt);
  * addresses inside .text that no FDE covers are V8's embedded builtins (the blob is emitted as
    raw code without unwind info);
  * '[JIT]' / anonymous executable memory is V8-generated code: the wasm module's own functions
    and V8's wrappers around it.
A sample is 'wasm plumbing' when any frame of its call chain (frame pointers) is JIT code, a
V8 builtin or a function of a wasm / V8 / proxy-wasm class; the rest is split by DSO.
"""
import bisect
import json
import os
import re
import struct
import subprocess
import sys
from collections import Counter, defaultdict

WASM_CLASS = re.compile(r"(Envoy::Extensions::Common::Wasm|Envoy::Extensions::NetworkFilters::Wasm|proxy_wasm|\bv8::|\bwasm::)")

# Address regions of the pinned Envoy 1.39.3 binary (BuildID 6eb0d2d9...), found from the classes
# whose vtables fall in them (python3 bench/envoy/profile_report.py --regions prints the evidence):
# the link order keeps each library's code together.
REGIONS = [
    (0x2E3F500, 0x2EB2900, "wasm host: Envoy wasm extension + proxy-wasm-cpp-host"),
    (0x2EB2900, 0x2EBA6D0, "V8 wasm C API"),
    (0x2EBB764, 0x30CC000, "V8 builtins (embedded blob)"),
    (0x2EBA6D0, 0x42FEAB0, "V8 runtime/compiler"),
    (0x5FFBC80, 0x605A8AE, "tcmalloc"),
]
PLUMBING = {"wasm host: Envoy wasm extension + proxy-wasm-cpp-host", "V8 wasm C API", "V8 builtins (embedded blob)", "V8 runtime/compiler", "JIT"}


# Where Envoy enters the wasm machinery (outermost wasm frame of a sample), named from the call
# stacks of this binary: Context vslot[53] is called by the network filter manager when the
# connection starts and calls onCreate (proxy_on_context_create) and proxy_on_new_connection;
# vslot[73] is called from the connection's close event and runs the close callbacks,
# proxy_on_done and proxy_on_log; vslot[24] is called from the socket teardown (proxy_on_delete).
PHASES = {
    "Envoy::Extensions::Common::Wasm::Context::vslot[53]": "open: Context::onNewConnection (context_create, new_connection, its host calls)",
    "Envoy::Extensions::Common::Wasm::Context::vslot[73]": "close: Context::onEvent (close callbacks, done, log)",
    "Envoy::Extensions::Common::Wasm::Context::vslot[24] (+1 vtables)": "teardown: delete",
}
LAYER = {
    "JIT": "JIT code (guest + V8 wrappers)",
    "V8 wasm C API": "V8 C API (call in / callback out)",
    "V8 runtime/compiler": "V8 runtime",
    "V8 builtins (embedded blob)": "V8 runtime",
    "wasm host: Envoy wasm extension + proxy-wasm-cpp-host": "Envoy wasm host + proxy-wasm-cpp-host",
    "envoy (rest)": "Envoy (rest)",
}


def region(addr):
    for lo, hi, name in REGIONS:
        if lo <= addr < hi:
            return name
    return "envoy (rest)"


class Elf:
    def __init__(self, path):
        self.data = open(path, "rb").read()
        d = self.data
        shoff, = struct.unpack_from("<Q", d, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
        strtab_off = raw[shstrndx][4]
        self.sections = {}
        for s in raw:
            name = d[strtab_off + s[0]: d.index(b"\0", strtab_off + s[0])].decode()
            self.sections[name] = {"addr": s[3], "off": s[4], "size": s[5]}

    def sec(self, name):
        return self.sections[name]

    def off(self, vaddr):
        for s in self.sections.values():
            if s["addr"] and s["addr"] <= vaddr < s["addr"] + s["size"]:
                return vaddr - s["addr"] + s["off"]
        return None

    def cstr(self, vaddr, limit=400):
        o = self.off(vaddr)
        if o is None:
            return None
        end = self.data.find(b"\0", o, o + limit)
        return self.data[o:end] if end > 0 else None


def functions(elf):
    """(starts, ends) of every FDE, from the .eh_frame_hdr binary search table."""
    hdr = elf.sec(".eh_frame_hdr")
    d, base = elf.data, hdr["off"]
    version, ptr_enc, count_enc, table_enc = d[base:base + 4]
    assert version == 1 and count_enc == 0x03 and table_enc == 0x3B, (ptr_enc, count_enc, table_enc)
    count, = struct.unpack_from("<I", d, base + 8)
    starts, ends = [], []
    for i in range(count):
        loc, fde = struct.unpack_from("<ii", d, base + 12 + 8 * i)
        start, fde_addr = hdr["addr"] + loc, hdr["addr"] + fde
        fo = elf.off(fde_addr)
        # FDE: length, CIE pointer, pc_begin (pcrel sdata4), pc_range (sdata4)
        begin, = struct.unpack_from("<i", d, fo + 8)
        rng, = struct.unpack_from("<i", d, fo + 12)
        if fde_addr + 8 + begin != start:
            rng = 16  # other encoding: keep the start, guess a small size
        starts.append(start)
        ends.append(start + rng)
    order = sorted(range(len(starts)), key=starts.__getitem__)
    return [starts[i] for i in order], [ends[i] for i in order]


def vtable_names(elf):
    """function address -> list of (class, slot) from vtables found through RTTI."""
    rela = elf.sec(".rela.dyn")
    d = elf.data
    rel = {}
    for i in range(rela["size"] // 24):
        off, info, addend = struct.unpack_from("<QQq", d, rela["off"] + 24 * i)
        if info & 0xFFFFFFFF == 8:
            rel[off] = addend
    text = elf.sec(".text")
    text_lo, text_hi = text["addr"], elf.sec(".plt")["addr"] + elf.sec(".plt")["size"]
    ti_name = {}

    def typeinfo(t):
        if t in ti_name:
            return ti_name[t]
        name = None
        if t + 8 in rel:
            s = elf.cstr(rel[t + 8])
            if s and re.fullmatch(rb"[A-Za-z0-9_$.]+", s) and (s[:1] in b"N0123456789S"):
                name = s.decode()
        ti_name[t] = name
        return name

    found = defaultdict(list)
    for off in sorted(rel):
        t = rel[off]
        if off - 8 in rel or not (text_lo > t or t >= text_hi) or typeinfo(t) is None:
            continue
        cls = typeinfo(t)
        k, slot = off + 8, 0
        while k in rel and text_lo <= rel[k] < text_hi:
            found[rel[k]].append((cls, slot))
            k += 8
            slot += 1
    classes = sorted({c for v in found.values() for c, _ in v})
    out = subprocess.run(["c++filt"], input="\n".join("_ZTS" + c for c in classes), capture_output=True, text=True).stdout.split("\n")
    pretty = {c: (o.replace("typeinfo name for ", "") if o else c) for c, o in zip(classes, out)}
    return {f: [(pretty[c], s) for c, s in v] for f, v in found.items()}


def dynsyms(elf):
    sec, strs = elf.sec(".dynsym"), elf.sec(".dynstr")
    out = {}
    for i in range(sec["size"] // 24):
        name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", elf.data, sec["off"] + 24 * i)
        if value and info & 0xF == 2:
            out[value] = elf.data[strs["off"] + name: elf.data.index(b"\0", strs["off"] + name)].decode()
    return out


class Symbolizer:
    def __init__(self, envoy):
        elf = Elf(envoy)
        self.starts, self.ends = functions(elf)
        self.vt = vtable_names(elf)
        self.dyn = dynsyms(elf)
        text = elf.sec(".text")
        self.text = (text["addr"], text["addr"] + text["size"])

    def function(self, addr):
        """(start, name) of the function holding addr in the envoy binary."""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.ends[i]:
            start = self.starts[i]
            if start in self.dyn:
                return start, self.dyn[start]
            names = self.vt.get(start)
            if names:
                cls, slot = names[0]
                more = f" (+{len(names) - 1} vtables)" if len(names) > 1 else ""
                return start, f"{cls}::vslot[{slot}]{more}"
            return start, f"fn_{start:x}"
        if self.text[0] <= addr < self.text[1]:
            return -1, "[.text without unwind info]"
        return -2, f"[envoy, outside .text: {addr:x}]"


def parse_script(path):
    """Yields (comm, period, [(addr, sym, dso), ...] innermost first) from perf script."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,period,ip,sym,dso"], capture_output=True, text=True).stdout
    sample = None
    for line in out.split("\n"):
        if not line.strip():
            if sample:
                yield sample
            sample = None
            continue
        if not line.startswith(("\t", " ")):
            m = re.match(r"^(.*?)\s+(\d+)\s*$", line)
            if m:
                sample = (m.group(1).strip(), int(m.group(2)), [])
            continue
        m = re.match(r"^\s+([0-9a-f]+)\s+(.*)\s+\((.*)\)\s*$", line)
        if m and sample is not None:
            sample[2].append((int(m.group(1), 16), m.group(2), m.group(3)))
    if sample:
        yield sample


def dso_kind(dso):
    if dso.endswith("/envoy"):
        return "envoy"
    if "JIT" in dso or "anon" in dso or dso.startswith("[unknown") or dso.startswith("//") or re.search(r"perf-\d+\.map", dso):
        return "jit"
    if "kernel" in dso:
        return "kernel"
    return os.path.basename(dso)


def analyze(sym, arm_dir, arm):
    meta = json.load(open(os.path.join(arm_dir, f"{arm}.json")))
    conns = meta["connections"]
    per = lambda ns: ns / 1000.0 / conns  # period is ns of cpu-clock
    self_fn, by_region, by_thread, split, entry, plumbing_fn, phase, layer = (Counter() for _ in range(8))
    cache = {}

    def name(addr, s, dso):
        """(region, function name) of one frame."""
        kind = dso_kind(dso)
        if kind == "envoy":
            if addr not in cache:
                reg = region(addr)
                fn = sym.function(addr)[1]
                cache[addr] = (reg, reg if reg.startswith("V8 builtins") else fn)
            return cache[addr]
        if kind == "jit":
            return "JIT", "[JIT: wasm code + V8 wrappers]"
        return kind, f"{s} [{kind}]"

    total = 0
    for comm, period, frames in parse_script(os.path.join(arm_dir, f"{arm}.perf.data")):
        total += period
        by_thread["worker" if comm.startswith("wrk:") else comm] += period
        if not frames:
            continue
        named = [name(*f) for f in frames]
        reg0, fn0 = named[0]
        self_fn[fn0] += period
        by_region[reg0] += period
        inside = [i for i, (reg, fn) in enumerate(named) if reg in PLUMBING or WASM_CLASS.search(fn)]
        if inside:
            # the outermost plumbing frame is where Envoy entered the wasm machinery
            outer = named[inside[-1]][1]
            entry[outer] += period
            phase[PHASES.get(outer, "other entry")] += period
            layer[LAYER.get(reg0, reg0)] += period
            split["under wasm plumbing, leaf in " + reg0] += period
            plumbing_fn[fn0 + " {" + reg0.split(":")[0] + "}"] += period
        else:
            split["not under wasm plumbing, leaf in " + reg0] += period
            layer["not wasm: " + LAYER.get(reg0, reg0)] += period
    return {
        "arm": arm, "connections": conns, "cpu_us_per_conn_proc": meta["cpuUs"] / conns, "sampled_us_per_conn": per(total),
        "self": {k: per(v) for k, v in self_fn.items()}, "region": {k: per(v) for k, v in by_region.items()},
        "thread": {k: per(v) for k, v in by_thread.items()}, "split": {k: per(v) for k, v in split.items()},
        "entry": {k: per(v) for k, v in entry.items()}, "plumbing_self": {k: per(v) for k, v in plumbing_fn.items()},
        "phase": {k: per(v) for k, v in phase.items()}, "layer": {k: per(v) for k, v in layer.items()},
        "plumbing_total": per(sum(phase.values())),
    }


def table(title, rows, arms, top=None, base="without"):
    print(f"\n## {title} (µs per connection)")
    keys = sorted({k for a in arms for k in rows[a]}, key=lambda k: -max(rows[a].get(k, 0) - (rows[base].get(k, 0) if base in rows else 0) for a in arms))
    if top:
        keys = keys[:top]
    print("| " + " | ".join(["what"] + arms) + " |")
    print("|" + "---|" * (len(arms) + 1))
    for k in keys:
        print("| " + " | ".join([k.replace("|", "/")[:110]] + [f"{rows[a].get(k, 0):.1f}" for a in arms]) + " |")


def spread(values):
    values = sorted(values)
    mid = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    return f"{mid:.1f} [{values[0]:.1f}–{values[-1]:.1f}]" if len(values) > 1 else f"{mid:.1f}"


def summary(title, runs, arms, key, rows=None):
    """median [min–max] over runs of runs[i][arm][key][row]."""
    print(f"\n## {title} (µs per connection, median [min–max] of {len(runs)} runs)")
    if rows is None:
        rows = sorted({r for run in runs for a in arms for r in run[a][key]}, key=lambda r: -sum(run[a][key].get(r, 0) for run in runs for a in arms))
    print("| " + " | ".join(["what"] + arms) + " |")
    print("|" + "---|" * (len(arms) + 1))
    for r in rows:
        print("| " + " | ".join([r] + [spread([run[a][key].get(r, 0) for run in runs]) for a in arms]) + " |")


def main():
    args = sys.argv[1:]
    dirs = [a for a in args if not a.startswith("--") and os.path.isdir(a)] or ["build/profile"]
    envoy = args[args.index("--envoy") + 1] if "--envoy" in args else ".venv/envoy"
    top = int(args[args.index("--top") + 1]) if "--top" in args else 25
    order = ["without", "bare", "callbacks", "getprop", "setprop", "hostcalls", "newconn", "newconn_hostcalls", "newconn_min", "filterstate", "noop", "passthrough", "mtls_with", "mtls_native"]
    arms = [a for a in order if all(os.path.exists(os.path.join(d, f"{a}.perf.data")) for d in dirs)]
    sym = Symbolizer(envoy)
    print(f"symbolizer: {len(sym.starts)} functions (FDEs), {len(sym.vt)} named through vtables; runs: {', '.join(dirs)}")
    runs = [{a: analyze(sym, d, a) for a in arms} for d in dirs]
    for run in runs:
        for a in arms:
            r = run[a]
            r["totals"] = {"CPU/conn (/proc, under perf)": r["cpu_us_per_conn_proc"], "sampled": r["sampled_us_per_conn"],
                           "wasm plumbing (stacks)": r["plumbing_total"], "not wasm plumbing": r["sampled_us_per_conn"] - r["plumbing_total"]}
    summary("totals", runs, arms, "totals", ["CPU/conn (/proc, under perf)", "sampled", "wasm plumbing (stacks)", "not wasm plumbing"])
    summary("wasm plumbing by phase (outermost wasm frame)", runs, arms, "phase")
    summary("by layer of the sampled instruction (wasm plumbing first, then the rest)", runs, arms, "layer")
    if len(runs) == 1:
        results = runs[0]
        table("by thread", {a: results[a]["thread"] for a in arms}, arms)
        table("wasm plumbing by its outermost plumbing frame (where Envoy enters it)", {a: results[a]["entry"] for a in arms}, arms, top)
        table("wasm plumbing: self time by function", {a: results[a]["plumbing_self"] for a in arms}, arms, top)
        table("self time by function, sorted by the largest increase over 'without'", {a: results[a]["self"] for a in arms}, arms, top)
    json.dump(runs, open(os.path.join(dirs[0], "report.json"), "w"), indent=1)


if __name__ == "__main__":
    main()

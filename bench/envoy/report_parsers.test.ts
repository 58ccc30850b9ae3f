// The text the reports read from valgrind's and perf's tools, on small inputs in those tools'
// output formats, and the fixed-point formatting of their tables.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseAnnotate } from "./callgrind_annotate.js";
import { fixed } from "./number_format.js";
import { parsePerfScript } from "./perf_script.js";

describe("callgrind_annotate function summary", () => {
  // The layout of `callgrind_annotate --inclusive=no --threshold=100` (valgrind 3.19+): a header,
  // the program total, then one line per function: cost (percentage), file:function [object].
  const output = [
    "--------------------------------------------------------------------------------",
    "Profile data file 'callgrind.out.1234-02' (creator: callgrind-3.19.0)",
    "--------------------------------------------------------------------------------",
    "Events recorded:  Ir",
    "Thresholds:       100",
    "--------------------------------------------------------------------------------",
    "Ir                 ",
    "--------------------------------------------------------------------------------",
    "12,345,678 (100.0%)  PROGRAM TOTALS",
    "",
    "--------------------------------------------------------------------------------",
    "Ir                 file:function",
    "--------------------------------------------------------------------------------",
    " 1,234,567 (10.00%)  ???:0x0000000002c86350 [/work/.venv/envoy]",
    "    98,765 ( 0.80%)  ./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:__memcpy_avx_unaligned_erms [/usr/lib/x86_64-linux-gnu/libc.so.6]",
    "     4,321 ( 0.04%)  ???:0x000000001c0ffee0 [???]",
    "       512 ( 0.00%)  ???:std::vector<int, std::allocator<int> >::push_back(int const&) [/usr/lib/libfoo.so]",
    "       256 ( 0.00%)  ./elf/../sysdeps/generic/dl-new-hash.h:_dl_lookup_symbol_x",
    "",
  ].join("\n");

  it("reads each function line's cost, address (when unnamed), name and object, and nothing else", () => {
    assert.deepEqual(parseAnnotate(output), [
      { cost: 1_234_567, address: 0x2c86350, fn: "0x0000000002c86350", obj: "/work/.venv/envoy" },
      { cost: 98_765, address: undefined, fn: "__memcpy_avx_unaligned_erms", obj: "/usr/lib/x86_64-linux-gnu/libc.so.6" },
      { cost: 4_321, address: 0x1c0ffee0, fn: "0x000000001c0ffee0", obj: "???" },
      { cost: 512, address: undefined, fn: "std::vector<int, std::allocator<int> >::push_back(int const&)", obj: "/usr/lib/libfoo.so" },
    ]);
  });

  it("reads the older layout without percentages", () => {
    assert.deepEqual(parseAnnotate("7,000  ???:0x0000000000401000 [/bin/envoy]\n"), [{ cost: 7000, address: 0x401000, fn: "0x0000000000401000", obj: "/bin/envoy" }]);
  });
});

describe("perf script call chains", () => {
  // `perf script -F comm,period,ip,sym,dso` with call chains: header, frames innermost first, blank.
  const output = [
    "wrk:worker_0  1000000",
    "\t          2c86355 [unknown] (/work/.venv/envoy)",
    "\t     7f01d2a3b4c5 __libc_start_main+0x80 (/usr/lib/x86_64-linux-gnu/libc.so.6)",
    "",
    "envoy  2000000",
    "\t     7f00deadbeef [unknown] (//anon)",
    "",
    "wrk:worker_0  1000000",
    "\tffffffff81000000 do_syscall_64+0x5c ([kernel.kallsyms])",
  ].join("\n");

  it("reads every sample's thread, period and frames, the last one without a closing blank line", () => {
    assert.deepEqual(parsePerfScript(output), [
      {
        comm: "wrk:worker_0",
        period: 1_000_000,
        frames: [
          { addr: 0x2c86355, sym: "[unknown]", dso: "/work/.venv/envoy" },
          { addr: 0x7f01d2a3b4c5, sym: "__libc_start_main+0x80", dso: "/usr/lib/x86_64-linux-gnu/libc.so.6" },
        ],
      },
      { comm: "envoy", period: 2_000_000, frames: [{ addr: 0x7f00deadbeef, sym: "[unknown]", dso: "//anon" }] },
      { comm: "wrk:worker_0", period: 1_000_000, frames: [{ addr: 0xffffffff81000000, sym: "do_syscall_64+0x5c", dso: "[kernel.kallsyms]" }] },
    ]);
  });
});

describe("fixed-point table cells", () => {
  it("rounds exact ties to even and everything else to nearest", () => {
    assert.equal(fixed(2.5, 0), "2");
    assert.equal(fixed(3.5, 0), "4");
    assert.equal(fixed(0.25, 1), "0.2");
    assert.equal(fixed(0.35, 1), "0.3"); // 0.35 is 0.34999... in binary
    assert.equal(fixed(2.5000001, 0), "3");
    assert.equal(fixed(9.96, 1), "10.0");
  });

  it("groups thousands and signs differences", () => {
    assert.equal(fixed(1234567.5, 0, { grouped: true }), "1,234,568");
    assert.equal(fixed(999.4, 0, { grouped: true }), "999");
    assert.equal(fixed(1500, 0, { grouped: true, signed: true }), "+1,500");
    assert.equal(fixed(-1500.2, 0, { grouped: true, signed: true }), "-1,500");
    assert.equal(fixed(-0.2, 0, { signed: true }), "-0");
    assert.equal(fixed(0.0123, 3), "0.012");
  });
});

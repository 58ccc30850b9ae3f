// Cost per function of a callgrind dump, from valgrind's `callgrind_annotate` (the function
// summary; no source annotation). The stripped Envoy's functions have no names in the dump, only
// addresses ("0x0000000002c86350"), which the callgrind report names from the binary itself.
import { execFileSync } from "node:child_process";

export interface AnnotatedFunction {
  /** Instructions (Ir), exclusive or inclusive as asked. */
  cost: number;
  /** The function's address when callgrind knew no name for it, else undefined. */
  address: number | undefined;
  /** The function as callgrind_annotate prints it (a name, or its 0x address). */
  fn: string;
  /** The object file it is in ("???" when none: JIT code). */
  obj: string;
}

// `  1,234,567 (12.34%)  file:function [object]`; older valgrind versions print no
// percentage, and the file is "???" for code without debug info. The file ends at the first colon (the
// function's own "::" and spaces, as in demangled C++ names, stay in it); the object is the last
// bracketed part. A line without an object (code inlined from a header of a library with debug
// info) is not read.
const FUNCTION_LINE = /^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S*?):(.+?)\s+\[([^[\]]*)\]\s*$/;
const HEX_ADDRESS = /^0x([0-9a-f]+)$/;

/** The function lines of callgrind_annotate's output; every other line is ignored. */
export function parseAnnotate(output: string): AnnotatedFunction[] {
  const rows: AnnotatedFunction[] = [];
  for (const line of output.split("\n")) {
    const m = FUNCTION_LINE.exec(line);
    if (!m) continue;
    const fn = m[3]!;
    const hex = HEX_ADDRESS.exec(fn);
    rows.push({ cost: Number(m[1]!.replaceAll(",", "")), address: hex ? parseInt(hex[1]!, 16) : undefined, fn, obj: m[4]! });
  }
  return rows;
}

/** Every function of a dump (threshold 100%: none left out), exclusive or inclusive cost. */
export function annotate(dump: string, inclusive: boolean): AnnotatedFunction[] {
  const output = execFileSync("callgrind_annotate", [`--inclusive=${inclusive ? "yes" : "no"}`, "--threshold=100", dump], { encoding: "utf8", maxBuffer: 1 << 30 });
  return parseAnnotate(output);
}

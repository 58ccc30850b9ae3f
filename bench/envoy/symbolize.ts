// Names an address of the stripped Envoy binary: the function holding it (bounds from .eh_frame)
// and, where it has one, its name (an exported symbol, else the vtable slot it fills, else its
// start address). Shared by the perf report (profile_report.ts) and the callgrind report.
import { dynamicSymbols, Elf, functionBounds, vtableNames, type VtableSlot } from "./elf.js";

/** Index of the last element ≤ value in a sorted array (-1 when none). */
export function lastAtOrBelow(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** Start -1: inside .text but no FDE covers it (V8's embedded builtins); -2: outside .text. */
export const NO_UNWIND_INFO = -1;
export const OUTSIDE_TEXT = -2;

export class Symbolizer {
  readonly elf: Elf;
  readonly starts: number[];
  readonly ends: number[];
  /** Function start → the vtable slots it fills, first found first. */
  readonly vtables: Map<number, VtableSlot[]>;
  readonly exported: Map<number, string>;
  readonly text: [number, number];

  constructor(envoy: string) {
    this.elf = new Elf(envoy);
    ({ starts: this.starts, ends: this.ends } = functionBounds(this.elf));
    this.vtables = vtableNames(this.elf);
    this.exported = dynamicSymbols(this.elf);
    const text = this.elf.section(".text");
    this.text = [text.addr, text.addr + text.size];
  }

  /** Start and name of the function holding `addr` (a file address of the binary). */
  function(addr: number): { start: number; name: string } {
    const i = lastAtOrBelow(this.starts, addr);
    if (i >= 0 && addr < this.ends[i]!) {
      const start = this.starts[i]!;
      const symbol = this.exported.get(start);
      if (symbol !== undefined) return { start, name: symbol };
      const slots = this.vtables.get(start);
      if (slots && slots.length > 0) {
        const more = slots.length > 1 ? ` (+${slots.length - 1} vtables)` : "";
        return { start, name: `${slots[0]!.cls}::vslot[${slots[0]!.slot}]${more}` };
      }
      return { start, name: `fn_${start.toString(16)}` };
    }
    if (this.text[0] <= addr && addr < this.text[1]) return { start: NO_UNWIND_INFO, name: "[.text without unwind info]" };
    return { start: OUTSIDE_TEXT, name: `[envoy, outside .text: ${addr.toString(16)}]` };
  }
}

// Reads what the profile reports need from the stripped Envoy binary (ELF64, little-endian,
// x86-64): section headers, function bounds from .eh_frame_hdr / .eh_frame (one FDE per
// function), the dynamic symbols, and the names of virtual functions from vtables + RTTI.
// The binary has no symbol table, so these are the only names there are.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

export interface Section {
  addr: number;
  off: number;
  size: number;
}

/** A 64-bit little-endian field as a number: every address and offset here is below 2^53. */
function u64(data: Buffer, at: number): number {
  return data.readUInt32LE(at) + data.readUInt32LE(at + 4) * 2 ** 32;
}
function i64(data: Buffer, at: number): number {
  return data.readUInt32LE(at) + data.readInt32LE(at + 4) * 2 ** 32;
}

export class Elf {
  readonly data: Buffer;
  /** By name, in section header order (a repeated name keeps its first place, the last header). */
  readonly sections = new Map<string, Section>();

  constructor(path: string) {
    this.data = readFileSync(path);
    const d = this.data;
    if (d.readUInt32BE(0) !== 0x7f454c46 || d[4] !== 2 || d[5] !== 1) throw new Error(`${path}: not a 64-bit little-endian ELF file`);
    const shoff = u64(d, 0x28);
    const shentsize = d.readUInt16LE(0x3a);
    const shnum = d.readUInt16LE(0x3c);
    const shstrndx = d.readUInt16LE(0x3e);
    const header = (i: number) => shoff + i * shentsize;
    const names = u64(d, header(shstrndx) + 0x18);
    for (let i = 0; i < shnum; i++) {
      const h = header(i);
      const name = this.cstringAt(names + d.readUInt32LE(h)) ?? "";
      this.sections.set(name, { addr: u64(d, h + 0x10), off: u64(d, h + 0x18), size: u64(d, h + 0x20) });
    }
  }

  section(name: string): Section {
    const s = this.sections.get(name);
    if (!s) throw new Error(`ELF: no section ${name}`);
    return s;
  }

  /** The file offset of a virtual address, or undefined outside every allocated section. */
  offset(vaddr: number): number | undefined {
    for (const s of this.sections.values()) {
      if (s.addr && s.addr <= vaddr && vaddr < s.addr + s.size) return vaddr - s.addr + s.off;
    }
    return undefined;
  }

  /** The NUL-terminated string at a virtual address, if it ends within `limit` bytes. */
  cstring(vaddr: number, limit = 400): Buffer | undefined {
    const o = this.offset(vaddr);
    if (o === undefined || o >= this.data.length) return undefined;
    const end = this.data.indexOf(0, o);
    return end > 0 && end < o + limit ? this.data.subarray(o, end) : undefined;
  }

  private cstringAt(offset: number): string | undefined {
    const end = this.data.indexOf(0, offset);
    return end < 0 ? undefined : this.data.toString("latin1", offset, end);
  }

  /** The entry point (e_entry). */
  get entry(): number {
    return u64(this.data, 0x18);
  }
}

/**
 * Start and end of every function with unwind info, sorted by start, from the binary search
 * table of .eh_frame_hdr and each FDE's pc_begin / pc_range.
 */
export function functionBounds(elf: Elf): { starts: number[]; ends: number[] } {
  const hdr = elf.section(".eh_frame_hdr");
  const d = elf.data;
  const base = hdr.off;
  const [version, , countEncoding, tableEncoding] = [d[base], d[base + 1], d[base + 2], d[base + 3]];
  // udata4 count, a table of datarel sdata4 pairs: the only layout the linkers emit for x86-64.
  if (version !== 1 || countEncoding !== 0x03 || tableEncoding !== 0x3b) {
    throw new Error(`.eh_frame_hdr: version ${version}, count encoding ${countEncoding}, table encoding ${tableEncoding}: not the expected 1, 0x03, 0x3b`);
  }
  const count = d.readUInt32LE(base + 8);
  const starts = new Array<number>(count);
  const ends = new Array<number>(count);
  for (let i = 0; i < count; i++) {
    const start = hdr.addr + d.readInt32LE(base + 12 + 8 * i);
    const fdeAddr = hdr.addr + d.readInt32LE(base + 16 + 8 * i);
    const fo = elf.offset(fdeAddr);
    if (fo === undefined) throw new Error(`.eh_frame_hdr entry ${i}: FDE address ${fdeAddr.toString(16)} is in no section`);
    // FDE: length, CIE pointer, pc_begin (pcrel sdata4), pc_range (sdata4)
    const begin = d.readInt32LE(fo + 8);
    let range = d.readInt32LE(fo + 12);
    if (fdeAddr + 8 + begin !== start) range = 16; // another pointer encoding: keep the start, guess a small size
    starts[i] = start;
    ends[i] = start + range;
  }
  const order = starts.map((_, i) => i).sort((a, b) => starts[a]! - starts[b]!);
  return { starts: order.map((i) => starts[i]!), ends: order.map((i) => ends[i]!) };
}

/** Address → name of every STT_FUNC symbol of .dynsym (the few the binary exports). */
export function dynamicSymbols(elf: Elf): Map<number, string> {
  const sym = elf.section(".dynsym");
  const strs = elf.section(".dynstr");
  const d = elf.data;
  const out = new Map<number, string>();
  for (let at = sym.off; at + 24 <= sym.off + sym.size; at += 24) {
    const value = u64(d, at + 8);
    if (value && (d[at + 4]! & 0xf) === 2) {
      const name = strs.off + d.readUInt32LE(at);
      out.set(value, d.toString("latin1", name, d.indexOf(0, name)));
    }
  }
  return out;
}

/** One vtable slot a function fills: the class (demangled) and the slot's index. */
export interface VtableSlot {
  cls: string;
  slot: number;
}

const R_X86_64_RELATIVE = 8;
const MANGLED_TYPE = /^[A-Za-z0-9_$.]+$/;

/**
 * Function address → the vtable slots it fills. A PIE's vtables are filled by R_X86_64_RELATIVE
 * relocations: a relocated word whose predecessor is not relocated and whose target is a
 * typeinfo object (its second word points at a mangled type name) is a vtable's typeinfo
 * pointer; the relocated words after it that point into code are that class's virtual functions.
 */
export function vtableNames(elf: Elf): Map<number, VtableSlot[]> {
  const rela = elf.section(".rela.dyn");
  const d = elf.data;
  const relocated = new Map<number, number>();
  for (let at = rela.off; at + 24 <= rela.off + rela.size; at += 24) {
    if (d.readUInt32LE(at + 8) === R_X86_64_RELATIVE) relocated.set(u64(d, at), i64(d, at + 16));
  }
  const textLow = elf.section(".text").addr;
  const plt = elf.section(".plt");
  const textHigh = plt.addr + plt.size;
  const inCode = (a: number) => textLow <= a && a < textHigh;

  const typeNames = new Map<number, string | null>();
  const typeName = (typeinfo: number): string | null => {
    if (typeNames.has(typeinfo)) return typeNames.get(typeinfo) ?? null;
    let name: string | null = null;
    const target = relocated.get(typeinfo + 8);
    if (target !== undefined) {
      const s = elf.cstring(target)?.toString("latin1");
      // a nested name (N...E), a plain one (length first) or a substitution (S...)
      if (s && MANGLED_TYPE.test(s) && "N0123456789S".includes(s[0]!)) name = s;
    }
    typeNames.set(typeinfo, name);
    return name;
  };

  const found = new Map<number, { cls: string; slot: number }[]>();
  const offsets = [...relocated.keys()].sort((a, b) => a - b);
  for (const off of offsets) {
    const target = relocated.get(off)!;
    if (relocated.has(off - 8) || inCode(target)) continue;
    const cls = typeName(target);
    if (cls === null) continue;
    for (let k = off + 8, slot = 0; relocated.has(k) && inCode(relocated.get(k)!); k += 8, slot++) {
      const fn = relocated.get(k)!;
      const slots = found.get(fn);
      if (slots) slots.push({ cls, slot });
      else found.set(fn, [{ cls, slot }]);
    }
  }
  const pretty = demangleTypeNames(new Set([...found.values()].flatMap((v) => v.map((s) => s.cls))));
  for (const slots of found.values()) for (const s of slots) s.cls = pretty.get(s.cls) ?? s.cls;
  return found;
}

/** Mangled type name → C++ name, through c++filt (binutils) in one call. */
function demangleTypeNames(mangled: Set<string>): Map<string, string> {
  const classes = [...mangled].sort();
  const out = execFileSync("c++filt", { input: classes.map((c) => "_ZTS" + c).join("\n"), encoding: "latin1", maxBuffer: 1 << 30 }).split("\n");
  return new Map(classes.map((c, i) => [c, out[i] ? out[i]!.replace("typeinfo name for ", "") : c]));
}

// A minimal WebAssembly binary writer for tests: modules with chosen imports, exports and tiny
// function bodies, to check what the host refuses or how it treats a module without callbacks.

export type ValType = "i32" | "i64" | "f32" | "f64";

const VALTYPE: Record<ValType, number> = { i32: 0x7f, i64: 0x7e, f32: 0x7d, f64: 0x7c };

/** Opcodes used in bodies. */
export const op = {
  unreachable: 0x00,
  drop: 0x1a,
  call: 0x10,
  i32Const: 0x41,
  i64Const: 0x42,
  end: 0x0b,
} as const;

function uleb(value: number): number[] {
  const out: number[] = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
  return out;
}

/** Signed LEB128 (for i32.const immediates). */
export function sleb(value: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = value & 0x7f;
    value >>= 7;
    if ((value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0)) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}

function name(text: string): number[] {
  const bytes = [...new TextEncoder().encode(text)];
  return [...uleb(bytes.length), ...bytes];
}

function vec(items: number[][]): number[] {
  return [...uleb(items.length), ...items.flat()];
}

function section(id: number, body: number[]): number[] {
  return body.length === 0 ? [] : [id, ...uleb(body.length), ...body];
}

interface FuncType {
  params: ValType[];
  results: ValType[];
}

export class WasmBuilder {
  private readonly types: FuncType[] = [];
  private readonly imports: Array<{ module: string; name: string; type: number } | { module: string; name: string; memory: true }> = [];
  private readonly functions: Array<{ type: number; body: number[]; exportName?: string }> = [];
  private memoryPages: number | undefined;
  private memoryExported = false;
  private readonly data: Array<{ offset: number; bytes: number[] }> = [];
  private importedFunctionCount = 0;

  private typeIndex(params: ValType[], results: ValType[]): number {
    const key = JSON.stringify([params, results]);
    const found = this.types.findIndex((t) => JSON.stringify([t.params, t.results]) === key);
    if (found >= 0) return found;
    this.types.push({ params, results });
    return this.types.length - 1;
  }

  /** Imports a function; returns its function index (for `call`). */
  importFunction(module: string, field: string, params: ValType[] = [], results: ValType[] = []): number {
    this.imports.push({ module, name: field, type: this.typeIndex(params, results) });
    return this.importedFunctionCount++;
  }

  importMemory(module: string, field: string): this {
    this.imports.push({ module, name: field, memory: true });
    return this;
  }

  /**
   * Adds a function (exported when `exportName` is given). The default body returns zeros of the
   * result types; pass `body` (instructions without the final `end`) to do something else.
   */
  addFunction(exportName: string | undefined, params: ValType[] = [], results: ValType[] = [], body?: number[]): this {
    const code =
      body ?? results.flatMap((r) => (r === "i64" ? [op.i64Const, 0] : r === "i32" ? [op.i32Const, 0] : [op.unreachable]));
    this.functions.push({ type: this.typeIndex(params, results), body: code, ...(exportName ? { exportName } : {}) });
    return this;
  }

  /** Defines a memory of `pages` (unless one is imported) and exports it as "memory". */
  exportMemory(pages = 1): this {
    if (!this.imports.some((i) => "memory" in i)) this.memoryPages = pages;
    this.memoryExported = true;
    return this;
  }

  /** An active data segment in memory 0 at `offset`. */
  addData(offset: number, bytes: Uint8Array | number[]): this {
    this.data.push({ offset, bytes: [...bytes] });
    return this;
  }

  build(): Uint8Array {
    const typeSection = vec(
      this.types.map((t) => [0x60, ...vec(t.params.map((p) => [VALTYPE[p]])), ...vec(t.results.map((r) => [VALTYPE[r]]))]),
    );
    const importSection = vec(
      this.imports.map((i) =>
        "memory" in i ? [...name(i.module), ...name(i.name), 0x02, 0x00, 0x01] : [...name(i.module), ...name(i.name), 0x00, ...uleb(i.type)],
      ),
    );
    const functionSection = vec(this.functions.map((f) => uleb(f.type)));
    const memorySection = this.memoryPages === undefined ? [] : vec([[0x00, ...uleb(this.memoryPages)]]);
    const exports: number[][] = [];
    this.functions.forEach((f, i) => {
      if (f.exportName) exports.push([...name(f.exportName), 0x00, ...uleb(this.importedFunctionCount + i)]);
    });
    if (this.memoryExported) exports.push([...name("memory"), 0x02, 0x00]);
    const codeSection = vec(
      this.functions.map((f) => {
        const body = [0x00 /* no locals */, ...f.body, op.end];
        return [...uleb(body.length), ...body];
      }),
    );
    return Uint8Array.from([
      0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
      ...section(1, this.types.length ? typeSection : []),
      ...section(2, this.imports.length ? importSection : []),
      ...section(3, this.functions.length ? functionSection : []),
      ...section(5, memorySection),
      ...section(7, exports.length ? vec(exports) : []),
      ...section(10, this.functions.length ? codeSection : []),
      ...section(
        11,
        this.data.length
          ? vec(this.data.map((d) => [0x00, op.i32Const, ...sleb(d.offset), op.end, ...uleb(d.bytes.length), ...d.bytes]))
          : [],
      ),
    ]);
  }
}

export interface MinimalOptions {
  /** ABI marker export ("" for none). Default proxy_abi_version_0_2_1. */
  readonly marker?: string;
  /** Allocator export name (null for none). Its body returns address 1024. Default "malloc". */
  readonly allocator?: string | null;
}

/**
 * The smallest module Envoy accepts: ABI marker, malloc, memory. `configure` adds imports and
 * functions first (imports must come before any function is added).
 */
export function minimalFilter(configure?: (builder: WasmBuilder) => void, options: MinimalOptions = {}): Uint8Array {
  const builder = new WasmBuilder();
  configure?.(builder);
  const marker = options.marker ?? "proxy_abi_version_0_2_1";
  if (marker) builder.addFunction(marker);
  const allocator = options.allocator === undefined ? "malloc" : options.allocator;
  if (allocator) builder.addFunction(allocator, ["i32"], ["i32"], [op.i32Const, ...sleb(1024)]);
  builder.exportMemory(1);
  return builder.build();
}

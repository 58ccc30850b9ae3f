// Reads a module's import and export tables, with the signature of every function, from the
// binary. V8 validates the module first (WebAssembly.Module); this only extracts the interface
// the import/export checks need. Parsing is delegated to @webassemblyjs/wasm-parser (the parser
// webpack uses); only the type, import, function and export sections matter, so code and data
// are skipped.
import { decode } from "@webassemblyjs/wasm-parser";
import type { AstField, AstSignature } from "@webassemblyjs/wasm-parser";
import type { Signature, ValType } from "./abi.js";

export type ExternKind = "function" | "memory" | "table" | "global";

export interface ImportEntry {
  readonly module: string;
  readonly name: string;
  readonly kind: ExternKind;
  /** Present for function imports. */
  readonly signature?: Signature;
}

export interface ExportEntry {
  readonly name: string;
  readonly kind: ExternKind;
  /** Present for function exports. */
  readonly signature?: Signature;
}

export interface ModuleInterface {
  readonly imports: readonly ImportEntry[];
  readonly exports: readonly ExportEntry[];
}

function toSignature(ast: AstSignature): Signature {
  return {
    params: ast.params.map((p) => p.valtype as ValType),
    results: ast.results.map((r) => r as ValType),
  };
}

const IMPORT_KINDS: Record<string, ExternKind> = {
  FuncImportDescr: "function",
  Memory: "memory",
  Table: "table",
  GlobalType: "global",
};

const EXPORT_KINDS: Record<string, ExternKind> = {
  Func: "function",
  Memory: "memory",
  Table: "table",
  Global: "global",
};

export function readModuleInterface(bytes: Uint8Array): ModuleInterface {
  const program = decode(bytes, {
    ignoreCodeSection: true,
    ignoreDataSection: true,
    ignoreCustomNameSection: true,
  });
  const fields: AstField[] = program.body[0]?.fields ?? [];
  const imports: ImportEntry[] = [];
  // Function index space: imported functions first, then the module's own.
  const functionSignatures: Signature[] = [];
  for (const field of fields) {
    if (field.type !== "ModuleImport") continue;
    const descr = field["descr"] as { type: string; signature?: AstSignature };
    const kind = IMPORT_KINDS[descr.type] ?? "global";
    const entry: ImportEntry = {
      module: String(field["module"]),
      name: String(field["name"]),
      kind,
      ...(kind === "function" && descr.signature ? { signature: toSignature(descr.signature) } : {}),
    };
    if (kind === "function" && entry.signature) functionSignatures.push(entry.signature);
    imports.push(entry);
  }
  for (const field of fields) {
    if (field.type === "Func") functionSignatures.push(toSignature(field["signature"] as AstSignature));
  }
  const exports: ExportEntry[] = [];
  for (const field of fields) {
    if (field.type !== "ModuleExport") continue;
    const descr = field["descr"] as { exportType: string; id: { value: number } };
    const kind = EXPORT_KINDS[descr.exportType] ?? "global";
    const signature = kind === "function" ? functionSignatures[descr.id.value] : undefined;
    exports.push({ name: String(field["name"]), kind, ...(signature ? { signature } : {}) });
  }
  return { imports, exports };
}

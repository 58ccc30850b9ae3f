// Refuses a module Envoy would refuse, before running any of it: bytes V8 rejects, no ABI
// marker, an import Envoy does not link (or links with another signature), a callback export with
// the wrong signature, no allocator, no exported memory.
import {
  ABI_MARKERS,
  ASSEMBLYSCRIPT_DEFAULT_IMPORTS,
  formatSignature,
  guestExportSignatures,
  HOST_FUNCTION_INDEX,
  sameSignature,
  type AbiVersion,
} from "./abi.js";
import { readModuleInterface, type ModuleInterface } from "./wasm_sections.js";

/** Thrown when a module would not load in Envoy; `problems` lists every reason found. */
export class ModuleRefusedError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(
      problems.length === 1
        ? `Wasm module refused: ${problems[0]}`
        : `Wasm module refused:\n- ${problems.join("\n- ")}`,
    );
    this.name = "ModuleRefusedError";
  }
}

export interface CheckedModule {
  readonly module: WebAssembly.Module;
  readonly abiVersion: AbiVersion;
  readonly interface: ModuleInterface;
}

function checkImports(iface: ModuleInterface, abi: AbiVersion, problems: string[]): void {
  for (const imp of iface.imports) {
    const key = `${imp.module}.${imp.name}`;
    if (imp.kind !== "function") {
      problems.push(`imports ${imp.kind} ${key}; Envoy links only functions (export memory instead)`);
      continue;
    }
    const spec = HOST_FUNCTION_INDEX.get(key);
    if (spec === undefined) {
      const hint = ASSEMBLYSCRIPT_DEFAULT_IMPORTS.get(key);
      problems.push(
        `imports ${key}, which Envoy does not provide` + (hint ? ` (${hint})` : ""),
      );
      continue;
    }
    if (spec.abis && !spec.abis.includes(abi)) {
      problems.push(
        `imports ${key}, which Envoy links only for ABI ${spec.abis.join("/")} modules ` +
          `(this module exports proxy_abi_version_${abi})`,
      );
      continue;
    }
    if (imp.signature && !sameSignature(imp.signature, spec)) {
      problems.push(
        `import ${key} has signature ${formatSignature(imp.signature)} ` +
          `but Envoy provides ${formatSignature(spec)}`,
      );
    }
  }
}

function checkExports(iface: ModuleInterface, abi: AbiVersion, problems: string[]): void {
  const wanted = guestExportSignatures(abi);
  const names = new Set<string>();
  for (const exp of iface.exports) {
    names.add(exp.name);
    const want = wanted.get(exp.name);
    if (want === undefined) continue;
    if (exp.kind !== "function" || !exp.signature || !sameSignature(exp.signature, want)) {
      const got = exp.signature ? formatSignature(exp.signature) : exp.kind;
      problems.push(
        `bad function signature for export ${exp.name}: ${got}, Envoy calls it as ${formatSignature(want)}`,
      );
    }
  }
  if (!names.has("malloc") && !names.has("proxy_on_memory_allocate")) {
    problems.push("missing malloc function (export `malloc` or `proxy_on_memory_allocate`)");
  }
  const memory = iface.exports.find((e) => e.name === "memory");
  if (!memory || memory.kind !== "memory") problems.push("missing exported memory `memory`");
}

function abiVersionOf(iface: ModuleInterface): AbiVersion | undefined {
  for (const [marker, version] of ABI_MARKERS) {
    if (iface.exports.some((e) => e.name === marker)) return version;
  }
  return undefined;
}

/** Compiles and checks a module; throws ModuleRefusedError naming every problem. */
export function checkModule(bytes: Uint8Array): CheckedModule {
  let module: WebAssembly.Module;
  try {
    module = new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>);
  } catch (error) {
    throw new ModuleRefusedError([`not a valid wasm binary: ${(error as Error).message}`]);
  }
  let iface: ModuleInterface;
  try {
    iface = readModuleInterface(bytes);
  } catch (error) {
    // V8 accepted the module, so this is a limit of the section reader, not an Envoy refusal.
    throw new Error(`host: cannot read the module's import/export tables: ${(error as Error).message}`);
  }
  const abiVersion = abiVersionOf(iface);
  if (abiVersion === undefined) {
    throw new ModuleRefusedError([
      "missing or unknown Proxy-Wasm ABI version: export proxy_abi_version_0_2_1 " +
        "(0_2_0 and 0_1_0 are also recognised)",
    ]);
  }
  const problems: string[] = [];
  checkImports(iface, abiVersion, problems);
  checkExports(iface, abiVersion, problems);
  if (problems.length > 0) throw new ModuleRefusedError(problems);
  return { module, abiVersion, interface: iface };
}

// Minimal typings for the part of @webassemblyjs/wasm-parser the host uses (the package ships
// none). Only the AST nodes read by wasm_sections.ts are described.
declare module "@webassemblyjs/wasm-parser" {
  export interface DecodeOptions {
    dump?: boolean;
    ignoreCodeSection?: boolean;
    ignoreDataSection?: boolean;
    ignoreCustomNameSection?: boolean;
  }
  export interface AstSignature {
    type: "Signature";
    params: Array<{ valtype: string }>;
    results: string[];
  }
  export interface AstField {
    type: string;
    [key: string]: unknown;
  }
  export interface AstModule {
    type: "Module";
    fields: AstField[];
  }
  export interface AstProgram {
    type: "Program";
    body: AstModule[];
  }
  export function decode(binary: Uint8Array | ArrayBuffer, options?: DecodeOptions): AstProgram;
}

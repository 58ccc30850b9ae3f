// Where the libraries the reports care about lie in the pinned Envoy 1.40.0 binary (file
// addresses). The linker keeps a library's code together, so the runs of functions that vtables
// name after one library's classes mark its range: `npx tsx bench/envoy/callgrind_report.ts
// --regions` prints those runs; every function inside a range belongs to that library, named or
// not. A new Envoy version needs these re-derived.

export type Library = "wasm host" | "V8 wasm C API" | "V8";

const RANGES: [number, number, Library][] = [
  [0x2c7b800, 0x2ca5e00, "wasm host"], // Envoy's wasm extension + proxy-wasm-cpp-host
  [0x2ca5e00, 0x2cb0620, "V8 wasm C API"],
  [0x2f3e8d0, 0x2fa9060, "wasm host"],
  [0x2faf7f0, 0x4446d70, "V8"], // runtime, compiler and the embedded builtins (2.2 MB without unwind info)
];

/** The library whose range holds a file address of the binary, if any. */
export function libraryAt(fileAddress: number): Library | undefined {
  for (const [low, high, library] of RANGES) if (low <= fileAddress && fileAddress < high) return library;
  return undefined;
}

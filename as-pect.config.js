// as-pect 8 test-runner configuration (`npx asp --config as-pect.config.js`).
//
// as-pect compiles each spec with ./as-pect.asconfig.json, which deliberately does not extend
// asconfig.json: the build's `abort=` override would route as-pect's own failures into a
// proxy_log + trap instead of a reported test failure.
export default {
  entries: ["assembly/__tests__/**/*.spec.ts"],
  include: ["assembly/__tests__/**/*.include.ts"],
  disclude: [/node_modules/],

  /**
   * as-pect 8 takes host imports only from this hook (an `imports` key is ignored).
   * Specs that pull in assembly/runtime import the proxy-wasm host functions from `env`;
   * there is no Envoy here, so each one the module imports gets a stub. proxy_* calls answer
   * 12 (WasmResult.Unimplemented) so code under test takes its "host refused" path; other
   * `env` functions answer 0. as-pect's own imports (abort, trace, ...) are left alone.
   */
  async instantiate(memory, createImports, instantiate, binary) {
    const UNIMPLEMENTED = 12;
    const env = {};
    for (const imp of WebAssembly.Module.imports(new WebAssembly.Module(binary))) {
      if (imp.module !== "env" || imp.kind !== "function") continue;
      if (imp.name === "abort" || imp.name === "trace" || imp.name === "seed") continue;
      env[imp.name] = imp.name.startsWith("proxy_") ? () => UNIMPLEMENTED : () => 0;
    }
    return instantiate(binary, createImports({ env }));
  },

  outputBinary: false,
};

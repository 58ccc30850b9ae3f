// Loading: a module Envoy would refuse is refused with an Error naming the import or export.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { ModuleRefusedError, ProxyWasmHost } from "../../host/index.js";
import { ensureBuilt } from "./helpers.js";
import { minimalFilter } from "./wasm_builder.js";

function refusal(bytes: Uint8Array): ModuleRefusedError {
  try {
    ProxyWasmHost.fromBytes(bytes);
  } catch (error) {
    assert.ok(error instanceof ModuleRefusedError, `expected ModuleRefusedError, got ${String(error)}`);
    return error;
  }
  assert.fail("the module was accepted");
}

describe("loading a module", () => {
  it("accepts the compiled noop filter and the probe", () => {
    for (const name of ["noop", "host_probe"] as const) {
      const host = ProxyWasmHost.fromBytes(readFileSync(ensureBuilt(name)));
      assert.equal(host.abiVersion, "0_2_1");
    }
  });

  it("accepts the smallest module (ABI marker, malloc, memory)", () => {
    assert.equal(ProxyWasmHost.fromBytes(minimalFilter()).abiVersion, "0_2_1");
  });

  for (const [field, hint] of [
    ["abort", /abort override/],
    ["seed", /Math\.random/],
    ["trace", /trace\(\)/],
  ] as const) {
    it(`refuses env.${field} (an AssemblyScript default import Envoy does not provide)`, () => {
      const error = refusal(minimalFilter((b) => b.importFunction("env", field, ["i32", "i32", "i32", "i32"])));
      assert.match(error.message, new RegExp(`env\\.${field}, which Envoy does not provide`));
      assert.match(error.message, hint);
    });
  }

  it("refuses any other import Envoy does not link, naming it", () => {
    const error = refusal(minimalFilter((b) => b.importFunction("env", "proxy_get_foo", ["i32"], ["i32"])));
    assert.match(error.message, /imports env\.proxy_get_foo, which Envoy does not provide/);
  });

  it("refuses an import whose signature differs from Envoy's, showing both", () => {
    const error = refusal(minimalFilter((b) => b.importFunction("env", "proxy_log", ["i32", "i32"], ["i32"])));
    assert.match(error.message, /import env\.proxy_log has signature \(i32, i32\) -> \(i32\)/);
    assert.match(error.message, /Envoy provides \(i32, i32, i32\) -> \(i32\)/);
  });

  it("checks i64 parameters (proxy_increment_metric takes an i64 offset)", () => {
    refusal(minimalFilter((b) => b.importFunction("env", "proxy_increment_metric", ["i32", "i32"], ["i32"])));
    ProxyWasmHost.fromBytes(minimalFilter((b) => b.importFunction("env", "proxy_increment_metric", ["i32", "i64"], ["i32"])));
  });

  it("refuses a module without a proxy_abi_version export", () => {
    const error = refusal(minimalFilter(undefined, { marker: "" }));
    assert.match(error.message, /missing or unknown Proxy-Wasm ABI version/);
  });

  it("accepts the 0_2_0 and 0_1_0 markers", () => {
    assert.equal(ProxyWasmHost.fromBytes(minimalFilter(undefined, { marker: "proxy_abi_version_0_2_0" })).abiVersion, "0_2_0");
    assert.equal(ProxyWasmHost.fromBytes(minimalFilter(undefined, { marker: "proxy_abi_version_0_1_0" })).abiVersion, "0_1_0");
  });

  it("links proxy_get_log_level only for ABI 0_2_1 modules", () => {
    const withLogLevel = (marker: string) =>
      minimalFilter((b) => b.importFunction("env", "proxy_get_log_level", ["i32"], ["i32"]), { marker });
    ProxyWasmHost.fromBytes(withLogLevel("proxy_abi_version_0_2_1"));
    const error = refusal(withLogLevel("proxy_abi_version_0_2_0"));
    assert.match(error.message, /env\.proxy_get_log_level, which Envoy links only for ABI 0_2_1/);
  });

  it("links proxy_clear_route_cache only for ABI 0_1_0 modules (0.2.x use the foreign function)", () => {
    const withClear = (marker: string) => minimalFilter((b) => b.importFunction("env", "proxy_clear_route_cache", [], ["i32"]), { marker });
    ProxyWasmHost.fromBytes(withClear("proxy_abi_version_0_1_0"));
    assert.match(refusal(withClear("proxy_abi_version_0_2_1")).message, /proxy_clear_route_cache/);
  });

  it("accepts WASI under both module names, with i64 parameters, and the emscripten helpers", () => {
    ProxyWasmHost.fromBytes(
      minimalFilter((b) => {
        for (const module of ["wasi_snapshot_preview1", "wasi_unstable"]) {
          b.importFunction(module, "fd_write", ["i32", "i32", "i32", "i32"], ["i32"]);
          b.importFunction(module, "fd_seek", ["i32", "i64", "i32", "i32"], ["i32"]);
          b.importFunction(module, "clock_time_get", ["i32", "i64", "i32"], ["i32"]);
          b.importFunction(module, "proc_exit", ["i32"], []);
        }
        b.importFunction("env", "emscripten_notify_memory_growth", ["i32"], []);
        b.importFunction("env", "pthread_equal", ["i32", "i32"], ["i32"]);
      }),
    );
  });

  it("refuses a WASI import with the wrong signature", () => {
    const error = refusal(minimalFilter((b) => b.importFunction("wasi_snapshot_preview1", "clock_time_get", ["i32", "i32", "i32"], ["i32"])));
    assert.match(error.message, /wasi_snapshot_preview1\.clock_time_get/);
  });

  it("refuses an imported memory (Envoy links functions only)", () => {
    const error = refusal(minimalFilter((b) => b.importMemory("env", "memory")));
    assert.match(error.message, /imports memory env\.memory/);
  });

  it("refuses a callback export with the wrong signature", () => {
    const error = refusal(minimalFilter((b) => b.addFunction("proxy_on_new_connection", ["i32"], [])));
    assert.match(error.message, /bad function signature for export proxy_on_new_connection/);
  });

  it("refuses a module without malloc, and accepts proxy_on_memory_allocate instead", () => {
    assert.match(refusal(minimalFilter(undefined, { allocator: null })).message, /missing malloc function/);
    ProxyWasmHost.fromBytes(minimalFilter(undefined, { allocator: "proxy_on_memory_allocate" }));
  });

  it("reports every problem at once", () => {
    const error = refusal(
      minimalFilter((b) => {
        b.importFunction("env", "abort", ["i32", "i32", "i32", "i32"]);
        b.importFunction("env", "seed", [], ["f64"]);
      }),
    );
    assert.equal(error.problems.length, 2);
  });

  it("refuses bytes that are not a wasm module", () => {
    assert.match(refusal(new Uint8Array([1, 2, 3])).message, /not a valid wasm binary/);
  });
});

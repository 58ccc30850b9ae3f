#!/usr/bin/env node
// Exercises build/bench/stock_noop.wasm (from build.mjs) in node, without Envoy:
//
//   1. interface: imports/exports, which proxy-wasm callbacks the stock runtime exports and which
//      network-filter callbacks it lacks;
//   2. lifecycle with a STUB host (every env.proxy_* returns 0 = Ok and writes nothing):
//      _initialize, proxy_on_context_create(1,0), proxy_on_vm_start(1,0), proxy_on_configure(1,0),
//      then for i = 2..N: proxy_on_context_create(i,1), proxy_on_done(i), proxy_on_log(i),
//      proxy_on_delete(i) - must not trap;
//   3. the same root setup with an ENVOY-LIKE host (answers plugin_root_id and hands the plugin
//      configuration over through the guest's malloc, as proxy-wasm-cpp-host does), for a few
//      root ids and configurations, to show which ones the runtime survives;
//   4. rough timing with the stub host: per-connection cost of create/done/log/delete with 0 and
//      with K contexts kept open, and how many proxy_log calls/bytes a connection produces.
//
// Usage: node bench/stock-runtime/verify.mjs [--wasm build/bench/stock_noop.wasm]
//          [--connections 10000] [--open 10000] [--runs 3] [--no-timing]
// The lifecycle/timing part is generic proxy-wasm, so it also runs against another module
// (e.g. --wasm build/noop.wasm) for a side-by-side figure.
import { readFileSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
function option(name, fallback) {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}
const WASM = resolve(ROOT, option("wasm", "build/bench/stock_noop.wasm"));
const CONNECTIONS = Number(option("connections", "10000"));
const OPEN = Number(option("open", "10000"));
const RUNS = Number(option("runs", "3"));
const TIMING = !args.includes("--no-timing");

const module = new WebAssembly.Module(readFileSync(WASM));
const imports = WebAssembly.Module.imports(module);
const exports = WebAssembly.Module.exports(module);
const exported = new Set(exports.map((e) => e.name));

// ---------------------------------------------------------------------------------------------
// 1. Interface.
console.log(`module: ${WASM} (${statSync(WASM).size} bytes)`);
console.log(`imports: ${imports.map((i) => `${i.module}.${i.name}`).join(", ")}`);
console.log(`exports: ${exports.map((e) => e.name).join(", ")}`);
const forbidden = imports.filter((i) => i.module !== "env" || !i.name.startsWith("proxy_"));
const banned = imports.filter((i) => i.module === "env" && ["abort", "seed", "trace"].includes(i.name));
console.log(
  `non-proxy imports: ${forbidden.length ? forbidden.map((i) => `${i.module}.${i.name}`).join(", ") : "none"}; ` +
    `env.abort/seed/trace: ${banned.length ? banned.map((i) => i.name).join(", ") : "none"}`,
);
const NETWORK_CALLBACKS = [
  "proxy_on_new_connection",
  "proxy_on_downstream_data",
  "proxy_on_upstream_data",
  "proxy_on_downstream_connection_close",
  "proxy_on_upstream_connection_close",
];
const LIFECYCLE_CALLBACKS = ["proxy_on_context_create", "proxy_on_vm_start", "proxy_on_configure", "proxy_on_done", "proxy_on_log", "proxy_on_delete"];
const callbacks = exports.filter((e) => e.name.startsWith("proxy_on_") || e.name === "proxy_validate_configuration");
console.log(`callbacks exported (${callbacks.length}): ${callbacks.map((e) => e.name).join(", ")}`);
console.log(`ABI marker: ${exports.filter((e) => e.name.startsWith("proxy_abi_version_")).map((e) => e.name).join(", ") || "none"}`);
console.log(`network callbacks missing: ${NETWORK_CALLBACKS.filter((n) => !exported.has(n)).join(", ") || "none"}`);
const missingLifecycle = LIFECYCLE_CALLBACKS.filter((n) => !exported.has(n));
if (missingLifecycle.length) {
  console.error(`missing lifecycle callbacks: ${missingLifecycle.join(", ")}`);
  process.exit(1);
}

// ---------------------------------------------------------------------------------------------
// Hosts.
const utf8 = new TextDecoder();
const encoder = new TextEncoder();
const LEVELS = ["trace", "debug", "info", "warn", "error", "critical"];

/**
 * A host whose every env.proxy_* import returns 0 (Ok) and writes nothing into guest memory.
 * `observe` additionally counts proxy_log calls/bytes and remembers critical messages (reading
 * guest memory only); the timing runs use observe = false: bare `() => 0` functions.
 */
function stubHost(observe) {
  const state = { instance: null, logCalls: 0, logBytes: 0, critical: [] };
  const env = {};
  for (const i of imports) {
    if (i.module !== "env" || i.kind !== "function") continue;
    env[i.name] = () => 0;
  }
  if (observe && env.proxy_log) {
    env.proxy_log = (level, ptr, size) => {
      state.logCalls++;
      state.logBytes += size;
      if (level >= 4) {
        state.critical.push(`${LEVELS[level] ?? level}: ${utf8.decode(new Uint8Array(state.instance.exports.memory.buffer, ptr, size))}`);
      }
      return 0;
    };
  }
  return { imports: { env }, state };
}

/**
 * A host that behaves like proxy-wasm-cpp-host (Envoy) for the calls a root context makes:
 * proxy_get_property("plugin_root_id") and proxy_get_buffer_bytes(PluginConfiguration/
 * VmConfiguration). Values go to the guest through its exported malloc; an empty value is
 * written as pointer 0 / size 0 (copyToPointerSize), and get_buffer_bytes with nothing to copy
 * returns Ok without writing (as the C++ host does). Everything else returns 0.
 */
function envoyLikeHost({ rootId, pluginConfiguration, vmConfiguration = "" }) {
  const state = { instance: null, logs: [] };
  const env = {};
  for (const i of imports) if (i.module === "env" && i.kind === "function") env[i.name] = () => 0;
  const memory = () => state.instance.exports.memory.buffer;
  const setWord = (addr, value) => new DataView(memory()).setUint32(addr, value, true);
  const copyToPointerSize = (bytes, ptrPtr, sizePtr) => {
    let pointer = 0;
    if (bytes.length > 0) {
      pointer = state.instance.exports.malloc(bytes.length);
      new Uint8Array(memory(), pointer, bytes.length).set(bytes);
    }
    setWord(ptrPtr, pointer);
    setWord(sizePtr, bytes.length);
  };
  env.proxy_log = (level, ptr, size) => {
    state.logs.push(`${LEVELS[level] ?? level}: ${utf8.decode(new Uint8Array(memory(), ptr, size))}`);
    return 0;
  };
  env.proxy_get_property = (pathPtr, pathSize, valuePtrPtr, valueSizePtr) => {
    const path = utf8.decode(new Uint8Array(memory(), pathPtr, pathSize));
    if (path !== "plugin_root_id") return 1; // NotFound
    copyToPointerSize(encoder.encode(rootId), valuePtrPtr, valueSizePtr);
    return 0;
  };
  env.proxy_get_buffer_bytes = (type, start, length, ptrPtr, sizePtr) => {
    const buffers = { 6: vmConfiguration, 7: pluginConfiguration };
    if (!(type in buffers)) return 1; // NotFound
    const bytes = encoder.encode(buffers[type]);
    if (start > bytes.length) return 2; // BadArgument
    const n = Math.min(length, bytes.length - start);
    if (n > 0) copyToPointerSize(bytes.subarray(start, start + n), ptrPtr, sizePtr);
    return 0;
  };
  return { imports: { env }, state };
}

function instantiate(host) {
  const instance = new WebAssembly.Instance(module, host.imports);
  host.state.instance = instance;
  instance.exports._initialize();
  return instance.exports;
}

function rootSetup(ex, configurationSize = 0) {
  ex.proxy_on_context_create(1, 0);
  const started = ex.proxy_on_vm_start(1, 0);
  const configured = ex.proxy_on_configure(1, configurationSize);
  return { started, configured };
}

function connection(ex, id) {
  ex.proxy_on_context_create(id, 1);
  ex.proxy_on_done(id);
  ex.proxy_on_log(id);
  ex.proxy_on_delete(id);
}

function describe(error) {
  return error instanceof WebAssembly.RuntimeError ? `trap (${error.message})` : String(error);
}

// ---------------------------------------------------------------------------------------------
// 2. Lifecycle with the stub host.
{
  const N = 5000;
  const host = stubHost(true);
  let step = "_initialize";
  try {
    const ex = instantiate(host);
    step = "root setup";
    const { started, configured } = rootSetup(ex, 0);
    step = "connections";
    for (let id = 2; id <= N; id++) connection(ex, id);
    console.log(
      `\nstub host lifecycle: OK - proxy_on_vm_start -> ${started}, proxy_on_configure(1,0) -> ${configured}, ` +
        `${N - 1} connections (ids 2..${N}) created/done/logged/deleted without a trap; ` +
        `memory ${ex.memory.buffer.byteLength / 65536} pages`,
    );
    if (host.state.critical.length) console.log(`  error/critical logs: ${host.state.critical.slice(0, 3).join(" | ")}`);
  } catch (error) {
    console.log(`\nstub host lifecycle: FAILED during ${step}: ${describe(error)}`);
    for (const line of host.state.critical.slice(-3)) console.log(`  ${line}`);
    process.exitCode = 1;
  }

  // What one connection costs in logging, and how it grows with open contexts.
  for (const open of [0, 100, 1000]) {
    const h = stubHost(true);
    const ex = instantiate(h);
    rootSetup(ex, 0);
    for (let id = 2; id < 2 + open; id++) ex.proxy_on_context_create(id, 1);
    const before = { calls: h.state.logCalls, bytes: h.state.logBytes };
    const base = 100000;
    for (let id = base; id < base + 100; id++) connection(ex, id);
    console.log(
      `  per connection with ${open} contexts open: ${(h.state.logCalls - before.calls) / 100} proxy_log calls, ` +
        `${Math.round((h.state.logBytes - before.bytes) / 100)} bytes logged (all at debug level)`,
    );
  }

  // Callbacks for an id the runtime never created (Envoy does not do this; shown for reference).
  for (const call of ["proxy_on_done", "proxy_on_log", "proxy_on_delete"]) {
    const h = stubHost(true);
    const ex = instantiate(h);
    rootSetup(ex, 0);
    try {
      ex[call](424242);
      console.log(`  ${call}(unknown id): returns`);
    } catch (error) {
      console.log(`  ${call}(unknown id): ${describe(error)}; ${h.state.critical.at(-1) ?? ""}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Root setup with an Envoy-like host.
if (exported.has("malloc")) {
  console.log("\nenvoy-like host (plugin_root_id and plugin configuration handed over via malloc):");
  for (const rootId of ["", "noop", "other"]) {
    for (const pluginConfiguration of ["", "x", "{}"]) {
      const host = envoyLikeHost({ rootId, pluginConfiguration });
      let outcome;
      try {
        const ex = instantiate(host);
        const { started, configured } = rootSetup(ex, encoder.encode(pluginConfiguration).length);
        for (let id = 2; id < 102; id++) connection(ex, id);
        const seen = host.state.logs.find((l) => l.includes("Updating this.configuration="));
        outcome =
          `vm_start -> ${started}, configure -> ${configured}, 100 connections OK` +
          (seen ? `; runtime's configuration: ${JSON.stringify(seen.split("Updating this.configuration=")[1])}` : "");
      } catch (error) {
        const last = host.state.logs.filter((l) => l.startsWith("critical") || l.startsWith("error")).at(-1);
        outcome = `${describe(error)}${last ? `; last error log: ${last}` : ""}`;
      }
      console.log(`  root_id ${JSON.stringify(rootId).padEnd(7)} configuration ${JSON.stringify(pluginConfiguration).padEnd(5)}: ${outcome}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 4. Timing with the bare stub host.
if (TIMING) {
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  function measure(open, connections) {
    const ex = instantiate(stubHost(false));
    rootSetup(ex, 0);
    const openStart = performance.now();
    for (let id = 2; id < 2 + open; id++) ex.proxy_on_context_create(id, 1);
    const openMs = performance.now() - openStart;
    const first = 2 + open;
    const start = performance.now();
    for (let id = first; id < first + connections; id++) connection(ex, id);
    const ms = performance.now() - start;
    return { usPerConnection: (ms * 1000) / connections, openMs };
  }
  // Warm-up so that the measured runs use optimized (TurboFan) code, not the baseline tier.
  measure(0, 20000);
  measure(500, 2000);
  console.log(`\ntiming (stub host, performance.now, ${RUNS} fresh instances each, median):`);
  for (const open of [0, OPEN]) {
    const results = [];
    for (let r = 0; r < RUNS; r++) results.push(measure(open, CONNECTIONS));
    const us = median(results.map((x) => x.usPerConnection));
    const openNote = open ? `; opening the ${open} contexts took ${(median(results.map((x) => x.openMs)) / 1000).toFixed(1)} s` : "";
    console.log(
      `  ${String(open).padStart(6)} contexts open: ${us.toFixed(2)} us per connection ` +
        `(create+done+log+delete, ${CONNECTIONS} connections; runs: ${results.map((x) => x.usPerConnection.toFixed(2)).join(", ")})${openNote}`,
    );
  }
}

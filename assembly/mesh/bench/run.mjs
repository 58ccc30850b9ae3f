#!/usr/bin/env node
// Measures the mesh model at several sizes: the VM's linear memory after configure, configure
// time, retained model bytes per pod, and lookup cost. Usage (repo root):
//   node --expose-gc assembly/mesh/bench/run.mjs [--tree] [--peak] [pods ...]   default: 1000 100000
// 1M pods takes ~20 s and ~1 GB. --tree also sizes the JsonValue tree parseJson would build
// (what configure needed before it streamed): ~3.6 KB per pod, 3.6 GB at 1M pods. --peak
// also bisects configure's own peak heap need (configurePeakBytesPerPod; ~10 more runs).
//
// Memory figures are the wasm memory's byteLength, which only ever grows: what the VM keeps.
//   vmBytesPerPod          what a filter's VM holds after configure in Envoy: the parser reads
//                          the configuration window by window through proxy_get_buffer_bytes
//                          (implemented here as Envoy does it: range clamped, each window in a
//                          block the host gets from the guest's malloc); total ÷ pods
//   windowedConfigureMs    configure's time that way
//   reservedBytesPerPod    the block the build reserved up front (its estimate of everything
//                          it allocates, transient uid index included) ÷ pods
//   hostReads, bytesReadPerInputByte  proxy_get_buffer_bytes calls (windows, and one per
//                          endpoint whose uid is confirmed on the bytes), bytes they returned
//   wholeInputVmBytesPerPod the configuration copied in whole first (one proxy_get_buffer_bytes
//                          for all of it, the runtime copies it into an ArrayBuffer and frees
//                          the block: how the runtime delivered it before), then configure
//   managedInputBytesPerPod the configuration is one ArrayBuffer from the start; total ÷ pods
//   configureBytesPerPod   what configure adds to linear memory on top of its input; the
//                          allocator grows memory by at least its current size, so this is
//                          about the input size again, whatever configure needs
//   configurePeakBytesPerPod (--peak) the heap configure needs at its peak, without that effect
//   inputBytesPerPod       the JSON text itself
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";

const here = new URL(".", import.meta.url).pathname;
const out = "build/bench/mesh_bench.wasm";
mkdirSync("build/bench", { recursive: true });
const built = spawnSync(
  process.execPath,
  ["node_modules/assemblyscript/bin/asc.js", `${here}entry.ts`, "--config", `${here}asconfig.json`, "--outFile", out],
  { stdio: "inherit" },
);
if (built.status !== 0) process.exit(built.status ?? 1);
const wasm = readFileSync(out);

/** A cluster-like snapshot: shared identities/localities, one 100-endpoint service per 100 pods. */
function snapshot(pods) {
  const parts = ['{"workloads":['];
  for (let i = 0; i < pods; i++) {
    if (i) parts.push(",");
    const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    parts.push(
      `{"uid":"kubernetes//Pod/default/app-${i}","addresses":["${ip}"],"tlsMode":"istio",` +
        `"identity":"spiffe://cluster.local/ns/default/sa/sa${i % 1000}","locality":"region/zone${i % 3}/sub${i % 7}"}`,
    );
  }
  parts.push('],"services":[');
  const services = Math.max(1, Math.ceil(pods / 100));
  for (let s = 0; s < services; s++) {
    if (s) parts.push(",");
    const endpoints = [];
    for (let e = 0; e < 100 && s * 100 + e < pods; e++) {
      endpoints.push(`{"workload":"kubernetes//Pod/default/app-${s * 100 + e}"}`);
    }
    parts.push(
      `{"hostname":"svc${s}.default.svc.cluster.local","vips":[{"address":"10.200.${(s >> 8) & 255}.${s & 255}"}],` +
        `"ports":{"80":8080},"endpoints":[${endpoints.join(",")}]}`,
    );
  }
  parts.push("]}");
  return Buffer.from(parts.join(""));
}

/**
 * A fresh module instance. `config` (optional) is the plugin configuration its
 * proxy_get_buffer_bytes serves, as Envoy does: the range clamped to the buffer, the bytes in a
 * block allocated through the guest's malloc, pointer and size written to the out-params.
 */
const hostReads = { calls: 0, bytes: 0 };

async function instance(config) {
  let x;
  let bytes = null;
  let words = null;
  const env = {
    abort: () => { throw new Error("abort"); },
    seed: () => 1,
    trace: () => {},
    proxy_get_buffer_bytes: (type, start, length, ptrOut, sizeOut) => {
      if (!config) return 1; // NOT_FOUND
      hostReads.calls++;
      const from = Math.min(start >>> 0, config.length);
      const to = Math.min(from + (length >>> 0), config.length);
      hostReads.bytes += to - from;
      const block = x.malloc(Math.max(to - from, 1)) >>> 0;
      if (bytes === null || bytes.buffer !== x.memory.buffer) {
        bytes = new Uint8Array(x.memory.buffer); // a grown memory detaches the old view
        words = new DataView(x.memory.buffer);
      }
      bytes.set(config.subarray(from, to), block);
      words.setUint32(ptrOut >>> 0, block, true);
      words.setUint32(sizeOut >>> 0, to - from, true);
      return 0;
    },
  };
  x = (await WebAssembly.instantiate(wasm, { env })).instance.exports;
  return x;
}

/** The configuration as one pinned ArrayBuffer; its pointer. */
function copyIn(x, bytes) {
  const ptr = x.__pin(x.newBuffer(bytes.length)) >>> 0; // addresses above 2 GB come back negative
  new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
  return ptr;
}

/** The configuration the way proxy_on_configure gets it (malloc'd block → ArrayBuffer). */
function deliver(x, bytes) {
  const block = x.hostBlock(bytes.length) >>> 0;
  new Uint8Array(x.memory.buffer, block, bytes.length).set(bytes);
  return x.__pin(x.takeHostBlock(block, bytes.length)) >>> 0;
}

const MB = 1048576;

async function measure(pods, withTree) {
  const text = snapshot(pods);
  const result = { pods, ok: true, jsonMB: +(text.length / MB).toFixed(1) };
  // 0. As a filter configures in Envoy now: read in windows, in a fresh instance.
  {
    const w = await instance(text);
    hostReads.calls = hostReads.bytes = 0;
    const t = performance.now();
    result.ok &&= w.configureWindowed(text.length, 0) === 1;
    result.windowedConfigureMs = Math.round(performance.now() - t);
    result.vmBytesPerPod = +(w.memory.buffer.byteLength / pods).toFixed(1);
    result.vmMB = +(w.memory.buffer.byteLength / MB).toFixed(1);
    result.windowedRetainedBytesPerPod = +(w.retainedBytes() / pods).toFixed(1);
    result.reservedBytesPerPod = +(w.reservedBytes() / pods).toFixed(1);
    // How the configuration was read: host calls, and bytes read ÷ the configuration's size.
    result.hostReads = hostReads.calls;
    result.bytesReadPerInputByte = +(hostReads.bytes / text.length).toFixed(2);
  }
  globalThis.gc?.();
  // 1. The configuration copied in whole first (as the runtime delivered it before).
  {
    const v = await instance();
    const input = deliver(v, text);
    const t = performance.now();
    result.ok &&= v.configure(input) === 1;
    result.firstConfigureMs = performance.now() - t;
    v.__unpin(input);
    v.__collect();
    result.wholeInputVmBytesPerPod = Math.round(v.memory.buffer.byteLength / pods);
  }
  globalThis.gc?.();
  // 2. The input as one managed buffer: timing, memory above the input, lookups.
  const x = await instance();
  const input = copyIn(x, text);
  const base = x.memory.buffer.byteLength;
  const t0 = performance.now();
  const ok = x.configure(input);
  const configureMs = performance.now() - t0;
  x.__unpin(input);
  x.__collect();
  const after = x.memory.buffer.byteLength;
  const iterations = 2_000_000;
  x.lookups(10_000, pods);
  const t1 = performance.now();
  const hits = x.lookups(iterations, pods);
  const lookupNs = ((performance.now() - t1) * 1e6) / iterations;
  x.connections(10_000, pods);
  const t2 = performance.now();
  const istio = x.connections(iterations, pods);
  const connectionNs = ((performance.now() - t2) * 1e6) / iterations;
  Object.assign(result, {
    ok: result.ok && ok === 1 && hits === iterations && istio === iterations,
    // Each configure runs once in a fresh instance; the faster of the two (shared machine).
    configureMs: Math.round(Math.min(configureMs, result.firstConfigureMs)),
    configureUsPerPod: +((Math.min(configureMs, result.firstConfigureMs) * 1000) / pods).toFixed(2),
    managedInputBytesPerPod: Math.round(after / pods),
    configureBytesPerPod: +((after - base) / pods).toFixed(1),
    inputBytesPerPod: Math.round(text.length / pods),
    retainedBytesPerPod: +(x.retainedBytes() / pods).toFixed(1),
    linearMemoryMB: Math.round(after / MB),
    randomLookupNs: +lookupNs.toFixed(1),
    perConnectionNs: +connectionNs.toFixed(1),
  });
  delete result.firstConfigureMs;
  // 3. Optionally: the JsonValue tree alone, in a fresh instance.
  if (withTree) {
    globalThis.gc?.();
    const a = await instance();
    const inA = copyIn(a, text);
    const baseA = a.memory.buffer.byteLength;
    a.parseTree(inA);
    result.jsonTreeBytesPerPod = Math.round((a.memory.buffer.byteLength - baseA) / pods);
  }
  return result;
}

/**
 * The heap configure needs at its peak (model + parse temporaries + fragmentation), free of
 * the allocator's growth policy: the smallest free space R, reserved right after the input,
 * in which configure runs without growing memory (bisection, fresh instance per try).
 */
async function peakNeed(text) {
  const fits = async (reserve) => {
    const x = await instance();
    const block = x.hostBlock(text.length + reserve) >>> 0; // grows memory to hold both
    x.freeBlock(block); // one free region
    const input = copyIn(x, text); // placed at its start
    const before = x.memory.buffer.byteLength;
    const ok = x.configure(input) === 1;
    return ok && x.memory.buffer.byteLength == before;
  };
  let lo = 0;
  let hi = 64 * 1024 * 1024 + text.length;
  while (!(await fits(hi))) hi *= 2;
  while (hi - lo > Math.max(65536, hi / 100)) {
    const mid = Math.floor((lo + hi) / 2);
    if (await fits(mid)) hi = mid;
    else lo = mid;
    globalThis.gc?.();
  }
  return hi;
}

const args = process.argv.slice(2);
const withTree = args.includes("--tree");
const withPeak = args.includes("--peak");
const sizes = args.filter((a) => !a.startsWith("--")).map(Number);
for (const pods of sizes.length ? sizes : [1000, 100000]) {
  const result = await measure(pods, withTree);
  if (withPeak) result.configurePeakBytesPerPod = +((await peakNeed(snapshot(pods))) / pods).toFixed(1);
  console.log(JSON.stringify(result));
}

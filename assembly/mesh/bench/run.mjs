#!/usr/bin/env node
// Measures the mesh model at several sizes: configure time, linear memory, retained model
// bytes per pod, and lookup cost. Usage (repo root):
//   node assembly/mesh/bench/run.mjs [pods ...]        default: 1000 100000
// 1M pods needs ~4 GB of wasm memory and ~1 min (the JSON tree, see README.md); run it as
//   node --expose-gc assembly/mesh/bench/run.mjs 1000000
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

async function instance() {
  const env = { abort: () => { throw new Error("abort"); }, seed: () => 1, trace: () => {} };
  return (await WebAssembly.instantiate(wasm, { env })).instance.exports;
}

function copyIn(x, bytes) {
  const ptr = x.__pin(x.newBuffer(bytes.length)) >>> 0; // addresses above 2 GB come back negative
  new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
  return ptr;
}

const MB = 1048576;

async function measure(pods) {
  const text = snapshot(pods);
  // 1. The JSON tree alone, in a fresh instance (dropped before the next one is made).
  let treeBytes = 0;
  {
    const a = await instance();
    const inA = copyIn(a, text);
    const baseA = a.memory.buffer.byteLength;
    a.parseTree(inA);
    treeBytes = a.memory.buffer.byteLength - baseA;
  }
  globalThis.gc?.();
  // 2. The whole configure in another fresh instance (its peak includes the tree).
  const x = await instance();
  const input = copyIn(x, text);
  const base = x.memory.buffer.byteLength;
  const t0 = performance.now();
  const ok = x.configure(input);
  const configureMs = performance.now() - t0;
  x.__unpin(input);
  x.__collect();
  const peak = x.memory.buffer.byteLength;
  // 3. Lookups.
  const iterations = 2_000_000;
  x.lookups(10_000, pods);
  const t1 = performance.now();
  const hits = x.lookups(iterations, pods);
  const lookupNs = ((performance.now() - t1) * 1e6) / iterations;
  x.connections(10_000, pods);
  const t2 = performance.now();
  const istio = x.connections(iterations, pods);
  const connectionNs = ((performance.now() - t2) * 1e6) / iterations;
  return {
    pods,
    ok: ok === 1 && hits === iterations && istio === iterations,
    jsonMB: +(text.length / MB).toFixed(1),
    configureMs: Math.round(configureMs),
    retainedBytesPerPod: +(x.retainedBytes() / pods).toFixed(1),
    jsonTreeBytesPerPod: Math.round(treeBytes / pods),
    peakLinearMemoryMB: Math.round(peak / MB),
    peakBytesPerPodAboveInput: Math.round((peak - base) / pods),
    randomLookupNs: +lookupNs.toFixed(1),
    perConnectionNs: +connectionNs.toFixed(1),
  };
}

const sizes = process.argv.slice(2).map(Number);
for (const pods of sizes.length ? sizes : [1000, 100000]) console.log(JSON.stringify(await measure(pods)));

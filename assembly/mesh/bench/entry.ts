// Benchmark module for run.mjs: the mesh model alone, built with release flags, so memory
// and lookup cost can be measured in node at 1k .. 1M pods. Not part of any filter.
import { JsonValue, parseJson } from "../../json";
import { Address, Mesh, MeshLimits, parseMeshConfig, parseMeshSource, parseSocketAddress } from "../index";
import { HostBufferSource } from "../../runtime/config_source";
import { lastReservation } from "../parse";
import { BufferType } from "../../runtime/types";
export { malloc } from "../../runtime/host_value";

let mesh: Mesh = new Mesh();
let tree: JsonValue | null = null;
const probe = new Address();

/** A buffer for the host to copy the configuration into (pin it while in use). */
export function newBuffer(length: i32): ArrayBuffer {
  return new ArrayBuffer(length);
}

/** A raw block, as the host gets from the guest's `malloc` for proxy_get_buffer_bytes. */
export function hostBlock(length: i32): usize {
  return heap.alloc(<usize>max(length, 1));
}

/** Frees a hostBlock. */
export function freeBlock(ptr: usize): void {
  heap.free(ptr);
}

/**
 * What assembly/runtime does with the configuration the host wrote into a `malloc` block:
 * copy it into a managed ArrayBuffer and free the block (takeHostValue).
 */
export function takeHostBlock(ptr: usize, length: i32): ArrayBuffer {
  const copy = new ArrayBuffer(length);
  memory.copy(changetype<usize>(copy), ptr, <usize>length);
  heap.free(ptr);
  return copy;
}

/** Parses the configuration (streaming) into the kept mesh; 1 on success. */
export function configure(bytes: ArrayBuffer): i32 {
  const result = parseMeshConfig(bytes);
  const m = result.mesh;
  if (m === null) return 0;
  mesh = m;
  return 1;
}

/**
 * Configure the way a filter does in Envoy: the plugin configuration is never copied in whole,
 * the parser reads it window by window through proxy_get_buffer_bytes (run.mjs implements that
 * import as Envoy does: a malloc'd block per call, range clamped). `window` 0: the default.
 */
export function configureWindowed(size: i32, window: i32): i32 {
  const source = new HostBufferSource(BufferType.PluginConfiguration, size);
  const doc = window > 0 ? parseMeshSource(source, [], new MeshLimits(), window) : parseMeshSource(source, []);
  const m = doc.mesh;
  if (m === null) return 0;
  mesh = m;
  return 1;
}

/** Parses the JSON only and keeps the tree (what the tree-based configure used to need). */
export function parseTree(bytes: ArrayBuffer): i32 {
  const result = parseJson(bytes);
  tree = result.value;
  return result.ok() ? 1 : 0;
}

export function dropTree(): void {
  tree = null;
}

/** What the last build reserved up front (see parse.ts reserveBuildMemory). */
export function reservedBytes(): f64 {
  return <f64>lastReservation;
}

export function retainedBytes(): f64 {
  return <f64>mesh.retainedBytes();
}

/** `iterations` lookups of pseudo-random pods 10.x.y.z = (10 << 24) | index; returns hits. */
export function lookups(iterations: i32, pods: i32): i32 {
  let x: u32 = 2463534242;
  let found = 0;
  for (let i = 0; i < iterations; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const pod = x % <u32>pods;
    probe.setV4((10 << 24) | pod);
    if (mesh.workloadByAddress(0, probe) == <i32>pod) found++;
  }
  return found;
}

// Scratch for the printed destination address, as the host would hand it over.
const text = heap.alloc(32);

/** Writes the decimal digits of v (0..65535) at `at`; returns the position after them. */
function writeNumber(at: usize, v: u32): usize {
  if (v >= 10) at = writeNumber(at, v / 10);
  store<u8>(at, 0x30 + <u8>(v % 10));
  return at + 1;
}

/** Prints "10.x.y.z:8080" for pod index `pod`; returns the length. */
function printAddress(pod: u32): i32 {
  let at = text;
  store<u8>(at++, 0x31);
  store<u8>(at++, 0x30);
  for (let shift: u32 = 16; shift < 32; shift -= 8) {
    store<u8>(at++, 0x2e);
    at = writeNumber(at, (pod >> shift) & 255);
    if (shift == 0) break;
  }
  store<u8>(at++, 0x3a);
  at = writeNumber(at, 8080);
  return <i32>(at - text);
}

/**
 * What a filter does per connection for pseudo-random pods: parse the printed "ip:port" from
 * memory, look the pod up, read its tlsMode and identity. Returns how many were istio pods.
 */
export function connections(iterations: i32, pods: i32): i32 {
  let x: u32 = 88172645;
  let istio = 0;
  for (let i = 0; i < iterations; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const length = printAddress(x % <u32>pods);
    if (!parseSocketAddress(text, length, probe)) continue;
    const w = mesh.workloadByAddress(0, probe);
    if (w >= 0 && mesh.workloadIstio(w) && mesh.workloadIdentityUtf8(w).byteLength > 0) istio++;
  }
  return istio;
}

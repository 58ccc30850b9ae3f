// Benchmark module for run.mjs: the mesh model alone, built with release flags, so memory
// and lookup cost can be measured in node at 1k .. 1M pods. Not part of any filter.
import { JsonValue, parseJson } from "../../json";
import { Address, applyMeshMessage, collectAfterMessage, formatIp, Mesh, MeshLimits, parseMeshConfig, parseMeshSource, parseSocketAddress } from "../index";
import { HostBufferSource } from "../../runtime/config_source";
import { lastReservation } from "../parse_build";
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

// ==================================================================== the update path (issue 15)
// Driven by tests/host/mesh_delta.test.ts and bench/scale/mesh_update.ts: apply feed messages
// to the kept mesh, read the model back as a canonical text (digest), time lookups.

let lastError: string = "";
let lastApplyKind: i32 = 0;

/** Applies a feed message to the kept mesh; 1 applied, 0 refused (lastErrorUtf8 says why). */
export function applyMessage(bytes: ArrayBuffer): i32 {
  const result = applyMeshMessage(mesh, bytes);
  lastError = result.error;
  lastApplyKind = result.kind;
  const m = result.mesh;
  const ok = result.ok() && m !== null;
  if (ok) mesh = changetype<Mesh>(m);
  // What the filters' feed sink does after each message (filters/mesh_feed/sink.ts).
  collectAfterMessage(result.kind, bytes.byteLength);
  return ok ? 1 : 0;
}

/** Drops the kept model (the next message must be a full one). */
export function resetMesh(): void {
  mesh = new Mesh();
}

export function lastErrorUtf8(): ArrayBuffer {
  return String.UTF8.encode(lastError);
}

export function meshVersion(): f64 {
  return <f64>mesh.version;
}

/** The WebAssembly memory size in bytes (what the VM keeps). */
export function memoryBytes(): f64 {
  return <f64>(<i64>memory.size() << 16);
}

/** Runs a full collection (the runtime's incremental GC would get there on its own). */
export function collect(): void {
  __collect();
}

export function workloadByV4(network: i32, ip: u32): i32 {
  return mesh.workloadByV4(network, ip);
}

/** The service with this hostname (UTF-8), or -1: what a hostname reference resolves to. */
export function serviceByHostnameUtf8(text: ArrayBuffer): i32 {
  return mesh.serviceByHostname(String.UTF8.decode(text));
}

/** The service with this IPv4 VIP on `network` (a name, UTF-8), or -1 (also when no such network). */
export function serviceByVip4(network: ArrayBuffer, ip: u32): i32 {
  const net = mesh.networkId(String.UTF8.decode(network));
  if (net < 0) return -1;
  probe.family = 4;
  probe.v4 = ip;
  probe.port = -1;
  return mesh.serviceByVip(net, probe);
}

function refText(m: Mesh, r: i32): string {
  if (r < 0) return "-";
  const a = new Address();
  let t = m.refHostname(r);
  if (m.refAddress(r, a)) t = formatIp(a);
  return t + ":" + m.refPort(r).toString() + "->" + m.refTarget(r).toString() + "/" + m.refIndex(r).toString();
}

/**
 * Everything the model answers, by id, as text: ids that are not live are skipped; each
 * service's endpoints are sorted (a delta's swap-remove order is not the build's order).
 */
export function digestUtf8(): ArrayBuffer {
  const m = mesh;
  const out = new Array<string>();
  const a = new Address();
  for (let w = 0; w < m.workloadCount(); w++) {
    if (!m.workloadLive(w)) continue;
    let line = "w" + w.toString() + " net=" + m.networkName(m.workloadNetwork(w));
    line += " istio=" + (m.workloadIstio(w) ? "1" : "0") + " healthy=" + (m.workloadHealthy(w) ? "1" : "0");
    line += " id=" + m.workloadIdentity(w) + " loc=" + m.workloadLocality(w);
    line += " r=" + m.localityPrefix(m.workloadRegion(w)) + " z=" + m.localityPrefix(m.workloadZone(w)) + " s=" + m.localityPrefix(m.workloadSubzone(w));
    line += " wp=" + refText(m, m.workloadWaypoint(w)) + " gw=" + refText(m, m.workloadGateway(w));
    for (let i = 0; i < m.workloadAddressCount(w); i++) {
      m.workloadAddress(w, i, a);
      line += " " + formatIp(a) + "->" + m.workloadByAddress(m.workloadNetwork(w), a).toString();
    }
    const ms = m.endpointsOfWorkload(w);
    for (let i = 0; i + 1 < ms.length; i += 2) {
      const s = ms[i];
      const e = ms[i + 1];
      line += " in" + s.toString() + (m.endpointWorkload(s, e) == w ? "" : "!");
      for (let k = 0; k < m.servicePortCount(s); k++) {
        const port = m.servicePortAt(s, k);
        const target = m.targetPort(s, e, port);
        line += ":" + port.toString() + "=" + target.toString();
        const h = m.headlessServiceOf(w, target);
        if (h >= 0) line += "h" + h.toString() + "/" + m.headlessServicePort(w, target).toString();
      }
    }
    out.push(line);
  }
  for (let s = 0; s < m.serviceCount(); s++) {
    if (!m.serviceLive(s)) continue;
    const hostname = m.serviceHostname(s);
    let line = "s" + s.toString() + " " + hostname + " by=" + m.serviceByHostname(hostname).toString();
    line += " headless=" + (m.serviceHeadless(s) ? "1" : "0") + " wp=" + refText(m, m.serviceWaypoint(s));
    line += " lb=" + m.lbMode(s).toString() + ":";
    for (let i = 0; i < m.lbPreferenceCount(s); i++) line += m.lbPreference(s, i).toString();
    for (let i = 0; i < m.servicePortCount(s); i++) {
      const port = m.servicePortAt(s, i);
      const cluster = m.clusterName(s, port);
      line += " port " + port.toString() + "->" + m.serviceTargetPort(s, port).toString();
      line += " " + (cluster === null ? "<null>" : String.UTF8.decode(cluster));
    }
    const eps = new Array<i32>();
    for (let e = 0; e < m.endpointCount(s); e++) eps.push(m.endpointWorkload(s, e));
    eps.sort((x: i32, y: i32): i32 => x - y);
    line += " eps=" + eps.join(",");
    for (let i = 0; i < m.sanCount(s); i++) line += " san=" + m.san(s, i);
    for (let i = 0; i < m.vipCount(s); i++) {
      m.vipAddress(s, i, a);
      line += " vip=" + formatIp(a) + "@" + m.networkName(m.vipNetworkId(s, i)) + "->" + m.serviceByVip(m.vipNetworkId(s, i), a).toString();
    }
    out.push(line);
  }
  return String.UTF8.encode(out.join("\n"));
}

/** Service s's port count and the target of one port (-1: none), without a whole digest. */
export function servicePorts(s: i32): i32 {
  return mesh.serviceLive(s) ? mesh.servicePortCount(s) : -1;
}

export function serviceTargetPort(s: i32, port: i32): i32 {
  return mesh.serviceTargetPort(s, port);
}

/** Live workloads, services and memberships, for the tests and the benchmark. */
export function liveCounts(): Int32Array {
  const out = new Int32Array(3);
  out[0] = mesh.liveWorkloads;
  out[1] = mesh.liveServices;
  out[2] = mesh.memLive;
  return out;
}

/** Removed services whose VIPs and SANs wait to be released (tests). */
export function retiredServiceCount(): i32 {
  return mesh.retiredServices.length;
}

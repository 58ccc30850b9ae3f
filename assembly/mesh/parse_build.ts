// Pass 2 of the JSON mesh reader, in order: both lists' types, one memory reservation for
// everything the build will allocate (sized from the scan's counts), the workloads, the
// services, the IPv4 table, the references resolved once.
import { MeshParser } from "./parse_context";
import { Mesh, VIP_WORDS } from "./model";
import { MAX_SERVICE_ITEMS, MAX_SERVICES, MAX_WORKLOADS, MeshLimits } from "./parse";
import { UidIndex } from "./parse_lookup";
import { MeshScan } from "./parse_scan";
import { readServices } from "./parse_services";
import { fillV4Table, readWorkloads } from "./parse_workloads";
import { ChunkPool } from "./pool";
import { AddrTable4, exactCapacity, SparseColumn, tableCapacity } from "./table";

/**
 * Builds the Mesh from the scanned document; null when a check failed (recorded in p.reader).
 * `path` is the lists' parent's path for messages ("" at the top).
 */
export function buildMesh(p: MeshParser, scan: MeshScan, path: string): Mesh | null {
  const r = p.reader;
  p.workloadsPath = r.childPath(path, "workloads");
  p.servicesPath = r.childPath(path, "services");
  // Both lists' types first, as ConfigReader.optionalArray on each did.
  const workloads = p.isList(scan.workloadsToken, p.workloadsPath);
  const services = p.isList(scan.servicesToken, p.servicesPath);
  scan.release();
  if (!r.failed()) reserveBuildMemory(scan, p.limits);
  if (workloads && !r.failed()) readWorkloads(p, scan);
  if (services && !r.failed()) readServices(p, scan);
  p.uids.release();
  // After the services, but a clash it finds is a workload's error: it replaces any later one.
  fillV4Table(p);
  if (r.failed()) return null;
  resolveRefs(p);
  // The last services' garbage goes now, so the filter starts with the spare free.
  __collect();
  return p.mesh;
}

/**
 * Linear memory never shrinks, and AssemblyScript's allocator grows it by at least its current
 * size whenever a block does not fit: a build that allocates column after column would end
 * with up to twice the memory it needs. So before the first column, one block the size of
 * everything the build will allocate (estimated from the scan's counts, with 1/16 and 128 KB
 * to spare) is allocated and freed at once: memory grows by that much once, while it is still small, and
 * every later allocation fits in the freed space. Columns and tables are sized exactly as
 * below; texts from the scan's byte counts; interned identities, localities and networks from
 * a per-workload allowance (they are shared texts; a mesh where every pod has its own identity
 * goes over it and then grows as before).
 */
export function reserveBuildMemory(scan: MeshScan, limits: MeshLimits): void {
  lastReservation = 0;
  const n = scan.workloads;
  // The uid index and the IPv4 table share one block (fillV4Table, parse_workloads.ts): the larger.
  const shared = max<i64>(<i64>AddrTable4.wordsFor(scan.count4), UidIndex.wordsFor(<i32>min(n, MAX_WORKLOADS))) * 4;
  const nw = <i32>min(n, MAX_WORKLOADS);
  // Per workload: identity + flags 4, network 2, locality 2, inline IPv4 4, first membership 4.
  let bytes: i64 = n * 16 + shared;
  bytes += SparseColumn.bytesFor(nw, scan.workloadWaypoints);
  bytes += SparseColumn.bytesFor(nw, scan.workloadGateways);
  bytes += ChunkPool.bytesFor(scan.extraWords, scan.extraWorkloads, nw);
  if (scan.count6 > 0) bytes += <i64>tableCapacity(scan.count6) * 20;
  bytes += n * limits.derivedBytesPerWorkload + scan.endpoints * limits.derivedBytesPerEndpoint;
  bytes += scan.internedBytes + n / 4; // interned texts (and their index slots)
  const services = scan.services;
  const ns = <i32>min(services, MAX_SERVICES);
  // Per service: flags 1, waypoint 4, routing preference 4; its member list [count, ...].
  bytes += services * 9 + 16;
  bytes += ChunkPool.bytesFor(scan.endpoints + services, services, ns);
  // Per port slot: port 2, target 2, its id in the service's chunk 4; the (service, port) index.
  bytes += scan.slots * 4 + ChunkPool.bytesFor(scan.slots, scan.servicesWithPorts, ns);
  bytes += <i64>tableCapacity(<i32>min(scan.slots, MAX_SERVICE_ITEMS)) * 16;
  // Per endpoint (membership): service 4, position 4, next of the workload 4, workload 4.
  bytes += scan.endpoints * 16;
  bytes += ChunkPool.bytesFor(scan.overrides, scan.overriddenEndpoints, <i32>min(scan.endpoints, MAX_SERVICE_ITEMS));
  bytes += ChunkPool.bytesFor(scan.vips * VIP_WORDS, scan.servicesWithVips, ns);
  bytes += ChunkPool.bytesFor(scan.sans, scan.servicesWithSans, ns);
  bytes += <i64>exactCapacity(scan.vip4) * 8 + <i64>tableCapacity(scan.vip6) * 20;
  bytes += scan.serviceTextBytes;
  // Spare: 1/16 and 256 KB: garbage the build collects only every 256 services, and the free
  // heap a filter has after configure for its own garbage (log lines: runtime/log.ts).
  bytes += (bytes >> 4) + 262144;
  // Beyond the limits the build refuses the configuration before allocating: nothing to reserve.
  if (bytes > <i64>0x40000000) return;
  const block = heap.alloc(<usize>growthRequest(bytes));
  heap.free(block);
  lastReservation = bytes;
}

/**
 * The request that makes the allocator grow memory by about `bytes`: before growing it rounds a
 * request up to the top of its size class (TLSF's roundSize in std/assembly/rt/tlsf.ts adds up
 * to 1/16), and all of the grown memory becomes free heap. Asking for `bytes` itself would grow
 * memory by up to 1/16 more than the build needs (measured: 2.4 MB at 1M pods).
 */
export function growthRequest(bytes: i64): i64 {
  const classStep = (<i64>1) << (63 - clz<i64>(bytes) - 4);
  return bytes - classStep;
}

/** Bytes the last build reserved (0: none); for the benchmark. */
export let lastReservation: i64 = 0;

/** Resolves each reference once (Mesh.resolveRef: the rules are the model's). */
function resolveRefs(p: MeshParser): void {
  const m = p.mesh;
  for (let i = 0; i < m.refs.length; i++) m.resolveRef(unchecked(m.refs[i]));
}

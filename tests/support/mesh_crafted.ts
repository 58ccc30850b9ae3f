// Crafted feed messages that aim at the decoder's cost rather than its rules: the largest
// lists one record may carry, header limits that claim far more than the message holds, and a
// membership of a service the message does not define. Shared by the host tests
// (tests/host/mesh_crafted.test.ts), the fuzzer (tests/fuzz/mesh_delta.test.ts feeds them,
// damaged and whole) and the benchmark (bench/scale/mesh_crafted.ts), so all three measure
// the same inputs.
import { encodeMessage, HEADER, HEADER_BYTES, KIND, WireRecord, WireService, WireWorkload } from "./mesh_wire.ts";

export const EPOCH = 11n;
/** The most a u16 count can say: ports of one service, memberships of one workload. */
export const MAX_LIST = 65_535;
/** The decoder's own id limits (MAX_WORKLOADS / MAX_SERVICES): the most a header may claim. */
export const MAX_IDS = 2_000_000;

/** A full message with no records that declares the largest id limits the decoder accepts. */
export function emptyFullAtMaxLimits(version = 1n): Uint8Array {
  return encodeMessage({ kind: KIND.full, epoch: EPOCH, version, workloadIdLimit: MAX_IDS, serviceIdLimit: MAX_IDS, records: [] });
}

/** The most texts a full message's table may declare (MAX_TABLE_TEXTS). */
export const MAX_TEXTS = 1_048_576;

/**
 * A full message whose text table holds `n` empty texts and no records: the table's own
 * declared count, as large as it may be, with the bytes to back it (2 per text).
 */
export function textTableFull(n = MAX_TEXTS, version = 1n): Uint8Array {
  const empty = emptyFullAtMaxLimits(version); // header, text count 0, reference count 0
  const out = new Uint8Array(empty.length + 2 * n);
  out.set(empty.subarray(0, HEADER_BYTES));
  const view = new DataView(out.buffer);
  view.setUint32(HEADER_BYTES, n, true); // then n zero-length texts, then 0 references
  view.setUint32(HEADER.bodyLength, out.length - HEADER_BYTES, true);
  return out;
}

/** The same claim in a delta (no records): the columns must not grow to the limits. */
export function emptyDeltaAtMaxLimits(base: bigint): Uint8Array {
  return encodeMessage({ kind: KIND.delta, epoch: EPOCH, baseVersion: base, version: base + 1n, workloadIdLimit: MAX_IDS, serviceIdLimit: MAX_IDS, records: [] });
}

/**
 * One service with `n` ports (1..n, each to itself). With `repeatLast`, the last port repeats
 * the first: the duplicate a pairwise check finds only after comparing every pair.
 */
export function manyPortsService(id: number, n = MAX_LIST, repeatLast = false): WireService {
  const ports: Array<[number, number]> = Array.from({ length: n }, (_, i) => [i + 1, i + 1]);
  if (repeatLast) ports[n - 1] = [1, 1];
  return { id, hostname: `many-ports-${id}.crafted.svc`, ports };
}

/** `n` small services (ids 0..n-1), one port each: what a workload's memberships can name. */
export function plainServices(n: number): WireService[] {
  return Array.from({ length: n }, (_, id) => ({ id, hostname: `s${id}.c`, ports: [[80, 8080]] }));
}

/**
 * `n` services (ids 0..n-1) with one port, one VIP (10.96.x.y on the default network) and one
 * SAN each: what a remove undoes beyond the hostname, ports and member list.
 */
export function servicesWithVipAndSan(n: number): WireService[] {
  return Array.from({ length: n }, (_, id) => ({
    id,
    hostname: `s${id}.c`,
    ports: [[80, 8080]],
    vips: [{ address: `10.${96 + (id >> 16)}.${(id >> 8) & 255}.${id & 255}` }],
    sans: [`spiffe://td/ns/c/sa/s${id}`],
  }));
}

/** One workload in `n` services (0..n-1); with `repeatLast` the last membership repeats the first. */
export function manyMembershipsWorkload(id: number, n = MAX_LIST, repeatLast = false): WireWorkload {
  const memberships = Array.from({ length: n }, (_, s) => ({ service: s }));
  if (repeatLast) memberships[n - 1] = { service: 0 };
  return { id, identity: "spiffe://td/ns/crafted/sa/many", istio: true, addresses: ["10.200.0.1"], memberships };
}

export function full(records: WireRecord[], version: bigint, limits: [number, number], epoch = EPOCH): Uint8Array {
  return encodeMessage({ kind: KIND.full, epoch, version, workloadIdLimit: limits[0], serviceIdLimit: limits[1], records });
}

export function delta(base: bigint, records: WireRecord[], limits: [number, number]): Uint8Array {
  return encodeMessage({ kind: KIND.delta, epoch: EPOCH, baseVersion: base, version: base + 1n, workloadIdLimit: limits[0], serviceIdLimit: limits[1], records });
}

/** A full message of one ordinary service and one pod in it: the base the deltas below start from. */
export function smallBase(version: bigint, limits: [number, number] = [4, 4]): Uint8Array {
  return full(
    [
      { service: { id: 0, hostname: "web.crafted.svc", ports: [[80, 8080]], vips: [{ address: "10.96.7.1" }] } },
      { workload: { id: 0, identity: "spiffe://td/ns/crafted/sa/web", istio: true, addresses: ["10.7.0.1"], memberships: [{ service: 0 }] } },
    ],
    version,
    limits,
  );
}

/**
 * The dangling membership: a full message whose workload names service `absent`, above every
 * service id the message defines (so a check bounded by the highest stored id missed it).
 */
export function danglingFull(version: bigint, absent = 3, epoch = EPOCH): Uint8Array {
  return full(
    [
      { service: { id: 0, hostname: "web.crafted.svc", ports: [[80, 8080]] } },
      { workload: { id: 0, addresses: ["10.7.0.1"], memberships: [{ service: 0 }, { service: absent }] } },
    ],
    version,
    [4, 8],
    epoch,
  );
}

/** The delta that once completed a dangling membership: it upserts the absent service. */
export function upsertAbsentService(base: bigint, absent = 3): Uint8Array {
  return delta(base, [{ service: { id: absent, hostname: "late.crafted.svc", ports: [[443, 8443]] } }], [4, 8]);
}

/**
 * An ordinary full message of about `bytes` bytes, for per-byte comparisons: services of 20
 * pods each (two ports, a VIP, a SAN), pods with one IPv4 address, an identity per service and
 * a locality, as the feed writes a cluster (compact records).
 */
export function ordinaryFull(bytes: number, version = 1n): Uint8Array {
  // Measured on this shape: ~30 bytes per pod, with its share of the service.
  let pods = Math.max(20, Math.round(bytes / 30));
  for (let attempt = 0; attempt < 4; attempt++) {
    const message = ordinaryOf(pods, version);
    const off = message.length / bytes;
    if (Math.abs(off - 1) < 0.03) return message;
    pods = Math.max(20, Math.round(pods / off));
  }
  return ordinaryOf(pods, version);
}

function ordinaryOf(pods: number, version: bigint): Uint8Array {
  const services = Math.ceil(pods / 20);
  const records: WireRecord[] = [];
  for (let s = 0; s < services; s++) {
    records.push({
      service: {
        id: s,
        hostname: `svc${s}.ns${s % 50}.svc.cluster.local`,
        ports: [[80, 8080], [443, 8443]],
        vips: [{ address: `10.96.${(s >> 8) & 255}.${s & 255}` }],
        sans: [`spiffe://cluster.local/ns/ns${s % 50}/sa/svc${s}`],
      },
    });
  }
  for (let w = 0; w < pods; w++) {
    const s = Math.floor(w / 20);
    records.push({
      workload: {
        id: w,
        istio: true,
        identity: `spiffe://cluster.local/ns/ns${s % 50}/sa/svc${s}`,
        locality: `region${w % 3}/zone${w % 9}`,
        addresses: [`10.${16 + ((w >> 16) & 127)}.${(w >> 8) & 255}.${w & 255}`],
        memberships: [{ service: s }],
      },
    });
  }
  return full(records, version, [pods, services]);
}

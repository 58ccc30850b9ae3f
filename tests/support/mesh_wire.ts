// Test-friendly front of the mesh feed's message format v2. The one encoder is the feed's
// (feed/src/delta/wire.ts, what the feed publishes); this file only gives tests and benchmarks
// shorter record shapes (optional fields with the model's defaults, flags derived from which
// fields are set) and re-exports the layout constants, so a test cannot drift from the format
// the feed writes.
import {
  DEFAULT_LB_PREFS,
  FORMAT_VERSION,
  HEADER_BYTES,
  KIND_DELTA,
  KIND_FULL,
  KIND_NO_CHANGE,
  MAGIC,
  RECORD_SERVICE_REMOVE,
  RECORD_SERVICE_UPSERT,
  RECORD_WORKLOAD_REMOVE,
  RECORD_WORKLOAD_UPSERT,
  SCOPE,
  SF_CLUSTER,
  SF_HEADLESS,
  SF_LB_STANDARD,
  SF_WAYPOINT,
  WF_GATEWAY,
  WF_HEALTHY,
  WF_ISTIO,
  WF_WAYPOINT,
  WireWriter,
  writeHeader,
  writeRemove,
  writeServiceUpsert,
  writeWorkloadUpsert,
  type WireRef,
} from "../../feed/src/delta/wire.ts";
import { assembleFull, RECORD_WORKLOAD_COMPACT } from "../../feed/src/delta/wire_full.ts";

export { RECORD_WORKLOAD_COMPACT };
export { DEFAULT_LB_PREFS, FORMAT_VERSION, HEADER_BYTES, MAGIC, SCOPE, type WireRef };
export { HEADER } from "../../feed/src/delta/wire.ts";
export const KIND = { full: KIND_FULL, delta: KIND_DELTA, noChange: KIND_NO_CHANGE } as const;
export const RECORD = { workloadUpsert: RECORD_WORKLOAD_UPSERT, workloadRemove: RECORD_WORKLOAD_REMOVE, serviceUpsert: RECORD_SERVICE_UPSERT, serviceRemove: RECORD_SERVICE_REMOVE } as const;

export interface WireMembership {
  service: number;
  /** [service port, target port] */
  overrides?: Array<[number, number]>;
}

export interface WireWorkload {
  id: number;
  istio?: boolean;
  healthy?: boolean; // default true
  network?: string;
  identity?: string;
  locality?: string;
  waypoint?: WireRef;
  gateway?: WireRef;
  addresses: string[];
  memberships?: WireMembership[];
}

export interface WireService {
  id: number;
  hostname: string;
  headless?: boolean;
  lbStandard?: boolean;
  cluster?: string;
  lbPrefs?: number; // default DEFAULT_LB_PREFS
  /** [service port, target port] */
  ports?: Array<[number, number]>;
  vips?: Array<{ network?: string; address: string }>;
  waypoint?: WireRef;
  sans?: string[];
}

export type WireRecord = { workload: WireWorkload } | { removeWorkload: number } | { service: WireService } | { removeService: number };

export interface WireMessage {
  kind: number;
  epoch: bigint | number;
  baseVersion?: bigint | number;
  version: bigint | number;
  workloadIdLimit: number;
  serviceIdLimit: number;
  records?: WireRecord[];
  /**
   * Full messages only: "compact" (default, what the feed sends) transcodes each workload
   * upsert into a compact record naming the message's tables; "inline" keeps v1 workload
   * records after empty tables (the decoder takes both in a full message).
   */
  fullWorkloads?: "compact" | "inline";
}

/** The feed's writer, with `done()` for callers that build a body record by record. */
export class Writer extends WireWriter {
  done(): Uint8Array {
    return new Uint8Array(this.copyFrom(0));
  }
}

export function writeWorkload(out: WireWriter, w: WireWorkload): void {
  let flags = 0;
  if (w.istio) flags |= WF_ISTIO;
  if (w.healthy !== false) flags |= WF_HEALTHY;
  if (w.waypoint) flags |= WF_WAYPOINT;
  if (w.gateway) flags |= WF_GATEWAY;
  writeWorkloadUpsert(out, {
    id: w.id,
    flags,
    network: w.network ?? "",
    identity: w.identity ?? "",
    locality: w.locality ?? "",
    waypoint: w.waypoint,
    gateway: w.gateway,
    addresses: w.addresses,
    memberships: (w.memberships ?? []).map((m) => ({ service: m.service, overrides: m.overrides ?? [] })),
  });
}

export function writeService(out: WireWriter, s: WireService): void {
  let flags = 0;
  if (s.headless) flags |= SF_HEADLESS;
  if (s.lbStandard) flags |= SF_LB_STANDARD;
  if (s.waypoint) flags |= SF_WAYPOINT;
  if (s.cluster !== undefined) flags |= SF_CLUSTER;
  writeServiceUpsert(out, {
    id: s.id,
    hostname: s.hostname,
    flags,
    cluster: s.cluster,
    lbPrefs: s.lbPrefs ?? DEFAULT_LB_PREFS,
    ports: s.ports ?? [],
    vips: (s.vips ?? []).map((v) => ({ network: v.network ?? "", address: v.address })),
    waypoint: s.waypoint,
    sans: s.sans ?? [],
  });
}

function writeRecord(out: WireWriter, r: WireRecord): void {
  if ("workload" in r) writeWorkload(out, r.workload);
  else if ("service" in r) writeService(out, r.service);
  else if ("removeWorkload" in r) writeRemove(out, RECORD_WORKLOAD_REMOVE, r.removeWorkload);
  else writeRemove(out, RECORD_SERVICE_REMOVE, r.removeService);
}

/** The records' bytes (the body). */
export function encodeRecords(records: WireRecord[]): Uint8Array {
  const out = new Writer();
  for (const r of records) writeRecord(out, r);
  return out.done();
}

/** A whole message: header (+ tables for a full one) + records, through the feed's writers. */
export function encodeMessage(m: WireMessage): Uint8Array {
  const records = m.records ?? [];
  const header = { epoch: Number(m.epoch), base: Number(m.baseVersion ?? 0), version: Number(m.version), workloadIdLimit: m.workloadIdLimit, serviceIdLimit: m.serviceIdLimit };
  if (m.kind === KIND_FULL && (m.fullWorkloads ?? "compact") === "compact") {
    const each = records.map((r) => {
      const w = new Writer(64);
      writeRecord(w, r);
      return w.copyFrom(0);
    });
    const bytes = assembleFull(header, [each]);
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
  }
  const out = new Writer();
  out.pos = HEADER_BYTES;
  out.ensure(8);
  if (m.kind === KIND_FULL) {
    out.u32(0); // no texts
    out.u32(0); // no references
  }
  for (const r of records) writeRecord(out, r);
  const bytes = out.copyFrom(0);
  writeHeader(
    bytes,
    { kind: m.kind as 1 | 2 | 3, epoch: Number(m.epoch), base: Number(m.baseVersion ?? 0), version: Number(m.version), workloadIdLimit: m.workloadIdLimit, serviceIdLimit: m.serviceIdLimit, recordCount: records.length },
    bytes.length,
  );
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}

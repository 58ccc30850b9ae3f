// Encoder of the mesh feed's binary message, format v1 (assembly/mesh/README.md "Update path",
// decoded by assembly/mesh/wire.ts), for tests and benchmarks. The feed has its own production
// encoder (feed/); the header and record layout are named constants here so the two can be
// checked against each other and, later, one of them made the single source.
import { isIP } from "node:net";

export const MAGIC = 0x3148534d; // bytes "M S H 1"
export const FORMAT_VERSION = 1;
export const HEADER_BYTES = 56;
export const HEADER = {
  magic: 0, // u32
  formatVersion: 4, // u16
  kind: 6, // u16
  epoch: 8, // u64
  baseVersion: 16, // u64
  version: 24, // u64
  workloadIdLimit: 32, // u32
  serviceIdLimit: 36, // u32
  recordCount: 40, // u32
  bodyLength: 44, // u32
  reserved: 48, // u64
} as const;

export const KIND = { full: 1, delta: 2, noChange: 3 } as const;
export const RECORD = { workloadUpsert: 1, workloadRemove: 2, serviceUpsert: 3, serviceRemove: 4 } as const;
export const WORKLOAD_FLAG = { istio: 1, healthy: 2, waypoint: 4, gateway: 8 } as const;
export const SERVICE_FLAG = { headless: 1, lbStandard: 2, waypoint: 4, cluster: 8 } as const;
export const REF_KIND = { address: 1, hostname: 2 } as const;
/** Scope bytes of `lbPrefs` (one per byte from the lowest; 0 ends the list). */
export const SCOPE = { network: 1, region: 2, zone: 3, subzone: 4 } as const;
export const DEFAULT_LB_PREFS = 0x04030201;

export interface WireRef {
  address?: string;
  hostname?: string;
  port: number;
}

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

export type WireRecord =
  | { workload: WireWorkload }
  | { removeWorkload: number }
  | { service: WireService }
  | { removeService: number };

export interface WireMessage {
  kind: number;
  epoch: bigint | number;
  baseVersion?: bigint | number;
  version: bigint | number;
  workloadIdLimit: number;
  serviceIdLimit: number;
  records?: WireRecord[];
}

/** IP text → [family, bytes in network order]. */
export function ipBytes(text: string): [number, Uint8Array] {
  const v = isIP(text);
  if (v === 4) return [4, Uint8Array.from(text.split(".").map(Number))];
  if (v !== 6) throw new Error(`not an IP: ${text}`);
  let t = text;
  const tail: number[] = [];
  const dotted = t.lastIndexOf(":");
  if (t.slice(dotted + 1).includes(".")) {
    tail.push(...t.slice(dotted + 1).split(".").map(Number));
    t = t.slice(0, dotted + 1) + "0:0";
  }
  const [head, rest] = t.includes("::") ? t.split("::") : [t, undefined];
  const h = head ? head.split(":") : [];
  const r = rest === undefined ? [] : rest ? rest.split(":") : [];
  const groups = rest === undefined ? h : [...h, ...Array(8 - h.length - r.length).fill("0"), ...r];
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = parseInt(g, 16);
    out[i * 2] = n >> 8;
    out[i * 2 + 1] = n & 255;
  });
  if (tail.length) out.set(tail, 12);
  return [6, out];
}

/** A growable little-endian byte writer. */
export class Writer {
  private buf = new Uint8Array(1024);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.length + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  u8(v: number): this {
    this.room(1);
    this.view.setUint8(this.length, v);
    this.length += 1;
    return this;
  }

  u16(v: number): this {
    this.room(2);
    this.view.setUint16(this.length, v, true);
    this.length += 2;
    return this;
  }

  u32(v: number): this {
    this.room(4);
    this.view.setUint32(this.length, v >>> 0, true);
    this.length += 4;
    return this;
  }

  u64(v: bigint | number): this {
    this.room(8);
    this.view.setBigUint64(this.length, BigInt(v), true);
    this.length += 8;
    return this;
  }

  bytes(b: Uint8Array): this {
    this.room(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
    return this;
  }

  string(text: string): this {
    const b = Buffer.from(text, "utf8");
    return this.u16(b.length).bytes(b);
  }

  address(text: string): this {
    const [family, b] = ipBytes(text);
    return this.u8(family).bytes(b);
  }

  ref(r: WireRef): this {
    if (r.hostname !== undefined) this.u8(REF_KIND.hostname).string(r.hostname);
    else this.u8(REF_KIND.address).address(r.address ?? "0.0.0.0");
    return this.u16(r.port);
  }

  done(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

export function writeWorkload(out: Writer, w: WireWorkload): void {
  let flags = 0;
  if (w.istio) flags |= WORKLOAD_FLAG.istio;
  if (w.healthy !== false) flags |= WORKLOAD_FLAG.healthy;
  if (w.waypoint) flags |= WORKLOAD_FLAG.waypoint;
  if (w.gateway) flags |= WORKLOAD_FLAG.gateway;
  out.u8(RECORD.workloadUpsert).u32(w.id).u8(flags);
  out.string(w.network ?? "").string(w.identity ?? "").string(w.locality ?? "");
  if (w.waypoint) out.ref(w.waypoint);
  if (w.gateway) out.ref(w.gateway);
  out.u8(w.addresses.length);
  for (const a of w.addresses) out.address(a);
  const members = w.memberships ?? [];
  out.u16(members.length);
  for (const m of members) {
    const o = m.overrides ?? [];
    out.u32(m.service).u8(o.length);
    for (const [port, target] of o) out.u16(port).u16(target);
  }
}

export function writeService(out: Writer, s: WireService): void {
  let flags = 0;
  if (s.headless) flags |= SERVICE_FLAG.headless;
  if (s.lbStandard) flags |= SERVICE_FLAG.lbStandard;
  if (s.waypoint) flags |= SERVICE_FLAG.waypoint;
  if (s.cluster !== undefined) flags |= SERVICE_FLAG.cluster;
  out.u8(RECORD.serviceUpsert).u32(s.id).string(s.hostname).u8(flags);
  if (s.cluster !== undefined) out.string(s.cluster);
  out.u32(s.lbPrefs ?? DEFAULT_LB_PREFS);
  const ports = s.ports ?? [];
  out.u16(ports.length);
  for (const [port, target] of ports) out.u16(port).u16(target);
  const vips = s.vips ?? [];
  out.u16(vips.length);
  for (const v of vips) out.string(v.network ?? "").address(v.address);
  if (s.waypoint) out.ref(s.waypoint);
  const sans = s.sans ?? [];
  out.u16(sans.length);
  for (const san of sans) out.string(san);
}

/** The records' bytes (the body). */
export function encodeRecords(records: WireRecord[]): Uint8Array {
  const out = new Writer();
  for (const r of records) {
    if ("workload" in r) writeWorkload(out, r.workload);
    else if ("service" in r) writeService(out, r.service);
    else if ("removeWorkload" in r) out.u8(RECORD.workloadRemove).u32(r.removeWorkload);
    else out.u8(RECORD.serviceRemove).u32(r.removeService);
  }
  return out.done();
}

/** A whole message: header + records. */
export function encodeMessage(m: WireMessage): Uint8Array {
  const records = m.records ?? [];
  const body = encodeRecords(records);
  const out = new Writer();
  out.u32(MAGIC).u16(FORMAT_VERSION).u16(m.kind);
  out.u64(m.epoch).u64(m.baseVersion ?? 0).u64(m.version);
  out.u32(m.workloadIdLimit).u32(m.serviceIdLimit).u32(records.length).u32(body.length).u64(0);
  out.bytes(body);
  return out.done();
}

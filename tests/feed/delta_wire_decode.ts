// A small decoder of format v2 written for the tests from the format's written layout (not
// from the encoder): every field of every record back into plain objects, so the tests can
// compare what the feed sent with what it meant to send.
import { isIP } from "node:net";

export interface DecodedRef {
  address?: string;
  hostname?: string;
  port: number;
}

export type DecodedRecord =
  | {
      type: "workload";
      id: number;
      flags: number;
      network: string;
      identity: string;
      locality: string;
      waypoint?: DecodedRef;
      gateway?: DecodedRef;
      addresses: string[];
      memberships: Array<{ service: number; overrides: Array<[number, number]> }>;
    }
  | { type: "workloadRemove"; id: number }
  | {
      type: "service";
      id: number;
      hostname: string;
      flags: number;
      cluster?: string;
      lbPrefs: number;
      ports: Array<[number, number]>;
      vips: Array<{ network: string; address: string }>;
      waypoint?: DecodedRef;
      sans: string[];
    }
  | { type: "serviceRemove"; id: number };

export interface DecodedMessage {
  kind: number;
  epoch: number;
  base: number;
  version: number;
  workloadIdLimit: number;
  serviceIdLimit: number;
  records: DecodedRecord[];
}

function v6(bytes: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  // Canonical form through Node's own parser (RFC 5952 compression).
  return new URL(`http://[${groups.join(":")}]/`).hostname.slice(1, -1);
}

/** `types`, when given, gets each record's type byte (1..5) in order. */
export function decodeMessage(buf: Buffer, types?: number[]): DecodedMessage {
  let p = 0;
  const u8 = () => buf.readUInt8(p++);
  const u16 = () => ((p += 2), buf.readUInt16LE(p - 2));
  const u32 = () => ((p += 4), buf.readUInt32LE(p - 4));
  const u64 = () => ((p += 8), buf.readUInt32LE(p - 8) + buf.readUInt32LE(p - 4) * 2 ** 32);
  const str = () => {
    const n = u16();
    const s = buf.toString("utf8", p, p + n);
    if (p + n > buf.length) throw new Error("string past the end");
    p += n;
    return s;
  };
  const address = () => {
    const family = u8();
    if (family === 4) {
      const s = [...buf.subarray(p, p + 4)].join(".");
      p += 4;
      return s;
    }
    if (family !== 6) throw new Error(`family ${family}`);
    const s = v6(buf.subarray(p, p + 16));
    p += 16;
    return s;
  };
  const ref = (): DecodedRef => {
    const kind = u8();
    const r: DecodedRef = kind === 1 ? { address: address(), port: 0 } : kind === 2 ? { hostname: str(), port: 0 } : (() => { throw new Error(`ref kind ${kind}`); })();
    r.port = u16();
    return r;
  };
  if (u32() !== 0x3148534d) throw new Error("magic");
  const format = u16();
  if (format !== 2 && format !== 3) throw new Error("format");
  const kind = u16();
  const epoch = u64();
  const base = u64();
  const version = u64();
  const workloadIdLimit = u32();
  const serviceIdLimit = u32();
  const count = u32();
  const bodyLength = u32();
  // Format 3: a bucket trailer may follow the body (trailerOf).
  if (format === 2 ? bodyLength !== buf.length - 56 : bodyLength > buf.length - 56) throw new Error(`body length ${bodyLength} vs ${buf.length - 56}`);
  if (format === 3) trailerOf(buf);
  const digest = buf.readBigUInt64LE(p);
  p += 8;
  if (format === 2 && digest !== 0n) throw new Error("reserved");
  const varint = () => {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      const b = u8();
      v += (b & 0x7f) * 2 ** shift;
      if (!(b & 0x80)) return v;
      if (shift > 28) throw new Error("varint too long");
    }
  };
  // A full message's tables: texts, then references, named by index in compact records.
  const texts: string[] = [];
  const refs: DecodedRef[] = [];
  if (kind === 1) {
    for (let n = u32(); n > 0; n--) texts.push(str());
    for (let n = u32(); n > 0; n--) refs.push(ref());
  }
  const text = () => {
    const i = varint();
    if (i >= texts.length) throw new Error(`text ${i} of ${texts.length}`);
    return texts[i];
  };
  const tableRef = () => {
    const i = varint();
    if (i >= refs.length) throw new Error(`reference ${i} of ${refs.length}`);
    return { ...refs[i] };
  };
  const records: DecodedRecord[] = [];
  for (let i = 0; i < count; i++) {
    const type = u8();
    types?.push(type);
    const id = u32();
    if (type === 1 || (type === 5 && kind === 1)) {
      const compact = type === 5;
      const flags = u8();
      const network = compact ? text() : str();
      const identity = compact ? text() : str();
      const locality = compact ? text() : str();
      const waypoint = flags & 4 ? (compact ? tableRef() : ref()) : undefined;
      const gateway = flags & 8 ? (compact ? tableRef() : ref()) : undefined;
      const addresses: string[] = [];
      for (let n = u8(); n > 0; n--) addresses.push(address());
      const memberships: Array<{ service: number; overrides: Array<[number, number]> }> = [];
      for (let n = u16(); n > 0; n--) {
        const service = u32();
        const overrides: Array<[number, number]> = [];
        for (let k = u8(); k > 0; k--) overrides.push([u16(), u16()]);
        memberships.push({ service, overrides });
      }
      records.push({ type: "workload", id, flags, network, identity, locality, ...(waypoint && { waypoint }), ...(gateway && { gateway }), addresses, memberships });
    } else if (type === 2) records.push({ type: "workloadRemove", id });
    else if (type === 3) {
      const hostname = str();
      const flags = u8();
      const cluster = flags & 8 ? str() : undefined;
      const lbPrefs = u32();
      const ports: Array<[number, number]> = [];
      for (let n = u16(); n > 0; n--) ports.push([u16(), u16()]);
      const vips: Array<{ network: string; address: string }> = [];
      for (let n = u16(); n > 0; n--) vips.push({ network: str(), address: address() });
      const waypoint = flags & 4 ? ref() : undefined;
      const sans: string[] = [];
      for (let n = u16(); n > 0; n--) sans.push(str());
      records.push({ type: "service", id, hostname, flags, ...(cluster !== undefined && { cluster }), lbPrefs, ports, vips, ...(waypoint && { waypoint }), sans });
    } else if (type === 4) records.push({ type: "serviceRemove", id });
    else throw new Error(`record ${i}: type ${type}`);
  }
  if (p !== 56 + bodyLength) throw new Error(`${56 + bodyLength - p} bytes after the records`);
  void isIP;
  return { kind, epoch, base, version, workloadIdLimit, serviceIdLimit, records };
}

/** Applies decoded messages to a model keyed by id, as a client would (for convergence checks). */
export class DecodedModel {
  epoch = 0;
  version = 0;
  workloads = new Map<number, Extract<DecodedRecord, { type: "workload" }>>();
  services = new Map<number, Extract<DecodedRecord, { type: "service" }>>();

  /** The content digest the last format-3 message gave (undefined: none, or format 2). */
  digest: bigint | undefined;

  /**
   * Applies a whole message as a format-3 filter does: a no-change at another epoch or version is
   * taken when it names this model's digest (the model adopts its epoch and version).
   */
  applyBody(body: Buffer): void {
    const m = decodeMessage(body);
    const { format, digest } = formatOf(body);
    if (m.kind === 3 && (m.epoch !== this.epoch || m.version !== this.version) && format >= 3 && this.digest === digest && this.epoch !== 0) {
      this.epoch = m.epoch;
      this.version = m.version;
      return;
    }
    if (m.kind === 5) return; // asks for the bucket digests: nothing to apply
    if (m.kind === 4) {
      // Each listed bucket is exactly the message's records: the rest of those buckets goes.
      const listed = trailerOf(body)!;
      const kept = new Set(m.records.map((r) => `${r.type}:${r.id}`));
      for (const id of [...this.workloads.keys()]) if (listed.has((id >> 2) % 4096) && !kept.has(`workload:${id}`)) this.workloads.delete(id);
      for (const id of [...this.services.keys()]) {
        if (!listed.has(4096 + ((id >> 2) % 4096)) || kept.has(`service:${id}`)) continue;
        this.services.delete(id);
        for (const w of this.workloads.values()) w.memberships = w.memberships.filter((x) => x.service !== id);
      }
      for (const r of m.records) {
        if (r.type === "workload") this.workloads.set(r.id, r);
        else if (r.type === "service") this.services.set(r.id, r);
        else throw new Error(`a repair with a ${r.type} record`);
      }
      this.epoch = m.epoch;
      this.version = m.version;
      this.digest = digest;
      return;
    }
    this.apply(m);
    if (m.kind !== 3) this.digest = format >= 3 ? digest : undefined;
  }

  apply(m: DecodedMessage): void {
    if (m.kind === 3) {
      if (m.epoch !== this.epoch || m.version !== this.version) throw new Error(`no-change at ${m.epoch}/${m.version}, model at ${this.epoch}/${this.version}`);
      return;
    }
    if (m.kind === 1) {
      this.workloads.clear();
      this.services.clear();
    } else if (m.epoch !== this.epoch || m.base !== this.version) throw new Error(`delta from ${m.epoch}/${m.base} onto ${this.epoch}/${this.version}`);
    for (const r of m.records) {
      if (r.type === "workload") this.workloads.set(r.id, r);
      else if (r.type === "workloadRemove") this.workloads.delete(r.id);
      else if (r.type === "service") this.services.set(r.id, r);
      else {
        this.services.delete(r.id);
        for (const w of this.workloads.values()) w.memberships = w.memberships.filter((x) => x.service !== r.id);
      }
    }
    this.epoch = m.epoch;
    this.version = m.version;
  }

  /** The model with ids, as JSON strings, sorted (two models equal here hold the same records). */
  records(): string[] {
    return [...[...this.workloads.values()].map((w) => JSON.stringify(w)), ...[...this.services.values()].map((x) => JSON.stringify(x))].sort();
  }

  /** The model without ids: workloads (memberships by hostname) and services, as JSON strings, sorted. */
  contents(): { workloads: string[]; services: string[] } {
    const hostOf = new Map([...this.services.values()].map((s) => [s.id, s.hostname]));
    const workloads: string[] = [];
    for (const w of this.workloads.values()) {
      const { id: _id, memberships, ...rest } = w;
      workloads.push(JSON.stringify({ ...rest, memberships: memberships.map((m) => ({ service: hostOf.get(m.service), overrides: m.overrides })).sort((a, b) => String(a.service).localeCompare(String(b.service))) }));
    }
    const services: string[] = [];
    for (const s of this.services.values()) {
      const { id: _id, ...rest } = s;
      services.push(JSON.stringify(rest));
    }
    return { workloads: workloads.sort(), services: services.sort() };
  }
}

/** A message's format and content digest (format 3; format 2: 0n). */
export function formatOf(buf: Buffer): { format: number; digest: bigint } {
  return { format: buf.readUInt16LE(4), digest: buf.readBigUInt64LE(48) };
}

/** A format-3 message's bucket trailer (bucket → digest), or undefined when it has none; throws when malformed. */
export function trailerOf(buf: Buffer): Map<number, bigint> | undefined {
  const end = 56 + buf.readUInt32LE(44);
  if (end === buf.length) return undefined;
  const count = buf.readUInt32LE(end);
  if (buf.length - end - 4 !== 12 * count) throw new Error(`trailer of ${buf.length - end} bytes for ${count} buckets`);
  const out = new Map<number, bigint>();
  let previous = -1;
  for (let i = 0; i < count; i++) {
    const b = buf.readUInt32LE(end + 4 + 12 * i);
    if (b <= previous || b >= 8192) throw new Error(`trailer bucket ${b} after ${previous}`);
    previous = b;
    out.set(b, buf.readBigUInt64LE(end + 8 + 12 * i));
  }
  return out;
}

// The mesh delta message, format 3, and the previous format 2 (the contract shared with the
// filters' decoder: assembly/mesh reads exactly this; it accepts both). Little-endian; a 56-byte header, then records (a full
// message also has tables and compact workload records: wire_full.ts). This file is the
// record encoder: one growable Buffer per message, written field by field in place (no
// per-field allocation: strings are written straight into the buffer, addresses parsed from
// their text into it), so a full message of 1M pods encodes in a fraction of a second
// (bench/feed `feed_wire_encode`).
//
// Layouts (offsets in bytes):
//   header: magic u32 @0 ("MSH1"), format u16 @4, kind u16 @6, epoch u64 @8, base u64 @16,
//           version u64 @24, workload id limit u32 @32, service id limit u32 @36,
//           record count u32 @40, body length u32 @44, content digest u64 @48 (format 3;
//           format 2: reserved, 0). Format 3 messages may carry a bucket trailer after the body
//           (feed/docs/deltas.md, "Repair"); format 2 never does.
//   string: u16 byte length + UTF-8
//   address: u8 family (4 | 6) + 4 | 16 bytes, network order
//   ref: u8 kind (1 address | 2 hostname) + address | string, u16 port
//   1 workload upsert: u32 id, u8 flags, string network, string identity, string locality,
//           [ref waypoint], [ref gateway], u8 address count + addresses,
//           u16 membership count + (u32 service id, u8 override count + (u16 port, u16 target)*)*
//   2 workload remove: u32 id
//   3 service upsert: u32 id, string hostname, u8 flags, [string cluster], u32 lb prefs,
//           u16 port count + (u16 port, u16 target)*, u16 vip count + (string network, address)*,
//           [ref waypoint], u16 san count + strings
//   4 service remove: u32 id

export const MAGIC = 0x3148534d;
/**
 * 3: the header carries the content digest (digest.ts) and a repair message kind exists;
 * 2 (the previous format, still served to filters that declare no format): full messages carry
 * text and reference tables (wire_full.ts); deltas are as in 1.
 */
export const FORMAT_VERSION = 3;
export const PREVIOUS_FORMAT = 2;
export type WireFormat = typeof FORMAT_VERSION | typeof PREVIOUS_FORMAT;
export const HEADER_BYTES = 56;

export const HEADER = {
  magic: 0,
  format: 4,
  kind: 6,
  epoch: 8,
  base: 16,
  version: 24,
  workloadIdLimit: 32,
  serviceIdLimit: 36,
  recordCount: 40,
  bodyLength: 44,
  /** Format 3: the content digest; format 2: reserved (0). */
  reserved: 48,
  digest: 48,
} as const;

export const KIND_FULL = 1;
export const KIND_DELTA = 2;
export const KIND_NO_CHANGE = 3;
/** Format 3: each bucket the trailer lists is exactly the message's records (the answer to a POST of a client's bucket digests). */
export const KIND_REPAIR = 4;
/** Format 3: no delta from the client's version can be served; send the bucket digests. */
export const KIND_ASK_BUCKETS = 5;
export type MessageKind = typeof KIND_FULL | typeof KIND_DELTA | typeof KIND_NO_CHANGE | typeof KIND_REPAIR | typeof KIND_ASK_BUCKETS;

export const RECORD_WORKLOAD_UPSERT = 1;
export const RECORD_WORKLOAD_REMOVE = 2;
export const RECORD_SERVICE_UPSERT = 3;
export const RECORD_SERVICE_REMOVE = 4;

/** Workload upsert flags. */
export const WF_ISTIO = 1;
export const WF_HEALTHY = 2;
export const WF_WAYPOINT = 4;
export const WF_GATEWAY = 8;

/** Service upsert flags. */
export const SF_HEADLESS = 1;
export const SF_LB_STANDARD = 2;
export const SF_WAYPOINT = 4;
export const SF_CLUSTER = 8;

export const REF_ADDRESS = 1;
export const REF_HOSTNAME = 2;

export const FAMILY_V4 = 4;
export const FAMILY_V6 = 6;

/** The model's scopes (one per byte of lb prefs, first preference in the low byte). */
export const SCOPE = { network: 1, region: 2, zone: 3, subzone: 4 } as const;
/** No loadBalancing (or no routingPreference): network, region, zone, subzone. */
export const DEFAULT_LB_PREFS = 0x04030201;

/** Per-message field bounds the u8/u16 counts impose (the decoder refuses nothing else by size). */
export const MAX_U8 = 0xff;
export const MAX_U16 = 0xffff;

export interface WireRef {
  address?: string;
  hostname?: string;
  port: number;
}

export interface WireMembership {
  service: number;
  /** (service port, target port) pairs where this workload's target differs. */
  overrides: Array<[number, number]>;
}

export interface WireWorkload {
  id: number;
  flags: number;
  network: string;
  identity: string;
  locality: string;
  waypoint?: WireRef;
  gateway?: WireRef;
  addresses: string[];
  memberships: WireMembership[];
}

export interface WireService {
  id: number;
  hostname: string;
  flags: number;
  cluster?: string;
  lbPrefs: number;
  ports: Array<[number, number]>;
  vips: Array<{ network: string; address: string }>;
  waypoint?: WireRef;
  sans: string[];
}

/** A value too large for its count or length field: the encoder refuses it, naming the field. */
export class WireEncodeError extends Error {}

/** One message (or one record) being written: a Buffer that doubles when full. */
export class WireWriter {
  buf: Buffer;
  pos = 0;

  constructor(initialBytes = 4096) {
    this.buf = Buffer.allocUnsafe(Math.max(64, initialBytes));
  }

  reset(): void {
    this.pos = 0;
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }

  u16(v: number): void {
    this.ensure(2);
    const b = this.buf;
    const p = this.pos;
    b[p] = v & 0xff;
    b[p + 1] = (v >>> 8) & 0xff;
    this.pos = p + 2;
  }

  u32(v: number): void {
    this.ensure(4);
    const b = this.buf;
    const p = this.pos;
    b[p] = v & 0xff;
    b[p + 1] = (v >>> 8) & 0xff;
    b[p + 2] = (v >>> 16) & 0xff;
    b[p + 3] = (v >>> 24) & 0xff;
    this.pos = p + 4;
  }

  /** A u64 from a non-negative safe integer (versions and epochs stay below 2^53). */
  u64(v: number): void {
    this.ensure(8);
    this.buf.writeUInt32LE(v % 0x1_0000_0000, this.pos);
    this.buf.writeUInt32LE(Math.floor(v / 0x1_0000_0000), this.pos + 4);
    this.pos += 8;
  }

  /**
   * u16 byte length + UTF-8. The texts of a mesh repeat (identities, networks, localities,
   * SANs: the model interns them too), so each text's encoding is kept in a bounded cache and
   * copied in; a miss encodes ASCII with a byte loop and anything else with Buffer.write.
   */
  str(s: string, field: string): void {
    let bytes = textCache.get(s);
    if (bytes === undefined) {
      bytes = encodeText(s);
      if (bytes.length > MAX_U16) throw new WireEncodeError(`${field}: ${bytes.length} bytes (at most ${MAX_U16})`);
      if (textCache.size >= TEXT_CACHE_ENTRIES) textCache.clear();
      textCache.set(s, bytes);
    }
    const n = bytes.length;
    this.ensure(2 + n);
    const buf = this.buf;
    buf[this.pos] = n & 0xff;
    buf[this.pos + 1] = n >> 8;
    if (n < 16) for (let i = 0; i < n; i++) buf[this.pos + 2 + i] = bytes[i];
    else buf.set(bytes, this.pos + 2);
    this.pos += 2 + n;
  }

  /** u8 family + the address bytes, parsed from its canonical text. */
  address(ip: string, field: string): void {
    this.ensure(17);
    if (writeIpv4(this.buf, this.pos + 1, ip)) {
      this.buf[this.pos] = FAMILY_V4;
      this.pos += 5;
    } else if (writeIpv6(this.buf, this.pos + 1, ip)) {
      this.buf[this.pos] = FAMILY_V6;
      this.pos += 17;
    } else throw new WireEncodeError(`${field}: not an IP address: ${JSON.stringify(ip)}`);
  }

  ref(r: WireRef, field: string): void {
    if (r.hostname !== undefined) {
      this.u8(REF_HOSTNAME);
      this.str(r.hostname, field);
    } else {
      this.u8(REF_ADDRESS);
      this.address(r.address ?? "", field);
    }
    this.u16(r.port);
  }

  count8(n: number, field: string): void {
    if (n > MAX_U8) throw new WireEncodeError(`${field}: ${n} entries (at most ${MAX_U8})`);
    this.u8(n);
  }

  count16(n: number, field: string): void {
    if (n > MAX_U16) throw new WireEncodeError(`${field}: ${n} entries (at most ${MAX_U16})`);
    this.u16(n);
  }

  /** The bytes written so far (a view, valid until the next write). */
  view(): Buffer {
    return this.buf.subarray(0, this.pos);
  }

  /** A copy of the bytes written since `from`. */
  copyFrom(from: number): Buffer {
    return Buffer.from(this.buf.subarray(from, this.pos));
  }
}

/** At most this many distinct texts are kept encoded (~64k x a few dozen bytes); the cache is emptied when full. */
const TEXT_CACHE_ENTRIES = 65_536;
const textCache = new Map<string, Uint8Array>();

function encodeText(s: string): Uint8Array {
  const len = s.length;
  const out = new Uint8Array(len);
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return Buffer.from(s, "utf8");
    out[i] = c;
  }
  return out;
}

function digit(c: number): number {
  return c >= 0x30 && c <= 0x39 ? c - 0x30 : -1;
}

/** Dotted-quad IPv4 → 4 bytes at `at`; false when `ip` is not one. */
export function writeIpv4(buf: Buffer, at: number, ip: string): boolean {
  const n = ip.length;
  if (n < 7 || n > 15) return false;
  let part = 0;
  let value = 0;
  let digits = 0;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? ip.charCodeAt(i) : 0x2e;
    if (c === 0x2e) {
      if (digits === 0 || part > 3) return false;
      buf[at + part++] = value;
      value = 0;
      digits = 0;
      continue;
    }
    const d = digit(c);
    if (d < 0 || (digits > 0 && value === 0)) return false;
    value = value * 10 + d;
    if (value > 255) return false;
    digits++;
  }
  return part === 4;
}

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/** IPv6 text (with `::` and a trailing dotted quad allowed) → 16 bytes at `at`. */
export function writeIpv6(buf: Buffer, at: number, ip: string): boolean {
  const groups: number[] = [];
  let gap = -1;
  let i = 0;
  const n = ip.length;
  if (n < 2 || n > 45) return false;
  if (ip.startsWith("::")) {
    gap = 0;
    i = 2;
    if (i === n) {
      buf.fill(0, at, at + 16);
      return true;
    }
  } else if (ip.charCodeAt(0) === 0x3a) return false;
  while (i < n) {
    // A dotted quad as the last 32 bits.
    const rest = ip.slice(i);
    if (!rest.includes(":") && rest.includes(".")) {
      const tmp = Buffer.allocUnsafe(4);
      if (!writeIpv4(tmp, 0, rest)) return false;
      groups.push((tmp[0] << 8) | tmp[1], (tmp[2] << 8) | tmp[3]);
      i = n;
      break;
    }
    let value = 0;
    let digits = 0;
    while (i < n && ip.charCodeAt(i) !== 0x3a) {
      const d = hexDigit(ip.charCodeAt(i));
      if (d < 0 || ++digits > 4) return false;
      value = (value << 4) | d;
      i++;
    }
    if (digits === 0) return false;
    groups.push(value);
    if (i === n) break;
    i++; // ':'
    if (i < n && ip.charCodeAt(i) === 0x3a) {
      if (gap >= 0) return false;
      gap = groups.length;
      i++;
    } else if (i === n) return false;
  }
  if (groups.length > 8 || (gap < 0 && groups.length !== 8) || (gap >= 0 && groups.length > 7)) return false;
  const zeros = 8 - groups.length;
  let g = 0;
  for (let k = 0; k < 8; k++) {
    let v: number;
    if (gap >= 0 && k >= gap && k < gap + zeros) v = 0;
    else v = groups[g++];
    buf[at + 2 * k] = v >> 8;
    buf[at + 2 * k + 1] = v & 0xff;
  }
  return true;
}

/** Names the record a WireEncodeError came from (built only on that path). */
function named(what: string, id: number, error: unknown): unknown {
  return error instanceof WireEncodeError ? new WireEncodeError(`${what} ${id}.${error.message}`) : error;
}

/** Writes one workload upsert record. */
export function writeWorkloadUpsert(w: WireWriter, r: WireWorkload): void {
  try {
    w.u8(RECORD_WORKLOAD_UPSERT);
    w.u32(r.id);
    w.u8(r.flags);
    w.str(r.network, "network");
    w.str(r.identity, "identity");
    w.str(r.locality, "locality");
    if (r.flags & WF_WAYPOINT) w.ref(r.waypoint!, "waypoint");
    if (r.flags & WF_GATEWAY) w.ref(r.gateway!, "networkGateway");
    const addresses = r.addresses;
    w.count8(addresses.length, "addresses");
    for (let i = 0; i < addresses.length; i++) w.address(addresses[i], "addresses");
    const ms = r.memberships;
    w.count16(ms.length, "memberships");
    for (let i = 0; i < ms.length; i++) {
      const m = ms[i];
      w.u32(m.service);
      w.count8(m.overrides.length, "memberships.overrides");
      for (const [port, target] of m.overrides) {
        w.u16(port);
        w.u16(target);
      }
    }
  } catch (error) {
    throw named("workload", r.id, error);
  }
}

/** Writes one service upsert record. */
export function writeServiceUpsert(w: WireWriter, r: WireService): void {
  try {
    w.u8(RECORD_SERVICE_UPSERT);
    w.u32(r.id);
    w.str(r.hostname, "hostname");
    w.u8(r.flags);
    if (r.flags & SF_CLUSTER) w.str(r.cluster ?? "", "cluster");
    w.u32(r.lbPrefs);
    w.count16(r.ports.length, "ports");
    for (const [port, target] of r.ports) {
      w.u16(port);
      w.u16(target);
    }
    w.count16(r.vips.length, "vips");
    for (const v of r.vips) {
      w.str(v.network, "vips.network");
      w.address(v.address, "vips.address");
    }
    if (r.flags & SF_WAYPOINT) w.ref(r.waypoint!, "waypoint");
    w.count16(r.sans.length, "subjectAltNames");
    for (const s of r.sans) w.str(s, "subjectAltNames");
  } catch (error) {
    throw named("service", r.id, error);
  }
}

export function writeRemove(w: WireWriter, type: typeof RECORD_WORKLOAD_REMOVE | typeof RECORD_SERVICE_REMOVE, id: number): void {
  w.u8(type);
  w.u32(id);
}

export interface MessageHeader {
  kind: MessageKind;
  epoch: number;
  base: number;
  version: number;
  workloadIdLimit: number;
  serviceIdLimit: number;
  recordCount: number;
  /** FORMAT_VERSION unless given. */
  format?: WireFormat;
  /** The content digest after this message (format 3; format 2 writes 0). */
  digest?: bigint;
}

/** Writes the 56-byte header at offset 0 of `buf`; the body length is what follows it. */
export function writeHeader(buf: Buffer, h: MessageHeader, totalLength: number): void {
  buf.writeUInt32LE(MAGIC, HEADER.magic);
  const format = h.format ?? FORMAT_VERSION;
  buf.writeUInt16LE(format, HEADER.format);
  buf.writeUInt16LE(h.kind, HEADER.kind);
  const u64 = (v: number, at: number) => {
    buf.writeUInt32LE(v % 0x1_0000_0000, at);
    buf.writeUInt32LE(Math.floor(v / 0x1_0000_0000), at + 4);
  };
  u64(h.epoch, HEADER.epoch);
  u64(h.base, HEADER.base);
  u64(h.version, HEADER.version);
  buf.writeUInt32LE(h.workloadIdLimit >>> 0, HEADER.workloadIdLimit);
  buf.writeUInt32LE(h.serviceIdLimit >>> 0, HEADER.serviceIdLimit);
  buf.writeUInt32LE(h.recordCount >>> 0, HEADER.recordCount);
  buf.writeUInt32LE(totalLength - HEADER_BYTES, HEADER.bodyLength);
  buf.writeBigUInt64LE(format >= 3 ? (h.digest ?? 0n) : 0n, HEADER.reserved);
}

/**
 * `message` with the bucket trailer of format 3 after its body: u32 count, then (u32 bucket,
 * u64 digest) per entry, buckets strictly increasing (the caller's entries may be in any order).
 */
export function withBuckets(message: Buffer, entries: Map<number, bigint>): Buffer {
  const trailer = bucketTrailer(entries);
  const out = Buffer.allocUnsafe(message.length + trailer.bytes);
  message.copy(out, 0);
  trailer.write(out, message.length);
  return out;
}

/** What follows a message's body, written straight into the message's own Buffer. */
export interface Trailer {
  bytes: number;
  write(out: Buffer, at: number): void;
}

/** The bucket trailer of `entries` (as withBuckets writes it), for a builder that sizes its Buffer once. */
export function bucketTrailer(entries: Map<number, bigint>): Trailer {
  const buckets = [...entries.keys()].sort((a, b) => a - b);
  return {
    bytes: 4 + 12 * buckets.length,
    write(out: Buffer, at: number): void {
      let p = at;
      out.writeUInt32LE(buckets.length, p);
      p += 4;
      for (const b of buckets) {
        out.writeUInt32LE(b, p);
        out.writeBigUInt64LE(entries.get(b) ?? 0n, p + 4);
        p += 12;
      }
    },
  };
}

/** Where a message's body ends (a format-3 trailer follows). */
export function bodyEnd(message: Buffer): number {
  return HEADER_BYTES + message.readUInt32LE(HEADER.bodyLength);
}

/** The same message in format 2 (same records, no trailer; the header's format and digest field differ). */
export function asPreviousFormat(message: Buffer, end = bodyEnd(message)): Buffer {
  const bodyEnd = end;
  const out = Buffer.allocUnsafe(bodyEnd);
  message.copy(out, 0, 0, bodyEnd);
  out.writeUInt16LE(PREVIOUS_FORMAT, HEADER.format);
  out.writeBigUInt64LE(0n, HEADER.reserved);
  return out;
}

/** A format-3 message as format 2 in two parts, written one after the other (previousFormatParts). */
export interface PreviousFormatParts {
  /** Its own 56 bytes: the header with format 2's number and no digest. */
  head: Buffer;
  /** A view of the format-3 message's records (no copy; the trailer left out). */
  records: Buffer;
}

/**
 * The same message as asPreviousFormat gives, byte for byte once `head` and `records` are
 * written in turn, without copying the records: a full message is the mesh's size, and a copy per
 * build for the previous format's callers doubled the garbage a flood of them leaves.
 */
export function previousFormatParts(message: Buffer, end = bodyEnd(message)): PreviousFormatParts {
  const head = Buffer.from(message.subarray(0, HEADER_BYTES));
  head.writeUInt16LE(PREVIOUS_FORMAT, HEADER.format);
  head.writeBigUInt64LE(0n, HEADER.reserved);
  return { head, records: message.subarray(HEADER_BYTES, end) };
}

/** A whole message from already-encoded records (each one record's bytes). */
export function assemble(h: Omit<MessageHeader, "recordCount">, records: Iterable<Buffer>, count?: number): Buffer {
  // A full message has tables and compact workload records: wire_full.ts builds it.
  if (h.kind === KIND_FULL) throw new Error("assemble: a full message is built by assembleFull (wire_full.ts)");
  const list = Array.isArray(records) ? (records as Buffer[]) : [...records];
  let total = HEADER_BYTES;
  for (const r of list) total += r.length;
  const out = Buffer.allocUnsafe(total);
  let pos = HEADER_BYTES;
  for (const r of list) {
    r.copy(out, pos);
    pos += r.length;
  }
  writeHeader(out, { ...h, recordCount: count ?? list.length }, total);
  return out;
}

// The full message of format v2: header, a text table and a reference table, then the
// service upserts as they are and every workload upsert as a compact record (type 5) that
// names its network, identity, locality, waypoint and gateway by table index (LEB128).
//
// Why: a pod's texts repeat across the mesh (a thousand identities for a million pods), and
// in a v1 record they are 65 of its ~81 bytes. A full message of 1M pods was ~80 MB, more than
// the 32 MB Envoy buffers for an HTTP call's response (`http.async_response_buffer_limit`), and
// the filter validated and hashed three texts per pod. Compact, it is ~25 B per pod and each
// distinct text is checked once.
//
// The channel keeps every object as its v1 record (what deltas carry, unchanged); this file
// transcodes those bytes, so a full message always says exactly what the records say.
//
//   tables: u32 text count, texts (u16 length + UTF-8); u32 reference count, references
//           (u8 kind 1 address | 2 hostname, address | string, u16 port)
//   5 workload upsert, compact: u32 id, u8 flags, varint network, varint identity,
//           varint locality, [varint waypoint], [varint gateway], then addresses and
//           memberships exactly as in record type 1
import {
  FAMILY_V4,
  HEADER_BYTES,
  KIND_FULL,
  RECORD_WORKLOAD_UPSERT,
  REF_ADDRESS,
  WF_GATEWAY,
  WF_WAYPOINT,
  WireWriter,
  writeHeader,
  type MessageHeader,
  type Trailer,
} from "./wire.js";

// Node's Buffer has latin1Slice (what toString("latin1") calls, without the encoding lookup);
// its type declarations do not list it.
declare module "node:buffer" {
  interface Buffer {
    latin1Slice(start: number, end: number): string;
  }
}

export const RECORD_WORKLOAD_COMPACT = 5;
/**
 * The filters' table limits (assembly/mesh/wire_layout.ts MAX_TABLE_TEXTS / MAX_TABLE_REFS; a test
 * checks they agree). A workload whose texts or references would not fit in the tables any
 * more is written inline (type 1), which a full message may also carry.
 */
export const MAX_TABLE_TEXTS = 1 << 20;
export const MAX_TABLE_REFS = 1 << 16;

/** An unsigned LEB128 integer (the decoder takes at most 31 bits, no overlong form). */
export function writeVarint(w: WireWriter, v: number): void {
  w.ensure(5);
  const buf = w.buf;
  let p = w.pos;
  while (v >= 0x80) {
    buf[p++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[p++] = v;
  w.pos = p;
}

/** Interns byte ranges (a text with its length prefix, or a whole reference) by their bytes. */
class ByteTable {
  readonly index = new Map<string, number>();
  readonly entries: Buffer[] = [];
  bytes = 0;

  /** The index of buf[start, end), added when new. */
  intern(buf: Buffer, start: number, end: number): number {
    // latin1 maps each byte to one char: equal keys iff equal bytes.
    const key = buf.latin1Slice(start, end);
    let i = this.index.get(key);
    if (i === undefined) {
      i = this.entries.length;
      this.index.set(key, i);
      // A copy: callers may pass records written into a reused buffer.
      const entry = Buffer.from(buf.subarray(start, end));
      this.entries.push(entry);
      this.bytes += entry.length;
    }
    return i;
  }
}

/** The end of the v1 string at `at` (u16 length + bytes). */
function stringEnd(b: Buffer, at: number): number {
  return at + 2 + b.readUInt16LE(at);
}

/** The end of the v1 reference at `at`. */
function refEnd(b: Buffer, at: number): number {
  if (b[at] === REF_ADDRESS) return at + 1 + 1 + (b[at + 1] === FAMILY_V4 ? 4 : 16) + 2;
  return stringEnd(b, at + 1) + 2;
}

/**
 * Builds the full messages of one channel (one epoch): each workload upsert transcoded to a
 * compact record, anything else (service upserts) copied as it is, in the order given (the
 * channel passes the services first, so memberships name live ones).
 *
 * The tables only grow, so a workload's compact record stays valid from one build to the next
 * and is kept, by its v1 record (a changed workload is a new Buffer): a full message after a few
 * changes transcodes only those, and the rest is copying (1M pods: ~0.8 s the first time).
 * Texts nobody uses any more stay in the table (a filter checks them as UTF-8 only) until the
 * tables are half way to the filters' limits; then the next build starts over.
 */
export class FullAssembler {
  private texts = new ByteTable();
  private refs = new ByteTable();
  /** A v1 workload record's compact form; null: written inline (the tables were full). */
  private compact = new WeakMap<Buffer, Buffer | null>();
  private readonly scratch = new WireWriter(256);

  constructor(private readonly limits: { texts: number; refs: number } = { texts: MAX_TABLE_TEXTS, refs: MAX_TABLE_REFS }) {}

  /**
   * One full message. `stableRecords`: the caller's record Buffers stay as they are until the
   * build returns (the channel's, one Buffer per record), so they are gathered and copied once
   * into a Buffer of the exact size, the `trailer` included: a build then leaves no garbage but
   * the message itself (a flood of full builds at 20k pods made ~3 message sizes of garbage
   * each). Without it each record is copied as it comes, since the caller may write them into
   * one reused buffer.
   */
  build(h: Omit<MessageHeader, "recordCount" | "kind">, recordLists: Iterable<Buffer>[], options: { stableRecords?: boolean; trailer?: Trailer } = {}): Buffer {
    if (this.texts.entries.length * 2 > this.limits.texts || this.refs.entries.length * 2 > this.limits.refs) {
      this.texts = new ByteTable();
      this.refs = new ByteTable();
      this.compact = new WeakMap();
    }
    const parts: Buffer[] = [];
    // Copied as they come unless stable: the caller may write them into one reused buffer.
    const body = options.stableRecords ? undefined : new WireWriter(1 << 16);
    let bodyBytes = 0;
    let count = 0;
    for (const list of recordLists) for (const b of list) {
      count++;
      let part = b;
      if (b[0] === RECORD_WORKLOAD_UPSERT) {
        let c = this.compact.get(b);
        if (c === undefined) {
          c = this.transcode(b);
          this.compact.set(b, c);
        }
        if (c !== null) part = c;
      }
      if (body) {
        body.ensure(part.length);
        body.pos += part.copy(body.buf, body.pos);
      } else parts.push(part);
      bodyBytes += part.length;
    }
    const texts = this.texts;
    const refs = this.refs;
    const total = HEADER_BYTES + 4 + texts.bytes + 4 + refs.bytes + bodyBytes;
    const out = Buffer.allocUnsafe(total + (options.trailer?.bytes ?? 0));
    let pos = HEADER_BYTES;
    out.writeUInt32LE(texts.entries.length, pos);
    pos += 4;
    for (const t of texts.entries) pos += t.copy(out, pos);
    out.writeUInt32LE(refs.entries.length, pos);
    pos += 4;
    for (const r of refs.entries) pos += r.copy(out, pos);
    if (body) body.buf.copy(out, pos, 0, body.pos);
    else for (const part of parts) pos += part.copy(out, pos);
    writeHeader(out, { ...h, kind: KIND_FULL, recordCount: count }, total);
    options.trailer?.write(out, total);
    return out;
  }

  /** The compact record for v1 workload record `b`, or null when the tables might not hold its texts. */
  private transcode(b: Buffer): Buffer | null {
    const texts = this.texts;
    const refs = this.refs;
    // Up to 3 new texts and 2 new references.
    if (texts.entries.length + 3 > this.limits.texts || refs.entries.length + 2 > this.limits.refs) return null;
    const flags = b[5];
    let at = 6;
    const netEnd = stringEnd(b, at);
    const net = texts.intern(b, at, netEnd);
    const identityEnd = stringEnd(b, netEnd);
    const identity = texts.intern(b, netEnd, identityEnd);
    const localityEnd = stringEnd(b, identityEnd);
    const locality = texts.intern(b, identityEnd, localityEnd);
    at = localityEnd;
    let waypoint = -1;
    let gateway = -1;
    if (flags & WF_WAYPOINT) {
      const end = refEnd(b, at);
      waypoint = refs.intern(b, at, end);
      at = end;
    }
    if (flags & WF_GATEWAY) {
      const end = refEnd(b, at);
      gateway = refs.intern(b, at, end);
      at = end;
    }
    const w = this.scratch;
    w.reset();
    w.ensure(6 + 20 + (b.length - at));
    w.u8(RECORD_WORKLOAD_COMPACT);
    b.copy(w.buf, w.pos, 1, 6); // id and flags
    w.pos += 5;
    writeVarint(w, net);
    writeVarint(w, identity);
    writeVarint(w, locality);
    if (waypoint >= 0) writeVarint(w, waypoint);
    if (gateway >= 0) writeVarint(w, gateway);
    b.copy(w.buf, w.pos, at);
    w.pos += b.length - at;
    return w.copyFrom(0);
  }
}

/** One full message from v1 records (a fresh assembler: tests, benchmarks). */
export function assembleFull(
  h: Omit<MessageHeader, "recordCount" | "kind">,
  recordLists: Iterable<Buffer>[],
  limits: { texts: number; refs: number } = { texts: MAX_TABLE_TEXTS, refs: MAX_TABLE_REFS },
): Buffer {
  return new FullAssembler(limits).build(h, recordLists);
}

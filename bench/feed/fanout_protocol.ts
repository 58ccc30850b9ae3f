// The /delta protocol as a fan-out poller speaks it (feed/docs/deltas.md): what a poll asks,
// and how an answer moves what the poller holds. It is the only part of the fan-out bench that
// knows the protocol, so that a change of it is a change of this file. The rules are the
// filters' feed client's (assembly/runtime/feed_client.ts `take`, feed_message.ts,
// feed_buckets.ts), wire format 3: a poll declares `format=3` and the content digest of what
// the poller holds; a no-change of another epoch or version naming that digest is adopted
// (a restarted feed or another replica serving the same content); an ask-buckets is answered
// with a POST of the poller's bucket digests, which it keeps from the trailer of every full,
// delta and repair message as the filters do (checked against the header's digest). A poller
// reads the header and the trailer only; the records are the model's business and cost the
// bench's pollers nothing (the feed's cost is the same either way).

/** What a poller holds: the feed's epoch and version of its model (0/0: nothing yet), and its content digest (format 3). */
export interface Position {
  epoch: number;
  version: number;
  digest?: bigint;
}

export const NOTHING: Position = { epoch: 0, version: 0 };

/** The fixed header's size: a poller needs these bytes of an answer (and the trailer), and counts the rest. */
export const HEADER_BYTES = 56;
const MAGIC = 0x3148534d; // "MSH1"
/** The format the pollers declare; the feed's previous one (2) is read too, as the filters do. */
export const FORMAT = 3;
const PREVIOUS_FORMAT = 2;
export const CONTENT_TYPE = "application/x-mesh-delta";
/** 4,096 workload buckets and 4,096 service buckets (assembly/mesh/wire_layout.ts). */
export const BUCKET_COUNT = 8192;
const BUCKET_ENTRY_BYTES = 12;
/** The largest trailer: a u32 count and every bucket once. */
export const MAX_TRAILER_BYTES = 4 + BUCKET_ENTRY_BYTES * BUCKET_COUNT;
const U64 = (1n << 64n) - 1n;

export type AnswerKind = "full" | "delta" | "no-change" | "repair" | "ask-buckets";
const KINDS: Record<number, AnswerKind> = { 1: "full", 2: "delta", 3: "no-change", 4: "repair", 5: "ask-buckets" };

export interface Header {
  kind: AnswerKind;
  format: number;
  epoch: number;
  base: number;
  version: number;
  /** Format 3: the content digest of the model after this message (format 2: 0n). */
  digest: bigint;
  /** Where the body ends: a format-3 trailer runs from here to the end. */
  bodyEnd: number;
}

/**
 * A content digest as a poll's `digest` parameter carries it: 16 lowercase hex digits. The
 * client's own, beside the feed's (feed/src/delta/digest.ts): this module reads and writes the
 * protocol as the filters do, never through the feed's code.
 */
export function digestHex(v: bigint): string {
  return v.toString(16).padStart(16, "0");
}

/**
 * The request path of one poll from `at` (after a refused answer the client passes NOTHING: a
 * full model); `repair`: the poll is the POST of the bucket digests answering an ask-buckets;
 * `hex`: at.digest's digestHex when the caller keeps it.
 */
export function pollPath(target: string, at: Position, waitSeconds: number, repair = false, hex?: string): string {
  const digest = at.epoch !== 0 && at.digest !== undefined ? `&digest=${hex || digestHex(at.digest)}` : "";
  return `/delta/${encodeURIComponent(target)}?epoch=${at.epoch}&version=${at.version}&wait=${waitSeconds}&format=${FORMAT}${digest}${repair ? "&repair=1" : ""}`;
}

/** Reads the header of an answer of `length` bytes whose first bytes are `head`; a string says why it is not one. */
export function readHeader(head: Buffer, length: number): Header | string {
  if (head.length < HEADER_BYTES) return `answer of ${length} bytes is shorter than the ${HEADER_BYTES}-byte header`;
  if (head.readUInt32LE(0) !== MAGIC) return "header.magic: not a mesh feed message";
  const format = head.readUInt16LE(4);
  if (format !== FORMAT && format !== PREVIOUS_FORMAT) return `header.formatVersion: ${format}`;
  const code = head.readUInt16LE(6);
  const kind = KINDS[code];
  if (!kind || (format === PREVIOUS_FORMAT && code > 3)) return `header.kind: ${code}`;
  const u64 = (at: number) => head.readUInt32LE(at) + head.readUInt32LE(at + 4) * 2 ** 32;
  const bodyLength = head.readUInt32LE(44);
  if (format === FORMAT ? bodyLength > length - HEADER_BYTES : bodyLength !== length - HEADER_BYTES) return `header.bodyLength: ${bodyLength} for ${length - HEADER_BYTES} bytes`;
  const digest = head.readBigUInt64LE(48);
  if (format === PREVIOUS_FORMAT && digest !== 0n) return "header.reserved: must be 0";
  return { kind, format, epoch: u64(8), base: u64(16), version: u64(24), digest, bodyEnd: HEADER_BYTES + bodyLength };
}

/**
 * Where an answer leaves a poller at `at`: a full message is taken whole, a delta only from the
 * poller's own epoch and version, a repair only when `repairAsked`, a no-change at them or, in
 * format 3, at another epoch or version naming the poller's own content digest (adopted: "rebased").
 * A string: refused (the client then asks for a full model). An ask-buckets is not taken here
 * (see `Poller`): it moves nothing.
 */
export function take(at: Position, h: Header, repairAsked = false): Position | string {
  if (h.kind === "no-change") {
    if (h.epoch === at.epoch && h.version === at.version) return at;
    if (rebases(at, h)) return { epoch: h.epoch, version: h.version, digest: at.digest };
    return `no-change at ${h.epoch}/${h.version}, poller at ${at.epoch}/${at.version}`;
  }
  if (h.kind === "ask-buckets") return at;
  if (h.kind === "delta" && (h.epoch !== at.epoch || h.base !== at.version)) return `delta from ${h.epoch}/${h.base}, poller at ${at.epoch}/${at.version}`;
  if (h.kind === "repair" && !repairAsked) return "a repair, but this poller sent no bucket digests";
  return h.format === FORMAT ? { epoch: h.epoch, version: h.version, digest: h.digest } : { epoch: h.epoch, version: h.version };
}

/** A format-3 no-change of another position naming the content this poller holds. */
export function rebases(at: Position, h: Header): boolean {
  return h.kind === "no-change" && h.format === FORMAT && at.epoch !== 0 && at.digest !== undefined && h.digest === at.digest && (h.epoch !== at.epoch || h.version !== at.version);
}

/** Whether a poller at `at` has everything the feed published up to (epoch, version). */
export function holds(at: Position, epoch: number, version: number): boolean {
  return at.epoch === epoch && at.version >= version;
}

/**
 * A poller's bucket digests (feed_buckets.ts): set from the trailer of each format-3 full, delta
 * and repair message it takes; a trailer whose digests do not add up to the header's content
 * digest is refused with its message. 64 KiB per poller once it has had a format-3 message.
 */
export class BucketTable {
  /** Each bucket's digest as two u32 halves (low, high): a BigInt per entry cost the pollers more than any other step of an answer. */
  private digests: Uint32Array | undefined;
  private total = 0n;
  known = false;

  forget(): void {
    this.known = false;
  }

  /** "" when `trailer` is well formed and adds up to `digest` applied to this table (from empty when `full`); else why not. */
  check(trailer: Buffer, full: boolean, digest: bigint): string {
    if (trailer.length < 4) return `trailer: ${trailer.length} bytes`;
    const count = trailer.readUInt32LE(0);
    if (count > BUCKET_COUNT || trailer.length !== 4 + count * BUCKET_ENTRY_BYTES) return `trailer: ${trailer.length} bytes for ${count} buckets`;
    if (!full && !this.known) return "trailer: a delta or repair, but no bucket digests held";
    // Sums of u32 halves, exact in a double (8,192 × 2^32 < 2^53); one BigInt sum at the end.
    let addLow = 0;
    let addHigh = 0;
    let subLow = 0;
    let subHigh = 0;
    const held = full ? undefined : this.digests;
    let previous = -1;
    for (let i = 0; i < count; i++) {
      const p = 4 + i * BUCKET_ENTRY_BYTES;
      const b = trailer.readUInt32LE(p);
      if (b >= BUCKET_COUNT || b <= previous) return `trailer.buckets[${i}]: ${b}`;
      previous = b;
      if (held) {
        subLow += held[2 * b];
        subHigh += held[2 * b + 1];
      }
      addLow += trailer.readUInt32LE(p + 4);
      addHigh += trailer.readUInt32LE(p + 8);
    }
    const sum = (full ? 0n : this.total) + (BigInt(addHigh) << 32n) + BigInt(addLow) - (BigInt(subHigh) << 32n) - BigInt(subLow);
    return (sum & U64) === digest ? "" : "trailer: the bucket digests do not add up to the header's content digest";
  }

  /** Takes a trailer `check` accepted. */
  commit(trailer: Buffer, full: boolean, digest: bigint): void {
    if (!this.digests) this.digests = new Uint32Array(2 * BUCKET_COUNT);
    if (full) this.digests.fill(0);
    const count = trailer.readUInt32LE(0);
    for (let i = 0; i < count; i++) {
      const p = 4 + i * BUCKET_ENTRY_BYTES;
      const b = trailer.readUInt32LE(p);
      this.digests[2 * b] = trailer.readUInt32LE(p + 4);
      this.digests[2 * b + 1] = trailer.readUInt32LE(p + 8);
    }
    this.total = digest;
    this.known = true;
  }

  /** The POST body: BUCKET_COUNT little-endian u64 digests. */
  body(): Buffer {
    const out = Buffer.alloc(BUCKET_COUNT * 8);
    if (this.digests) for (let i = 0; i < 2 * BUCKET_COUNT; i++) out.writeUInt32LE(this.digests[i], i * 4);
    return out;
  }
}

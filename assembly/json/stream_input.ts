// The input side of JsonStream (stream.ts): the bytes it reads, the current token's place in
// them and the sticky first error. StreamInput is the base of the reader's class chain
// (StreamInput → StreamKeys → StreamValues → JsonStream); each link only adds fields and methods
// (nothing is overridden, so every call stays a direct call and every field a fixed offset).
//
// Windows: a windowed reader keeps a window of the document (DEFAULT_WINDOW bytes) and at
// least `margin` bytes (DEFAULT_MARGIN) ahead of every token in it, refilling from the source
// as it moves and when valueAt seeks outside it; a string or number longer than that is read
// again in a wider window. Offsets are document offsets either way (tokenOffset, valueAt,
// errors), and string accessors work on the current token, which is always in the window.
// What must outlive the window is copied: the keys of the open objects (for the duplicate
// check, into a small arena: stream_keys.ts) and, for sameStringAt, the one earlier literal it
// compares with (stream_values.ts).
//
// A host that stops serving bytes ends the document there, with the error
// "configuration could not be read past this offset" at that offset.
import { ByteSource } from "./source";
import { skipSpace } from "./stream_scan";
import { findInvalidUtf8At } from "./utf8";

/** What `next()` read. */
export enum JsonToken {
  /** Malformed input (or a misuse): see `error()`. Sticky. */
  Error = 0,
  /** The document is complete (after `valueAt`: that one value is complete). */
  End = 1,
  BeginObject = 2,
  EndObject = 3,
  BeginArray = 4,
  EndArray = 5,
  /** An object key (its ':' already read); the next token starts its value. */
  Key = 6,
  String = 7,
  Number = 8,
  True = 9,
  False = 10,
  Null = 11,
}

/**
 * A windowed reader keeps at least this many bytes ahead of each token in its window (or the
 * rest of the document), so ordinary tokens never straddle a refill; longer ones refill.
 */
export const DEFAULT_MARGIN: i32 = 1024;
/** Default window of a windowed reader. */
export const DEFAULT_WINDOW: i32 = 8192;

export class StreamInput {
  protected buffer: ArrayBuffer;
  /** Address of document offset 0: offset i is at base + i while i is in the window. */
  protected base: usize;
  /** Document length. */
  protected length: i32;
  /** End (document offset) of the bytes present: `length` in memory, the window's end otherwise. */
  protected limit: i32;
  /** Windowed: where the bytes come from (null: the whole document is in `buffer`). */
  protected source: ByteSource | null = null;
  /** Windowed: document offset of window[0]. */
  protected winStart: i32 = 0;
  /** Windowed: bytes kept ahead of each token (DEFAULT_MARGIN; tests make it tiny). */
  protected margin: i32 = DEFAULT_MARGIN;

  // The current token.
  protected tok: JsonToken = JsonToken.End;
  protected tokAt: i32 = 0; // offset of its first byte (the opening quote of a string)
  protected strFrom: i32 = 0; // string / key content: [strFrom, strTo), escapes undecoded
  protected strTo: i32 = 0;
  protected strEscaped: bool = false;
  protected numEnd: i32 = 0;
  protected numPlain: bool = false; // an integer of at most 15 digits: exact without Decimal

  protected errAt: i32 = -1;
  protected errReason: string = "";

  constructor(bytes: ArrayBuffer) {
    this.buffer = bytes;
    this.base = changetype<usize>(bytes);
    this.length = bytes.byteLength;
    this.limit = bytes.byteLength;
  }

  protected attach(source: ByteSource, window: i32, margin: i32): void {
    const size = source.size();
    this.source = source;
    this.margin = margin;
    this.length = size < 0 ? 0 : size;
    this.buffer = new ArrayBuffer(max(max(window, 2 * margin), 16));
    this.winStart = 0;
    this.limit = 0;
    this.base = changetype<usize>(this.buffer);
  }

  /** Makes the window hold [from, to) (clamped to the document), starting it at `from` when it moves. */
  protected cover(from: i32, to: i32): bool {
    const source = this.source;
    if (source === null) return true;
    if (to > this.length) to = this.length;
    if (from >= this.winStart && to <= this.limit) return true;
    let capacity = this.buffer.byteLength;
    if (to - from > capacity) {
      // In i64: doubling past 2^30 would overflow an i32 and never end. Never beyond the rest
      // of the document (to <= length, so this still holds to - from).
      let grown: i64 = capacity;
      while (grown < <i64>(to - from)) grown <<= 1;
      capacity = <i32>min<i64>(grown, <i64>this.length - <i64>from);
      this.buffer = new ArrayBuffer(capacity);
    }
    const want = min(capacity, this.length - from);
    const got = source.read(from, want, changetype<usize>(this.buffer));
    this.winStart = from;
    this.limit = from + max(got, 0);
    this.base = changetype<usize>(this.buffer) - <usize>from;
    if (got == want) return true;
    // The host stopped serving bytes: the document ends here, with a message saying why.
    this.length = this.limit;
    this.fail(this.limit, "configuration could not be read past this offset");
    return false;
  }

  /** The windowed reader's UTF-8 check: window by window, cut at a sequence boundary. */
  protected validateUtf8(): void {
    const n = this.length;
    let at = 0;
    while (at < n && this.errAt < 0) {
      if (!this.cover(at, at + this.buffer.byteLength)) return;
      let end = this.limit;
      if (end < n) {
        // Leave a sequence cut by the window's end for the next window.
        let lead = end - 1;
        while (lead > at && end - lead < 4 && (load<u8>(this.base + <usize>lead) & 0xc0) == 0x80) lead--;
        const c = <i32>load<u8>(this.base + <usize>lead);
        const need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        if (lead + need > end) end = lead;
      }
      const bad = findInvalidUtf8At(this.base + <usize>at, end - at);
      if (bad >= 0) this.fail(at + bad, "invalid UTF-8");
      at = end;
    }
  }

  /**
   * Skips whitespace from `i`. A windowed reader then holds at least this.margin bytes past the
   * result (or the rest of the document), keeping [keep, ...) in the window (keep < 0: nothing
   * before the result needs keeping).
   */
  // @ts-ignore: decorator
  @inline protected space(i: i32, keep: i32): i32 {
    if (this.source === null) return skipSpace(this.base, this.length, i);
    return this.windowSpace(i, keep);
  }

  private windowSpace(i: i32, keep: i32): i32 {
    if (i < this.winStart || i + this.margin > this.limit) {
      if (!this.cover(keep < 0 ? i : keep, i + this.margin)) return i;
    }
    let j = skipSpace(this.base, this.limit, i);
    while (this.limit < this.length && j + this.margin > this.limit) {
      if (!this.cover(keep < 0 ? j : keep, j + this.margin)) return j;
      j = skipSpace(this.base, this.limit, j);
    }
    return j;
  }

  /** Windowed: refills so the window starts at `from` and reaches further than it does now. */
  protected widen(from: i32): bool {
    // In i64, clamped: past 1 GiB the sum would wrap negative and cover() would read nothing.
    return this.cover(from, <i32>min<i64>(<i64>this.limit + <i64>max(this.limit - from, this.margin), <i64>this.length));
  }

  // ================================================================ errors

  failed(): bool {
    return this.errAt >= 0;
  }

  /** "byte N: reason" (parseJson's format), or "" when nothing failed. */
  error(): string {
    return this.errAt < 0 ? "" : "byte " + this.errAt.toString() + ": " + this.errReason;
  }

  /** Byte offset of the first error, or -1. */
  errorOffset(): i32 {
    return this.errAt;
  }

  /** The reason alone ("unexpected end of input"), or "". */
  errorReason(): string {
    return this.errReason;
  }

  /** Total input length in bytes. */
  byteLength(): i32 {
    return this.length;
  }

  /** Records the first failure; returns Error so callers can `return this.fail(...)`. */
  protected fail(offset: i32, reason: string): JsonToken {
    if (this.errAt < 0) {
      this.errAt = offset;
      this.errReason = reason;
    }
    return (this.tok = JsonToken.Error);
  }

  /** A failure where `expected` was wanted; the end of input gets its own reason. */
  protected unexpected(offset: i32, expected: string): JsonToken {
    return this.fail(offset, <u32>offset >= <u32>this.length ? "unexpected end of input" : expected);
  }
}

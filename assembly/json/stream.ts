// A pull (streaming) JSON reader over UTF-8 bytes, either already in linear memory or read
// through a window from a ByteSource (`JsonStream.windowed`: the host's plugin configuration,
// which then never is whole in linear memory; see "Windows" below).
//
// `parseJson` builds a JsonValue tree: about 15 bytes of tree per byte of text, which at a
// million pods is gigabytes of linear memory that the VM keeps forever (wasm memory never
// shrinks). JsonStream hands out one token at a time instead and builds nothing: the caller
// copies what it wants to keep straight into its own structures.
//
// Use: `next()` returns the next JsonToken; after a Key the next token starts its value. The
// string accessors (stringEquals, stringHash, stringPtr, sameStringAt; JsonNames.find) work on
// the current key or string in place; stringValue() decodes it. skip(t) skips the rest of a
// value, readValue() builds it as a JsonValue. A value's tokenOffset() can be kept and the
// value read later with valueAt(offset) on a fork() (same bytes, its own position).
//
// Validation is exactly parseJson's (same checks, same order, same offsets and messages):
// strict UTF-8 (checked once up front, as parseJson does), string escapes and lone
// surrogates, the number grammar and range, the nesting limit, duplicate keys, trailing data.
// A document therefore fails here with the very "byte N: reason" that parseJson would give.
//
// Never traps: every read is bounds-checked (-1 past the end), the container stack is bounded
// by MAX_DEPTH, and the first error is sticky (every later `next()` answers Error).
//
// Allocation: none per token, except when the caller asks for a string (`stringValue`) or a
// tree (`readValue`), and for the rare number that needs exact big-number arithmetic (one
// with more than 15 significant digits or a fraction/exponent, and only when the caller asks
// for its value, or when it is 1e308 or larger and must be range-checked). Bookkeeping grows
// amortised: the key stack (16 bytes per key of the objects currently open) and, for objects
// with more than SMALL_OBJECT keys, a hash index of their keys.
//
// Windows: a windowed reader keeps a window of the document (DEFAULT_WINDOW bytes) and at
// least `margin` bytes (DEFAULT_MARGIN) ahead of every token in it, refilling from the source
// as it moves and when valueAt seeks outside it; a string or number longer than that is read
// again in a wider window. Offsets are document offsets either way (tokenOffset, valueAt,
// errors), and string accessors work on the current token, which is always in the window.
// What must outlive the window is copied: the keys of the open objects (for the duplicate
// check, into a small arena) and, for sameStringAt, the one earlier literal it compares with.
//
// Duplicate keys: every object is checked, as parseJson does, so the reader is a drop-in
// validator. The keys of the objects currently open are kept as byte ranges of the input
// (hash, start, end, escaped) on one stack; a key is compared with the earlier keys of its own
// object by hash first, then by bytes (or by decoded code points when either has escapes, so
// "a" and "\u0061" are duplicates). Objects with up to SMALL_OBJECT keys are scanned
// linearly; a larger one gets a hash index (reused per depth), so a hostile object with a
// million keys costs linear time, not quadratic.
import { Decimal } from "./number";
import { MAX_DEPTH } from "./parser";
import { quoteForMessage } from "./quote";
import { ByteSource } from "./source";
import {
  byteAt,
  describeByte,
  isDigit,
  literalMismatch,
  NUMBER_BAD,
  NUMBER_HUGE,
  NUMBER_LEADING_ZERO,
  NUMBER_NO_DIGIT,
  NUMBER_NO_FRACTION,
  NUMBER_PLAIN,
  NUMBER_RANGE,
  plainInteger,
  QUOTE,
  scanNumber,
  skipSpace,
  WORD_FALSE,
  WORD_NULL,
  WORD_TRUE,
} from "./stream_scan";
import {
  codePointAt,
  ESCAPE_BAD_U,
  ESCAPE_INVALID,
  escapeProblem,
  hashContent,
  sameContent,
  sameContentIn,
  scanLiteral,
  SCAN_CONTROL,
  SCAN_ESCAPED,
  SCAN_UNTERMINATED,
} from "./stream_string";
import { findInvalidUtf8At } from "./utf8";
import { JsonValue } from "./value";

export { hashBytes } from "./stream_string";
export { JsonNames } from "./names";

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

// Where the reader stands between tokens.
const S_VALUE: i32 = 0; // a value must come next
const S_FIRST_MEMBER: i32 = 1; // just after '{': '}' or a key
const S_FIRST_ITEM: i32 = 2; // just after '[': ']' or a value
const S_AFTER_VALUE: i32 = 3; // after a value in a container: ',' or the closing bracket
const S_DONE: i32 = 4; // the outermost value is complete
const S_ENDED: i32 = 5; // End was returned

const IN_OBJECT: u8 = 1;
const IN_ARRAY: u8 = 2;

/** Objects with at most this many keys check duplicates by a linear scan. */
const SMALL_OBJECT: i32 = 16;
/** Ints per key on the key stack: hash, content start, content end, escaped (0/1). */
const KEY_INTS: i32 = 4;

/**
 * A windowed reader keeps at least this many bytes ahead of each token in its window (or the
 * rest of the document), so ordinary tokens never straddle a refill; longer ones refill.
 */
export const DEFAULT_MARGIN: i32 = 1024;
/** Default window of a windowed reader. */
export const DEFAULT_WINDOW: i32 = 8192;

const EMPTY_INDEX = new StaticArray<i32>(0);

export class JsonStream {
  private buffer: ArrayBuffer;
  /** Address of document offset 0: offset i is at base + i while i is in the window. */
  private base: usize;
  /** Document length. */
  private length: i32;
  /** End (document offset) of the bytes present: `length` in memory, the window's end otherwise. */
  private limit: i32;
  /** Windowed: where the bytes come from (null: the whole document is in `buffer`). */
  private source: ByteSource | null = null;
  /** Windowed: document offset of window[0]. */
  private winStart: i32 = 0;
  /** Windowed: bytes kept ahead of each token (DEFAULT_MARGIN; tests make it tiny). */
  private margin: i32 = DEFAULT_MARGIN;
  // Keys of the open objects are copied here (their texts may leave the window).
  /** Windowed: the open objects' key texts (collected with the reader, never leaked). */
  private keyArena: ArrayBuffer = new ArrayBuffer(0);
  private keyBytes: usize = 0; // changetype<usize>(keyArena)
  private keyBytesUsed: i32 = 0;
  private keyBytesCapacity: i32 = 0;
  // Windowed: a second window for sameStringAt's reads far from the main one.
  private far: ArrayBuffer | null = null;
  private farStart: i32 = 0;
  private farEnd: i32 = 0;
  private pos: i32 = 0;
  private state: i32 = S_VALUE;
  /** true: the whole input is one document (trailing data is an error); false after valueAt. */
  private whole: bool = true;
  /** Keys are not checked for duplicates (a fork over a document already read in full). */
  private trusted: bool = false;

  // Open containers: kind per level, and where each object's keys start on the key stack.
  private open: i32 = 0;
  private kinds: StaticArray<u8> = new StaticArray<u8>(MAX_DEPTH + 1);
  private keyBase: StaticArray<i32> = new StaticArray<i32>(MAX_DEPTH + 1);
  // Keys of the open objects, KEY_INTS ints each.
  private keys: StaticArray<i32> = new StaticArray<i32>(64 * KEY_INTS);
  private keyCount: i32 = 0;
  // Hash index of a large object's keys, one per depth (entries: key-stack index + 1).
  private indexes: Array<StaticArray<i32>> = new Array<StaticArray<i32>>(MAX_DEPTH + 1);
  private indexMask: StaticArray<i32> = new StaticArray<i32>(MAX_DEPTH + 1);

  // The current token.
  private tok: JsonToken = JsonToken.End;
  private tokAt: i32 = 0; // offset of its first byte (the opening quote of a string)
  private strFrom: i32 = 0; // string / key content: [strFrom, strTo), escapes undecoded
  private strTo: i32 = 0;
  private strEscaped: bool = false;
  private numEnd: i32 = 0;
  private numPlain: bool = false; // an integer of at most 15 digits: exact without Decimal

  private errAt: i32 = -1;
  private errReason: string = "";
  private view: Uint8Array | null = null;

  /** A reader over the whole of `bytes` (one JSON document). Validates UTF-8 up front. */
  constructor(bytes: ArrayBuffer) {
    this.buffer = bytes;
    this.base = changetype<usize>(bytes);
    this.length = bytes.byteLength;
    this.limit = bytes.byteLength;
    for (let d = 0; d <= MAX_DEPTH; d++) {
      this.indexes[d] = EMPTY_INDEX;
      unchecked((this.indexMask[d] = -1));
    }
    const bad = findInvalidUtf8At(this.base, this.length);
    if (bad >= 0) this.fail(bad, "invalid UTF-8");
  }

  /**
   * A reader that never holds the whole document: it reads `source` through a window of
   * `window` bytes (grown only for a token longer than that), refilled as it moves and when
   * it seeks (valueAt). Same tokens, checks and messages as a reader over the whole buffer.
   * UTF-8 is validated up front in one windowed pass, as the in-memory reader does.
   */
  static windowed(source: ByteSource, window: i32 = DEFAULT_WINDOW, margin: i32 = DEFAULT_MARGIN): JsonStream {
    const s = new JsonStream(new ArrayBuffer(0));
    s.attach(source, window, max(margin, 1));
    s.validateUtf8();
    return s;
  }

  private attach(source: ByteSource, window: i32, margin: i32): void {
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
  private cover(from: i32, to: i32): bool {
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
  private validateUtf8(): void {
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
  @inline private space(i: i32, keep: i32): i32 {
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
  private widen(from: i32): bool {
    // In i64, clamped: past 1 GiB the sum would wrap negative and cover() would read nothing.
    return this.cover(from, <i32>min<i64>(<i64>this.limit + <i64>max(this.limit - from, this.margin), <i64>this.length));
  }

  /** A reader over a string's UTF-8 encoding (tests, literals). */
  static fromString(text: string): JsonStream {
    return new JsonStream(String.UTF8.encode(text));
  }

  /**
   * A second reader over the same bytes, for reading values at recorded offsets while this
   * one keeps its place (see valueAt). Skips the UTF-8 check this one already did; a reader
   * that failed forks into a failed one. `trusted`: this reader has already read the whole
   * document without error, so the fork skips the duplicate-key check (every other check
   * stays, so it still cannot go wrong on any input).
   */
  fork(trusted: bool = false): JsonStream {
    const other = new JsonStream(new ArrayBuffer(0));
    const source = this.source;
    if (source !== null) {
      other.attach(source, this.buffer.byteLength, this.margin);
      other.length = this.length;
    } else {
      other.buffer = this.buffer;
      other.base = this.base;
      other.length = this.length;
      other.limit = this.limit;
    }
    other.errAt = this.errAt;
    other.errReason = this.errReason;
    other.state = S_ENDED;
    other.whole = false;
    other.trusted = trusted;
    return other;
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

  // ================================================================ position

  /** Containers currently open around the reader (0 at the top level). */
  depth(): i32 {
    return this.open;
  }

  /** Total input length in bytes. */
  byteLength(): i32 {
    return this.length;
  }

  /**
   * Restarts the reader at `offset`, where a value starts (an offset earlier read from
   * `tokenOffset()`): the next `next()` reads that value, and once it is complete `next()`
   * answers End (what follows it is not looked at). Keeps a failed reader failed.
   */
  valueAt(offset: i32): void {
    if (this.errAt >= 0) return;
    if (offset < 0 || offset > this.length) {
      this.fail(max(offset, 0), "unexpected end of input");
      return;
    }
    this.pos = offset;
    this.state = S_VALUE;
    this.whole = false;
    this.open = 0;
    this.keyCount = 0;
    this.keyBytesUsed = 0;
    this.tok = JsonToken.End;
  }

  // ================================================================ tokens

  /** Reads the next token. */
  next(): JsonToken {
    if (this.errAt >= 0) return (this.tok = JsonToken.Error);
    const state = this.state;
    if (state == S_ENDED) return (this.tok = JsonToken.End);
    let i = this.space(this.pos, -1);
    if (this.errAt >= 0) return (this.tok = JsonToken.Error);
    if (state == S_VALUE) return this.value(i);
    if (state == S_AFTER_VALUE) {
      const c = byteAt(this.base, this.limit, i);
      const inObject = unchecked(this.kinds[this.open - 1]) == IN_OBJECT;
      if (c == (inObject ? 0x7d : 0x5d)) return this.close(i, inObject);
      if (c != 0x2c) return this.unexpected(i, inObject ? "expected ',' or '}'" : "expected ',' or ']'");
      i = this.space(i + 1, -1);
      if (this.errAt >= 0) return (this.tok = JsonToken.Error);
      return inObject ? this.key(i) : this.value(i);
    }
    if (state == S_FIRST_MEMBER) return byteAt(this.base, this.limit, i) == 0x7d ? this.close(i, true) : this.key(i);
    if (state == S_FIRST_ITEM) return byteAt(this.base, this.limit, i) == 0x5d ? this.close(i, false) : this.value(i);
    // S_DONE
    if (this.whole && i < this.length) return this.fail(i, "unexpected data after JSON value");
    this.state = S_ENDED;
    return (this.tok = JsonToken.End);
  }

  /** Offset just past the last token read (where the reader continues). */
  offset(): i32 {
    return this.pos;
  }

  /** The last token `next()` returned. */
  token(): JsonToken {
    return this.tok;
  }

  /** Offset of the current token's first byte (a string's opening quote, a bracket). */
  tokenOffset(): i32 {
    return this.tokAt;
  }

  /**
   * Given `t`, the token that starts a value (as just returned by next()), skips the rest of
   * that value, validating it. True on success; false for Error or a token that does not
   * start a value (End, Key, EndObject, EndArray).
   */
  skip(t: JsonToken): bool {
    if (t == JsonToken.BeginObject || t == JsonToken.BeginArray) {
      const outer = this.open - 1;
      while (true) {
        const u = this.next();
        if (u == JsonToken.Error || u == JsonToken.End) return false;
        if (this.open == outer) return true;
      }
    }
    return t >= JsonToken.String;
  }

  /** Reads and skips the next value (after a Key, or where a value is due). */
  skipValue(): bool {
    return this.skip(this.next());
  }

  /** Reads the next value as a JsonValue tree (as parseJson builds it); null on error. */
  readValue(): JsonValue | null {
    return this.build(this.next());
  }

  /** The tree of the value whose first token `t` was just returned; null on error. */
  build(t: JsonToken): JsonValue | null {
    if (t == JsonToken.String) return JsonValue.fromString(this.stringValue());
    if (t == JsonToken.Number) return this.numberJson();
    if (t == JsonToken.True) return JsonValue.fromBool(true);
    if (t == JsonToken.False) return JsonValue.fromBool(false);
    if (t == JsonToken.Null) return JsonValue.fromNull();
    if (t == JsonToken.BeginArray) {
      const items = new Array<JsonValue>();
      while (true) {
        const u = this.next();
        if (u == JsonToken.EndArray) return JsonValue.fromArray(items);
        const item = this.build(u);
        if (item === null) return null;
        items.push(item);
      }
    }
    if (t == JsonToken.BeginObject) {
      const obj = JsonValue.newObject();
      while (true) {
        const u = this.next();
        if (u == JsonToken.EndObject) return obj;
        if (u != JsonToken.Key) return null;
        const key = this.stringValue();
        const value = this.readValue();
        if (value === null) return null;
        obj.addField(key, value);
      }
    }
    return null;
  }

  // ================================================================ strings (Key, String)

  /** Byte length of the current string's content as written (escapes undecoded). */
  stringByteLength(): i32 {
    return this.isText() ? this.strTo - this.strFrom : 0;
  }

  /** Address of that content in linear memory: its UTF-8 text when !stringEscaped(). */
  stringPtr(): usize {
    return this.base + <usize>this.strFrom;
  }

  /** The current token is a key or a string. */
  isString(): bool {
    return this.isText();
  }

  /** True when the current string holds escapes (its bytes are then not its text). */
  stringEscaped(): bool {
    return this.isText() && this.strEscaped;
  }

  /** The current key or string, decoded (allocates); "" for other tokens. */
  stringValue(): string {
    if (!this.isText()) return "";
    const from = this.strFrom;
    const to = this.strTo;
    if (!this.strEscaped) return String.UTF8.decodeUnsafe(this.base + <usize>from, <usize>(to - from));
    // Every UTF-16 unit written consumes at least one input byte, so this is large enough.
    const out = new Uint16Array(to - from);
    const base = this.base;
    const n = this.limit;
    let count = 0;
    let i = from;
    while (i < to) {
      const r = codePointAt(base, n, i);
      const cp = <i32>(<u32>r);
      i = <i32>(r >> 32);
      if (cp >= 0x10000) {
        if (count + 1 >= out.length) break; // unreachable for validated input; keeps writes in bounds
        unchecked((out[count++] = <u16>(0xd800 + ((cp - 0x10000) >> 10))));
        unchecked((out[count++] = <u16>(0xdc00 + ((cp - 0x10000) & 0x3ff))));
      } else {
        if (count >= out.length) break;
        unchecked((out[count++] = <u16>cp));
      }
    }
    return String.UTF16.decodeUnsafe(out.dataStart, <usize>count << 1);
  }

  /** Whether the current key or string decodes to `text`. No allocation. */
  stringEquals(text: string): bool {
    if (!this.isText()) return false;
    const base = this.base;
    const n = this.limit;
    const from = this.strFrom;
    const to = this.strTo;
    const units = text.length;
    if (!this.strEscaped) {
      // UTF-8 takes 1..3 bytes per UTF-16 unit, and exactly 1 for ASCII.
      const bytes = to - from;
      if (bytes < units || bytes > 3 * units) return false;
      let ascii = true;
      if (bytes == units) {
        for (let k = 0; k < units; k++) {
          const c = <i32>text.charCodeAt(k);
          if (c >= 0x80) {
            ascii = false;
            break;
          }
          if (<i32>load<u8>(base + <usize>(from + k)) != c) return false;
        }
      } else {
        for (let k = 0; k < units && ascii; k++) ascii = text.charCodeAt(k) < 0x80;
      }
      if (ascii) return bytes == units;
    }
    // Non-ASCII text or escapes: compare code point by code point.
    let i = from;
    let k = 0;
    while (i < to) {
      const r = codePointAt(base, n, i);
      i = <i32>(r >> 32);
      if (k >= units) return false;
      const c = text.codePointAt(k);
      if (c != <i32>(<u32>r)) return false;
      k += c >= 0x10000 ? 2 : 1;
    }
    return k == units;
  }

  /** Hash of the current string's decoded text (= hashBytes of its UTF-8). No allocation. */
  stringHash(): u32 {
    return this.isText() ? hashContent(this.base, this.limit, this.strFrom, this.strTo, this.strEscaped) : 0;
  }

  /**
   * Whether the current key or string has the same decoded text as the string literal whose
   * opening quote is at `quoteOffset` (an offset read earlier from tokenOffset()). No
   * allocation.
   */
  sameStringAt(quoteOffset: i32): bool {
    if (!this.isText()) return false;
    if (this.source !== null && (quoteOffset < this.winStart || quoteOffset >= this.limit)) return this.sameStringFetched(quoteOffset);
    const base = this.base;
    const n = this.limit;
    if (byteAt(base, n, quoteOffset) != QUOTE) return false;
    const r = scanLiteral(base, n, quoteOffset);
    // Windowed, a literal that starts here may run past the window's end: read it whole.
    if ((r & SCAN_UNTERMINATED) != 0 && this.source !== null && n < this.length) return this.sameStringFetched(quoteOffset);
    if ((r & (SCAN_CONTROL | SCAN_UNTERMINATED)) != 0) return false;
    const end = <i32>(r & 0xffffffff);
    const escaped = (r & SCAN_ESCAPED) != 0;
    return sameContent(base, n, this.strFrom, this.strTo, this.strEscaped, quoteOffset + 1, end, escaped);
  }

  /**
   * Windowed, the literal at `quoteOffset` outside the window: read from the source into a
   * second window. A literal that spells the current text takes at most 6 bytes per byte of
   * that text (a \u escape per byte), so a longer one cannot be equal: that much must be read.
   */
  private sameStringFetched(quoteOffset: i32): bool {
    const source = this.source;
    if (source === null || quoteOffset < 0 || quoteOffset >= this.length) return false;
    const want = min(6 * (this.strTo - this.strFrom) + 2, this.length - quoteOffset);
    // A second, lazily made window for these far reads: uids of consecutive endpoints are
    // often consecutive workloads, so one read usually serves many comparisons.
    let far = this.far;
    if (far === null || want > far.byteLength) {
      far = new ArrayBuffer(max(want, this.buffer.byteLength));
      this.far = far;
      this.farEnd = this.farStart; // empty
    }
    if (quoteOffset < this.farStart || quoteOffset + want > this.farEnd) {
      const count = min(far.byteLength, this.length - quoteOffset);
      const got = source.read(quoteOffset, count, changetype<usize>(far));
      this.farStart = quoteOffset;
      this.farEnd = quoteOffset + max(got, 0);
      if (got < count) {
        // The host stopped serving bytes: an error at that offset, as cover() reports it, rather
        // than a misleading "not equal" (an unknown uid, or a duplicate not seen).
        this.fail(this.farEnd, "configuration could not be read past this offset");
        return false;
      }
    }
    const fetched = changetype<usize>(far) - <usize>this.farStart; // document offsets, as in the window
    const end = this.farEnd;
    if (byteAt(fetched, end, quoteOffset) != QUOTE || quoteOffset < this.farStart) return false;
    const r = scanLiteral(fetched, end, quoteOffset);
    if ((r & (SCAN_CONTROL | SCAN_UNTERMINATED)) != 0) return false;
    const close = <i32>(r & 0xffffffff);
    return sameContentIn(fetched, end, quoteOffset + 1, close, (r & SCAN_ESCAPED) != 0, this.base, this.limit, this.strFrom, this.strTo, this.strEscaped);
  }

  // ================================================================ scalars

  /** The current True/False token's value; false otherwise. */
  boolValue(): bool {
    return this.tok == JsonToken.True;
  }

  /** The current number's nearest double (correctly rounded); 0 for other tokens. */
  numberValue(): f64 {
    if (this.tok != JsonToken.Number) return 0;
    if (this.numPlain) return this.plainValue();
    return this.decimal(this.tokAt, this.numEnd).toF64();
  }

  /** True when the current number's literal is exactly an integer in i64 ("80", "8e1", "80.0"). */
  numberIsInteger(): bool {
    if (this.tok != JsonToken.Number) return false;
    if (this.numPlain) return true;
    return this.decimal(this.tokAt, this.numEnd).isI64();
  }

  /** That integer; 0 unless numberIsInteger(). */
  numberInteger(): i64 {
    if (this.tok != JsonToken.Number) return 0;
    if (this.numPlain) return plainInteger(this.base, this.limit, this.tokAt, this.numEnd);
    return this.decimal(this.tokAt, this.numEnd).toI64();
  }

  /** The current number's literal bytes: [tokenOffset(), numberEnd()). */
  numberEnd(): i32 {
    return this.tok == JsonToken.Number ? this.numEnd : this.tokAt;
  }

  // ================================================================ internals: reading

  // @ts-ignore: decorator
  @inline private isText(): bool {
    return this.tok == JsonToken.String || this.tok == JsonToken.Key;
  }

  /** Records the first failure; returns Error so callers can `return this.fail(...)`. */
  private fail(offset: i32, reason: string): JsonToken {
    if (this.errAt < 0) {
      this.errAt = offset;
      this.errReason = reason;
    }
    return (this.tok = JsonToken.Error);
  }

  /** A failure where `expected` was wanted; the end of input gets its own reason. */
  private unexpected(offset: i32, expected: string): JsonToken {
    return this.fail(offset, <u32>offset >= <u32>this.length ? "unexpected end of input" : expected);
  }

  // The messages that are built, kept out of the hot functions (their temporaries would
  // enlarge every call's shadow-stack frame).

  private failByte(at: i32): JsonToken {
    const c = byteAt(this.base, this.limit, at);
    return this.unexpected(at, "unexpected " + describeByte(c));
  }

  private failNesting(at: i32): JsonToken {
    return this.fail(at, "nesting deeper than " + MAX_DEPTH.toString());
  }

  private failDuplicate(at: i32): JsonToken {
    return this.fail(at, "duplicate key " + quoteForMessage(this.stringValue()));
  }

  /** After a complete value: where the reader stands next. */
  // @ts-ignore: decorator
  @inline private afterValue(): void {
    this.state = this.open == 0 ? S_DONE : S_AFTER_VALUE;
  }

  /** The closing bracket at `at` of the innermost container. */
  private close(at: i32, object: bool): JsonToken {
    this.tokAt = at;
    this.pos = at + 1;
    const level = --this.open;
    if (object) {
      const count = unchecked(this.keyBase[level]);
      this.keyCount = count;
      // Windowed: the closed object's key texts leave the arena.
      if (this.source !== null) this.keyBytesUsed = count > 0 ? unchecked(this.keys[(count - 1) * KEY_INTS + 2]) : 0;
    }
    this.afterValue();
    return (this.tok = object ? JsonToken.EndObject : JsonToken.EndArray);
  }

  /** A value starting at `at` (whitespace already skipped). */
  private value(at: i32): JsonToken {
    const c = byteAt(this.base, this.limit, at);
    this.tokAt = at;
    if (c == QUOTE) {
      if (!this.readString(at)) return JsonToken.Error;
      this.afterValue();
      return (this.tok = JsonToken.String);
    }
    if (c == 0x7b || c == 0x5b) {
      const level = this.open;
      if (level >= MAX_DEPTH) return this.failNesting(at);
      this.pos = at + 1;
      this.open = level + 1;
      if (c == 0x7b) {
        unchecked((this.kinds[level] = IN_OBJECT));
        unchecked((this.keyBase[level] = this.keyCount));
        unchecked((this.indexMask[level] = -1));
        this.state = S_FIRST_MEMBER;
        return (this.tok = JsonToken.BeginObject);
      }
      unchecked((this.kinds[level] = IN_ARRAY));
      this.state = S_FIRST_ITEM;
      return (this.tok = JsonToken.BeginArray);
    }
    if (c == 0x2d || isDigit(c)) return this.number(at);
    if (c == 0x74) return this.literal(at, WORD_TRUE, 4, JsonToken.True);
    if (c == 0x66) return this.literal(at, WORD_FALSE, 5, JsonToken.False);
    if (c == 0x6e) return this.literal(at, WORD_NULL, 4, JsonToken.Null);
    return this.failByte(at);
  }

  private literal(start: i32, word: u64, len: i32, t: JsonToken): JsonToken {
    let bad = literalMismatch(this.base, this.limit, start, word, len);
    if (bad >= this.limit && this.limit < this.length && this.cover(start, start + 8)) {
      bad = literalMismatch(this.base, this.limit, start, word, len);
    }
    if (bad >= 0) return this.unexpected(bad, "invalid literal");
    this.pos = start + len;
    this.afterValue();
    return (this.tok = t);
  }

  /** A key at `at`: its string, the duplicate check, then ':'. */
  private key(at: i32): JsonToken {
    this.tokAt = at;
    // A '}' here after a ',' is a trailing comma, which JSON does not allow.
    if (byteAt(this.base, this.limit, at) != QUOTE) return this.unexpected(at, "expected a string key");
    if (!this.readString(at)) return JsonToken.Error;
    this.tok = JsonToken.Key; // so that stringValue() works for the message
    if (!this.trusted && !this.addKey()) return this.failDuplicate(at);
    const colon = this.space(this.pos, at); // the key's text stays in the window
    if (this.errAt >= 0) return (this.tok = JsonToken.Error);
    if (byteAt(this.base, this.limit, colon) != 0x3a) return this.unexpected(colon, "expected ':' after key");
    this.pos = colon + 1;
    this.state = S_VALUE;
    return JsonToken.Key;
  }

  /** Reads the string literal opening at `open` into the token fields, checking escapes. */
  private readString(open: i32): bool {
    let r = scanLiteral(this.base, this.limit, open);
    // Windowed: a string longer than the window's margin is read again in a wider window.
    while ((r & SCAN_UNTERMINATED) != 0 && this.limit < this.length) {
      if (!this.widen(open)) return false;
      r = scanLiteral(this.base, this.limit, open);
    }
    const base = this.base;
    const n = this.limit;
    const at = <i32>(r & 0xffffffff);
    if ((r & SCAN_UNTERMINATED) != 0) {
      this.fail(open, "unterminated string");
      return false;
    }
    if ((r & SCAN_CONTROL) != 0) {
      this.fail(at, "control character in string");
      return false;
    }
    const escaped = (r & SCAN_ESCAPED) != 0;
    this.strFrom = open + 1;
    this.strTo = at;
    this.strEscaped = escaped;
    this.pos = at + 1;
    if (!escaped) return true;
    const problem = escapeProblem(base, n, open + 1, at);
    if (problem < 0) return true;
    const where = <i32>(problem & 0xffffffff);
    const kind = problem & ~<i64>0xffffffff;
    if (kind == ESCAPE_INVALID) this.fail(where, "invalid escape");
    else if (kind == ESCAPE_BAD_U) this.fail(where, "invalid \\u escape");
    else this.fail(where, "lone surrogate in \\u escape");
    return false;
  }

  /** A number at `start`: parseJson's grammar checks, then the range check. */
  private number(start: i32): JsonToken {
    let r = scanNumber(this.base, this.limit, start);
    // Windowed: a number that runs to the window's end may go on past it.
    while (<i32>(r & 0xffffffff) >= this.limit && this.limit < this.length) {
      if (!this.widen(start)) return JsonToken.Error;
      r = scanNumber(this.base, this.limit, start);
    }
    const at = <i32>(r & 0xffffffff);
    if ((r & NUMBER_BAD) != 0) {
      const kind = r & ~(NUMBER_BAD | 0xffffffff);
      if (kind == NUMBER_LEADING_ZERO) return this.fail(at, "leading zero in number");
      if (kind == NUMBER_NO_DIGIT) return this.unexpected(at, "expected a digit after '-'");
      if (kind == NUMBER_NO_FRACTION) return this.unexpected(at, "expected a digit after '.'");
      return this.unexpected(at, "expected a digit in exponent");
    }
    this.pos = at;
    this.numEnd = at;
    this.numPlain = (r & NUMBER_PLAIN) != 0;
    if ((r & NUMBER_HUGE) != 0 || ((r & NUMBER_RANGE) != 0 && !this.finite(start, at))) {
      return this.fail(start, "number out of range");
    }
    this.afterValue();
    return (this.tok = JsonToken.Number);
  }

  /** The exact check for a literal near the top of the double range (allocates; rare). */
  private finite(start: i32, end: i32): bool {
    return isFinite(this.decimal(start, end).toF64());
  }

  private plainValue(): f64 {
    const v = plainInteger(this.base, this.limit, this.tokAt, this.numEnd);
    // "-0" is the double -0, as parseJson has it.
    return v == 0 && byteAt(this.base, this.limit, this.tokAt) == 0x2d ? -0.0 : <f64>v;
  }

  /** The current number as parseJson builds it. */
  private numberJson(): JsonValue {
    if (this.numPlain) {
      return JsonValue.fromNumber(this.plainValue(), true, plainInteger(this.base, this.limit, this.tokAt, this.numEnd));
    }
    const d = this.decimal(this.tokAt, this.numEnd);
    const exact = d.isI64();
    return JsonValue.fromNumber(d.toF64(), exact, exact ? d.toI64() : 0);
  }

  /** The exact value of the number literal [start, end) (allocates: the rare slow path). */
  private decimal(start: i32, end: i32): Decimal {
    if (this.source === null) return Decimal.fromLiteral(this.bytes(), start, end);
    // Windowed: the literal is in the window; Decimal reads a copy of it.
    const len = max(0, min(end, this.limit) - start);
    const copy = new Uint8Array(len);
    if (len > 0 && start >= this.winStart) memory.copy(copy.dataStart, this.base + <usize>start, <usize>len);
    return Decimal.fromLiteral(copy, 0, len);
  }

  /** A byte view of the input for Decimal (made on first use: the rare slow path). */
  private bytes(): Uint8Array {
    let view = this.view;
    if (view === null) {
      view = Uint8Array.wrap(this.buffer);
      this.view = view;
    }
    return view;
  }

  // ================================================================ internals: keys

  /**
   * Pushes the current key onto the key stack of the innermost object; false when that object
   * already has a key with the same decoded text.
   */
  private addKey(): bool {
    const level = this.open - 1;
    if (level < 0) return true; // cannot happen: keys are read inside an object
    const base = this.base;
    const n = this.limit;
    const from = this.strFrom;
    const to = this.strTo;
    const escaped = this.strEscaped;
    const hash = hashContent(base, n, from, to, escaped);
    const first = unchecked(this.keyBase[level]);
    const count = this.keyCount;
    const mask = unchecked(this.indexMask[level]);
    if (mask < 0) {
      const keys = changetype<usize>(this.keys);
      for (let k = first; k < count; k++) {
        const at = keys + (<usize>(k * KEY_INTS) << 2);
        if (load<u32>(at) != hash) continue;
        if (this.sameKey(load<i32>(at, 4), load<i32>(at, 8), load<i32>(at, 12) != 0)) return false;
      }
    } else if (this.findIndexed(level, mask, hash)) {
      return false;
    }
    this.pushKey(hash);
    const size = count + 1 - first;
    if (mask >= 0) {
      if (size * 2 > mask + 1) this.buildIndex(level, (mask + 1) * 2);
      else this.insertIndexed(level, mask, count, hash);
    } else if (size > SMALL_OBJECT) {
      this.buildIndex(level, SMALL_OBJECT * 4);
    }
    return true;
  }

  /** Whether a kept key [from, to) (input offsets, or key-arena offsets when windowed) is the current key. */
  private sameKey(from: i32, to: i32, escaped: bool): bool {
    if (this.source === null) {
      return sameContent(this.base, this.limit, from, to, escaped, this.strFrom, this.strTo, this.strEscaped);
    }
    return sameContentIn(this.keyBytes, this.keyBytesUsed, from, to, escaped, this.base, this.limit, this.strFrom, this.strTo, this.strEscaped);
  }

  /** Windowed: copies the current key's text to the key arena; its arena offset. */
  private keepKeyText(): i32 {
    const len = this.strTo - this.strFrom;
    const at = this.keyBytesUsed;
    if (at + len > this.keyBytesCapacity) {
      let capacity = max(this.keyBytesCapacity * 2, 256);
      while (capacity < at + len) capacity <<= 1;
      const arena = new ArrayBuffer(capacity);
      if (at > 0) memory.copy(changetype<usize>(arena), this.keyBytes, <usize>at);
      this.keyArena = arena;
      this.keyBytes = changetype<usize>(arena);
      this.keyBytesCapacity = capacity;
    }
    memory.copy(this.keyBytes + <usize>at, this.base + <usize>this.strFrom, <usize>len);
    this.keyBytesUsed = at + len;
    return at;
  }

  private pushKey(hash: u32): void {
    let keys = this.keys;
    const at = this.keyCount * KEY_INTS;
    if (at + KEY_INTS > keys.length) {
      const bigger = new StaticArray<i32>(keys.length * 2);
      memory.copy(changetype<usize>(bigger), changetype<usize>(keys), <usize>keys.length << 2);
      this.keys = keys = bigger;
    }
    let from = this.strFrom;
    let to = this.strTo;
    if (this.source !== null) {
      from = this.keepKeyText();
      to = this.keyBytesUsed;
    }
    unchecked((keys[at] = <i32>hash));
    unchecked((keys[at + 1] = from));
    unchecked((keys[at + 2] = to));
    unchecked((keys[at + 3] = this.strEscaped ? 1 : 0));
    this.keyCount++;
  }

  /** (Re)builds the key index of the object at `level` with `capacity` slots (a power of 2). */
  private buildIndex(level: i32, capacity: i32): void {
    let table = unchecked(this.indexes[level]);
    if (table.length < capacity) {
      table = new StaticArray<i32>(capacity);
      unchecked((this.indexes[level] = table));
    } else {
      memory.fill(changetype<usize>(table), 0, <usize>capacity << 2);
    }
    const mask = capacity - 1;
    unchecked((this.indexMask[level] = mask));
    const keys = this.keys;
    for (let k = unchecked(this.keyBase[level]); k < this.keyCount; k++) {
      this.insertIndexed(level, mask, k, <u32>unchecked(keys[k * KEY_INTS]));
    }
  }

  private insertIndexed(level: i32, mask: i32, k: i32, hash: u32): void {
    const table = unchecked(this.indexes[level]);
    if (mask >= table.length) return;
    let i = <i32>(hash & <u32>mask);
    for (let probes = 0; probes <= mask; probes++) {
      if (unchecked(table[i]) == 0) {
        unchecked((table[i] = k + 1));
        return;
      }
      i = (i + 1) & mask;
    }
  }

  /** Whether the object at `level` has an earlier key equal to the current one (by its index). */
  private findIndexed(level: i32, mask: i32, hash: u32): bool {
    const table = unchecked(this.indexes[level]);
    if (mask >= table.length) return false;
    const base = this.base;
    const n = this.limit;
    const keys = this.keys;
    let i = <i32>(hash & <u32>mask);
    for (let probes = 0; probes <= mask; probes++) {
      const entry = unchecked(table[i]);
      if (entry == 0) return false;
      const at = (entry - 1) * KEY_INTS;
      if (at + 3 < keys.length && <u32>unchecked(keys[at]) == hash) {
        const from = unchecked(keys[at + 1]);
        const to = unchecked(keys[at + 2]);
        const escaped = unchecked(keys[at + 3]) != 0;
        if (this.sameKey(from, to, escaped)) return true;
      }
      i = (i + 1) & mask;
    }
    return false;
  }
}

// A pull (streaming) JSON reader over UTF-8 bytes, either already in linear memory or read
// through a window from a ByteSource (`JsonStream.windowed`: the host's plugin configuration,
// which then never is whole in linear memory; see "Windows" in stream_input.ts).
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
// tree (`readValue`), and for the rare number that needs exact big-number arithmetic (see
// stream_values.ts). Bookkeeping grows amortised (see stream_keys.ts).
//
// This file is the tokenizer: the state machine between tokens and the reader's API. The rest
// of the reader is a chain of classes, each in its own file, that JsonStream extends:
// StreamInput (stream_input.ts: the bytes, the window over a ByteSource, the current token's
// place, the sticky error) → StreamKeys (stream_keys.ts: the open containers and the
// duplicate-key check) → StreamValues (stream_values.ts: the current token's text and value).
// The byte-level scanning is free functions: stream_scan.ts (whitespace, literals, numbers) and
// stream_string.ts (string literals: escapes, code points, hashing, comparing). JsonNames is in
// names.ts. Everything a caller uses is importable from here (and from index.ts).
import { MAX_DEPTH } from "./parser";
import { quoteForMessage } from "./quote";
import { ByteSource } from "./source";
import { DEFAULT_MARGIN, DEFAULT_WINDOW, JsonToken } from "./stream_input";
import { IN_ARRAY, IN_OBJECT, KEY_INTS } from "./stream_keys";
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
  QUOTE,
  scanNumber,
  WORD_FALSE,
  WORD_NULL,
  WORD_TRUE,
} from "./stream_scan";
import { ESCAPE_BAD_U, ESCAPE_INVALID, escapeProblem, scanLiteral, SCAN_CONTROL, SCAN_ESCAPED, SCAN_UNTERMINATED } from "./stream_string";
import { StreamValues } from "./stream_values";
import { findInvalidUtf8At } from "./utf8";
import { JsonValue } from "./value";

export { DEFAULT_MARGIN, DEFAULT_WINDOW, JsonToken } from "./stream_input";
export { hashBytes } from "./stream_string";
export { JsonNames } from "./names";

// Where the reader stands between tokens.
const S_VALUE: i32 = 0; // a value must come next
const S_FIRST_MEMBER: i32 = 1; // just after '{': '}' or a key
const S_FIRST_ITEM: i32 = 2; // just after '[': ']' or a value
const S_AFTER_VALUE: i32 = 3; // after a value in a container: ',' or the closing bracket
const S_DONE: i32 = 4; // the outermost value is complete
const S_ENDED: i32 = 5; // End was returned

export class JsonStream extends StreamValues {
  private pos: i32 = 0;
  private state: i32 = S_VALUE;
  /** true: the whole input is one document (trailing data is an error); false after valueAt. */
  private whole: bool = true;
  /** Keys are not checked for duplicates (a fork over a document already read in full). */
  private trusted: bool = false;

  /** A reader over the whole of `bytes` (one JSON document). Validates UTF-8 up front. */
  constructor(bytes: ArrayBuffer) {
    super(bytes);
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

  // ================================================================ position

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

  // ================================================================ internals: reading

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
}

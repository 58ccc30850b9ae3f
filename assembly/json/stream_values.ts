// What JsonStream (stream.ts) says about its current token: a key's or string's text (in place,
// hashed, compared, or decoded on request), a literal's value, a number's value. No allocation
// except where a method says so (stringValue, and the rare number that needs exact big-number
// arithmetic: more than 15 significant digits or a fraction/exponent, and only when asked for
// its value, or when it is 1e308 or larger and must be range-checked).
import { Decimal } from "./number";
import { JsonToken } from "./stream_input";
import { StreamKeys } from "./stream_keys";
import { byteAt, plainInteger, QUOTE } from "./stream_scan";
import { codePointAt, hashContent, sameContent, sameContentIn, scanLiteral, SCAN_CONTROL, SCAN_ESCAPED, SCAN_UNTERMINATED } from "./stream_string";
import { JsonValue } from "./value";

/** StreamKeys plus the accessors of the current token. */
export class StreamValues extends StreamKeys {
  // Windowed: a second window for sameStringAt's reads far from the main one.
  private far: ArrayBuffer | null = null;
  private farStart: i32 = 0;
  private farEnd: i32 = 0;
  /** A byte view of the whole input for Decimal (bytes(); made on first use). */
  private view: Uint8Array | null = null;

  // ================================================================ strings (Key, String)

  // @ts-ignore: decorator
  @inline private isText(): bool {
    return this.tok == JsonToken.String || this.tok == JsonToken.Key;
  }

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

  // ================================================================ internals: numbers

  /** The exact check for a literal near the top of the double range (allocates; rare). */
  protected finite(start: i32, end: i32): bool {
    return isFinite(this.decimal(start, end).toF64());
  }

  private plainValue(): f64 {
    const v = plainInteger(this.base, this.limit, this.tokAt, this.numEnd);
    // "-0" is the double -0, as parseJson has it.
    return v == 0 && byteAt(this.base, this.limit, this.tokAt) == 0x2d ? -0.0 : <f64>v;
  }

  /** The current number as parseJson builds it. */
  protected numberJson(): JsonValue {
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
}

// A strict RFC 8259 JSON parser that never traps.
//
// Plugin configuration comes from whoever wrote the Envoy config, and a trap here would kill
// the VM for every connection on the worker. So every byte read goes through `at()`, which
// answers -1 past the end instead of indexing out of bounds, and every failure is returned as
// a JsonParseResult carrying the byte offset and a short reason.

import { Decimal } from "./number";
import { findInvalidUtf8 } from "./utf8";
import { quoteForMessage } from "./quote";
import { JsonParseResult, JsonValue } from "./value";

/** Deepest container nesting accepted; deeper input is refused rather than recursed into. */
export const MAX_DEPTH: i32 = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

function isDigit(c: i32): bool {
  return c >= 0x30 && c <= 0x39;
}

function hexValue(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/** How an unexpected byte is named in a message, without echoing unprintable bytes raw. */
function describeByte(c: i32): string {
  if (c >= 0x21 && c <= 0x7e) return "character '" + String.fromCharCode(c) + "'";
  const hex = "0123456789abcdef";
  return "byte 0x" + hex.charAt((c >> 4) & 15) + hex.charAt(c & 15);
}

class Parser {
  pos: i32 = 0;
  error: string = "";
  errorAt: i32 = -1;

  constructor(private bytes: Uint8Array) {}

  /** The byte at `i`, or -1 outside the input. */
  at(i: i32): i32 {
    if (i < 0 || i >= this.bytes.length) return -1;
    return <i32>unchecked(this.bytes[i]);
  }

  /** Records the first failure; returns null so callers can `return this.fail(...)`. */
  fail(offset: i32, reason: string): JsonValue | null {
    if (this.errorAt < 0) {
      this.errorAt = offset;
      this.error = reason;
    }
    return null;
  }

  /** A failure at `offset` where `expected` was wanted; end of input gets its own reason. */
  unexpected(offset: i32, expected: string): JsonValue | null {
    return this.fail(offset, this.at(offset) < 0 ? "unexpected end of input" : expected);
  }

  skipWhitespace(): void {
    while (true) {
      const c = this.at(this.pos);
      // RFC 8259 whitespace is exactly these four bytes.
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) return;
      this.pos++;
    }
  }

  /** `depth` is the number of containers already open around this value. */
  parseValue(depth: i32): JsonValue | null {
    const c = this.at(this.pos);
    if (c == 0x7b || c == 0x5b) {
      if (depth >= MAX_DEPTH) {
        return this.fail(this.pos, "nesting deeper than " + MAX_DEPTH.toString());
      }
      return c == 0x7b ? this.parseObject(depth + 1) : this.parseArray(depth + 1);
    }
    if (c == QUOTE) {
      const s = this.parseString();
      return s === null ? null : JsonValue.fromString(s);
    }
    if (c == 0x74) return this.parseLiteral("true", JsonValue.fromBool(true));
    if (c == 0x66) return this.parseLiteral("false", JsonValue.fromBool(false));
    if (c == 0x6e) return this.parseLiteral("null", JsonValue.fromNull());
    if (c == 0x2d || isDigit(c)) return this.parseNumber();
    return this.unexpected(this.pos, "unexpected " + describeByte(c));
  }

  parseLiteral(word: string, value: JsonValue): JsonValue | null {
    const start = this.pos;
    for (let k = 0; k < word.length; k++) {
      const c = this.at(start + k);
      if (c != word.charCodeAt(k)) return this.unexpected(start + k, "invalid literal");
    }
    this.pos = start + word.length;
    return value;
  }

  parseObject(depth: i32): JsonValue | null {
    const obj = JsonValue.newObject();
    this.pos++; // '{'
    this.skipWhitespace();
    if (this.at(this.pos) == 0x7d) {
      this.pos++;
      return obj;
    }
    while (true) {
      // A '}' here means a trailing comma, which JSON does not allow.
      if (this.at(this.pos) != QUOTE) return this.unexpected(this.pos, "expected a string key");
      const keyAt = this.pos;
      const key = this.parseString();
      if (key === null) return null;
      if (obj.has(key)) return this.fail(keyAt, "duplicate key " + quoteForMessage(key));
      this.skipWhitespace();
      if (this.at(this.pos) != 0x3a) return this.unexpected(this.pos, "expected ':' after key");
      this.pos++;
      this.skipWhitespace();
      const value = this.parseValue(depth);
      if (value === null) return null;
      obj.addField(key, value);
      this.skipWhitespace();
      const c = this.at(this.pos);
      this.pos++;
      if (c == 0x7d) return obj;
      if (c != 0x2c) return this.unexpected(this.pos - 1, "expected ',' or '}'");
      this.skipWhitespace();
    }
  }

  parseArray(depth: i32): JsonValue | null {
    const items = new Array<JsonValue>();
    this.pos++; // '['
    this.skipWhitespace();
    if (this.at(this.pos) == 0x5d) {
      this.pos++;
      return JsonValue.fromArray(items);
    }
    while (true) {
      const value = this.parseValue(depth);
      if (value === null) return null;
      items.push(value);
      this.skipWhitespace();
      const c = this.at(this.pos);
      this.pos++;
      if (c == 0x5d) return JsonValue.fromArray(items);
      if (c != 0x2c) return this.unexpected(this.pos - 1, "expected ',' or ']'");
      this.skipWhitespace();
    }
  }

  /** Parses the string starting at the opening quote at `pos`; null on error. */
  parseString(): string | null {
    const open = this.pos;
    // First find the closing quote, rejecting raw control characters. Most strings have no
    // escapes and can then be decoded straight from the (already validated) UTF-8 bytes.
    let i = open + 1;
    let escaped = false;
    while (true) {
      const c = this.at(i);
      if (c < 0) {
        this.fail(open, "unterminated string");
        return null;
      }
      if (c == QUOTE) break;
      if (c < 0x20) {
        this.fail(i, "control character in string");
        return null;
      }
      if (c == BACKSLASH) {
        escaped = true;
        i += 2; // the escaped byte cannot end the string; it is checked while decoding
      } else {
        i++;
      }
    }
    this.pos = i + 1;
    if (!escaped) {
      return String.UTF8.decodeUnsafe(this.bytes.dataStart + <usize>(open + 1), <usize>(i - open - 1));
    }
    return this.decodeEscaped(open + 1, i);
  }

  /** Reads 4 hex digits at `i`; -1 when any is missing or not hex. */
  hex4(i: i32): i32 {
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const d = hexValue(this.at(i + k));
      if (d < 0) return -1;
      v = (v << 4) | d;
    }
    return v;
  }

  /** Decodes bytes [from, to) holding escapes into a string; null on a bad escape. */
  decodeEscaped(from: i32, to: i32): string | null {
    // Every UTF-16 unit written consumes at least one input byte, so this is large enough.
    const out = new Uint16Array(to - from);
    let n = 0;
    let i = from;
    while (i < to && n < out.length) {
      const c = this.at(i);
      let unit = -1;
      if (c == BACKSLASH) {
        const e = this.at(i + 1);
        if (e == QUOTE || e == BACKSLASH || e == 0x2f) unit = e;
        else if (e == 0x62) unit = 0x08; // b
        else if (e == 0x66) unit = 0x0c; // f
        else if (e == 0x6e) unit = 0x0a; // n
        else if (e == 0x72) unit = 0x0d; // r
        else if (e == 0x74) unit = 0x09; // t
        else if (e != 0x75) {
          this.fail(i, "invalid escape");
          return null;
        }
        if (unit >= 0) {
          unchecked((out[n++] = <u16>unit));
          i += 2;
          continue;
        }
        // \uXXXX. Surrogates must come as a high+low pair of escapes; a lone half is not a
        // character and would make an ill-formed string.
        const u = this.hex4(i + 2);
        if (u < 0) {
          this.fail(i, "invalid \\u escape");
          return null;
        }
        if (u >= 0xdc00 && u <= 0xdfff) {
          this.fail(i, "lone surrogate in \\u escape");
          return null;
        }
        if (u >= 0xd800 && u <= 0xdbff) {
          const low = this.at(i + 6) == BACKSLASH && this.at(i + 7) == 0x75 ? this.hex4(i + 8) : -1;
          if (low < 0xdc00 || low > 0xdfff || n + 1 >= out.length) {
            this.fail(i, "lone surrogate in \\u escape");
            return null;
          }
          unchecked((out[n++] = <u16>u));
          unchecked((out[n++] = <u16>low));
          i += 12;
          continue;
        }
        unchecked((out[n++] = <u16>u));
        i += 6;
        continue;
      }
      // Raw UTF-8; already validated, so the lead byte tells the length.
      if (c < 0x80) {
        unchecked((out[n++] = <u16>c));
        i++;
      } else if (c < 0xe0) {
        unchecked((out[n++] = <u16>(((c & 0x1f) << 6) | (this.at(i + 1) & 0x3f))));
        i += 2;
      } else if (c < 0xf0) {
        const cp = ((c & 0x0f) << 12) | ((this.at(i + 1) & 0x3f) << 6) | (this.at(i + 2) & 0x3f);
        unchecked((out[n++] = <u16>cp));
        i += 3;
      } else {
        const cp =
          (((c & 0x07) << 18) |
            ((this.at(i + 1) & 0x3f) << 12) |
            ((this.at(i + 2) & 0x3f) << 6) |
            (this.at(i + 3) & 0x3f)) -
          0x10000;
        if (n + 1 >= out.length) break; // unreachable for valid UTF-8; keeps the writes in bounds
        unchecked((out[n++] = <u16>(0xd800 + (cp >> 10))));
        unchecked((out[n++] = <u16>(0xdc00 + (cp & 0x3ff))));
        i += 4;
      }
    }
    return String.UTF16.decodeUnsafe(out.dataStart, <usize>n << 1);
  }

  parseNumber(): JsonValue | null {
    const start = this.pos;
    let i = start;
    const negative = this.at(i) == 0x2d;
    if (negative) i++;
    const intStart = i;
    if (this.at(i) == 0x30) {
      i++;
      if (isDigit(this.at(i))) return this.fail(i, "leading zero in number");
    } else if (isDigit(this.at(i))) {
      while (isDigit(this.at(i))) i++;
    } else {
      return this.unexpected(i, "expected a digit after '-'");
    }
    const intEnd = i;
    if (this.at(i) == 0x2e) {
      i++;
      if (!isDigit(this.at(i))) return this.unexpected(i, "expected a digit after '.'");
      while (isDigit(this.at(i))) i++;
    }
    const e = this.at(i);
    if (e == 0x65 || e == 0x45) {
      i++;
      const s = this.at(i);
      if (s == 0x2b || s == 0x2d) i++;
      if (!isDigit(this.at(i))) return this.unexpected(i, "expected a digit in exponent");
      while (isDigit(this.at(i))) i++;
    }
    this.pos = i;

    // Plain integers of up to 15 digits (ports, counts) are exact in both f64 and i64; skip
    // the general conversion for them.
    if (i == intEnd && intEnd - intStart <= 15) {
      let n: i64 = 0;
      for (let k = intStart; k < intEnd; k++) n = n * 10 + <i64>(this.at(k) - 0x30);
      if (negative) n = -n;
      return JsonValue.fromNumber(negative && n == 0 ? -0.0 : <f64>n, true, n);
    }
    // The grammar is checked above; Decimal only computes the value.
    const d = Decimal.fromLiteral(this.bytes, start, i);
    const value = d.toF64();
    if (!isFinite(value)) return this.fail(start, "number out of range");
    const exact = d.isI64();
    return JsonValue.fromNumber(value, exact, exact ? d.toI64() : 0);
  }
}

function failure(offset: i32, reason: string): JsonParseResult {
  return new JsonParseResult(null, "byte " + offset.toString() + ": " + reason, offset);
}

/** Parses UTF-8 JSON text (as Envoy hands over plugin configuration). Never traps. */
export function parseJson(bytes: ArrayBuffer): JsonParseResult {
  const data = Uint8Array.wrap(bytes);
  const bad = findInvalidUtf8(data);
  if (bad >= 0) return failure(bad, "invalid UTF-8");
  const parser = new Parser(data);
  parser.skipWhitespace();
  const value = parser.parseValue(0);
  if (value === null) {
    // Every null return records a reason first; the fallback only guards that invariant.
    if (parser.errorAt < 0) return failure(parser.pos, "invalid JSON");
    return failure(parser.errorAt, parser.error);
  }
  parser.skipWhitespace();
  if (parser.pos < data.length) return failure(parser.pos, "unexpected data after JSON value");
  return new JsonParseResult(value);
}

/** Parses a string's UTF-8 encoding; a convenience for tests and literals. */
export function parseJsonString(text: string): JsonParseResult {
  return parseJson(String.UTF8.encode(text));
}

// The byte-level scanner of JsonStream (stream.ts): free functions over (base, n, index) that
// find where a token ends and what is wrong with it (whitespace, the literal words, numbers), as
// parseJson checks them. String literals have their own file (stream_string.ts).
//
// Free functions rather than methods: a method would spill `this` to the GC's shadow stack (and
// zero a frame) around every field access, which costs more than the work itself; these take
// plain integers instead. Every read is bounds-checked (byteAt answers -1 outside [0, n)), so
// none of them can read outside the bytes they are given.

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;

/** The byte at `i` of [0, n), or -1 outside. */
// @ts-ignore: decorator
@inline export function byteAt(base: usize, n: i32, i: i32): i32 {
  return <u32>i < <u32>n ? <i32>load<u8>(base + <usize>i) : -1;
}

/** The first index >= i that is not JSON whitespace. */
export function skipSpace(base: usize, n: i32, i: i32): i32 {
  while (i < n) {
    const c = load<u8>(base + <usize>i);
    // RFC 8259 whitespace is exactly these four bytes.
    if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) break;
    i++;
  }
  return i;
}

export function isDigit(c: i32): bool {
  return c >= 0x30 && c <= 0x39;
}

/** How an unexpected byte is named in a message (as parseJson names it). */
export function describeByte(c: i32): string {
  if (c >= 0x21 && c <= 0x7e) return "character '" + String.fromCharCode(c) + "'";
  const hex = "0123456789abcdef";
  return "byte 0x" + hex.charAt((c >> 4) & 15) + hex.charAt(c & 15);
}

/** Matches `len` (<= 5) bytes of `word` (little-endian in a u64) at `start`; the first mismatch or -1. */
export function literalMismatch(base: usize, n: i32, start: i32, word: u64, len: i32): i32 {
  for (let k = 0; k < len; k++) {
    if (byteAt(base, n, start + k) != <i32>((word >> (<u64>k << 3)) & 0xff)) return start + k;
  }
  return -1;
}

export const WORD_TRUE: u64 = 0x65757274; // "true"
export const WORD_FALSE: u64 = 0x65736c6166; // "false"
export const WORD_NULL: u64 = 0x6c6c756e; // "null"

// Results of scanNumber: the end index in the low 32 bits, plus these flags; on a grammar
// error the flag NUMBER_BAD and the kind, with the error's index in the low bits.
export const NUMBER_PLAIN: i64 = 1 << 32; // an integer of at most 15 digits: exact without Decimal
export const NUMBER_RANGE: i64 = 1 << 33; // must be range-checked exactly (1e308 <= |value| < 1e310)
export const NUMBER_HUGE: i64 = 1 << 34; // certainly beyond the double range
export const NUMBER_BAD: i64 = 1 << 40;
export const NUMBER_LEADING_ZERO: i64 = 1 << 41;
export const NUMBER_NO_DIGIT: i64 = 2 << 41; // after '-'
export const NUMBER_NO_FRACTION: i64 = 3 << 41; // after '.'
export const NUMBER_NO_EXPONENT: i64 = 4 << 41;

/**
 * A number literal at `start`: parseJson's grammar checks, and where its value lies. The value
 * is in [10^(top-1), 10^top) with `top` from the first nonzero digit and the exponent: below
 * 10^308 it is certainly finite, from 10^310 on certainly not (doubles end near 1.8e308); only
 * literals in between need the exact conversion.
 */
export function scanNumber(base: usize, n: i32, start: i32): i64 {
  let i = start;
  if (byteAt(base, n, i) == 0x2d) i++;
  const intStart = i;
  if (byteAt(base, n, i) == 0x30) {
    i++;
    if (isDigit(byteAt(base, n, i))) return NUMBER_BAD | NUMBER_LEADING_ZERO | <i64>i;
  } else if (isDigit(byteAt(base, n, i))) {
    while (isDigit(byteAt(base, n, i))) i++;
  } else {
    return NUMBER_BAD | NUMBER_NO_DIGIT | <i64>i;
  }
  const intEnd = i;
  let fracEnd = i;
  if (byteAt(base, n, i) == 0x2e) {
    i++;
    if (!isDigit(byteAt(base, n, i))) return NUMBER_BAD | NUMBER_NO_FRACTION | <i64>i;
    while (isDigit(byteAt(base, n, i))) i++;
    fracEnd = i;
  }
  let exponent: i64 = 0;
  const e = byteAt(base, n, i);
  if (e == 0x65 || e == 0x45) {
    i++;
    const sign = byteAt(base, n, i);
    if (sign == 0x2b || sign == 0x2d) i++;
    if (!isDigit(byteAt(base, n, i))) return NUMBER_BAD | NUMBER_NO_EXPONENT | <i64>i;
    while (isDigit(byteAt(base, n, i))) {
      // Clamped like Decimal's: far beyond anything a double can hold.
      if (exponent < 100000) exponent = exponent * 10 + <i64>(byteAt(base, n, i) - 0x30);
      i++;
    }
    if (sign == 0x2d) exponent = -exponent;
  }
  if (i == intEnd && intEnd - intStart <= 15) return NUMBER_PLAIN | <i64>i;
  // Index of the first nonzero digit among the integer then the fraction digits.
  let first = -1;
  for (let k = intStart; k < intEnd && first < 0; k++) {
    if (byteAt(base, n, k) != 0x30) first = k - intStart;
  }
  for (let k = intEnd + 1; k < fracEnd && first < 0; k++) {
    if (byteAt(base, n, k) != 0x30) first = intEnd - intStart + (k - intEnd - 1);
  }
  if (first < 0) return <i64>i; // zero
  const top = <i64>(intEnd - intStart) - <i64>first + exponent;
  if (top <= 308) return <i64>i;
  return (top > 310 ? NUMBER_HUGE : NUMBER_RANGE) | <i64>i;
}

/** The value of a plain integer literal (at most 15 digits) at [start, end). */
export function plainInteger(base: usize, n: i32, start: i32, end: i32): i64 {
  let i = start;
  const negative = byteAt(base, n, i) == 0x2d;
  if (negative) i++;
  let v: i64 = 0;
  for (; i < end; i++) v = v * 10 + <i64>(byteAt(base, n, i) - 0x30);
  return negative ? -v : v;
}

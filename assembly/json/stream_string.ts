// String literals for JsonStream (stream.ts): free functions over (base, n, index) (see
// stream_scan.ts for why) that find a literal's end, check its escapes as parseJson does, decode
// its code points, hash its decoded text and compare two literals' decoded texts, all without
// decoding a literal into a string.
import { BACKSLASH, byteAt, QUOTE } from "./stream_scan";

// Results of scanLiteral: the closing quote's index in the low 32 bits, plus these flags.
export const SCAN_ESCAPED: i64 = 1 << 32;
export const SCAN_CONTROL: i64 = 1 << 33; // the low bits are the control character's index
export const SCAN_UNTERMINATED: i64 = 1 << 34;

/** Finds the end of the string literal opening at `open` (see the SCAN_ flags). */
export function scanLiteral(base: usize, n: i32, open: i32): i64 {
  let i = open + 1;
  let escaped: i64 = 0;
  while (i < n) {
    const c = <i32>load<u8>(base + <usize>i);
    if (c == QUOTE) return escaped | <i64>i;
    if (c < 0x20) return SCAN_CONTROL | <i64>i;
    if (c == BACKSLASH) {
      escaped = SCAN_ESCAPED;
      i += 2; // the escaped byte cannot end the string; it is checked with the escapes
    } else {
      i++;
    }
  }
  return SCAN_UNTERMINATED | <i64>open;
}

function hexValue(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/** 4 hex digits at `i`; -1 when any is missing or not hex. */
function hex4(base: usize, n: i32, i: i32): i32 {
  let v = 0;
  for (let k = 0; k < 4; k++) {
    const d = hexValue(byteAt(base, n, i + k));
    if (d < 0) return -1;
    v = (v << 4) | d;
  }
  return v;
}

// Results of escapeProblem: the escape's index in the low 32 bits, plus the kind.
export const ESCAPE_INVALID: i64 = 1 << 32;
export const ESCAPE_BAD_U: i64 = 2 << 32;
export const ESCAPE_SURROGATE: i64 = 3 << 32;

/** The first bad escape in string content [from, to) (parseJson's checks, in its order), or -1. */
export function escapeProblem(base: usize, n: i32, from: i32, to: i32): i64 {
  let i = from;
  while (i < to) {
    const c = byteAt(base, n, i);
    if (c != BACKSLASH) {
      // Raw UTF-8, already validated: the lead byte gives the length.
      i += c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
      continue;
    }
    const e = byteAt(base, n, i + 1);
    if (e == QUOTE || e == BACKSLASH || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74) {
      i += 2;
      continue;
    }
    if (e != 0x75) return ESCAPE_INVALID | <i64>i;
    const u = hex4(base, n, i + 2);
    if (u < 0) return ESCAPE_BAD_U | <i64>i;
    if (u >= 0xdc00 && u <= 0xdfff) return ESCAPE_SURROGATE | <i64>i;
    if (u >= 0xd800 && u <= 0xdbff) {
      // A high surrogate must be followed by a low one, as a second escape.
      const low = byteAt(base, n, i + 6) == BACKSLASH && byteAt(base, n, i + 7) == 0x75 ? hex4(base, n, i + 8) : -1;
      if (low < 0xdc00 || low > 0xdfff) return ESCAPE_SURROGATE | <i64>i;
      i += 12;
      continue;
    }
    i += 6;
  }
  return -1;
}

/**
 * The code point at `i` of validated string content (an escape, a surrogate-pair escape or
 * raw UTF-8): the code point in the low 32 bits, the index of the next one in the high 32.
 */
export function codePointAt(base: usize, n: i32, i: i32): i64 {
  const c = byteAt(base, n, i);
  let cp = c;
  let next = i + 1;
  if (c == BACKSLASH) {
    const e = byteAt(base, n, i + 1);
    next = i + 2;
    if (e == 0x62) cp = 0x08;
    else if (e == 0x66) cp = 0x0c;
    else if (e == 0x6e) cp = 0x0a;
    else if (e == 0x72) cp = 0x0d;
    else if (e == 0x74) cp = 0x09;
    else if (e != 0x75) cp = e; // '"', '\\', '/'
    else {
      cp = hex4(base, n, i + 2);
      next = i + 6;
      if (cp >= 0xd800 && cp <= 0xdbff) {
        const low = hex4(base, n, i + 8);
        if (low >= 0xdc00 && low <= 0xdfff) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          next = i + 12;
        }
      }
    }
  } else if (c >= 0xf0) {
    cp = ((c & 0x07) << 18) | ((byteAt(base, n, i + 1) & 0x3f) << 12) | ((byteAt(base, n, i + 2) & 0x3f) << 6);
    cp |= byteAt(base, n, i + 3) & 0x3f;
    next = i + 4;
  } else if (c >= 0xe0) {
    cp = ((c & 0x0f) << 12) | ((byteAt(base, n, i + 1) & 0x3f) << 6) | (byteAt(base, n, i + 2) & 0x3f);
    next = i + 3;
  } else if (c >= 0x80) {
    cp = ((c & 0x1f) << 6) | (byteAt(base, n, i + 1) & 0x3f);
    next = i + 2;
  }
  return (<i64>next << 32) | <i64>(<u32>cp);
}

// FNV-1a over bytes, finished with murmur3's mixer so every bit depends on every byte.
const FNV_OFFSET: u32 = 2166136261;
const FNV_PRIME: u32 = 16777619;

// @ts-ignore: decorator
@inline function fnvStep(h: u32, b: u32): u32 {
  return (h ^ b) * FNV_PRIME;
}

// @ts-ignore: decorator
@inline function fnvFinish(h: u32): u32 {
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

/**
 * Hash of `len` UTF-8 bytes at `ptr`. A string token's `stringHash()` equals hashBytes of its
 * decoded text's UTF-8, so callers can index texts by their bytes and look tokens up.
 */
export function hashBytes(ptr: usize, len: i32): u32 {
  let h = FNV_OFFSET;
  for (let i = 0; i < len; i++) h = fnvStep(h, <u32>load<u8>(ptr + <usize>i));
  return fnvFinish(h);
}

/** Hash of the decoded text of content [from, to): the hash of its UTF-8 bytes. */
export function hashContent(base: usize, n: i32, from: i32, to: i32, escaped: bool): u32 {
  if (!escaped) return hashBytes(base + <usize>from, to - from);
  let h = FNV_OFFSET;
  let i = from;
  while (i < to) {
    const r = codePointAt(base, n, i);
    const cp = <u32>r;
    i = <i32>(r >> 32);
    // The code point's UTF-8 bytes, as an unescaped spelling would have them.
    if (cp < 0x80) {
      h = fnvStep(h, cp);
    } else if (cp < 0x800) {
      h = fnvStep(h, 0xc0 | (cp >> 6));
      h = fnvStep(h, 0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      h = fnvStep(h, 0xe0 | (cp >> 12));
      h = fnvStep(h, 0x80 | ((cp >> 6) & 0x3f));
      h = fnvStep(h, 0x80 | (cp & 0x3f));
    } else {
      h = fnvStep(h, 0xf0 | (cp >> 18));
      h = fnvStep(h, 0x80 | ((cp >> 12) & 0x3f));
      h = fnvStep(h, 0x80 | ((cp >> 6) & 0x3f));
      h = fnvStep(h, 0x80 | (cp & 0x3f));
    }
  }
  return fnvFinish(h);
}

/** Whether two string contents of the input decode to the same text. */
export function sameContent(base: usize, n: i32, aFrom: i32, aTo: i32, aEsc: bool, bFrom: i32, bTo: i32, bEsc: bool): bool {
  return sameContentIn(base, n, aFrom, aTo, aEsc, base, n, bFrom, bTo, bEsc);
}

/** sameContent for two texts in different places (a kept key and the current token). */
export function sameContentIn(aBase: usize, aN: i32, aFrom: i32, aTo: i32, aEsc: bool, bBase: usize, bN: i32, bFrom: i32, bTo: i32, bEsc: bool): bool {
  if (!aEsc && !bEsc) {
    const len = aTo - aFrom;
    if (bTo - bFrom != len) return false;
    return memory.compare(aBase + <usize>aFrom, bBase + <usize>bFrom, <usize>len) == 0;
  }
  let i = aFrom;
  let k = bFrom;
  while (i < aTo && k < bTo) {
    const a = codePointAt(aBase, aN, i);
    const b = codePointAt(bBase, bN, k);
    if (<u32>a != <u32>b) return false;
    i = <i32>(a >> 32);
    k = <i32>(b >> 32);
  }
  return i >= aTo && k >= bTo;
}

// The value of a JSON number literal: the nearest double, and the exact integer if it is one.
//
// Why not the standard library's parseFloat: in AssemblyScript 0.27 it is badly wrong for some
// inputs (e.g. "-5.5188722593483196e+42" comes out near -1e38), so numbers are converted here,
// correctly rounded: an exact fast path for ordinary literals, and exact big-integer arithmetic
// for the rest. The integer check works on the decimal digits too, so "9007199254740993" is
// not mistaken for its nearest double.

import { BigNum } from "./bignum";

// Significant digits kept. A double's rounding boundaries have at most 767 significant
// digits, so with more than that kept, dropped digits only matter when the kept ones land
// exactly on a boundary, which `truncated` records.
const MAX_DIGITS = 800;
// Literal exponents are clamped while read; far beyond anything a double can hold.
const EXPONENT_CLAMP: i64 = 100000;

// 10^0..10^22 are exact doubles; a product or quotient of two exact doubles is correctly rounded.
const EXACT_POW10: StaticArray<f64> = [
  1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
  1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

function isDigit(c: u8): bool {
  return c >= 0x30 && c <= 0x39;
}

/** A decimal number as digits × 10^exponent. */
export class Decimal {
  negative: bool = false;
  /** Significant digits (0-9), without leading or trailing zeros; empty for zero. */
  digits: Array<u8> = new Array<u8>();
  exponent: i32 = 0;
  /** Nonzero digits past MAX_DIGITS were dropped. */
  truncated: bool = false;

  /**
   * Reads a literal that already matched the JSON number grammar (the parser checked it), so
   * this only has to stay in bounds, not validate.
   */
  static fromLiteral(bytes: Uint8Array, start: i32, end: i32): Decimal {
    const d = new Decimal();
    let i = start;
    if (i < end && bytes[i] == 0x2d) {
      d.negative = true;
      i++;
    }
    // place = -(digits read so far): the k-th digit is worth 10^(intDigits - k), i.e.
    // 10^(intDigits + place) right after reading it.
    let place: i64 = 0;
    let pointSeen = false;
    let intDigits: i64 = 0;
    let lastKeptPlace: i64 = 0;
    let pendingZeros = 0; // zeros seen after the last nonzero digit
    for (; i < end; i++) {
      const c = bytes[i];
      if (c == 0x2e) {
        pointSeen = true;
        continue;
      }
      if (!isDigit(c)) break;
      if (!pointSeen) intDigits++;
      place--;
      if (c == 0x30) {
        if (d.digits.length > 0) pendingZeros++;
        continue;
      }
      // A nonzero digit: the zeros before it are significant after all.
      if (d.digits.length + pendingZeros + 1 > MAX_DIGITS) {
        d.truncated = true;
        continue;
      }
      for (; pendingZeros > 0; pendingZeros--) d.digits.push(0);
      d.digits.push(c - 0x30);
      lastKeptPlace = place;
    }
    let exp: i64 = 0;
    if (i < end && (bytes[i] == 0x65 || bytes[i] == 0x45)) {
      i++;
      let sign: i64 = 1;
      if (i < end && (bytes[i] == 0x2b || bytes[i] == 0x2d)) {
        if (bytes[i] == 0x2d) sign = -1;
        i++;
      }
      for (; i < end && isDigit(bytes[i]); i++) {
        if (exp < EXPONENT_CLAMP) exp = exp * 10 + <i64>(bytes[i] - 0x30);
      }
      exp *= sign;
    }
    if (d.digits.length > 0) {
      // digits × 10^e, where e is the power of ten of the last kept digit.
      const e = exp + intDigits + lastKeptPlace;
      d.exponent = <i32>max(min(e, 4 * EXPONENT_CLAMP), -4 * EXPONENT_CLAMP);
    }
    return d;
  }

  /** The nearest double (ties to even); +-Infinity when beyond the double range. */
  toF64(): f64 {
    const n = this.digits.length;
    const sign: f64 = this.negative ? -1 : 1;
    if (n == 0) return sign * 0;
    // The value is in [10^(top-1), 10^top).
    const top = n + this.exponent;
    if (top > 310) return sign * Infinity;
    if (top < -324) return sign * 0; // below half the smallest subnormal
    const e = this.exponent;
    if (n <= 15 && e >= -22 && e <= 22 && !this.truncated) {
      let m: u64 = 0;
      for (let i = 0; i < n; i++) m = m * 10 + <u64>this.digits[i];
      const x = <f64>m; // exact: below 2^53
      return sign * (e >= 0 ? x * EXACT_POW10[e] : x / EXACT_POW10[-e]);
    }
    return sign * this.slowF64();
  }

  /**
   * Exact rounding of digits × 10^exponent: the value is A / B with big integers A and B, so
   * find its binary exponent t, take the top 53 bits of the quotient and round on the remainder.
   */
  private slowF64(): f64 {
    const e = this.exponent;
    const a = BigNum.fromDigits(this.digits);
    const b = BigNum.one();
    if (e > 0) a.mulPow10(e);
    else b.mulPow10(-e);
    // 2^t <= A/B < 2^(t+1)
    let t = a.bitLength() - b.bitLength();
    if (scaledCompare(a, b, t) < 0) t--;
    if (t > 1023) return Infinity;
    // Quotient bits to produce: 53 for normal numbers; subnormals have a fixed 2^-1074 unit.
    const shift = t >= -1022 ? 52 - t : 1074;
    const rem = a.clone();
    const div = b.clone();
    if (shift >= 0) rem.shiftLeft(shift);
    else div.shiftLeft(-shift);
    // Binary long division: the quotient is below 2^53.
    let q: u64 = 0;
    const step = div.clone();
    step.shiftLeft(53);
    for (let bit = 53; bit >= 0; bit--) {
      if (rem.compare(step) >= 0) {
        rem.subtract(step);
        q |= <u64>1 << bit;
      }
      step.shiftRight1();
    }
    rem.shiftLeft(1);
    const half = rem.compare(div);
    if (half > 0 || (half == 0 && (this.truncated || (q & 1) != 0))) q++;
    if (t < -1022) {
      // Subnormal: the bits are the quotient itself; rounding up into 2^52 yields the
      // smallest normal, which is the same bit pattern.
      return reinterpret<f64>(q);
    }
    if (q == <u64>1 << 53) {
      q >>= 1;
      t++;
      if (t > 1023) return Infinity;
    }
    return reinterpret<f64>((<u64>(t + 1023) << 52) | (q & ((<u64>1 << 52) - 1)));
  }

  /** Whether the value is exactly an integer representable as i64 (see `toI64`). */
  isI64(): bool {
    if (this.truncated) return false; // more than MAX_DIGITS digits: not an i64
    if (this.digits.length == 0) return true;
    if (this.exponent < 0) return false;
    return this.magnitude() <= this.limit();
  }

  /** The exact integer when `isI64()`, else 0. */
  toI64(): i64 {
    if (!this.isI64()) return 0;
    const m = this.magnitude();
    return this.negative ? <i64>(0 - m) : <i64>m;
  }

  /** 2^63 for negatives (i64.MIN_VALUE), 2^63-1 otherwise. */
  private limit(): u64 {
    return this.negative ? <u64>1 << 63 : (<u64>1 << 63) - 1;
  }

  /** digits × 10^exponent as u64, or u64.MAX_VALUE once it passes 2^63 (not an i64 then). */
  private magnitude(): u64 {
    const big = u64.MAX_VALUE;
    const cap: u64 = <u64>1 << 63;
    if (this.digits.length + this.exponent > 20) return big;
    let m: u64 = 0;
    for (let i = 0; i < this.digits.length; i++) {
      const d = <u64>this.digits[i];
      if (m > (cap - d) / 10) return big;
      m = m * 10 + d;
    }
    for (let i = 0; i < this.exponent; i++) {
      if (m > cap / 10) return big;
      m *= 10;
    }
    return m;
  }
}

/** Compares a with b * 2^t, shifting whichever side keeps the arithmetic in integers. */
function scaledCompare(a: BigNum, b: BigNum, t: i32): i32 {
  if (t >= 0) {
    const bs = b.clone();
    bs.shiftLeft(t);
    return a.compare(bs);
  }
  const as = a.clone();
  as.shiftLeft(-t);
  return as.compare(b);
}

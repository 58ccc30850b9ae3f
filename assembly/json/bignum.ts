// Just enough unsigned big-integer arithmetic to round a long or extreme decimal number to
// the nearest double exactly (see number.ts). Only the rare slow path uses it.

/** Unsigned integer in little-endian base-2^32 limbs, without high zero limbs (zero = none). */
export class BigNum {
  limbs: Array<u32> = new Array<u32>();

  static fromDigits(digits: Array<u8>): BigNum {
    const n = new BigNum();
    for (let i = 0; i < digits.length; i++) n.mulAdd(10, <u32>digits[i]);
    return n;
  }

  static one(): BigNum {
    const n = new BigNum();
    n.limbs.push(1);
    return n;
  }

  clone(): BigNum {
    const n = new BigNum();
    n.limbs = this.limbs.slice(0);
    return n;
  }

  /** this = this * m + add. */
  mulAdd(m: u32, add: u32): void {
    let carry = <u64>add;
    for (let i = 0; i < this.limbs.length; i++) {
      const v = <u64>this.limbs[i] * <u64>m + carry;
      this.limbs[i] = <u32>v;
      carry = v >> 32;
    }
    if (carry != 0) this.limbs.push(<u32>carry);
  }

  /** this = this * 10^n. */
  mulPow10(n: i32): void {
    for (; n >= 9; n -= 9) this.mulAdd(1000000000, 0);
    let m: u32 = 1;
    for (; n > 0; n--) m *= 10;
    this.mulAdd(m, 0);
  }

  /** this = this * 2^bits. */
  shiftLeft(bits: i32): void {
    if (this.limbs.length == 0 || bits <= 0) return;
    const words = bits >> 5;
    const rest = <u32>(bits & 31);
    const out = new Array<u32>(this.limbs.length + words + 1); // zero-filled
    for (let i = 0; i < this.limbs.length; i++) {
      const v = <u64>this.limbs[i] << rest;
      out[i + words] |= <u32>v;
      out[i + words + 1] = <u32>(v >> 32);
    }
    if (out[out.length - 1] == 0) out.pop();
    this.limbs = out;
  }

  /** this = floor(this / 2). */
  shiftRight1(): void {
    const n = this.limbs.length;
    for (let i = 0; i < n; i++) {
      const high: u32 = i + 1 < n ? this.limbs[i + 1] << 31 : 0;
      this.limbs[i] = (this.limbs[i] >> 1) | high;
    }
    if (n > 0 && this.limbs[n - 1] == 0) this.limbs.pop();
  }

  bitLength(): i32 {
    const n = this.limbs.length;
    if (n == 0) return 0;
    return (n - 1) * 32 + (32 - <i32>clz(this.limbs[n - 1]));
  }

  /** -1, 0 or 1 as this is below, equal to or above `other`. */
  compare(other: BigNum): i32 {
    const a = this.limbs;
    const b = other.limbs;
    if (a.length != b.length) return a.length < b.length ? -1 : 1;
    for (let i = a.length - 1; i >= 0; i--) {
      if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    }
    return 0;
  }

  /** this = this - other; requires this >= other. */
  subtract(other: BigNum): void {
    let borrow: i64 = 0;
    for (let i = 0; i < this.limbs.length; i++) {
      const sub = i < other.limbs.length ? <i64>other.limbs[i] : 0;
      let v = <i64>this.limbs[i] - sub - borrow;
      borrow = v < 0 ? 1 : 0;
      if (v < 0) v += <i64>1 << 32;
      this.limbs[i] = <u32>v;
    }
    while (this.limbs.length > 0 && this.limbs[this.limbs.length - 1] == 0) this.limbs.pop();
  }
}

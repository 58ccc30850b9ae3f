// Strict UTF-8 validation (RFC 3629, table 3-7 of the Unicode standard).
//
// Done once over the whole input before parsing, so the parser can treat every byte >= 0x80
// as part of a well-formed sequence. Strict means overlong forms, encoded surrogates
// (ED A0..BF) and code points above U+10FFFF are rejected, as RFC 8259 requires.

/** Offset of the first byte that starts an invalid sequence, or -1 when `bytes` is valid. */
export function findInvalidUtf8(bytes: Uint8Array): i32 {
  return findInvalidUtf8At(bytes.dataStart, bytes.length);
}

/** The same over `length` bytes at `ptr` in linear memory (the streaming reader's input). */
export function findInvalidUtf8At(ptr: usize, length: i32): i32 {
  const n = length;
  let i = 0;
  while (i < n) {
    const b0 = <u32>load<u8>(ptr + <usize>i);
    if (b0 < 0x80) {
      i++;
      continue;
    }
    // Sequence length and the allowed range of the second byte, which is where overlongs,
    // surrogates and >U+10FFFF are excluded; later bytes are always 80..BF.
    let len = 0;
    let lo: u32 = 0x80;
    let hi: u32 = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      len = 2;
    } else if (b0 == 0xe0) {
      len = 3;
      lo = 0xa0;
    } else if (b0 == 0xed) {
      len = 3;
      hi = 0x9f;
    } else if (b0 >= 0xe1 && b0 <= 0xef) {
      len = 3;
    } else if (b0 == 0xf0) {
      len = 4;
      lo = 0x90;
    } else if (b0 >= 0xf1 && b0 <= 0xf3) {
      len = 4;
    } else if (b0 == 0xf4) {
      len = 4;
      hi = 0x8f;
    } else {
      return i; // 80..C1 or F5..FF can never start a sequence
    }
    if (i + len > n) return i; // truncated sequence
    const b1 = <u32>load<u8>(ptr + <usize>(i + 1));
    if (b1 < lo || b1 > hi) return i;
    for (let k = 2; k < len; k++) {
      const b = <u32>load<u8>(ptr + <usize>(i + k));
      if (b < 0x80 || b > 0xbf) return i;
    }
    i += len;
  }
  return -1;
}

// A reusable UTF-8 text buffer for values written to the host on the hot path (`IP:PORT`,
// `host:port`, a port number). A connection formats into the root's ByteText and hands its
// bytes to the host, which copies them: nothing is allocated per connection once the buffer
// has reached the longest text seen (it starts at 64 bytes, enough for any socket address).

export class ByteText {
  /** Raw heap block (not GC-managed, so the pointer stays valid across collections). */
  private data: usize;
  private capacity: i32;
  private size: i32 = 0;

  constructor(capacity: i32 = 64) {
    this.capacity = capacity < 16 ? 16 : capacity;
    this.data = heap.alloc(<usize>this.capacity);
  }

  /** Address of the first byte. Valid until the next append that outgrows the buffer. */
  get ptr(): usize {
    return this.data;
  }

  get length(): i32 {
    return this.size;
  }

  clear(): ByteText {
    this.size = 0;
    return this;
  }

  /** Room for `extra` more bytes; grows (doubling) only past the largest text seen so far. */
  private reserve(extra: i32): usize {
    const needed = this.size + extra;
    if (needed > this.capacity) {
      let capacity = this.capacity << 1;
      while (capacity < needed) capacity <<= 1;
      this.data = heap.realloc(this.data, <usize>capacity);
      this.capacity = capacity;
    }
    return this.data + <usize>this.size;
  }

  byte(b: i32): ByteText {
    store<u8>(this.reserve(1), <u8>b);
    this.size++;
    return this;
  }

  bytes(ptr: usize, len: i32): ByteText {
    if (len <= 0) return this;
    memory.copy(this.reserve(len), ptr, <usize>len);
    this.size += len;
    return this;
  }

  buffer(data: ArrayBuffer): ByteText {
    return this.bytes(changetype<usize>(data), data.byteLength);
  }

  /** `text` as UTF-8 (lone surrogates become U+FFFD, as String.UTF8.encode writes them). */
  string(text: string): ByteText {
    const n = text.length;
    for (let i = 0; i < n; i++) {
      let c = <i32>text.charCodeAt(i);
      if (c < 0x80) {
        this.byte(c);
        continue;
      }
      if (c < 0x800) {
        this.byte(0xc0 | (c >> 6)).byte(0x80 | (c & 0x3f));
        continue;
      }
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
        const low = <i32>text.charCodeAt(i + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          const cp = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
          this.byte(0xf0 | (cp >> 18)).byte(0x80 | ((cp >> 12) & 0x3f));
          this.byte(0x80 | ((cp >> 6) & 0x3f)).byte(0x80 | (cp & 0x3f));
          i++;
          continue;
        }
      }
      if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
      this.byte(0xe0 | (c >> 12)).byte(0x80 | ((c >> 6) & 0x3f)).byte(0x80 | (c & 0x3f));
    }
    return this;
  }

  /** Decimal digits of `value` (no sign: ports, counts). */
  decimal(value: u32): ByteText {
    let digits = 1;
    for (let v = value; v >= 10; v /= 10) digits++;
    const at = this.reserve(digits);
    let v = value;
    for (let k = digits - 1; k >= 0; k--) {
      store<u8>(at + <usize>k, <u8>(0x30 + v % 10));
      v /= 10;
    }
    this.size += digits;
    return this;
  }

  /** Lowercase hex digits of `value` without leading zeros ("0" for 0). */
  hex(value: u32): ByteText {
    let digits = 1;
    for (let v = value; v >= 16; v >>= 4) digits++;
    const at = this.reserve(digits);
    let v = value;
    for (let k = digits - 1; k >= 0; k--) {
      const d = v & 15;
      store<u8>(at + <usize>k, <u8>(d < 10 ? 0x30 + d : 0x57 + d));
      v >>= 4;
    }
    this.size += digits;
    return this;
  }

  /** Whether the text is exactly these bytes. */
  equalsBytes(ptr: usize, len: i32): bool {
    return len == this.size && memory.compare(this.data, ptr, <usize>len) == 0;
  }

  /** Decoded (allocates): for tests and log lines, never the hot path. */
  toString(): string {
    return String.UTF8.decodeUnsafe(this.data, <usize>this.size);
  }
}

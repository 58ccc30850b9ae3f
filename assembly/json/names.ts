// JsonNames: a fixed list of texts (an object's known keys, an enum's values) looked up by the
// current key or string of a JsonStream without allocating.
import { JsonStream } from "./stream";

/**
 * A fixed list of texts (an object's known keys, an enum's values) matched against the current
 * key or string of a JsonStream by their UTF-8 bytes: a length compare, then memcmp. Build it
 * once (it encodes the texts); `find` allocates nothing.
 */
export class JsonNames {
  private data: ArrayBuffer;
  /** Name k's bytes are data[starts[k] .. starts[k + 1]). */
  private starts: StaticArray<i32>;

  constructor(readonly names: string[]) {
    const n = names.length;
    const starts = new StaticArray<i32>(n + 1);
    let total = 0;
    for (let k = 0; k < n; k++) {
      unchecked((starts[k] = total));
      total += String.UTF8.byteLength(unchecked(names[k]));
    }
    unchecked((starts[n] = total));
    const data = new ArrayBuffer(total);
    for (let k = 0; k < n; k++) {
      const bytes = String.UTF8.encode(unchecked(names[k]));
      memory.copy(changetype<usize>(data) + <usize>unchecked(starts[k]), changetype<usize>(bytes), <usize>bytes.byteLength);
    }
    this.starts = starts;
    this.data = data;
  }

  get length(): i32 {
    return this.names.length;
  }

  /** The index of the current key or string of `s` among the names, or -1. */
  find(s: JsonStream): i32 {
    const n = this.names.length;
    const len = s.stringByteLength(); // 0 for a token that is not a key or string
    if (s.stringEscaped() || (len == 0 && !s.isString())) {
      for (let k = 0; k < n; k++) if (s.stringEquals(unchecked(this.names[k]))) return k;
      return -1;
    }
    const ptr = s.stringPtr();
    const base = changetype<usize>(this.data);
    const starts = changetype<usize>(this.starts);
    const first = len > 0 ? <u32>load<u8>(ptr) : 0;
    let from = load<i32>(starts);
    for (let k = 0; k < n; k++) {
      const to = load<i32>(starts + (<usize>(k + 1) << 2));
      if (to - from == len && (len == 0 || <u32>load<u8>(base + <usize>from) == first)) {
        let i = 1;
        while (i < len && load<u8>(base + <usize>(from + i)) == load<u8>(ptr + <usize>i)) i++;
        if (i >= len) return k;
      }
      from = to;
    }
    return -1;
  }
}

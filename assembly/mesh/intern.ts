// Interned strings: each distinct text stored once, named by a small integer.
//
// Identities, networks and localities are shared by many pods; a per-pod column then holds a
// 2- or 4-byte id instead of a string. Id 0 is always "". The UTF-8 form is encoded once here
// because filters hand such values straight to the host.
import { mix64, OBJECT_OVERHEAD } from "./table";

/**
 * Hash of `len` bytes at `ptr`, 8 bytes a step (the byte index's own: a full load looks up two
 * or three texts of ~20-50 bytes per pod, where a byte-at-a-time hash was the largest cost).
 */
function textHash(ptr: usize, len: i32): u32 {
  let h: u64 = 0x9e3779b97f4a7c15 ^ <u64>len;
  let i = 0;
  for (; i + 8 <= len; i += 8) h = (h ^ load<u64>(ptr + <usize>i)) * 0xff51afd7ed558ccd;
  let tail: u64 = 0;
  for (let k = 0; i < len; i++, k += 8) tail |= <u64>load<u8>(ptr + <usize>i) << <u64>k;
  return <u32>mix64(h ^ tail);
}

const EMPTY_BYTES = new ArrayBuffer(0);

export class StringTable {
  private ids: Map<string, i32> = new Map<string, i32>();
  private texts: Array<string> = new Array<string>();
  private bytes: Array<ArrayBuffer> = new Array<ArrayBuffer>();
  /**
   * Hash of the UTF-8 bytes → id, [hash, id + 1] per slot, built on the first findUtf8 (the
   * binary update path looks texts up by their bytes without decoding them); null until then,
   * so a model built from JSON pays nothing for it.
   */
  private byteSlots: StaticArray<u32> | null = null;
  private byteMask: i32 = 0;

  constructor() {
    this.intern("");
  }

  get size(): i32 {
    return this.texts.length;
  }

  /** The id of `text`, adding it when new. */
  intern(text: string): i32 {
    if (this.ids.has(text)) return this.ids.get(text);
    const id = this.texts.length;
    this.ids.set(text, id);
    this.texts.push(text);
    this.bytes.push(text.length == 0 ? EMPTY_BYTES : String.UTF8.encode(text));
    if (this.byteSlots !== null) this.indexBytes(id);
    return id;
  }

  /** The id of the text whose UTF-8 is the `len` bytes at `ptr`, or -1. No allocation once indexed. */
  findUtf8(ptr: usize, len: i32): i32 {
    let slots = this.byteSlots;
    if (slots === null) {
      let capacity = 16;
      while (capacity < (this.texts.length + 1) * 2) capacity <<= 1;
      this.byteSlots = new StaticArray<u32>(capacity << 1);
      this.byteMask = capacity - 1;
      for (let id = 0; id < this.texts.length; id++) this.placeBytes(id);
      slots = this.byteSlots!;
    }
    const hash = textHash(ptr, len);
    const mask = this.byteMask;
    let i = <i32>hash & mask;
    for (let probes = 0; probes <= mask; probes++) {
      const entry = unchecked(slots[(i << 1) + 1]);
      if (entry == 0) return -1;
      if (unchecked(slots[i << 1]) == hash) {
        const id = <i32>entry - 1;
        if (id < this.bytes.length) {
          const bytes = unchecked(this.bytes[id]);
          if (bytes.byteLength == len && memory.compare(changetype<usize>(bytes), ptr, <usize>len) == 0) return id;
        }
      }
      i = (i + 1) & mask;
    }
    return -1;
  }

  /** Interns the text of `len` UTF-8 bytes at `ptr` (valid UTF-8: checked by the caller). */
  internUtf8(ptr: usize, len: i32): i32 {
    const known = this.findUtf8(ptr, len);
    if (known >= 0) return known;
    return this.intern(String.UTF8.decodeUnsafe(ptr, <usize>len));
  }

  private indexBytes(id: i32): void {
    let slots = this.byteSlots;
    if (slots === null) return;
    if ((this.texts.length + 1) * 2 > this.byteMask + 1) {
      // Grow: rebuild for every id so far (this one included).
      const capacity = (this.byteMask + 1) << 1;
      this.byteSlots = new StaticArray<u32>(capacity << 1);
      this.byteMask = capacity - 1;
      for (let k = 0; k < this.texts.length; k++) this.placeBytes(k);
      return;
    }
    this.placeBytes(id);
  }

  private placeBytes(id: i32): void {
    const slots = this.byteSlots;
    if (slots === null || id >= this.bytes.length) return;
    const bytes = unchecked(this.bytes[id]);
    const hash = textHash(changetype<usize>(bytes), bytes.byteLength);
    const mask = this.byteMask;
    let i = <i32>hash & mask;
    while (unchecked(slots[(i << 1) + 1]) != 0) i = (i + 1) & mask;
    unchecked((slots[i << 1] = hash));
    unchecked((slots[(i << 1) + 1] = <u32>id + 1));
  }

  /** The id of `text`, or -1 when it was never interned. */
  find(text: string): i32 {
    return this.ids.has(text) ? this.ids.get(text) : -1;
  }

  /** The text of `id`; "" for an unknown id. */
  text(id: i32): string {
    return id >= 0 && id < this.texts.length ? unchecked(this.texts[id]) : "";
  }

  /** The UTF-8 bytes of `id` (shared: do not modify); empty for an unknown id. */
  utf8(id: i32): ArrayBuffer {
    return id >= 0 && id < this.bytes.length ? unchecked(this.bytes[id]) : EMPTY_BYTES;
  }

  /** Approximate bytes held: both copies of each text plus the index (about 3 words a key). */
  byteSize(): i64 {
    let total: i64 = OBJECT_OVERHEAD * 6;
    for (let i = 0; i < this.texts.length; i++) {
      total += <i64>unchecked(this.texts[i]).length * 2 + OBJECT_OVERHEAD;
      total += <i64>unchecked(this.bytes[i]).byteLength + OBJECT_OVERHEAD;
      total += 4 + 4 + 24; // array slots + map entry and bucket
    }
    return total;
  }
}

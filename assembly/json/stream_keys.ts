// The open containers of JsonStream (stream.ts) and the duplicate-key check of its objects.
//
// Duplicate keys: every object is checked, as parseJson does, so the reader is a drop-in
// validator. The keys of the objects currently open are kept as byte ranges of the input
// (hash, start, end, escaped) on one stack; a key is compared with the earlier keys of its own
// object by hash first, then by bytes (or by decoded code points when either has escapes, so
// "a" and "\u0061" are duplicates). Objects with up to SMALL_OBJECT keys are scanned
// linearly; a larger one gets a hash index (reused per depth), so a hostile object with a
// million keys costs linear time, not quadratic. A windowed reader copies the keys' texts into
// a small arena, since they may leave the window before their object closes.
//
// Bookkeeping grows amortised: the key stack (16 bytes per key of the objects currently open)
// and, for objects with more than SMALL_OBJECT keys, a hash index of their keys. The container
// stack is bounded by MAX_DEPTH (JsonStream refuses deeper nesting before it gets here).
import { MAX_DEPTH } from "./parser";
import { StreamInput } from "./stream_input";
import { hashContent, sameContent, sameContentIn } from "./stream_string";

// What an open container is (StreamKeys.kinds).
export const IN_OBJECT: u8 = 1;
export const IN_ARRAY: u8 = 2;

/** Objects with at most this many keys check duplicates by a linear scan. */
const SMALL_OBJECT: i32 = 16;
/** Ints per key on the key stack: hash, content start, content end, escaped (0/1). */
export const KEY_INTS: i32 = 4;

const EMPTY_INDEX = new StaticArray<i32>(0);

/** StreamInput plus the containers open around the reader and the keys of the open objects. */
export class StreamKeys extends StreamInput {
  // Keys of the open objects are copied here (their texts may leave the window).
  /** Windowed: the open objects' key texts (collected with the reader, never leaked). */
  private keyArena: ArrayBuffer = new ArrayBuffer(0);
  private keyBytes: usize = 0; // changetype<usize>(keyArena)
  protected keyBytesUsed: i32 = 0;
  private keyBytesCapacity: i32 = 0;

  // Open containers: kind per level, and where each object's keys start on the key stack.
  protected open: i32 = 0;
  protected kinds: StaticArray<u8> = new StaticArray<u8>(MAX_DEPTH + 1);
  protected keyBase: StaticArray<i32> = new StaticArray<i32>(MAX_DEPTH + 1);
  // Keys of the open objects, KEY_INTS ints each.
  protected keys: StaticArray<i32> = new StaticArray<i32>(64 * KEY_INTS);
  protected keyCount: i32 = 0;
  // Hash index of a large object's keys, one per depth (entries: key-stack index + 1).
  private indexes: Array<StaticArray<i32>> = new Array<StaticArray<i32>>(MAX_DEPTH + 1);
  protected indexMask: StaticArray<i32> = new StaticArray<i32>(MAX_DEPTH + 1);

  constructor(bytes: ArrayBuffer) {
    super(bytes);
    for (let d = 0; d <= MAX_DEPTH; d++) {
      this.indexes[d] = EMPTY_INDEX;
      unchecked((this.indexMask[d] = -1));
    }
  }

  /** Containers currently open around the reader (0 at the top level). */
  depth(): i32 {
    return this.open;
  }

  /**
   * Pushes the current key onto the key stack of the innermost object; false when that object
   * already has a key with the same decoded text.
   */
  protected addKey(): bool {
    const level = this.open - 1;
    if (level < 0) return true; // cannot happen: keys are read inside an object
    const base = this.base;
    const n = this.limit;
    const from = this.strFrom;
    const to = this.strTo;
    const escaped = this.strEscaped;
    const hash = hashContent(base, n, from, to, escaped);
    const first = unchecked(this.keyBase[level]);
    const count = this.keyCount;
    const mask = unchecked(this.indexMask[level]);
    if (mask < 0) {
      const keys = changetype<usize>(this.keys);
      for (let k = first; k < count; k++) {
        const at = keys + (<usize>(k * KEY_INTS) << 2);
        if (load<u32>(at) != hash) continue;
        if (this.sameKey(load<i32>(at, 4), load<i32>(at, 8), load<i32>(at, 12) != 0)) return false;
      }
    } else if (this.findIndexed(level, mask, hash)) {
      return false;
    }
    this.pushKey(hash);
    const size = count + 1 - first;
    if (mask >= 0) {
      if (size * 2 > mask + 1) this.buildIndex(level, (mask + 1) * 2);
      else this.insertIndexed(level, mask, count, hash);
    } else if (size > SMALL_OBJECT) {
      this.buildIndex(level, SMALL_OBJECT * 4);
    }
    return true;
  }

  /** Whether a kept key [from, to) (input offsets, or key-arena offsets when windowed) is the current key. */
  private sameKey(from: i32, to: i32, escaped: bool): bool {
    if (this.source === null) {
      return sameContent(this.base, this.limit, from, to, escaped, this.strFrom, this.strTo, this.strEscaped);
    }
    return sameContentIn(this.keyBytes, this.keyBytesUsed, from, to, escaped, this.base, this.limit, this.strFrom, this.strTo, this.strEscaped);
  }

  /** Windowed: copies the current key's text to the key arena; its arena offset. */
  private keepKeyText(): i32 {
    const len = this.strTo - this.strFrom;
    const at = this.keyBytesUsed;
    if (at + len > this.keyBytesCapacity) {
      let capacity = max(this.keyBytesCapacity * 2, 256);
      while (capacity < at + len) capacity <<= 1;
      const arena = new ArrayBuffer(capacity);
      if (at > 0) memory.copy(changetype<usize>(arena), this.keyBytes, <usize>at);
      this.keyArena = arena;
      this.keyBytes = changetype<usize>(arena);
      this.keyBytesCapacity = capacity;
    }
    memory.copy(this.keyBytes + <usize>at, this.base + <usize>this.strFrom, <usize>len);
    this.keyBytesUsed = at + len;
    return at;
  }

  private pushKey(hash: u32): void {
    let keys = this.keys;
    const at = this.keyCount * KEY_INTS;
    if (at + KEY_INTS > keys.length) {
      const bigger = new StaticArray<i32>(keys.length * 2);
      memory.copy(changetype<usize>(bigger), changetype<usize>(keys), <usize>keys.length << 2);
      this.keys = keys = bigger;
    }
    let from = this.strFrom;
    let to = this.strTo;
    if (this.source !== null) {
      from = this.keepKeyText();
      to = this.keyBytesUsed;
    }
    unchecked((keys[at] = <i32>hash));
    unchecked((keys[at + 1] = from));
    unchecked((keys[at + 2] = to));
    unchecked((keys[at + 3] = this.strEscaped ? 1 : 0));
    this.keyCount++;
  }

  /** (Re)builds the key index of the object at `level` with `capacity` slots (a power of 2). */
  private buildIndex(level: i32, capacity: i32): void {
    let table = unchecked(this.indexes[level]);
    if (table.length < capacity) {
      table = new StaticArray<i32>(capacity);
      unchecked((this.indexes[level] = table));
    } else {
      memory.fill(changetype<usize>(table), 0, <usize>capacity << 2);
    }
    const mask = capacity - 1;
    unchecked((this.indexMask[level] = mask));
    const keys = this.keys;
    for (let k = unchecked(this.keyBase[level]); k < this.keyCount; k++) {
      this.insertIndexed(level, mask, k, <u32>unchecked(keys[k * KEY_INTS]));
    }
  }

  private insertIndexed(level: i32, mask: i32, k: i32, hash: u32): void {
    const table = unchecked(this.indexes[level]);
    if (mask >= table.length) return;
    let i = <i32>(hash & <u32>mask);
    for (let probes = 0; probes <= mask; probes++) {
      if (unchecked(table[i]) == 0) {
        unchecked((table[i] = k + 1));
        return;
      }
      i = (i + 1) & mask;
    }
  }

  /** Whether the object at `level` has an earlier key equal to the current one (by its index). */
  private findIndexed(level: i32, mask: i32, hash: u32): bool {
    const table = unchecked(this.indexes[level]);
    if (mask >= table.length) return false;
    const base = this.base;
    const n = this.limit;
    const keys = this.keys;
    let i = <i32>(hash & <u32>mask);
    for (let probes = 0; probes <= mask; probes++) {
      const entry = unchecked(table[i]);
      if (entry == 0) return false;
      const at = (entry - 1) * KEY_INTS;
      if (at + 3 < keys.length && <u32>unchecked(keys[at]) == hash) {
        const from = unchecked(keys[at + 1]);
        const to = unchecked(keys[at + 2]);
        const escaped = unchecked(keys[at + 3]) != 0;
        if (this.sameKey(from, to, escaped)) return true;
      }
      i = (i + 1) & mask;
    }
    return false;
  }
}

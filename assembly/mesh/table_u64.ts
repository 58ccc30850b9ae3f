// U64Table: a growing u64 → i32 table for the model's small derived indexes.
import { ADDED, FULL, mix64, OBJECT_OVERHEAD, tableCapacity } from "./table_hash";

/**
 * u64 → non-negative i32, growing as needed (configure time only), with [key, value + 1]
 * interleaved so a probe touches one cache line. Used for small derived indexes:
 * (service, port) → port slot, (workload, target port) → headless port slot.
 */
export class U64Table {
  private slots: StaticArray<u64>; // [key, value + 1] per slot
  private mask: u32;
  private used: i32 = 0;

  constructor(expected: i32 = 0) {
    const cap = tableCapacity(expected);
    this.slots = new StaticArray<u64>(cap << 1);
    this.mask = <u32>cap - 1;
  }

  get size(): i32 {
    return this.used;
  }

  /** The value stored for `key`, or -1. */
  get(key: u64): i32 {
    const slots = this.slots;
    const mask = this.mask;
    let i = <u32>mix64(key) & mask;
    for (let probes: u32 = 0; probes <= mask; probes++) {
      const at = <i32>(i << 1);
      const stored = unchecked(slots[at + 1]);
      if (stored == 0) return -1;
      if (unchecked(slots[at]) == key) return <i32>(stored - 1);
      i = (i + 1) & mask;
    }
    return -1;
  }

  /** Adds key → value (value >= 0) unless the key is present: ADDED or the existing value. */
  add(key: u64, value: i32): i32 {
    const existing = this.get(key);
    if (existing >= 0) return existing;
    if (value < 0) return FULL;
    const cap = <i64>this.mask + 1;
    if ((<i64>this.used + 1) * 3 > cap * 2) this.grow();
    this.place(key, <u64>value + 1);
    this.used++;
    return ADDED;
  }

  /** Removes `key` (backward-shift deletion); false when absent. */
  remove(key: u64): bool {
    const slots = this.slots;
    const mask = this.mask;
    let i = <u32>mix64(key) & mask;
    let found = false;
    for (let probes: u32 = 0; probes <= mask; probes++) {
      const stored = unchecked(slots[<i32>(i << 1) + 1]);
      if (stored == 0) return false;
      if (unchecked(slots[<i32>(i << 1)]) == key) {
        found = true;
        break;
      }
      i = (i + 1) & mask;
    }
    if (!found) return false;
    let hole = i;
    let j = (i + 1) & mask;
    while (true) {
      const stored = unchecked(slots[<i32>(j << 1) + 1]);
      if (stored == 0) break;
      const k = unchecked(slots[<i32>(j << 1)]);
      const home = <u32>mix64(k) & mask;
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        unchecked((slots[<i32>(hole << 1)] = k));
        unchecked((slots[<i32>(hole << 1) + 1] = stored));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    unchecked((slots[<i32>(hole << 1)] = 0));
    unchecked((slots[<i32>(hole << 1) + 1] = 0));
    this.used--;
    return true;
  }

  /**
   * Room for `extra` more keys with one growth at most: a list of 65,535 ports added one by
   * one would double the table ~13 times, each step's old table left as garbage.
   */
  reserve(extra: i32): void {
    const want = <i64>this.used + <i64>extra;
    const cap = <i64>this.mask + 1;
    if (want * 3 <= cap * 2) return;
    const old = this.slots;
    const next = tableCapacity(<i32>min<i64>(want, 0x3fffffff));
    this.slots = new StaticArray<u64>(next << 1);
    this.mask = <u32>next - 1;
    for (let i = 0; i + 1 < old.length; i += 2) {
      const stored = unchecked(old[i + 1]);
      if (stored != 0) this.place(unchecked(old[i]), stored);
    }
  }

  clear(): void {
    memory.fill(changetype<usize>(this.slots), 0, <usize>this.slots.length << 3);
    this.used = 0;
  }

  byteSize(): i64 {
    return <i64>this.slots.length * 8 + OBJECT_OVERHEAD * 2;
  }

  private place(key: u64, stored: u64): void {
    const slots = this.slots;
    const mask = this.mask;
    let i = <u32>mix64(key) & mask;
    while (unchecked(slots[<i32>(i << 1) + 1]) != 0) i = (i + 1) & mask;
    unchecked((slots[<i32>(i << 1)] = key));
    unchecked((slots[<i32>(i << 1) + 1] = stored));
  }

  private grow(): void {
    const old = this.slots;
    const cap = (<i32>this.mask + 1) << 1;
    this.slots = new StaticArray<u64>(cap << 1);
    this.mask = <u32>cap - 1;
    for (let i = 0; i + 1 < old.length; i += 2) {
      const stored = unchecked(old[i + 1]);
      if (stored != 0) this.place(unchecked(old[i]), stored);
    }
  }
}

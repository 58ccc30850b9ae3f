// SparseColumn: a per-index u32 column that stays sparse (a hash table of the indexes that have
// a value) while few do, and turns dense when many do.
import { exactCapacity, mix32, OBJECT_OVERHEAD, slotOf } from "./table_hash";

/**
 * A per-index u32 column that most indexes leave at 0 (a workload's own waypoint or network
 * gateway: a service waypoint is the common case, and only workloads behind an east-west
 * gateway have one). Dense (4 bytes per index) when at least a third of the indexes have a
 * value, else sparse: one u64 slot [index:32][value:32] per index that has one, at load <= 2/3
 * (12 bytes each), and nothing for the rest. The build sizes either form once from the scan's
 * count; the update path (`put`, `remove`) grows a sparse column by doubling and turns it dense
 * once a third of `span` indexes have a value; a dense one grows to cover new indexes. Reads of
 * a missing index answer 0. Deletion shifts the following run back (no tombstones).
 */
export class SparseColumn {
  private dense: StaticArray<u32> = new StaticArray<u32>(0);
  private slots: StaticArray<u64> = new StaticArray<u64>(0);
  private capacity: u32 = 0;
  private used: i32 = 0;
  private isDenseForm: bool = false;

  /** Room for `present` non-zero values among `n` indexes (present may overcount). */
  constructor(n: i32 = 0, present: i64 = 0) {
    if (present <= 0 || n <= 0) {
      // empty: every read answers 0
    } else if (SparseColumn.isDense(n, present)) {
      this.dense = new StaticArray<u32>(n);
      this.isDenseForm = true;
    } else {
      const cap = exactCapacity(<i32>present);
      this.slots = new StaticArray<u64>(cap);
      this.capacity = <u32>cap;
    }
  }

  /** Bytes a column of `n` indexes with `present` values costs (for the build's reservation). */
  static bytesFor(n: i32, present: i64): i64 {
    if (present <= 0 || n <= 0) return 0;
    if (SparseColumn.isDense(n, present)) return <i64>n * 4 + OBJECT_OVERHEAD;
    return <i64>exactCapacity(<i32>present) * 8 + OBJECT_OVERHEAD;
  }

  private static isDense(n: i32, present: i64): bool {
    return present * 3 >= <i64>n;
  }

  // get and remove are inlined for the dense form (the pools' owner indexes: several reads
  // per record on the update path) and for an empty column (a pool nobody uses, e.g. the VIPs
  // of a mesh without ClusterIPs: asked once per service removed); the probe stays a call.
  // @ts-ignore: decorator
  @inline get(index: i32): u32 {
    if (this.isDenseForm) {
      const dense = this.dense;
      return <u32>index < <u32>dense.length ? unchecked(dense[index]) : 0;
    }
    return this.used == 0 ? 0 : this.getSparse(index);
  }

  private getSparse(index: i32): u32 {
    if (index < 0) return 0;
    const capacity = this.capacity;
    if (capacity == 0) return 0;
    const slots = this.slots;
    let i = slotOf(mix32(<u32>index), capacity);
    for (let probes: u32 = 0; probes < capacity; probes++) {
      const entry = unchecked(slots[<i32>i]);
      if (entry == 0) return 0;
      if (<i32>(entry >> 32) == index) return <u32>entry;
      i = i + 1 == capacity ? 0 : i + 1;
    }
    return 0;
  }

  /** Sets index's value (non-zero, once per index); false when there is no room for it. */
  set(index: i32, value: u32): bool {
    if (index < 0 || value == 0) return false;
    if (this.isDenseForm) {
      const dense = this.dense;
      if (index >= dense.length) return false;
      unchecked((dense[index] = value));
      return true;
    }
    const capacity = this.capacity;
    if (<u32>this.used + 1 >= capacity) return false; // keep one slot empty
    const slots = this.slots;
    let i = slotOf(mix32(<u32>index), capacity);
    while (unchecked(slots[<i32>i]) != 0) {
      if (<i32>(unchecked(slots[<i32>i]) >> 32) == index) return false;
      i = i + 1 == capacity ? 0 : i + 1;
    }
    unchecked((slots[<i32>i] = (<u64><u32>index << 32) | <u64>value));
    this.used++;
    return true;
  }

  /**
   * Sets or replaces index's value, growing as needed (value 0 removes it). `span` is the
   * number of indexes in use (the id limit), which decides when the column turns dense.
   */
  put(index: i32, value: u32, span: i32): void {
    if (index < 0) return;
    if (value == 0) {
      this.remove(index);
      return;
    }
    if (this.isDenseForm) {
      if (index >= this.dense.length) this.growDense(max(index + 1, span));
      unchecked((this.dense[index] = value));
      return;
    }
    // Replace in place when present.
    const capacity = this.capacity;
    if (capacity > 0) {
      const slots = this.slots;
      let i = slotOf(mix32(<u32>index), capacity);
      for (let probes: u32 = 0; probes < capacity; probes++) {
        const entry = unchecked(slots[<i32>i]);
        if (entry == 0) break;
        if (<i32>(entry >> 32) == index) {
          unchecked((slots[<i32>i] = (<u64><u32>index << 32) | <u64>value));
          return;
        }
        i = i + 1 == capacity ? 0 : i + 1;
      }
    }
    if ((<i64>this.used + 1) * 3 >= <i64>max(span, index + 1) && this.used >= 16) {
      this.toDense(max(span, index + 1));
      unchecked((this.dense[index] = value));
      return;
    }
    if ((<i64>this.used + 2) * 3 > <i64>this.capacity * 2) this.rehash(exactCapacity(max(this.used * 2, 8)));
    this.set(index, value);
  }

  /** Clears index's value (backward-shift deletion in the sparse form). */
  // @ts-ignore: decorator
  @inline remove(index: i32): void {
    if (this.isDenseForm) {
      if (<u32>index < <u32>this.dense.length) unchecked((this.dense[index] = 0));
    } else if (this.used > 0) {
      this.removeSparse(index);
    }
  }

  private removeSparse(index: i32): void {
    if (index < 0) return;
    const capacity = this.capacity;
    if (capacity == 0) return;
    const slots = this.slots;
    let i = slotOf(mix32(<u32>index), capacity);
    let found = false;
    for (let probes: u32 = 0; probes < capacity; probes++) {
      const entry = unchecked(slots[<i32>i]);
      if (entry == 0) return;
      if (<i32>(entry >> 32) == index) {
        found = true;
        break;
      }
      i = i + 1 == capacity ? 0 : i + 1;
    }
    if (!found) return;
    let hole = i;
    let j: u32 = i + 1 == capacity ? 0 : i + 1;
    while (true) {
      const entry = unchecked(slots[<i32>j]);
      if (entry == 0) break;
      const home = slotOf(mix32(<u32>(entry >> 32)), capacity);
      const stays = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (!stays) {
        unchecked((slots[<i32>hole] = entry));
        hole = j;
      }
      j = j + 1 == capacity ? 0 : j + 1;
    }
    unchecked((slots[<i32>hole] = 0));
    this.used--;
  }

  /** Removes every value, keeping the form. */
  clear(): void {
    if (this.isDenseForm) memory.fill(changetype<usize>(this.dense), 0, <usize>this.dense.length << 2);
    else if (this.capacity > 0) memory.fill(changetype<usize>(this.slots), 0, <usize>this.slots.length << 3);
    this.used = 0;
  }

  private growDense(n: i32): void {
    const old = this.dense;
    const next = new StaticArray<u32>(max(n, old.length * 2));
    memory.copy(changetype<usize>(next), changetype<usize>(old), <usize>old.length << 2);
    this.dense = next;
  }

  private toDense(n: i32): void {
    const dense = new StaticArray<u32>(n);
    const slots = this.slots;
    for (let k = 0; k < slots.length; k++) {
      const entry = unchecked(slots[k]);
      if (entry == 0) continue;
      const index = <i32>(entry >> 32);
      if (index < n) unchecked((dense[index] = <u32>entry));
    }
    this.dense = dense;
    this.slots = new StaticArray<u64>(0);
    this.capacity = 0;
    this.isDenseForm = true;
  }

  private rehash(cap: i32): void {
    const old = this.slots;
    this.slots = new StaticArray<u64>(cap);
    this.capacity = <u32>cap;
    this.used = 0;
    for (let k = 0; k < old.length; k++) {
      const entry = unchecked(old[k]);
      if (entry != 0) this.set(<i32>(entry >> 32), <u32>entry);
    }
  }

  byteSize(): i64 {
    if (this.isDenseForm) return <i64>this.dense.length * 4 + OBJECT_OVERHEAD;
    return this.capacity > 0 ? <i64>this.slots.length * 8 + OBJECT_OVERHEAD : 0;
  }
}


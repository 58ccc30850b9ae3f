// Context id → context, for the callbacks' dispatch. A Map would do, but its entry buffer
// fills with deleted entries as connections come and go and is rebuilt every few connections:
// steady garbage the GC lets pile up before it collects, which grows linear memory (and that
// never shrinks). This table is open addressing with backward-shift deletion: set and delete
// allocate nothing unless the number of contexts open at once outgrows it (it then doubles).

export class ContextTable<T> {
  private ids: StaticArray<u32> = new StaticArray<u32>(64);
  private values: StaticArray<T | null> = new StaticArray<T | null>(64);
  private mask: u32 = 63;
  private count: i32 = 0;

  get size(): i32 {
    return this.count;
  }

  // @ts-ignore: decorator
  @inline private home(id: u32): u32 {
    // Fibonacci hashing: consecutive ids spread over the table.
    return (id * 0x9e3779b1) & this.mask;
  }

  /** The context with this id, or null. */
  get(id: u32): T | null {
    let i = this.home(id);
    for (let probes: u32 = 0; probes <= this.mask; probes++) {
      const value = unchecked(this.values[<i32>i]);
      if (value === null) return null;
      if (unchecked(this.ids[<i32>i]) == id) return value;
      i = (i + 1) & this.mask;
    }
    return null;
  }

  has(id: u32): bool {
    return this.get(id) !== null;
  }

  /** Adds or replaces the context for `id`. */
  set(id: u32, value: T): void {
    if ((this.count + 1) * 2 > <i32>this.mask + 1) this.grow();
    let i = this.home(id);
    while (true) {
      const existing = unchecked(this.values[<i32>i]);
      if (existing === null) break;
      if (unchecked(this.ids[<i32>i]) == id) {
        unchecked((this.values[<i32>i] = value));
        return;
      }
      i = (i + 1) & this.mask;
    }
    unchecked((this.ids[<i32>i] = id));
    unchecked((this.values[<i32>i] = value));
    this.count++;
  }

  /** Removes `id`; the context it had, or null. */
  delete(id: u32): T | null {
    const mask = this.mask;
    let i = this.home(id);
    let found: T | null = null;
    for (let probes: u32 = 0; probes <= mask; probes++) {
      const value = unchecked(this.values[<i32>i]);
      if (value === null) return null;
      if (unchecked(this.ids[<i32>i]) == id) {
        found = value;
        break;
      }
      i = (i + 1) & mask;
    }
    if (found === null) return null;
    // Backward-shift: pull later entries of the probe run into the hole, so no tombstones.
    let hole = i;
    let j = (i + 1) & mask;
    while (true) {
      const value = unchecked(this.values[<i32>j]);
      if (value === null) break;
      const home = this.home(unchecked(this.ids[<i32>j]));
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const stays = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (!stays) {
        unchecked((this.ids[<i32>hole] = unchecked(this.ids[<i32>j])));
        unchecked((this.values[<i32>hole] = value));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    unchecked((this.values[<i32>hole] = null));
    this.count--;
    return found;
  }

  private grow(): void {
    const ids = this.ids;
    const values = this.values;
    const capacity = (<i32>this.mask + 1) << 1;
    this.ids = new StaticArray<u32>(capacity);
    this.values = new StaticArray<T | null>(capacity);
    this.mask = <u32>capacity - 1;
    this.count = 0;
    for (let k = 0; k < values.length; k++) {
      const value = unchecked(values[k]);
      if (value !== null) this.set(unchecked(ids[k]), value);
    }
  }
}

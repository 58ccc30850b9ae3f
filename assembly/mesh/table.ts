// Open-addressing hash tables in flat arrays: no object per entry, no Map.
//
// All use linear probing kept at most 2/3 full, and store `value + 1` so a zero slot means
// "empty" (the arrays start zeroed). The per-pod IPv4 table has an exact capacity (a
// multiply-shift picks the home slot); the others a power of two (a mask does). Lookups never
// allocate and never index out of bounds: every probe index is reduced or masked, and the
// probe count is bounded.
//
// The address tables hash the IP only and keep the owner's network in the entry, so the same
// IP on two networks is two entries in one probe chain, told apart without leaving the slot.

/** Per-object overhead of the incremental runtime (block + object header), for accounting. */
export const OBJECT_OVERHEAD: i64 = 20;

/** murmur3's 32-bit finaliser: sequential pod IPs spread over the whole table. */
// @ts-ignore: decorator
@inline export function mix32(x: u32): u32 {
  x ^= x >> 16;
  x *= 0x85ebca6b;
  x ^= x >> 13;
  x *= 0xc2b2ae35;
  x ^= x >> 16;
  return x;
}

/** murmur3's 64-bit finaliser. */
// @ts-ignore: decorator
@inline export function mix64(x: u64): u64 {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccd;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53;
  x ^= x >> 33;
  return x;
}

/** Smallest power of two >= 8 that holds `expected` entries at a load of at most 2/3. */
export function tableCapacity(expected: i32): i32 {
  const need = <i64>expected + (<i64>expected >> 1) + 1;
  let cap: i64 = 8;
  while (cap < need) cap <<= 1;
  return <i32>cap;
}

/**
 * Slots for `expected` entries at a load of exactly 2/3 (at least 8): for the per-pod tables,
 * whose power-of-two size would cost up to 2x the memory. Probed from slotOf, not a mask.
 */
export function exactCapacity(expected: i32): i32 {
  const need = <i64>expected + (<i64>expected >> 1) + 1;
  return <i32>max<i64>(need, 8);
}

/** A hash's home slot in [0, capacity): the multiply-shift range reduction (no modulo). */
// @ts-ignore: decorator
@inline export function slotOf(hash: u32, capacity: u32): u32 {
  return <u32>((<u64>hash * <u64>capacity) >> 32);
}

/** Result of an insert that added the entry. Any value >= 0 is the clashing existing owner. */
export const ADDED: i32 = -1;
/** Result of an insert into a full table (cannot happen when sized with the expected count). */
export const FULL: i32 = -2;

// An address-table entry packs the owner and its network into one u32, so a probe touches a
// single cache line: bits 0..20 hold owner + 1 (0 = empty slot), bits 21..31 the network id.
const OWNER_BITS: u32 = 21;
const OWNER_MASK: u32 = (1 << OWNER_BITS) - 1;

/** Owners (workloads, VIPs) an address table can name: 2^21 - 2. */
export const MAX_OWNERS: i32 = <i32>OWNER_MASK - 1;
/** Network ids an address table can hold: 2^11. */
export const MAX_TABLE_NETWORKS: i32 = 1 << (32 - <i32>OWNER_BITS);

// @ts-ignore: decorator
@inline function pack(owner: i32, network: i32): u32 {
  return (<u32>network << OWNER_BITS) | (<u32>owner + 1);
}

// @ts-ignore: decorator
@inline function fits(owner: i32, network: i32): bool {
  return <u32>owner < <u32>MAX_OWNERS && <u32>network < <u32>MAX_TABLE_NETWORKS;
}

/**
 * IPv4 → owner index, per network. 8 bytes per slot: [ip, packed owner + network]. One slot
 * per pod, so the capacity is exact (load 2/3), not a power of two.
 */
export class AddrTable4 {
  private slots: StaticArray<u32>;
  private capacity: u32;
  private used: i32 = 0;

  constructor(expected: i32) {
    const cap = exactCapacity(expected);
    this.slots = new StaticArray<u32>(cap << 1);
    this.capacity = <u32>cap;
  }

  /** u32 words a table for `expected` addresses needs (what `over` wants). */
  static wordsFor(expected: i32): i32 {
    return exactCapacity(expected) << 1;
  }

  /**
   * A table for `expected` addresses in `words` (at least wordsFor(expected) long), which it
   * clears and keeps: the mesh build lends it the memory its uid index used until then.
   */
  static over(words: StaticArray<u32>, expected: i32): AddrTable4 {
    const table = new AddrTable4(0);
    const cap = exactCapacity(expected);
    if ((<i64>cap << 1) <= <i64>words.length) {
      memory.fill(changetype<usize>(words), 0, <usize>words.length << 2);
      table.slots = words;
      table.capacity = <u32>cap;
    } else {
      table.slots = new StaticArray<u32>(cap << 1);
      table.capacity = <u32>cap;
    }
    return table;
  }

  get size(): i32 {
    return this.used;
  }

  /** The first word of `ip`'s home slot: a load with no use but to bring its line into the cache. */
  touch(ip: u32): u32 {
    return unchecked(this.slots[<i32>(slotOf(mix32(ip), this.capacity) << 1)]);
  }

  /** The owner of `ip` on `network`, or -1. */
  find(ip: u32, network: i32): i32 {
    const slots = this.slots;
    const capacity = this.capacity;
    const net = <u32>network;
    let i = slotOf(mix32(ip), capacity);
    for (let probes: u32 = 0; probes < capacity; probes++) {
      const at = <i32>(i << 1);
      const packed = unchecked(slots[at + 1]);
      if (packed == 0) return -1;
      if (unchecked(slots[at]) == ip && packed >> OWNER_BITS == net) {
        return <i32>(packed & OWNER_MASK) - 1;
      }
      i = i + 1 == capacity ? 0 : i + 1;
    }
    return -1;
  }

  /**
   * Adds ip → owner on `network`. ADDED, or the owner already holding `ip` on that network
   * (nothing changes), or FULL (also for an owner or network id the packing cannot hold).
   */
  insert(ip: u32, owner: i32, network: i32): i32 {
    if (!fits(owner, network)) return FULL;
    const capacity = this.capacity;
    const slots = this.slots;
    const net = <u32>network;
    // One probe run: the key's entry (a clash) or the first empty slot, where it goes.
    let i = slotOf(mix32(ip), capacity);
    for (let probes: u32 = 0; probes < capacity; probes++) {
      const packed = unchecked(slots[<i32>(i << 1) + 1]);
      if (packed == 0) {
        if (this.used >= <i32>capacity - 1) return FULL; // always keep one empty slot
        unchecked((slots[<i32>(i << 1)] = ip));
        unchecked((slots[<i32>(i << 1) + 1] = pack(owner, network)));
        this.used++;
        return ADDED;
      }
      if (unchecked(slots[<i32>(i << 1)]) == ip && packed >> OWNER_BITS == net) return <i32>(packed & OWNER_MASK) - 1;
      i = i + 1 == capacity ? 0 : i + 1;
    }
    return FULL;
  }

  /**
   * Removes ip on `network` when `owner` holds it (backward-shift deletion: the entries after it
   * in its probe run move up, so no tombstone is left and probe runs never lengthen under
   * churn). False when absent or held by another owner.
   */
  remove(ip: u32, owner: i32, network: i32): bool {
    const slots = this.slots;
    const capacity = this.capacity;
    const net = <u32>network;
    let i = slotOf(mix32(ip), capacity);
    let found = false;
    for (let probes: u32 = 0; probes < capacity; probes++) {
      const packed = unchecked(slots[<i32>(i << 1) + 1]);
      if (packed == 0) return false;
      if (unchecked(slots[<i32>(i << 1)]) == ip && packed >> OWNER_BITS == net) {
        if (<i32>(packed & OWNER_MASK) - 1 != owner) return false;
        found = true;
        break;
      }
      i = i + 1 == capacity ? 0 : i + 1;
    }
    if (!found) return false;
    // Backward shift: move each later entry of the run into the hole when its home slot is not
    // cyclically within (hole, entry].
    let hole = i;
    let j: u32 = i + 1 == capacity ? 0 : i + 1;
    while (true) {
      const packed = unchecked(slots[<i32>(j << 1) + 1]);
      if (packed == 0) break;
      const home = slotOf(mix32(unchecked(slots[<i32>(j << 1)])), capacity);
      const stays = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (!stays) {
        unchecked((slots[<i32>(hole << 1)] = slots[<i32>(j << 1)]));
        unchecked((slots[<i32>(hole << 1) + 1] = packed));
        hole = j;
      }
      j = j + 1 == capacity ? 0 : j + 1;
    }
    unchecked((slots[<i32>(hole << 1)] = 0));
    unchecked((slots[<i32>(hole << 1) + 1] = 0));
    this.used--;
    return true;
  }

  /** Grows (rehashing) so `extra` more entries keep the load at most 2/3. */
  ensureRoom(extra: i32): void {
    const need = <i64>this.used + <i64>extra;
    if (need * 3 <= <i64>this.capacity * 2 && <i64>this.used + <i64>extra < <i64>this.capacity - 1) return;
    const old = this.slots;
    const cap = exactCapacity(<i32>min<i64>(need * 2, 0x3fffffff));
    this.slots = new StaticArray<u32>(cap << 1);
    this.capacity = <u32>cap;
    const slots = this.slots;
    for (let k = 0; k + 1 < old.length; k += 2) {
      const packed = unchecked(old[k + 1]);
      if (packed == 0) continue;
      const ip = unchecked(old[k]);
      let i = slotOf(mix32(ip), <u32>cap);
      while (unchecked(slots[<i32>(i << 1) + 1]) != 0) i = i + 1 == <u32>cap ? 0 : i + 1;
      unchecked((slots[<i32>(i << 1)] = ip));
      unchecked((slots[<i32>(i << 1) + 1] = packed));
    }
  }

  /** Removes every entry, keeping the capacity. */
  clear(): void {
    memory.fill(changetype<usize>(this.slots), 0, <usize>this.slots.length << 2);
    this.used = 0;
  }

  byteSize(): i64 {
    return <i64>this.slots.length * 4 + OBJECT_OVERHEAD * 2;
  }
}

/**
 * IPv6 (hi, lo) → owner index, per network. 20 bytes per slot: the key pair in one array, the
 * packed owner in another (interleaving would cost 24 bytes a slot for alignment).
 */
export class AddrTable6 {
  private keys: StaticArray<u64>; // [hi, lo] per slot
  private owners: StaticArray<u32>; // packed owner + network
  private mask: u32;
  private used: i32 = 0;

  constructor(expected: i32) {
    const cap = tableCapacity(expected);
    this.keys = new StaticArray<u64>(cap << 1);
    this.owners = new StaticArray<u32>(cap);
    this.mask = <u32>cap - 1;
  }

  get size(): i32 {
    return this.used;
  }

  find(hi: u64, lo: u64, network: i32): i32 {
    const keys = this.keys;
    const owners = this.owners;
    const mask = this.mask;
    const net = <u32>network;
    let i = <u32>mix64(hi ^ mix64(lo)) & mask;
    for (let probes: u32 = 0; probes <= mask; probes++) {
      const packed = unchecked(owners[<i32>i]);
      if (packed == 0) return -1;
      const at = <i32>(i << 1);
      if (packed >> OWNER_BITS == net && unchecked(keys[at]) == hi && unchecked(keys[at + 1]) == lo) {
        return <i32>(packed & OWNER_MASK) - 1;
      }
      i = (i + 1) & mask;
    }
    return -1;
  }

  insert(hi: u64, lo: u64, owner: i32, network: i32): i32 {
    if (!fits(owner, network)) return FULL;
    const existing = this.find(hi, lo, network);
    if (existing >= 0) return existing;
    if (this.used >= <i32>this.mask) return FULL;
    const mask = this.mask;
    let i = <u32>mix64(hi ^ mix64(lo)) & mask;
    while (unchecked(this.owners[<i32>i]) != 0) i = (i + 1) & mask;
    unchecked((this.keys[<i32>(i << 1)] = hi));
    unchecked((this.keys[<i32>(i << 1) + 1] = lo));
    unchecked((this.owners[<i32>i] = pack(owner, network)));
    this.used++;
    return ADDED;
  }

  /** Removes (hi, lo) on `network` when `owner` holds it (backward-shift deletion). */
  remove(hi: u64, lo: u64, owner: i32, network: i32): bool {
    const keys = this.keys;
    const owners = this.owners;
    const mask = this.mask;
    const net = <u32>network;
    let i = <u32>mix64(hi ^ mix64(lo)) & mask;
    let found = false;
    for (let probes: u32 = 0; probes <= mask; probes++) {
      const packed = unchecked(owners[<i32>i]);
      if (packed == 0) return false;
      const at = <i32>(i << 1);
      if (packed >> OWNER_BITS == net && unchecked(keys[at]) == hi && unchecked(keys[at + 1]) == lo) {
        if (<i32>(packed & OWNER_MASK) - 1 != owner) return false;
        found = true;
        break;
      }
      i = (i + 1) & mask;
    }
    if (!found) return false;
    let hole = i;
    let j = (i + 1) & mask;
    while (true) {
      const packed = unchecked(owners[<i32>j]);
      if (packed == 0) break;
      const khi = unchecked(keys[<i32>(j << 1)]);
      const klo = unchecked(keys[<i32>(j << 1) + 1]);
      const home = <u32>mix64(khi ^ mix64(klo)) & mask;
      // Cyclic distance from home: the entry may move to the hole when the hole is no farther.
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        unchecked((keys[<i32>(hole << 1)] = khi));
        unchecked((keys[<i32>(hole << 1) + 1] = klo));
        unchecked((owners[<i32>hole] = packed));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    unchecked((keys[<i32>(hole << 1)] = 0));
    unchecked((keys[<i32>(hole << 1) + 1] = 0));
    unchecked((owners[<i32>hole] = 0));
    this.used--;
    return true;
  }

  /** Grows (rehashing) so `extra` more entries keep the load at most 2/3. */
  ensureRoom(extra: i32): void {
    const need = <i64>this.used + <i64>extra;
    if (need * 3 <= (<i64>this.mask + 1) * 2 && need < <i64>this.mask) return;
    const oldKeys = this.keys;
    const oldOwners = this.owners;
    const cap = tableCapacity(<i32>min<i64>(need * 2, 0x3fffffff));
    this.keys = new StaticArray<u64>(cap << 1);
    this.owners = new StaticArray<u32>(cap);
    this.mask = <u32>cap - 1;
    const mask = this.mask;
    for (let k = 0; k < oldOwners.length; k++) {
      const packed = unchecked(oldOwners[k]);
      if (packed == 0) continue;
      const hi = unchecked(oldKeys[k << 1]);
      const lo = unchecked(oldKeys[(k << 1) + 1]);
      let i = <u32>mix64(hi ^ mix64(lo)) & mask;
      while (unchecked(this.owners[<i32>i]) != 0) i = (i + 1) & mask;
      unchecked((this.keys[<i32>(i << 1)] = hi));
      unchecked((this.keys[<i32>(i << 1) + 1] = lo));
      unchecked((this.owners[<i32>i] = packed));
    }
  }

  clear(): void {
    memory.fill(changetype<usize>(this.keys), 0, <usize>this.keys.length << 3);
    memory.fill(changetype<usize>(this.owners), 0, <usize>this.owners.length << 2);
    this.used = 0;
  }

  byteSize(): i64 {
    return <i64>this.keys.length * 8 + <i64>this.owners.length * 4 + OBJECT_OVERHEAD * 3;
  }
}

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

  get(index: i32): u32 {
    if (index < 0) return 0;
    if (this.isDenseForm) {
      const dense = this.dense;
      return index < dense.length ? unchecked(dense[index]) : 0;
    }
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
  remove(index: i32): void {
    if (index < 0) return;
    if (this.isDenseForm) {
      if (index < this.dense.length) unchecked((this.dense[index] = 0));
      return;
    }
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

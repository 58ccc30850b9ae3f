// The address tables: IP (IPv4 in AddrTable4, exact capacity; IPv6 in AddrTable6, a power of
// two) → owner (workload or service) on a network, with backward-shift deletion and growth.
import { ADDED, exactCapacity, fits, FULL, mix32, mix64, OBJECT_OVERHEAD, OWNER_BITS, OWNER_MASK, pack, slotOf, tableCapacity } from "./table_hash";

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

  /** The slot of `ip`'s entry on `network` (its index in `slots`), or -1. */
  @inline private entryAt(ip: u32, network: i32): i32 {
    const slots = this.slots;
    const capacity = this.capacity;
    const net = <u32>network;
    let i = slotOf(mix32(ip), capacity);
    for (let probes: u32 = 0; probes < capacity; probes++) {
      const at = <i32>(i << 1);
      const packed = unchecked(slots[at + 1]);
      if (packed == 0) return -1;
      if (unchecked(slots[at]) == ip && packed >> OWNER_BITS == net) return at;
      i = i + 1 == capacity ? 0 : i + 1;
    }
    return -1;
  }

  /** The owner of `ip` on `network`, or -1. */
  find(ip: u32, network: i32): i32 {
    const at = this.entryAt(ip, network);
    return at < 0 ? -1 : <i32>(unchecked(this.slots[at + 1]) & OWNER_MASK) - 1;
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
   * Gives ip on `network` to `owner`: a new entry, or the existing one's owner replaced (the
   * caller has found no live holder: the entry is a removed service's, not yet released, whose
   * later release leaves it alone since it checks the owner). ADDED or FULL.
   */
  take(ip: u32, owner: i32, network: i32): i32 {
    const added = this.insert(ip, owner, network);
    if (added == ADDED || added == FULL || added == owner) return added == owner ? ADDED : added;
    const at = this.entryAt(ip, network);
    if (at < 0) return FULL;
    unchecked((this.slots[at + 1] = pack(owner, network)));
    return ADDED;
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

  /** The slot of (hi, lo)'s entry on `network` (its index in `owners`), or -1. */
  @inline private entryAt(hi: u64, lo: u64, network: i32): i32 {
    const keys = this.keys;
    const owners = this.owners;
    const mask = this.mask;
    const net = <u32>network;
    let i = <u32>mix64(hi ^ mix64(lo)) & mask;
    for (let probes: u32 = 0; probes <= mask; probes++) {
      const packed = unchecked(owners[<i32>i]);
      if (packed == 0) return -1;
      const at = <i32>(i << 1);
      if (packed >> OWNER_BITS == net && unchecked(keys[at]) == hi && unchecked(keys[at + 1]) == lo) return <i32>i;
      i = (i + 1) & mask;
    }
    return -1;
  }

  find(hi: u64, lo: u64, network: i32): i32 {
    const slot = this.entryAt(hi, lo, network);
    return slot < 0 ? -1 : <i32>(unchecked(this.owners[slot]) & OWNER_MASK) - 1;
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

  /** As AddrTable4.take: a new entry, or a removed service's entry given to `owner`. */
  take(hi: u64, lo: u64, owner: i32, network: i32): i32 {
    const added = this.insert(hi, lo, owner, network);
    if (added == ADDED || added == FULL || added == owner) return added == owner ? ADDED : added;
    const slot = this.entryAt(hi, lo, network);
    if (slot < 0) return FULL;
    unchecked((this.owners[slot] = pack(owner, network)));
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


// Scratch sets for the decoder's duplicate checks, so that every check costs O(1) per list
// entry whatever the list's length: a record may carry 65,535 ports or memberships, and a
// pairwise check of such a list took seconds (65,535 ports: 10 s) in every worker on every
// message that carried it. Each set is reused across records and messages; a list marks its
// entries while it is read and unmarks them (another walk of the same entries) before the next
// list, so nothing is cleared in bulk and nothing is sized from what a header claims.
import { mix32 } from "./table_hash";

/**
 * Ids as bits, grown to the largest id marked (never beyond what the caller allows: ids are
 * checked against the header's limits first). 2,000,000 ids take 250 KB at most.
 */
export class IdMarks {
  private words: StaticArray<u32> = new StaticArray<u32>(0);

  // The three below are inlined: they run once per list entry (a port, a membership, a removed
  // service's member), where a call cost as much as the work.
  /** Marks id; false when it was already marked. */
  // @ts-ignore: decorator
  @inline mark(id: u32): bool {
    const word = <i32>(id >>> 5);
    if (word >= this.words.length) this.grow(word);
    const bit: u32 = 1 << (id & 31);
    const have = unchecked(this.words[word]);
    if ((have & bit) != 0) return false;
    unchecked((this.words[word] = have | bit));
    return true;
  }

  /** Unmarks every id (the bits span the largest id ever marked: 250 KB at most). */
  clear(): void {
    memory.fill(changetype<usize>(this.words), 0, <usize>this.words.length << 2);
  }

  // @ts-ignore: decorator
  @inline has(id: u32): bool {
    const word = <i32>(id >>> 5);
    return word < this.words.length && (unchecked(this.words[word]) & (<u32>1 << (id & 31))) != 0;
  }

  // @ts-ignore: decorator
  @inline unmark(id: u32): void {
    const word = <i32>(id >>> 5);
    if (word < this.words.length) unchecked((this.words[word] &= ~(<u32>1 << (id & 31))));
  }

  /** Bytes held (for the memory accounting of tests and benches). */
  byteSize(): i32 {
    return this.words.length << 2;
  }

  private grow(word: i32): void {
    // Doubling keeps a list of rising ids amortised O(1) per mark.
    const size = max(word + 1, min(this.words.length * 2, (word + 1) * 2));
    const next = new StaticArray<u32>(size);
    memory.copy(changetype<usize>(next), changetype<usize>(this.words), <usize>this.words.length << 2);
    this.words = next;
  }
}

/** Every port number (1..65535) fits: 8 KB, allocated once. */
export const portMarks = new IdMarks();
/** Service ids of one workload's memberships. */
export const serviceMarks = new IdMarks();

/**
 * Counts per id in an open-addressing table: the full load's members per service, sized from
 * the memberships the message holds (not from the service id limit it declares).
 */
export class IdCounts {
  private keys: StaticArray<u32> = new StaticArray<u32>(16); // id + 1; 0 = empty
  private counts: StaticArray<u32> = new StaticArray<u32>(16);
  private used: i32 = 0;
  /** The last id bumped and its slot: a service's members usually come one after another. */
  private lastId: u32 = 0xffffffff;
  private lastSlot: i32 = 0;

  clear(): void {
    if (this.keys.length > 16) {
      this.keys = new StaticArray<u32>(16);
      this.counts = new StaticArray<u32>(16);
    } else {
      memory.fill(changetype<usize>(this.keys), 0, 64);
      memory.fill(changetype<usize>(this.counts), 0, 64);
    }
    this.used = 0;
    this.lastId = 0xffffffff;
  }

  get size(): i32 {
    return this.used;
  }

  /** Slots (for a walk with idAt / countAt; empty slots answer -1). */
  get capacity(): i32 {
    return this.keys.length;
  }

  idAt(slot: i32): i32 {
    return <i32>unchecked(this.keys[slot]) - 1;
  }

  countAt(slot: i32): i32 {
    return <i32>unchecked(this.counts[slot]);
  }

  /** Adds one to id's count. */
  bump(id: u32): void {
    if (id == this.lastId) {
      unchecked(this.counts[this.lastSlot]++);
      return;
    }
    if ((this.used + 1) * 2 > this.keys.length) this.grow();
    const slot = this.slotOf(id);
    if (unchecked(this.keys[slot]) == 0) {
      unchecked((this.keys[slot] = id + 1));
      this.used++;
    }
    unchecked(this.counts[slot]++);
    this.lastId = id;
    this.lastSlot = slot;
  }

  /** id's count (0 when never bumped). */
  get(id: u32): i32 {
    const slot = this.slotOf(id);
    return unchecked(this.keys[slot]) == 0 ? 0 : <i32>unchecked(this.counts[slot]);
  }

  /** id's slot, or the empty slot where it would go (the table is never full: load ≤ 1/2). */
  private slotOf(id: u32): i32 {
    const mask = <u32>this.keys.length - 1;
    let i = mix32(id) & mask;
    const want = id + 1;
    while (true) {
      const k = unchecked(this.keys[<i32>i]);
      if (k == 0 || k == want) return <i32>i;
      i = (i + 1) & mask;
    }
    return 0; // not reached
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldCounts = this.counts;
    this.keys = new StaticArray<u32>(oldKeys.length * 2);
    this.counts = new StaticArray<u32>(oldKeys.length * 2);
    for (let i = 0; i < oldKeys.length; i++) {
      const k = unchecked(oldKeys[i]);
      if (k == 0) continue;
      const slot = this.slotOf(k - 1);
      unchecked((this.keys[slot] = k));
      unchecked((this.counts[slot] = unchecked(oldCounts[i])));
    }
    this.lastId = 0xffffffff;
  }
}

/**
 * id → i32 for one message at a time, indexed by id: a delta's "last record of each id" and
 * "removed somewhere in the message". Each entry carries the message's stamp, so starting a
 * message clears every entry at once (no walk, no table per message), and a lookup is one or
 * two loads at the id's own place: a hash table here was a cache miss per probe, several per
 * record (a delta of 65,535 service removes spent a third of its time in them). Grown to the
 * largest id a message names, as the model's own columns are (8 bytes per id, next to theirs).
 */
export class IdSlots {
  private values: StaticArray<i32> = new StaticArray<i32>(0);
  private stamps: StaticArray<u32> = new StaticArray<u32>(0);
  private stamp: u32 = 0;

  /** Forgets every entry (a new message). */
  begin(): void {
    this.stamp++;
    if (this.stamp == 0) {
      // Wrapped after 2^32 messages: clear for real once.
      memory.fill(changetype<usize>(this.stamps), 0, <usize>this.stamps.length << 2);
      this.stamp = 1;
    }
  }

  // @ts-ignore: decorator
  @inline set(id: u32, value: i32): void {
    const at = <i32>id;
    if (at >= this.stamps.length) this.grow(at);
    unchecked((this.values[at] = value));
    unchecked((this.stamps[at] = this.stamp));
  }

  /** The value set for id in this message, or -1. */
  // @ts-ignore: decorator
  @inline get(id: u32): i32 {
    const at = <i32>id;
    return at < this.stamps.length && unchecked(this.stamps[at]) == this.stamp ? unchecked(this.values[at]) : -1;
  }

  private grow(at: i32): void {
    const size = max(at + 1, min(this.stamps.length * 2, (at + 1) * 2));
    const values = new StaticArray<i32>(size);
    const stamps = new StaticArray<u32>(size);
    memory.copy(changetype<usize>(values), changetype<usize>(this.values), <usize>this.values.length << 2);
    memory.copy(changetype<usize>(stamps), changetype<usize>(this.stamps), <usize>this.stamps.length << 2);
    this.values = values;
    this.stamps = stamps;
  }
}

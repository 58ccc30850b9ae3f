// HostnameIndex: a service's hostname → its id, in flat arrays.
//
// It replaced a Map<string, i32>. Removing a service had to find its entry by the hostname,
// comparing the text against every entry in the bucket's chain, and the Map shrank and re-hashed
// every key as entries went: a delta of 65,535 service removes spent a third of its time there.
// Here each slot packs the hostname's 32-bit hash with the owner id, and the hash is also kept
// per id, so a removal finds its slot by integer compares alone (the id is unique) and closes the
// gap by backward shift (no tombstones: probe runs do not lengthen under churn). A lookup by text
// compares the text only where the hash matches.
//
// A removal is deferred: `retire` only queues the id (the service's hostname text is already
// "" by then, and a lookup answers an id only when that id's text equals the text asked for, so
// the entry is dead at once), and each later delta reclaims a bounded number of queued entries
// (`reclaim`, newest first). The slot a removal would clear is a random access into a table of
// all the services, a cache miss; a delta of 65,535 removes spent a fifth of its time there.
// Re-indexing an id drops its old entry first, so every id has at most one entry, dead or live:
// the table is bounded by the service ids in use since the last full load (which starts a new
// model), as every per-service column is, and a dead entry costs a lookup one more probe step.
import { mix32, OBJECT_OVERHEAD, tableCapacity } from "./table_hash";
import { IdMarks } from "./wire_marks";

/** The hash of a hostname's UTF-16 code units (hostnames are ASCII: isHostname). */
export function hostnameHash(text: string): u32 {
  const p = changetype<usize>(text);
  const n = <usize>text.length;
  let h: u32 = 0x811c9dc5 ^ <u32>n;
  for (let i: usize = 0; i < n; i++) h = (h ^ <u32>load<u16>(p + (i << 1))) * 0x01000193;
  return mix32(h);
}

export class HostnameIndex {
  /** [hash:32][id + 1:32] per slot; 0 = empty. A power of two, at most 2/3 full. */
  private slots: StaticArray<u64> = new StaticArray<u64>(8);
  private mask: u32 = 7;
  private used: i32 = 0;
  /** Per id: the hash of the hostname it is indexed under (valid while it has an entry). */
  private hashes: StaticArray<u32> = new StaticArray<u32>(0);

  get size(): i32 {
    return this.used;
  }

  /** Ids retired and not reclaimed yet (each at most once: `queued`). */
  private retired: StaticArray<i32> = new StaticArray<i32>(0);
  private retiredCount: i32 = 0;
  private queued: IdMarks = new IdMarks();

  /**
   * The id indexed under `text`, or -1. `names` holds each id's hostname (Mesh.sHostname; ""
   * for an id without a service), so a retired id's entry never answers.
   */
  find(text: string, names: Array<string>): i32 {
    if (text.length == 0) return -1;
    const hash = hostnameHash(text);
    const slots = this.slots;
    const mask = this.mask;
    let i = hash & mask;
    for (let probes: u32 = 0; probes <= mask; probes++) {
      const entry = unchecked(slots[<i32>i]);
      if (entry == 0) return -1;
      if (<u32>(entry >> 32) == hash) {
        const id = <i32>(<u32>entry) - 1;
        if (id < names.length && unchecked(names[id]) == text) return id;
      }
      i = (i + 1) & mask;
    }
    return -1;
  }

  /** Indexes `id` under `text` (absent, and id not indexed: the callers check both first). */
  add(text: string, id: i32): void {
    if (id < 0) return;
    if (id >= this.hashes.length) this.growHashes(id);
    else this.remove(id); // a caller's mistake must not leave two entries for one id
    if ((this.used + 1) * 3 > (<i32>this.mask + 1) * 2) this.grow();
    const hash = hostnameHash(text);
    unchecked((this.hashes[id] = hash));
    this.place((<u64>hash << 32) | (<u64>id + 1));
    this.used++;
  }

  /**
   * Queues id's entry for reclaiming (its hostname in `names` is now ""): O(1), no access to
   * the table.
   */
  // @ts-ignore: decorator
  @inline retire(id: i32): void {
    if (id < 0 || id >= this.hashes.length || !this.queued.mark(<u32>id)) return;
    if (this.retiredCount >= this.retired.length) this.growRetired();
    unchecked((this.retired[this.retiredCount++] = id));
  }

  private growRetired(): void {
    const next = new StaticArray<i32>(max(16, this.retiredCount * 2));
    memory.copy(changetype<usize>(next), changetype<usize>(this.retired), <usize>this.retiredCount << 2);
    this.retired = next;
  }

  /**
   * Drops up to `budget` retired entries, newest first; an id indexed again since (its text in
   * `names` not "") kept its new entry when it was re-indexed, and is only dequeued.
   */
  reclaim(budget: i32, names: Array<string>): void {
    while (budget-- > 0 && this.retiredCount > 0) {
      const id = unchecked(this.retired[--this.retiredCount]);
      this.queued.unmark(<u32>id);
      if (id < names.length && unchecked(names[id]).length == 0) this.remove(id);
    }
  }

  /** Retired entries not reclaimed yet (tests). */
  get retiredSize(): i32 {
    return this.retiredCount;
  }

  /** Drops id's entry, if it has one: integer compares only (no text is read). */
  remove(id: i32): void {
    if (id < 0 || id >= this.hashes.length) return;
    const want = (<u64>unchecked(this.hashes[id]) << 32) | (<u64>id + 1);
    const slots = this.slots;
    const mask = this.mask;
    let i = <u32>(want >> 32) & mask;
    let found = false;
    for (let probes: u32 = 0; probes <= mask; probes++) {
      const entry = unchecked(slots[<i32>i]);
      if (entry == 0) return;
      if (entry == want) {
        found = true;
        break;
      }
      i = (i + 1) & mask;
    }
    if (!found) return;
    // Backward shift: move each later entry of the run into the hole unless its home lies
    // (cyclically) after the hole.
    let hole = i;
    let j = (i + 1) & mask;
    while (true) {
      const entry = unchecked(slots[<i32>j]);
      if (entry == 0) break;
      const home = <u32>(entry >> 32) & mask;
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        unchecked((slots[<i32>hole] = entry));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    unchecked((slots[<i32>hole] = 0));
    this.used--;
  }

  /** Room for `extra` more entries with one growth at most (a full load knows its count). */
  reserve(extra: i32): void {
    const want = <i64>this.used + <i64>extra;
    if (want * 3 <= (<i64>this.mask + 1) * 2) return;
    this.rebuild(tableCapacity(<i32>min<i64>(want, 0x3fffffff)));
  }

  byteSize(): i64 {
    return <i64>this.slots.length * 8 + <i64>this.hashes.length * 4 + <i64>this.retired.length * 4 + <i64>this.queued.byteSize() + OBJECT_OVERHEAD * 4;
  }

  private place(entry: u64): void {
    const slots = this.slots;
    const mask = this.mask;
    let i = <u32>(entry >> 32) & mask;
    while (unchecked(slots[<i32>i]) != 0) i = (i + 1) & mask;
    unchecked((slots[<i32>i] = entry));
  }

  private grow(): void {
    this.rebuild((<i32>this.mask + 1) << 1);
  }

  private rebuild(capacity: i32): void {
    const old = this.slots;
    this.slots = new StaticArray<u64>(capacity);
    this.mask = <u32>capacity - 1;
    for (let i = 0; i < old.length; i++) {
      const entry = unchecked(old[i]);
      if (entry != 0) this.place(entry);
    }
  }

  private growHashes(id: i32): void {
    const size = max(id + 1, min(this.hashes.length * 2, (id + 1) * 2));
    const next = new StaticArray<u32>(size);
    memory.copy(changetype<usize>(next), changetype<usize>(this.hashes), <usize>this.hashes.length << 2);
    this.hashes = next;
  }
}

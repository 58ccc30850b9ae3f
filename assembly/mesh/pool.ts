// Variable-length per-owner lists in one flat u32 array: the mutable replacement for the
// compressed-row (start/pool) layout, so a workload's extra addresses, a membership's port
// overrides and a service's ports, VIPs, SANs and members can each be replaced in place.
//
// A chunk is [owner, capacity, data x capacity]; `index` maps owner -> data offset + 1. A
// replaced or freed chunk becomes garbage. When an allocation does not fit and garbage is at
// least a third of the used words (and 64), the pool first compacts in place: live chunks
// slide down in address order (a chunk is live when the index still points at it). Only when
// it still does not fit does the array grow, by doubling, so it doubles only when at least 2/3
// of it is live and stays within about 3x its live words + 128. Offsets handed out
// are valid until the next alloc / resize of any owner (compaction moves chunks).
import { exactCapacity } from "./table";
import { SparseColumn } from "./table";
import { OBJECT_OVERHEAD } from "./table";

const HEADER: i32 = 2;

export class ChunkPool {
  words: StaticArray<u32>;
  private used: i32 = 0;
  private garbage: i32 = 0;
  private index: SparseColumn;

  /** Room for `words` words of data in `chunks` chunks, owners < `owners` (build sizing). */
  constructor(words: i32 = 0, chunks: i64 = 0, owners: i32 = 0) {
    this.words = new StaticArray<u32>(max(0, words) + <i32>min<i64>(chunks, 0x10000000) * HEADER);
    this.index = new SparseColumn(owners, chunks);
  }

  /** What the constructor allocates, for the build's memory reservation. */
  static bytesFor(words: i64, chunks: i64, owners: i32): i64 {
    return (words + chunks * HEADER) * 4 + OBJECT_OVERHEAD + SparseColumn.bytesFor(owners, chunks);
  }

  /** Data offset of owner's chunk, or -1. (Inlined: several per record on the update path.) */
  // @ts-ignore: decorator
  @inline offset(owner: i32): i32 {
    const at = <i32>this.index.get(owner) - 1;
    return at >= HEADER && at <= this.used ? at : -1;
  }

  /** Data words of owner's chunk (0 when it has none). */
  // @ts-ignore: decorator
  @inline capacityOf(owner: i32): i32 {
    const at = this.offset(owner);
    return at < 0 ? 0 : <i32>unchecked(this.words[at - 1]);
  }

  /** Data words of the chunk at data offset `at` (an offset from `offset`, not -1). */
  // @ts-ignore: decorator
  @inline capacityAt(at: i32): i32 {
    return at >= HEADER && at <= this.used ? <i32>unchecked(this.words[at - 1]) : 0;
  }

  /** Word `at` of the pool (an offset from `offset` plus an index below `capacityOf`). */
  // @ts-ignore: decorator
  @inline word(at: i32): u32 {
    return <u32>at < <u32>this.words.length ? unchecked(this.words[at]) : 0;
  }

  // @ts-ignore: decorator
  @inline setWord(at: i32, value: u32): void {
    if (<u32>at < <u32>this.words.length) unchecked((this.words[at] = value));
  }

  /**
   * A fresh chunk of `capacity` zeroed words for `owner` (its old chunk, if any, becomes
   * garbage); the data offset. `span` is the owner id limit (for the index's form).
   */
  alloc(owner: i32, capacity: i32, span: i32): i32 {
    this.free(owner);
    const at = this.place(owner, capacity, span);
    memory.fill(changetype<usize>(this.words) + (<usize>at << 2), 0, <usize>capacity << 2);
    return at;
  }

  /** owner's chunk with `capacity` words, keeping its first words (as many as fit). */
  resize(owner: i32, capacity: i32, span: i32): i32 {
    const before = this.capacityOf(owner);
    this.reserve(capacity + HEADER);
    const old = this.offset(owner); // after a compaction that may have moved it
    const at = this.place(owner, capacity, span);
    const words = changetype<usize>(this.words);
    const keep = min(before, capacity);
    memory.fill(words + (<usize>at << 2), 0, <usize>capacity << 2);
    if (old >= 0 && keep > 0) memory.copy(words + (<usize>at << 2), words + (<usize>old << 2), <usize>keep << 2);
    if (old >= 0) this.garbage += before + HEADER;
    return at;
  }

  /** Drops owner's chunk, found at data offset `at` (from `offset`, not -1). */
  // @ts-ignore: decorator
  @inline freeAt(owner: i32, at: i32): void {
    this.garbage += this.capacityAt(at) + HEADER;
    this.index.remove(owner);
  }

  /** Drops owner's chunk. */
  free(owner: i32): void {
    const at = this.offset(owner);
    if (at < 0) return;
    this.garbage += <i32>unchecked(this.words[at - 1]) + HEADER;
    this.index.remove(owner);
  }

  /** Forgets every chunk, keeping the array. */
  clear(): void {
    this.used = 0;
    this.garbage = 0;
    this.index.clear();
  }

  /** Live and garbage words, for the benchmark and tests. */
  usedWords(): i32 {
    return this.used;
  }

  garbageWords(): i32 {
    return this.garbage;
  }

  byteSize(): i64 {
    return <i64>this.words.length * 4 + OBJECT_OVERHEAD + this.index.byteSize();
  }

  /** Appends a chunk header for owner (room reserved here) and points the index at it. */
  private place(owner: i32, capacity: i32, span: i32): i32 {
    this.reserve(capacity + HEADER);
    const start = this.used;
    unchecked((this.words[start] = <u32>owner));
    unchecked((this.words[start + 1] = <u32>capacity));
    this.used = start + HEADER + capacity;
    const at = start + HEADER;
    this.index.put(owner, <u32>(at + 1), span);
    return at;
  }

  /**
   * Makes room for `need` more words: compacts when garbage is worth it, else grows. Inlined
   * test (a member list's first chunk is placed once per service a workload joins).
   */
  // @ts-ignore: decorator
  @inline private reserve(need: i32): void {
    if (this.used + need > this.words.length) this.makeRoom(need);
  }

  private makeRoom(need: i32): void {
    if (this.garbage > 64 && this.garbage * 3 >= this.used) this.compact();
    if (this.used + need <= this.words.length) return;
    const next = new StaticArray<u32>(max(this.used + need, this.words.length * 2));
    memory.copy(changetype<usize>(next), changetype<usize>(this.words), <usize>this.used << 2);
    this.words = next;
  }

  /** Slides live chunks down over the garbage, in address order. */
  private compact(): void {
    const words = this.words;
    const base = changetype<usize>(words);
    let read = 0;
    let write = 0;
    while (read + HEADER <= this.used) {
      const owner = <i32>unchecked(words[read]);
      const capacity = <i32>unchecked(words[read + 1]);
      const at = read + HEADER;
      if (<i32>this.index.get(owner) - 1 == at) {
        if (write != read) {
          memory.copy(base + (<usize>write << 2), base + (<usize>read << 2), <usize>(capacity + HEADER) << 2);
          this.index.put(owner, <u32>(write + HEADER + 1), 0);
        }
        write += capacity + HEADER;
      }
      read = at + capacity;
    }
    this.used = write;
    this.garbage = 0;
  }
}

/** exactCapacity re-exported for callers sizing pools. */
export { exactCapacity };

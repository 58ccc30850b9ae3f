// Ids for the objects of one delta channel (workloads by uid, services by hostname) that depend
// only on which objects exist, never on the order they arrived in: two feed processes (another
// replica, or this one after a restart) over the same mesh give every object the same id, so a
// filter's model stays valid across them (feed/docs/deltas.md, "Ids").
//
// The rule is an ordered linear-probing table (Amble and Knuth's "ordered hash table"): a key's
// home is hash(key) mod size, and with every key sorted by (home, hash, key), each one's id is
// max(home, id of the key before it + 1). The layout is a function of the set of keys: it is
// the same whatever order they were added and removed in. Adding or removing a key moves only
// the keys after it in its run of consecutive ids (short at the load kept here); a key that moves
// is, to the filters, a remove of its old id and an upsert at the new one.
//
// The size is a function of the number of keys too (the smallest 2^k or 3·2^(k-1) holding them
// at the configured load, at least MIN_SIZE): when it changes every key is laid out again, a
// version that re-sends every object once (each step is ×1.33 or ×1.5). The filter indexes its
// columns by id, so ids stay near the number of objects: below size + the last run's overflow.

export const MIN_SIZE = 64;

/** What one change of the key set did to ids: every key whose id changed (-1: it had none / has none now). */
export type IdMoves = Map<string, { before: number; after: number }>;

/** FNV-1a over the key's UTF-16 code units, then murmur3's finaliser: a deterministic 32-bit hash. */
export function keyHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The table size for `n` keys at load at most `load`: 2^k or 3·2^(k-1), at least MIN_SIZE. */
export function sizeFor(n: number, load: number): number {
  const need = Math.ceil(n / load);
  let s = MIN_SIZE;
  for (;;) {
    if (s >= need) return s;
    if ((s / 2) * 3 >= need) return (s / 2) * 3;
    s *= 2;
  }
}

export class CanonicalIds {
  /** The key at each id (undefined: free). */
  private slots: Array<string | undefined> = [];
  private hashes: number[] = [];
  private readonly ids = new Map<string, number>();
  private size: number;

  constructor(private readonly load: number) {
    this.size = sizeFor(0, load);
  }

  get(key: string): number | undefined {
    return this.ids.get(key);
  }

  keyAt(id: number): string | undefined {
    return this.slots[id];
  }

  has(key: string): boolean {
    return this.ids.has(key);
  }

  get count(): number {
    return this.ids.size;
  }

  /** Every id in use is below this (the last used id + 1). */
  get limit(): number {
    return this.slots.length;
  }

  get tableSize(): number {
    return this.size;
  }

  /**
   * Removes `removed` and adds `added` (keys already absent / present are skipped); returns every
   * key whose id changed. Undo with `change(added, removed)`: the layout depends only on the set.
   */
  change(removed: Iterable<string>, added: Iterable<string>): IdMoves {
    const gone = [...removed].filter((k) => this.ids.has(k));
    const fresh = [...new Set(added)].filter((k) => !this.ids.has(k));
    const moves: IdMoves = new Map();
    const nextSize = sizeFor(this.ids.size - gone.length + fresh.length, this.load);
    if (nextSize !== this.size) {
      this.relayout(nextSize, gone, fresh, moves);
      return moves;
    }
    for (const k of gone) this.remove(k, moves);
    for (const k of fresh) this.insert(k, moves);
    for (const [k, m] of moves) if (m.before === m.after) moves.delete(k);
    return moves;
  }

  private note(moves: IdMoves, key: string, before: number, after: number): void {
    const m = moves.get(key);
    if (m) m.after = after;
    else moves.set(key, { before, after });
  }

  /** Whether key a (hash ha) sorts before key b (hash hb) in the layout's order. */
  private before(a: string, ha: number, b: string, hb: number): boolean {
    const homeA = ha % this.size;
    const homeB = hb % this.size;
    if (homeA !== homeB) return homeA < homeB;
    if (ha !== hb) return ha < hb;
    return a < b;
  }

  private place(id: number, key: string | undefined, hash: number): void {
    this.slots[id] = key;
    this.hashes[id] = hash;
    if (key !== undefined) this.ids.set(key, id);
  }

  private insert(key: string, moves: IdMoves): void {
    const h = keyHash(key);
    let p = h % this.size;
    while (p < this.slots.length && this.slots[p] !== undefined && this.before(this.slots[p]!, this.hashes[p], key, h)) p++;
    // The keys from p to the end of the run move up by one.
    let end = p;
    while (end < this.slots.length && this.slots[end] !== undefined) end++;
    for (let j = end; j > p; j--) {
      const k = this.slots[j - 1]!;
      this.place(j, k, this.hashes[j - 1]);
      this.note(moves, k, j - 1, j);
    }
    this.place(p, key, h);
    this.note(moves, key, -1, p);
  }

  private remove(key: string, moves: IdMoves): void {
    const p = this.ids.get(key)!;
    this.ids.delete(key);
    this.slots[p] = undefined;
    this.note(moves, key, p, -1);
    // The keys after it in its run move down as far as their homes let them.
    let free = p;
    for (let s = p + 1; s < this.slots.length && this.slots[s] !== undefined; s++) {
      const k = this.slots[s]!;
      const home = this.hashes[s] % this.size;
      const to = Math.max(home, free);
      if (to === s) break;
      this.place(to, k, this.hashes[s]);
      this.slots[s] = undefined;
      this.note(moves, k, s, to);
      free = to + 1;
    }
    while (this.slots.length > 0 && this.slots[this.slots.length - 1] === undefined) {
      this.slots.pop();
      this.hashes.pop();
    }
  }

  /** Lays every key out again for a new size (the set's canonical layout, built from scratch). */
  private relayout(size: number, gone: string[], fresh: string[], moves: IdMoves): void {
    const kept = new Map(this.ids);
    for (const k of gone) kept.delete(k);
    const keys = [...kept.keys(), ...fresh].map((k) => ({ k, h: keyHash(k) }));
    this.size = size;
    keys.sort((a, b) => (this.before(a.k, a.h, b.k, b.h) ? -1 : 1));
    const old = new Map(this.ids);
    this.ids.clear();
    this.slots = [];
    this.hashes = [];
    let last = -1;
    for (const { k, h } of keys) {
      const id = Math.max(h % size, last + 1);
      while (this.slots.length < id) {
        this.slots.push(undefined);
        this.hashes.push(0);
      }
      this.place(id, k, h);
      last = id;
    }
    for (const [k, id] of old) if (this.ids.get(k) !== id) moves.set(k, { before: id, after: this.ids.get(k) ?? -1 });
    for (const k of fresh) moves.set(k, { before: -1, after: this.ids.get(k)! });
  }
}

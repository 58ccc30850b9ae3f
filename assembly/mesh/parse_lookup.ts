// Lookups by the bytes of a JSON token during the mesh build, so a text a million pods repeat is
// decoded once: interned texts (TextIndex), workload uids (UidIndex, in memory lent by the
// build) and shared references (RefIndex).
import { hashBytes, JsonStream } from "../json";
import { Address, FAMILY_V4 } from "./ip";
import { StringTable } from "./intern";
import { Ref } from "./model";
import { exactCapacity, mix32, mix64, slotOf } from "./table";

/**
 * Finds interned texts by the UTF-8 bytes of a string token, so a text repeated by a million
 * pods is decoded once. Indexes every id of `table` (hash → id, compared with its UTF-8).
 */
export class TextIndex {
  private slots: StaticArray<u32> = new StaticArray<u32>(32); // [hash, id + 1] per slot
  private mask: i32 = 15;
  private used: i32 = 0;

  constructor(private table: StringTable) {
    for (let id = 0; id < table.size; id++) this.add(id);
  }

  /** The id of the current string token's text, or -1. */
  find(s: JsonStream): i32 {
    if (s.stringEscaped()) return this.table.find(s.stringValue());
    const hash = s.stringHash();
    const ptr = s.stringPtr();
    const len = s.stringByteLength();
    const slots = this.slots;
    let i = <i32>hash & this.mask;
    for (let probes = 0; probes <= this.mask; probes++) {
      const at = i << 1;
      const entry = unchecked(slots[at + 1]);
      if (entry == 0) return -1;
      if (unchecked(slots[at]) == hash) {
        const id = <i32>entry - 1;
        const bytes = this.table.utf8(id);
        if (bytes.byteLength == len && memory.compare(changetype<usize>(bytes), ptr, <usize>len) == 0) return id;
      }
      i = (i + 1) & this.mask;
    }
    return -1;
  }

  /** Interns `text` in the table (and here). */
  intern(text: string): i32 {
    const before = this.table.size;
    const id = this.table.intern(text);
    if (id >= before) this.add(id);
    return id;
  }

  private add(id: i32): void {
    if ((this.used + 1) * 2 > this.mask + 1) this.grow();
    const bytes = this.table.utf8(id);
    this.place(hashBytes(changetype<usize>(bytes), bytes.byteLength), <u32>id + 1);
    this.used++;
  }

  private place(hash: u32, entry: u32): void {
    const slots = this.slots;
    let i = <i32>hash & this.mask;
    while (unchecked(slots[(i << 1) + 1]) != 0) i = (i + 1) & this.mask;
    unchecked((slots[i << 1] = hash));
    unchecked((slots[(i << 1) + 1] = entry));
  }

  private grow(): void {
    const old = this.slots;
    const capacity = (this.mask + 1) << 1;
    this.slots = new StaticArray<u32>(capacity << 1);
    this.mask = capacity - 1;
    for (let i = 0; i + 1 < old.length; i += 2) {
      if (unchecked(old[i + 1]) != 0) this.place(unchecked(old[i]), unchecked(old[i + 1]));
    }
  }
}

/**
 * uid → workload index while parsing (uids are not kept): 4 bytes per slot (owner + 1 in the
 * low bits, hash bits above) and 4 per workload (where its uid is in the input), in memory the
 * parser lends it until the services are read and then gives to the IPv4 address table (see
 * fillV4Table in parse_workloads.ts), so the index costs nothing at the peak. uids are compared by their
 * text in the input.
 */
export class UidIndex {
  /** One block: `capacity` slots, then one offset per workload (see bytesFor). */
  private slots: usize = 0;
  private offsets: usize = 0;
  private capacity: i32 = 0;
  private count: i32 = 0;
  private limit: i32 = 0;
  private ownerMask: u32 = 0;

  /** Room for `n` workloads in `storage` (at least wordsFor(n) u32 words, owned by the caller). */
  init(n: i32, storage: StaticArray<u32>): void {
    this.release();
    const capacity = exactCapacity(n);
    if (<i64>storage.length < UidIndex.wordsFor(n)) return; // capacity 0: nothing is found
    this.slots = changetype<usize>(storage);
    memory.fill(this.slots, 0, <usize>capacity << 2);
    this.offsets = this.slots + (<usize>capacity << 2);
    this.capacity = capacity;
    this.limit = n;
    this.count = 0;
    // Enough low bits for n + 1; the rest of the slot holds hash bits that rule out most
    // non-matching slots without touching the input.
    const bits = 32 - clz<u32>(<u32>n + 1);
    this.ownerMask = bits >= 32 ? 0xffffffff : (<u32>1 << <u32>bits) - 1;
  }

  /** The workload whose uid equals the current string token of `s`, or -1. */
  find(s: JsonStream): i32 {
    return this.probe(s, s.stringHash(), -1);
  }

  /**
   * Adds workload w (= the count so far) with the current string token of `s` as its uid,
   * unless a workload already has that uid: then nothing is added and that workload is
   * returned. -1 when added.
   */
  add(s: JsonStream, w: i32): i32 {
    if (w != this.count || w >= this.limit || this.count + 1 >= this.capacity) return -1;
    return this.probe(s, s.stringHash(), w);
  }

  /** Finds the uid; when absent and `add` >= 0, stores it as workload `add` in the free slot. */
  private probe(s: JsonStream, hash: u32, add: i32): i32 {
    if (this.capacity == 0) return -1;
    const tag = hash & ~this.ownerMask;
    const capacity = <u32>this.capacity;
    // The home slot from remixed bits, so it does not correlate with the tag (high bits).
    let i = slotOf(mix32(hash), capacity);
    for (let probes = 0; probes < this.capacity; probes++) {
      const slot = this.slots + (<usize>i << 2);
      const entry = load<u32>(slot);
      if (entry == 0) {
        if (add >= 0) {
          store<u32>(this.offsets + (<usize>add << 2), <u32>s.tokenOffset());
          store<u32>(slot, tag | (<u32>add + 1));
          this.count++;
        }
        return -1;
      }
      if ((entry & ~this.ownerMask) == tag) {
        const w = <i32>(entry & this.ownerMask) - 1;
        if (w >= 0 && w < this.count && s.sameStringAt(<i32>load<u32>(this.offsets + (<usize>w << 2)))) return w;
      }
      i = i + 1 == capacity ? 0 : i + 1;
    }
    return -1;
  }

  /** u32 words the index needs for n workloads: its slots, then one uid offset per workload. */
  static wordsFor(n: i32): i64 {
    return <i64>exactCapacity(n) + <i64>max(n, 1);
  }

  /** Forgets the storage (the caller owns it and reuses it for the IPv4 table). */
  release(): void {
    this.slots = 0;
    this.offsets = 0;
    this.capacity = 0;
    this.count = 0;
  }
}

/** Identical references share one id: hostname + port, or address + port + network. */
export class RefIndex {
  private slots: StaticArray<u32> = new StaticArray<u32>(32); // [hash, id + 1]
  private mask: i32 = 15;
  private used: i32 = 0;

  constructor(private refs: Array<Ref>) {}

  findHostname(s: JsonStream, port: i32): i32 {
    const hash = RefIndex.hostnameHash(s.stringHash(), port);
    let i = <i32>hash & this.mask;
    for (let probes = 0; probes <= this.mask; probes++) {
      const entry = unchecked(this.slots[(i << 1) + 1]);
      if (entry == 0) return -1;
      if (unchecked(this.slots[i << 1]) == hash) {
        const id = <i32>entry - 1;
        if (id < this.refs.length) {
          const ref = unchecked(this.refs[id]);
          if (ref.hostname.length > 0 && ref.port == port && s.stringEquals(ref.hostname)) return id;
        }
      }
      i = (i + 1) & this.mask;
    }
    return -1;
  }

  findAddress(a: Address, port: i32, network: i32): i32 {
    const hash = RefIndex.addressHash(a, port, network);
    let i = <i32>hash & this.mask;
    for (let probes = 0; probes <= this.mask; probes++) {
      const entry = unchecked(this.slots[(i << 1) + 1]);
      if (entry == 0) return -1;
      if (unchecked(this.slots[i << 1]) == hash) {
        const id = <i32>entry - 1;
        if (id < this.refs.length) {
          const ref = unchecked(this.refs[id]);
          if (ref.hostname.length == 0 && ref.port == port && ref.network == network && ref.address.sameIp(a)) {
            return id;
          }
        }
      }
      i = (i + 1) & this.mask;
    }
    return -1;
  }

  /** Adds `ref` as a new reference; its id. */
  add(ref: Ref, hash: u32): i32 {
    const id = this.refs.length;
    this.refs.push(ref);
    if ((this.used + 1) * 2 > this.mask + 1) this.grow();
    this.place(hash, <u32>id + 1);
    this.used++;
    return id;
  }

  static hostnameHash(textHash: u32, port: i32): u32 {
    return mix32(textHash ^ mix32(<u32>port + 0x9e3779b9));
  }

  static addressHash(a: Address, port: i32, network: i32): u32 {
    const key = a.family == FAMILY_V4 ? <u64>a.v4 : a.hi ^ mix64(a.lo);
    return <u32>mix64(key ^ ((<u64>port << 40) | (<u64>network << 8) | <u64>a.family));
  }

  private place(hash: u32, entry: u32): void {
    let i = <i32>hash & this.mask;
    while (unchecked(this.slots[(i << 1) + 1]) != 0) i = (i + 1) & this.mask;
    unchecked((this.slots[i << 1] = hash));
    unchecked((this.slots[(i << 1) + 1] = entry));
  }

  private grow(): void {
    const old = this.slots;
    const capacity = (this.mask + 1) << 1;
    this.slots = new StaticArray<u32>(capacity << 1);
    this.mask = capacity - 1;
    for (let i = 0; i + 1 < old.length; i += 2) {
      if (unchecked(old[i + 1]) != 0) this.place(unchecked(old[i]), unchecked(old[i + 1]));
    }
  }
}


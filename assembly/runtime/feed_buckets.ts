// The bucket digests of the model a feed client holds (format 3; feed/docs/deltas.md, "Repair"):
// what the feed said each bucket's digest is, from the trailer of every full, delta and repair
// message this VM applied. When the feed cannot send a delta from this VM's version (it
// restarted, or another replica answers) it asks for them, and the VM sends them back in one
// POST (BUCKET_COUNT × 8 bytes); the feed answers with the records of the buckets that differ.
// Before a message is applied its trailer is checked against the header: the buckets' new
// digests must add up to the message's content digest (a full: the listed ones; a delta or
// repair: this table with the listed ones replaced), so a trailer that disagrees with the header
// is refused with the message. Cost: linear in the trailer; the sum is kept, not recomputed.
import { BUCKET_COUNT, BUCKET_ENTRY_BYTES } from "../mesh/wire_layout";

export class FeedBuckets {
  private digests: StaticArray<u64> = new StaticArray<u64>(0);
  /** Whether the table describes the model in force (a format-3 message set it). */
  known: bool = false;
  private total: u64 = 0;

  /** Forgets the table (a format-2 message, or a refusal that asks for a full model). */
  forget(): void {
    this.known = false;
  }

  /**
   * Checks the trailer at [at, end) of `message`: "" when well formed and its digests, applied
   * to this table (from empty when `full`), add up to `digest`; else why not (one line).
   */
  check(message: ArrayBuffer, at: i32, end: i32, full: bool, digest: u64): string {
    if (end - at < 4) return "trailer: " + (end - at).toString() + " bytes (at least the u32 count)";
    const base = changetype<usize>(message);
    const count = <i64>load<u32>(base + <usize>at);
    if (count > <i64>BUCKET_COUNT || <i64>(end - at - 4) != count * BUCKET_ENTRY_BYTES) {
      return "trailer: " + (end - at).toString() + " bytes is not 4 + 12 × count (count " + count.toString() + ", at most " + BUCKET_COUNT.toString() + ")";
    }
    if (!full && !this.known) return "trailer: a delta or repair, but this VM has no bucket digests";
    let sum: u64 = full ? 0 : this.total;
    let previous: i64 = -1;
    for (let i = 0; i < <i32>count; i++) {
      const p = base + <usize>(at + 4 + i * BUCKET_ENTRY_BYTES);
      const b = <i64>load<u32>(p);
      if (b >= <i64>BUCKET_COUNT || b <= previous) return "trailer.buckets[" + i.toString() + "]: " + b.toString() + " is not a bucket above the one before";
      previous = b;
      if (!full) sum -= unchecked(this.digests[<i32>b]);
      sum += load<u64>(p + 4);
    }
    if (sum != digest) return "trailer: the bucket digests do not add up to the header's content digest";
    return "";
  }

  /** Takes the trailer's digests (checked by `check`); a full message clears the table first. */
  commit(message: ArrayBuffer, at: i32, full: bool, digest: u64): void {
    if (this.digests.length != BUCKET_COUNT) this.digests = new StaticArray<u64>(BUCKET_COUNT);
    const d = this.digests;
    if (full) for (let i = 0; i < BUCKET_COUNT; i++) unchecked((d[i] = 0));
    const base = changetype<usize>(message);
    const count = <i32>load<u32>(base + <usize>at);
    for (let i = 0; i < count; i++) {
      const p = base + <usize>(at + 4 + i * BUCKET_ENTRY_BYTES);
      unchecked((d[<i32>load<u32>(p)] = load<u64>(p + 4)));
    }
    this.total = digest;
    this.known = true;
  }

  /** The table as the feed reads it: BUCKET_COUNT little-endian u64 digests. */
  body(): ArrayBuffer {
    const out = new ArrayBuffer(BUCKET_COUNT * 8);
    if (this.digests.length == BUCKET_COUNT) memory.copy(changetype<usize>(out), changetype<usize>(this.digests), <usize>(BUCKET_COUNT * 8));
    return out;
  }
}

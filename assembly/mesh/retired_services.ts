// RetiredServices: the ids of removed services whose VIPs and SANs are still held, queued for
// a later message to release (edit.ts reclaimRetiredServices).
//
// Releasing a VIP is a backward-shift deletion in a table of every service's VIPs, a random
// access and a probe run per VIP; releasing a SAN is a store and a free-slot push. A delta of
// 65,535 removes (5 bytes each) of services with a VIP and a SAN each spent about half its time
// there. A removed service no longer answers at once without them (it is not live:
// Mesh.serviceByVip, vipCount and sanCount check liveness), so the release can wait. Each id is
// queued at most once (a mark per id), so the queue is bounded by the service ids in use.
import { IdMarks } from "./wire_marks";

export class RetiredServices {
  private ids: StaticArray<i32> = new StaticArray<i32>(0);
  private count: i32 = 0;
  private queued: IdMarks = new IdMarks();

  /** Ids queued. */
  // @ts-ignore: decorator
  @inline get length(): i32 {
    return this.count;
  }

  /** Queues id (once: an id already queued stays where it is). Inlined: once per remove. */
  // @ts-ignore: decorator
  @inline add(id: i32): void {
    if (id >= 0 && this.queued.mark(<u32>id)) {
      if (this.count >= this.ids.length) this.grow();
      unchecked((this.ids[this.count++] = id));
    }
  }

  /** The id queued last (dequeued), or -1 when none is. */
  pop(): i32 {
    if (this.count <= 0) return -1;
    const id = unchecked(this.ids[--this.count]);
    this.queued.unmark(<u32>id);
    return id;
  }

  /** Bytes held (the model's memory accounting). */
  byteSize(): i64 {
    return <i64>this.ids.length * 4 + <i64>this.queued.byteSize();
  }

  private grow(): void {
    const next = new StaticArray<i32>(max(16, this.ids.length * 2));
    memory.copy(changetype<usize>(next), changetype<usize>(this.ids), <usize>this.count << 2);
    this.ids = next;
  }
}

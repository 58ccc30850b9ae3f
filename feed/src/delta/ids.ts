// Dense u32 ids for the objects of one delta channel (workloads by uid, services by hostname).
// The filter indexes its columns directly by id, so ids stay small: a freed id is reused
// (last freed, first reused) and `limit` (every id < limit) only grows to the largest number
// of objects alive at once in this process's epoch. Ids mean nothing across epochs: a feed
// restart starts at 0 again and every client gets a full message.
export class IdAllocator {
  private readonly ids = new Map<string, number>();
  private readonly free: number[] = [];
  private next = 0;

  get(key: string): number | undefined {
    return this.ids.get(key);
  }

  /** The key's id, allocating one (a freed id first) when it has none. */
  acquire(key: string): { id: number; fresh: boolean } {
    const have = this.ids.get(key);
    if (have !== undefined) return { id: have, fresh: false };
    const id = this.free.length > 0 ? this.free.pop()! : this.next++;
    this.ids.set(key, id);
    return { id, fresh: true };
  }

  /** Frees the key's id for reuse; returns it (undefined when the key had none). */
  release(key: string): number | undefined {
    const id = this.ids.get(key);
    if (id === undefined) return undefined;
    this.ids.delete(key);
    this.free.push(id);
    return id;
  }

  /** Undoes an acquire that was not committed (a refused version): the id goes back unused. */
  unacquire(key: string, id: number): void {
    if (this.ids.get(key) !== id) return;
    this.ids.delete(key);
    if (id === this.next - 1) this.next--;
    else this.free.push(id);
  }

  /** Every id handed out in this epoch is below this (the header's id limit). */
  get limit(): number {
    return this.next;
  }

  get size(): number {
    return this.ids.size;
  }
}

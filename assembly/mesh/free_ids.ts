// FreeIds: the freed slot ids of a column (port slots, SAN slots), reused last freed first.
//
// A flat array and a count, with inlined push and pop. It replaced an Array<i32>, whose push
// and pop are calls (with their own stack-frame bookkeeping) once per port or SAN a service
// loses or gains: a delta of 65,535 service removes made 65,535 of them.

export class FreeIds {
  private ids: StaticArray<i32> = new StaticArray<i32>(0);
  private count: i32 = 0;

  /** Ids held. */
  // @ts-ignore: decorator
  @inline get length(): i32 {
    return this.count;
  }

  // @ts-ignore: decorator
  @inline push(id: i32): void {
    if (this.count >= this.ids.length) this.grow();
    unchecked((this.ids[this.count++] = id));
  }

  /** The id freed last (removed), or -1 when none is free. */
  // @ts-ignore: decorator
  @inline pop(): i32 {
    return this.count > 0 ? unchecked(this.ids[--this.count]) : -1;
  }

  private grow(): void {
    const next = new StaticArray<i32>(max(16, this.ids.length * 2));
    memory.copy(changetype<usize>(next), changetype<usize>(this.ids), <usize>this.count << 2);
    this.ids = next;
  }
}

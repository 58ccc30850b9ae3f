// Where a windowed JsonStream gets its bytes: the document is never whole in linear memory,
// the reader copies the part it is reading into its own window and refills it as it moves.
// A plugin configuration comes from the host this way (assembly/runtime: HostBufferSource);
// MemorySource serves a buffer the same way so tests can drive the windowed path with tiny
// windows.

export abstract class ByteSource {
  /** Total size of the document in bytes. */
  abstract size(): i32;

  /**
   * Copies bytes [start, start + length), clamped to the document, to `dest`. Returns how many
   * were copied; fewer than asked (before the end) means the source failed.
   */
  abstract read(start: i32, length: i32, dest: usize): i32;
}

/** A document already in memory, served through the windowed interface. */
export class MemorySource extends ByteSource {
  /** How many times read() was called (tests check that windows are really refilled). */
  reads: i32 = 0;

  constructor(private bytes: ArrayBuffer) {
    super();
  }

  size(): i32 {
    return this.bytes.byteLength;
  }

  read(start: i32, length: i32, dest: usize): i32 {
    this.reads++;
    const total = this.bytes.byteLength;
    if (start < 0 || length <= 0 || start >= total) return 0;
    const count = min(length, total - start);
    memory.copy(dest, changetype<usize>(this.bytes) + <usize>start, <usize>count);
    return count;
  }
}

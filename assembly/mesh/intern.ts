// Interned strings: each distinct text stored once, named by a small integer.
//
// Identities, networks and localities are shared by many pods; a per-pod column then holds a
// 2- or 4-byte id instead of a string. Id 0 is always "". The UTF-8 form is encoded once here
// because filters hand such values straight to the host.
import { OBJECT_OVERHEAD } from "./table";

const EMPTY_BYTES = new ArrayBuffer(0);

export class StringTable {
  private ids: Map<string, i32> = new Map<string, i32>();
  private texts: Array<string> = new Array<string>();
  private bytes: Array<ArrayBuffer> = new Array<ArrayBuffer>();

  constructor() {
    this.intern("");
  }

  get size(): i32 {
    return this.texts.length;
  }

  /** The id of `text`, adding it when new. */
  intern(text: string): i32 {
    if (this.ids.has(text)) return this.ids.get(text);
    const id = this.texts.length;
    this.ids.set(text, id);
    this.texts.push(text);
    this.bytes.push(text.length == 0 ? EMPTY_BYTES : String.UTF8.encode(text));
    return id;
  }

  /** The id of `text`, or -1 when it was never interned. */
  find(text: string): i32 {
    return this.ids.has(text) ? this.ids.get(text) : -1;
  }

  /** The text of `id`; "" for an unknown id. */
  text(id: i32): string {
    return id >= 0 && id < this.texts.length ? unchecked(this.texts[id]) : "";
  }

  /** The UTF-8 bytes of `id` (shared: do not modify); empty for an unknown id. */
  utf8(id: i32): ArrayBuffer {
    return id >= 0 && id < this.bytes.length ? unchecked(this.bytes[id]) : EMPTY_BYTES;
  }

  /** Approximate bytes held: both copies of each text plus the index (about 3 words a key). */
  byteSize(): i64 {
    let total: i64 = OBJECT_OVERHEAD * 6;
    for (let i = 0; i < this.texts.length; i++) {
      total += <i64>unchecked(this.texts[i]).length * 2 + OBJECT_OVERHEAD;
      total += <i64>unchecked(this.bytes[i]).byteLength + OBJECT_OVERHEAD;
      total += 4 + 4 + 24; // array slots + map entry and bucket
    }
    return total;
  }
}

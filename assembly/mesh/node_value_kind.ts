// Which kind of google.protobuf.Value the node metadata holds under a key, read from the
// serialized envoy.config.core.v3.Node that Envoy serves for the property `xds\0node`.
//
// Why: for `xds\0node\0metadata\0NETWORK` Envoy serves a string's bytes raw and a number as its
// 8 bytes (a little-endian double), with nothing saying which. An 8-byte value is therefore
// ambiguous ("network1" is a string; 6.0e+226 has the same 8 bytes), and only the Node message
// itself, where the Value's oneof field number is the kind, can tell them apart. It is read only
// in that case (once per configuration: the Node is ~60 KB with Envoy's extension list).
//
// The reader walks protobuf wire format by hand: Node.metadata is field 3 (a Struct), whose
// `fields` map is field 1 (entries: key = 1, value = 2), and a Value's kind is its oneof field:
// null 1, number 2, string 3, bool 4, struct 5, list 6. Every length is checked against the
// buffer; malformed input gives VALUE_UNREADABLE, never a trap.

export const VALUE_ABSENT: i32 = 0;
export const VALUE_NULL: i32 = 1;
export const VALUE_NUMBER: i32 = 2;
export const VALUE_STRING: i32 = 3;
export const VALUE_BOOL: i32 = 4;
export const VALUE_STRUCT: i32 = 5;
export const VALUE_LIST: i32 = 6;
/** The bytes are not a well-formed Node (or the Value has no kind). */
export const VALUE_UNREADABLE: i32 = -1;

const WIRE_VARINT: u32 = 0;
const WIRE_I64: u32 = 1;
const WIRE_LEN: u32 = 2;
const WIRE_I32: u32 = 5;

const NODE_METADATA: u32 = 3;
const STRUCT_FIELDS: u32 = 1;
const ENTRY_KEY: u32 = 1;
const ENTRY_VALUE: u32 = 2;

/** A cursor over [at, end) of linear memory; `failed` once anything did not fit. */
class Cursor {
  failed: bool = false;
  constructor(public at: usize, readonly end: usize) {}

  more(): bool {
    return !this.failed && this.at < this.end;
  }

  varint(): u64 {
    let value: u64 = 0;
    for (let shift: u64 = 0; shift < 64; shift += 7) {
      if (this.at >= this.end) break;
      const b = load<u8>(this.at);
      this.at++;
      value |= (<u64>(b & 0x7f)) << shift;
      if ((b & 0x80) == 0) return value;
    }
    this.failed = true;
    return 0;
  }

  /** A length-delimited field's [start, end): its start is `this.at` after the call. */
  length(): usize {
    const n = this.varint();
    if (this.failed || n > <u64>(this.end - this.at)) {
      this.failed = true;
      return 0;
    }
    return <usize>n;
  }

  /** Skips a field of wire type `wire`. */
  skip(wire: u32): void {
    if (wire == WIRE_VARINT) this.varint();
    else if (wire == WIRE_I64) this.advance(8);
    else if (wire == WIRE_I32) this.advance(4);
    else if (wire == WIRE_LEN) this.advance(this.length());
    else this.failed = true; // groups (3, 4) are not used by these messages
  }

  advance(n: usize): void {
    if (this.failed || n > this.end - this.at) this.failed = true;
    else this.at += n;
  }
}

/** Whether bytes [ptr, ptr+len) equal the ASCII `key`. */
function keyIs(ptr: usize, len: usize, key: string): bool {
  if (len != <usize>key.length) return false;
  for (let i = 0; i < key.length; i++) {
    if (<i32>load<u8>(ptr + <usize>i) != key.charCodeAt(i)) return false;
  }
  return true;
}

/** The kind of a Value message at [start, end): its first oneof field number. */
function valueKind(start: usize, end: usize): i32 {
  const c = new Cursor(start, end);
  let kind = VALUE_UNREADABLE;
  while (c.more()) {
    const tag = c.varint();
    const field = <u32>(tag >> 3);
    if (field >= 1 && field <= 6) kind = <i32>field; // a oneof: the last one set wins, as in protobuf
    c.skip(<u32>(tag & 7));
  }
  return c.failed ? VALUE_UNREADABLE : kind;
}

/** Within a map entry at [start, end): the Value's kind when its key is `key`, else VALUE_ABSENT. */
function entryKind(start: usize, end: usize, key: string): i32 {
  const c = new Cursor(start, end);
  let matched = false;
  let valueStart: usize = 0;
  let valueEnd: usize = 0;
  let hasValue = false;
  while (c.more()) {
    const tag = c.varint();
    const field = <u32>(tag >> 3);
    const wire = <u32>(tag & 7);
    if ((field == ENTRY_KEY || field == ENTRY_VALUE) && wire == WIRE_LEN) {
      const n = c.length();
      if (c.failed) break;
      if (field == ENTRY_KEY) matched = keyIs(c.at, n, key);
      else {
        valueStart = c.at;
        valueEnd = c.at + n;
        hasValue = true;
      }
      c.advance(n);
    } else {
      c.skip(wire);
    }
  }
  if (c.failed) return VALUE_UNREADABLE;
  if (!matched) return VALUE_ABSENT;
  // An entry without a value is the Value's default: no kind set.
  return hasValue ? valueKind(valueStart, valueEnd) : VALUE_UNREADABLE;
}

/** The kind of node metadata `key` in the serialized Node at [ptr, ptr+len). */
export function nodeMetadataKind(ptr: usize, len: i32, key: string): i32 {
  if (ptr == 0 || len <= 0) return VALUE_UNREADABLE;
  const node = new Cursor(ptr, ptr + <usize>len);
  let kind = VALUE_ABSENT;
  while (node.more()) {
    const tag = node.varint();
    const field = <u32>(tag >> 3);
    const wire = <u32>(tag & 7);
    if (field != NODE_METADATA || wire != WIRE_LEN) {
      node.skip(wire);
      continue;
    }
    const n = node.length();
    if (node.failed) break;
    // The Struct: each `fields` entry is one key; a later entry for the same key wins.
    const struct = new Cursor(node.at, node.at + n);
    while (struct.more()) {
      const t = struct.varint();
      const w = <u32>(t & 7);
      if (<u32>(t >> 3) != STRUCT_FIELDS || w != WIRE_LEN) {
        struct.skip(w);
        continue;
      }
      const m = struct.length();
      if (struct.failed) break;
      const found = entryKind(struct.at, struct.at + m, key);
      if (found != VALUE_ABSENT) kind = found;
      struct.advance(m);
    }
    if (struct.failed) return VALUE_UNREADABLE;
    node.advance(n);
  }
  return node.failed ? VALUE_UNREADABLE : kind;
}

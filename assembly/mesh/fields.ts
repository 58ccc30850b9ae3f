// Field reads for configuration objects of a known shape (a workload, a service, a VIP, a
// reference...), straight from the JSON stream, building no path string and no value unless a
// check fails.
//
// `read` takes one object off a stream in a single pass and only notes, per known field, where
// its value starts and what kind of token it is; the typed reads then seek this reader's own
// stream (a fork over the same bytes) to the value they want. So fields are checked in the
// parser's fixed order whatever order the document has them in, exactly as the tree-based
// reader did: the first error of a configuration does not depend on key order.
//
// Messages still come from ConfigReader. A check that fails hands ConfigReader what it would
// have seen in a tree: null for a missing (or JSON null) field, a placeholder value for one of
// the wrong type (ConfigReader's type messages never quote the value), and a one-field object
// for an unknown key, so every message is ConfigReader's own, byte for byte.
import { ConfigReader, JsonNames, JsonStream, JsonToken, JsonValue } from "../json";

/** Stands for a present value of the wrong type in ConfigReader's type checks. */
const WRONG_TYPE = JsonValue.fromNull();

const ABSENT: i32 = -1;

/** Whether `t` is the first token of a value (not Error, End, a key or a closing bracket). */
function startsValue(t: JsonToken): bool {
  return t == JsonToken.BeginObject || t == JsonToken.BeginArray || t >= JsonToken.String;
}

/** Reads the fields of `list[index]` (or of `list[index].key` when a key is set). */
export class FieldReader {
  private list: string = "";
  private index: i32 = 0;
  private key: string = "";
  /** Values are read from here (seeked to the offsets `read` noted). */
  readonly stream: JsonStream;
  // Per known field: the JsonToken its value starts with (ABSENT when the key is not there),
  // and that token's offset.
  private tokens: StaticArray<i32>;
  private offsets: StaticArray<i32>;
  private names: JsonNames;

  /** `document` must have been read in full without error (its fork skips the key check). */
  constructor(
    readonly reader: ConfigReader,
    document: JsonStream,
    readonly known: string[],
  ) {
    this.names = new JsonNames(known);
    this.stream = document.fork(true);
    this.tokens = new StaticArray<i32>(known.length);
    this.offsets = new StaticArray<i32>(known.length);
  }

  // ================================================================ where

  /** Points at `list[index]`; returns this for chaining. */
  at(list: string, index: i32): FieldReader {
    this.list = list;
    this.index = index;
    this.key = "";
    return this;
  }

  /** Points at `list[index].key`. */
  atField(list: string, index: i32, key: string): FieldReader {
    this.at(list, index);
    this.key = key;
    return this;
  }

  /** The item's path, built on demand (failures only). */
  path(): string {
    const item = this.reader.indexPath(this.list, this.index);
    return this.key.length == 0 ? item : this.reader.childPath(item, this.key);
  }

  /** The path of one of the item's fields, built on demand. */
  fieldPath(key: string): string {
    return this.reader.childPath(this.path(), key);
  }

  /** Records `reason` at the item's field `key`. */
  failField(key: string, reason: string): void {
    this.reader.fail(this.fieldPath(key), reason);
  }

  /** Records `reason` at the item itself. */
  fail(reason: string): void {
    this.reader.fail(this.path(), reason);
  }

  // ================================================================ reading the object

  /**
   * Reads the value whose first token `t` the stream `from` just returned: it must be an
   * object holding only known keys. Afterwards `from` stands after the object. False (failure
   * recorded) otherwise; `from` is then left anywhere (the caller stops).
   */
  read(from: JsonStream, t: JsonToken): bool {
    if (this.reader.failed()) return false;
    if (t != JsonToken.BeginObject) {
      if (!startsValue(t)) return this.broken(from);
      this.reader.expectObject(WRONG_TYPE, this.path());
      return false;
    }
    const known = this.known;
    const n = known.length;
    for (let k = 0; k < n; k++) unchecked((this.tokens[k] = ABSENT));
    while (true) {
      const u = from.next();
      if (u == JsonToken.EndObject) return true;
      if (u != JsonToken.Key) return this.broken(from);
      const k = this.names.find(from);
      if (k < 0) {
        // The first unknown key in document order, as ConfigReader.onlyKnownFields reports it.
        const one = JsonValue.newObject();
        one.addField(from.stringValue(), JsonValue.fromNull());
        this.reader.onlyKnownFields(one, this.path(), known);
        return false;
      }
      const v = from.next();
      unchecked((this.tokens[k] = <i32>v));
      unchecked((this.offsets[k] = from.tokenOffset()));
      if (!from.skip(v)) return this.broken(from);
    }
  }

  /** `read` for the value at `offset` (read from this reader's own stream). */
  readAt(offset: i32): bool {
    const s = this.stream;
    s.valueAt(offset);
    return this.read(s, s.next());
  }

  /** A stream that stopped making sense; cannot happen for a document the scan validated. */
  private broken(s: JsonStream): bool {
    this.reader.fail(this.path(), s.failed() ? "invalid JSON: " + s.error() : "invalid JSON");
    return false;
  }

  // ================================================================ fields (k = index in known)

  /** The field is there with a non-null value (ConfigReader treats null as absent). */
  has(k: i32): bool {
    const t = this.token(k);
    return t != ABSENT && t != <i32>JsonToken.Null;
  }

  /** Offset of field k's value (valid when has(k)). */
  offset(k: i32): i32 {
    return k >= 0 && k < this.offsets.length ? unchecked(this.offsets[k]) : 0;
  }

  /** Seeks the stream to field k's value and reads its first token. */
  seek(k: i32): JsonToken {
    const s = this.stream;
    s.valueAt(this.offset(k));
    return s.next();
  }

  /** A string (the stream then stands on it); else "missing required field" or a type error. */
  requireString(k: i32): bool {
    if (this.reader.failed()) return false;
    if (this.token(k) == <i32>JsonToken.String) return this.seek(k) == JsonToken.String;
    this.reader.expectString(this.has(k) ? WRONG_TYPE : null, this.fieldPath(this.name(k)));
    return false;
  }

  /** True when a string is there (the stream stands on it); false when absent or wrong (recorded). */
  optionalString(k: i32): bool {
    if (!this.present(k)) return false;
    if (this.token(k) == <i32>JsonToken.String) return this.seek(k) == JsonToken.String;
    this.reader.expectString(WRONG_TYPE, this.fieldPath(this.name(k)));
    return false;
  }

  optionalBool(k: i32, fallback: bool): bool {
    if (!this.present(k)) return fallback;
    const t = this.token(k);
    if (t == <i32>JsonToken.True) return true;
    if (t == <i32>JsonToken.False) return false;
    this.reader.expectBool(WRONG_TYPE, this.fieldPath(this.name(k)));
    return fallback;
  }

  /** The index in `allowed` of the field's value, or `fallback` when absent or wrong (recorded). */
  optionalEnum(k: i32, allowed: JsonNames, fallback: i32): i32 {
    if (!this.present(k)) return fallback;
    if (this.token(k) == <i32>JsonToken.String && this.seek(k) == JsonToken.String) {
      const i = allowed.find(this.stream);
      if (i >= 0) return i;
    }
    this.reader.expectEnum(WRONG_TYPE, this.fieldPath(this.name(k)), allowed.names);
    return fallback;
  }

  /** An exact integer in [min, max], or `fallback` when absent or wrong (recorded). */
  optionalInteger(k: i32, min: i64, max: i64, fallback: i64): i64 {
    if (!this.present(k)) return fallback;
    if (this.token(k) == <i32>JsonToken.Number && this.seek(k) == JsonToken.Number) {
      const s = this.stream;
      if (s.numberIsInteger()) {
        const n = s.numberInteger();
        if (n >= min && n <= max) return n;
      }
    }
    this.reader.expectInteger(WRONG_TYPE, this.fieldPath(this.name(k)), min, max);
    return fallback;
  }

  /** True when an array is there; the stream then stands just inside it. */
  optionalArray(k: i32): bool {
    if (!this.present(k)) return false;
    if (this.token(k) == <i32>JsonToken.BeginArray) return this.seek(k) == JsonToken.BeginArray;
    this.reader.expectArray(WRONG_TYPE, this.fieldPath(this.name(k)));
    return false;
  }

  /** True when an object is there; the stream then stands just inside it (offset(k) = its '{'). */
  optionalObject(k: i32): bool {
    if (!this.present(k)) return false;
    if (this.token(k) == <i32>JsonToken.BeginObject) return this.seek(k) == JsonToken.BeginObject;
    this.reader.expectObject(WRONG_TYPE, this.fieldPath(this.name(k)));
    return false;
  }

  /**
   * Element `index` of the item's array field `key`, whose first token `t` the stream just
   * returned, must be a string (a JSON null element is a type error, as in ConfigReader).
   */
  elementString(t: JsonToken, key: string, index: i32): bool {
    if (t == JsonToken.String) return true;
    this.reader.expectString(WRONG_TYPE, this.reader.indexPath(this.fieldPath(key), index));
    return false;
  }

  // ================================================================ internals

  private token(k: i32): i32 {
    return k >= 0 && k < this.tokens.length ? unchecked(this.tokens[k]) : ABSENT;
  }

  private name(k: i32): string {
    return k >= 0 && k < this.known.length ? unchecked(this.known[k]) : "";
  }

  /** Present and not null, and nothing failed yet. */
  private present(k: i32): bool {
    return !this.reader.failed() && this.has(k);
  }
}

/** "expected an integer in [min, max]" (or "missing required field" for a null value) at `path`. */
export function failInteger(reader: ConfigReader, t: JsonToken, path: string, min: i64, max: i64): void {
  reader.expectInteger(t == JsonToken.Null ? null : WRONG_TYPE, path, min, max);
}

/** "expected one of: ..." at `path` for a list element that is not one of `allowed`. */
export function failEnum(reader: ConfigReader, path: string, allowed: string[]): void {
  reader.expectEnum(WRONG_TYPE, path, allowed);
}

/** "expected a string" at `path` for a list element (a null element included). */
export function failElementString(reader: ConfigReader, path: string): void {
  reader.expectString(WRONG_TYPE, path);
}

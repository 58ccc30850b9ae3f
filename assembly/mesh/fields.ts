// Field reads for per-pod configuration items that build no path string unless a check fails.
//
// ConfigReader takes the parent's path up front and builds each field's path on every read,
// valid or not. For a million workloads and endpoints that is several million short-lived
// strings at configure time, and since linear memory never shrinks, the garbage the
// incremental GC has not yet reclaimed becomes permanent VM size. ItemReader checks the happy
// path itself and only then defers to the ConfigReader call it stands for, which records
// exactly the error (and path) it always would. All messages still come from ConfigReader.
import { ConfigReader, JsonValue } from "../json";

/** True when every key of `obj` is in `known` (obj must be an object). */
function onlyKnown(obj: JsonValue, known: string[]): bool {
  const keys = obj.keys();
  for (let i = 0; i < keys.length; i++) {
    if (!known.includes(unchecked(keys[i]))) return false;
  }
  return true;
}

function absent(v: JsonValue | null): bool {
  return v === null || v.isNull();
}

/** Reads the fields of `list[index]` (or of `list[index].key` when a key is set). */
export class ItemReader {
  private list: string = "";
  private index: i32 = 0;
  private key: string = "";

  constructor(readonly reader: ConfigReader) {}

  /** Points at `list[index]`; returns this for chaining. */
  at(list: string, index: i32): ItemReader {
    this.list = list;
    this.index = index;
    this.key = "";
    return this;
  }

  /** Points at `list[index].key`. */
  atField(list: string, index: i32, key: string): ItemReader {
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

  /** `value` as an object holding only `known` keys, else null (failure recorded). */
  object(value: JsonValue, known: string[]): JsonValue | null {
    if (value.isObject() && onlyKnown(value, known)) return value;
    const r = this.reader;
    const p = this.path();
    const obj = r.expectObject(value, p);
    if (obj !== null) r.onlyKnownFields(obj, p, known);
    return null;
  }

  requireString(obj: JsonValue, key: string): string {
    const v = obj.get(key);
    if (v !== null && v.isString()) return v.asString();
    return this.reader.requireString(obj, key, this.path());
  }

  optionalString(obj: JsonValue, key: string, fallback: string): string {
    const v = obj.get(key);
    if (absent(v)) return fallback;
    if (v !== null && v.isString()) return v.asString();
    return this.reader.optionalString(obj, key, this.path(), fallback);
  }

  optionalBool(obj: JsonValue, key: string, fallback: bool): bool {
    const v = obj.get(key);
    if (absent(v)) return fallback;
    if (v !== null && v.isBool()) return v.asBool();
    return this.reader.optionalBool(obj, key, this.path(), fallback);
  }

  optionalEnum(obj: JsonValue, key: string, allowed: string[], fallback: string): string {
    const v = obj.get(key);
    if (absent(v)) return fallback;
    if (v !== null && v.isString() && allowed.includes(v.asString())) return v.asString();
    return this.reader.optionalEnum(obj, key, this.path(), allowed, fallback);
  }

  optionalInteger(obj: JsonValue, key: string, min: i64, max: i64, fallback: i64): i64 {
    const v = obj.get(key);
    if (absent(v)) return fallback;
    if (v !== null && v.isInteger() && v.asInteger() >= min && v.asInteger() <= max) return v.asInteger();
    return this.reader.optionalInteger(obj, key, this.path(), min, max, fallback);
  }

  optionalArray(obj: JsonValue, key: string): JsonValue | null {
    const v = obj.get(key);
    if (absent(v)) return null;
    if (v !== null && v.isArray()) return v;
    return this.reader.optionalArray(obj, key, this.path());
  }

  optionalObject(obj: JsonValue, key: string): JsonValue | null {
    const v = obj.get(key);
    if (absent(v)) return null;
    if (v !== null && v.isObject()) return v;
    return this.reader.optionalObject(obj, key, this.path());
  }

  /** Element `index` of the item's array field `key`, which must be a string. */
  elementString(value: JsonValue, key: string, index: i32): string {
    if (value.isString()) return value.asString();
    return this.reader.expectString(value, this.reader.indexPath(this.fieldPath(key), index));
  }
}

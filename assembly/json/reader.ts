// Schema-style reading of a parsed configuration, with the field's path in every error.
//
// The first error wins and every later call is a no-op answering a neutral value ("" / 0 /
// false / null for require*, the fallback for optional*). A filter can thus read a whole
// config object straight through and check `failed()` once, instead of testing after every
// field; the one message it logs names the field that broke, e.g.
// `workloads[3].addresses[0]: not an IP address`.
//
// Parents are accepted as `JsonValue | null` so the result of requireObject/optionalObject can
// be passed straight on: callers never need a `!` (which would trap on null).
//
// JSON `null` counts as absent: config generators commonly emit null for unset fields.

import { MAX_QUOTED, oneLine, quoteForMessage } from "./quote";
import { JsonValue } from "./value";

/**
 * Keys that read unambiguously after a '.'; anything else is written as ["..."], which also
 * cuts over-long keys so a path stays a readable log line.
 */
function isPlainKey(key: string): bool {
  if (key.length == 0 || key.length > MAX_QUOTED) return false;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    const ok =
      (c >= 0x61 && c <= 0x7a) || // a-z
      (c >= 0x41 && c <= 0x5a) || // A-Z
      (c >= 0x30 && c <= 0x39) || // 0-9
      c == 0x5f || // _
      c == 0x2d; // -
    if (!ok) return false;
  }
  return true;
}

export class ConfigReader {
  private _failed: bool = false;
  private _error: string = "";

  constructor() {}

  failed(): bool {
    return this._failed;
  }

  /** "path: reason" of the first failure, or "" when nothing failed. */
  error(): string {
    return this._error;
  }

  /**
   * Records a failure unless one is already recorded. The message is forced onto one line
   * because callers may put document text in `reason`. The root path shows as "(root)".
   */
  fail(path: string, reason: string): void {
    if (this._failed) return;
    this._failed = true;
    this._error = oneLine((path.length == 0 ? "(root)" : path) + ": " + reason);
  }

  /**
   * Records a failure that comes before the one already recorded (a check that runs late over
   * an earlier part of the document), replacing it; like `fail` when nothing is recorded.
   */
  failEarlier(path: string, reason: string): void {
    this._failed = false;
    this.fail(path, reason);
  }

  /** "routes" at the root, "routes.x" below it, `routes["a b"]` for keys that need quoting. */
  childPath(path: string, key: string): string {
    if (!isPlainKey(key)) return path + "[" + quoteForMessage(key) + "]";
    return path.length == 0 ? key : path + "." + key;
  }

  /** "workloads[3]". */
  indexPath(path: string, index: i32): string {
    return path + "[" + index.toString() + "]";
  }

  // ---- Checks on a value already in hand (e.g. an array element). `null` means missing. ----

  expectObject(value: JsonValue | null, path: string): JsonValue | null {
    if (!this.check(value, path)) return null;
    return value !== null && value.isObject() ? value : this.mismatch(path, "expected an object");
  }

  expectArray(value: JsonValue | null, path: string): JsonValue | null {
    if (!this.check(value, path)) return null;
    return value !== null && value.isArray() ? value : this.mismatch(path, "expected an array");
  }

  expectString(value: JsonValue | null, path: string): string {
    if (!this.check(value, path)) return "";
    if (value !== null && value.isString()) return value.asString();
    this.fail(path, "expected a string");
    return "";
  }

  expectBool(value: JsonValue | null, path: string): bool {
    if (!this.check(value, path)) return false;
    if (value !== null && value.isBool()) return value.asBool();
    this.fail(path, "expected a boolean");
    return false;
  }

  /** Only exact integers in [min, max]: 80 and 8e1 pass; 80.5, 1e400 and 2^64 do not. */
  expectInteger(value: JsonValue | null, path: string, min: i64, max: i64): i64 {
    if (!this.check(value, path)) return 0;
    if (value !== null && value.isInteger()) {
      const n = value.asInteger();
      if (n >= min && n <= max) return n;
    }
    this.fail(path, "expected an integer in [" + min.toString() + ", " + max.toString() + "]");
    return 0;
  }

  expectEnum(value: JsonValue | null, path: string, allowed: string[]): string {
    if (!this.check(value, path)) return "";
    if (value !== null && value.isString()) {
      const s = value.asString();
      if (allowed.includes(s)) return s;
    }
    this.fail(path, "expected one of: " + allowed.join(", "));
    return "";
  }

  // ---- Fields of an object: the parent, the key, and the parent's path ("" for the root). ----

  requireObject(parent: JsonValue | null, key: string, path: string): JsonValue | null {
    return this.expectObject(this.field(parent, key, path), this.childPath(path, key));
  }

  optionalObject(parent: JsonValue | null, key: string, path: string): JsonValue | null {
    const v = this.field(parent, key, path);
    return v === null ? null : this.expectObject(v, this.childPath(path, key));
  }

  requireArray(parent: JsonValue | null, key: string, path: string): JsonValue | null {
    return this.expectArray(this.field(parent, key, path), this.childPath(path, key));
  }

  optionalArray(parent: JsonValue | null, key: string, path: string): JsonValue | null {
    const v = this.field(parent, key, path);
    return v === null ? null : this.expectArray(v, this.childPath(path, key));
  }

  requireString(parent: JsonValue | null, key: string, path: string): string {
    return this.expectString(this.field(parent, key, path), this.childPath(path, key));
  }

  optionalString(parent: JsonValue | null, key: string, path: string, fallback: string): string {
    const v = this.field(parent, key, path);
    if (v === null) return fallback;
    const s = this.expectString(v, this.childPath(path, key));
    return this._failed ? fallback : s;
  }

  requireInteger(parent: JsonValue | null, key: string, path: string, min: i64, max: i64): i64 {
    return this.expectInteger(this.field(parent, key, path), this.childPath(path, key), min, max);
  }

  optionalInteger(
    parent: JsonValue | null,
    key: string,
    path: string,
    min: i64,
    max: i64,
    fallback: i64,
  ): i64 {
    const v = this.field(parent, key, path);
    if (v === null) return fallback;
    const n = this.expectInteger(v, this.childPath(path, key), min, max);
    return this._failed ? fallback : n;
  }

  requireBool(parent: JsonValue | null, key: string, path: string): bool {
    return this.expectBool(this.field(parent, key, path), this.childPath(path, key));
  }

  optionalBool(parent: JsonValue | null, key: string, path: string, fallback: bool): bool {
    const v = this.field(parent, key, path);
    if (v === null) return fallback;
    const b = this.expectBool(v, this.childPath(path, key));
    return this._failed ? fallback : b;
  }

  requireEnum(parent: JsonValue | null, key: string, path: string, allowed: string[]): string {
    return this.expectEnum(this.field(parent, key, path), this.childPath(path, key), allowed);
  }

  optionalEnum(
    parent: JsonValue | null,
    key: string,
    path: string,
    allowed: string[],
    fallback: string,
  ): string {
    const v = this.field(parent, key, path);
    if (v === null) return fallback;
    const s = this.expectEnum(v, this.childPath(path, key), allowed);
    return this._failed ? fallback : s;
  }

  /** Rejects keys outside `known`, so a misspelt option fails loudly instead of being ignored. */
  onlyKnownFields(obj: JsonValue | null, path: string, known: string[]): bool {
    if (this._failed) return false;
    if (obj === null || !obj.isObject()) {
      this.fail(path, "expected an object");
      return false;
    }
    const keys = obj.keys();
    for (let i = 0; i < keys.length; i++) {
      const key = unchecked(keys[i]);
      if (!known.includes(key)) {
        this.fail(this.childPath(path, key), "unknown field (known: " + known.join(", ") + ")");
        return false;
      }
    }
    return true;
  }

  // ---- Internals ----

  /**
   * The value of `parent[key]`, or null when absent, null-valued, or after any failure.
   * A parent that is not an object is itself an error at `path`.
   */
  private field(parent: JsonValue | null, key: string, path: string): JsonValue | null {
    if (this._failed) return null;
    if (parent === null || !parent.isObject()) {
      this.fail(path, "expected an object");
      return null;
    }
    const v = parent.get(key);
    return v === null || v.isNull() ? null : v;
  }

  /**
   * False when there is nothing to check: after a failure, or when the value is missing (which
   * is then recorded). A JSON null element reaches the type check and fails it there.
   */
  private check(value: JsonValue | null, path: string): bool {
    if (this._failed) return false;
    if (value === null) {
      this.fail(path, "missing required field");
      return false;
    }
    return true;
  }

  private mismatch(path: string, reason: string): JsonValue | null {
    this.fail(path, reason);
    return null;
  }
}

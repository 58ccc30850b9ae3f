// The parsed JSON tree.
//
// One class for every kind (rather than a subclass per kind) so callers can walk a document
// without casts: a cast to the wrong subclass would trap, and a trap kills the whole VM.
// Every accessor therefore answers something neutral on the wrong kind instead of failing.

export enum JsonKind {
  Null,
  Bool,
  Number,
  String,
  Array,
  Object,
}

export class JsonValue {
  readonly kind: JsonKind;

  private _bool: bool = false;
  private _number: f64 = 0;
  // Set by the parser when the literal's exact decimal value is an integer that fits in i64
  // ("80", "8e1", "80.0"); f64 alone cannot tell 9007199254740993 from ...992.
  private _isInteger: bool = false;
  private _integer: i64 = 0;
  private _string: string = "";
  // Only allocated for the kinds that use them, so scalars stay small.
  private _items: Array<JsonValue> | null = null;
  private _keys: Array<string> | null = null;
  private _values: Array<JsonValue> | null = null;
  // Key -> position in _keys/_values. A map keeps duplicate detection and lookups linear
  // overall even for a hostile object with many keys.
  private _index: Map<string, i32> | null = null;

  private constructor(kind: JsonKind) {
    this.kind = kind;
  }

  static fromNull(): JsonValue {
    return new JsonValue(JsonKind.Null);
  }

  static fromBool(value: bool): JsonValue {
    const v = new JsonValue(JsonKind.Bool);
    v._bool = value;
    return v;
  }

  /** `isInteger`/`integer` describe the literal exactly; see the field comment. */
  static fromNumber(value: f64, isInteger: bool = false, integer: i64 = 0): JsonValue {
    const v = new JsonValue(JsonKind.Number);
    v._number = value;
    v._isInteger = isInteger;
    v._integer = isInteger ? integer : 0;
    return v;
  }

  static fromString(value: string): JsonValue {
    const v = new JsonValue(JsonKind.String);
    v._string = value;
    return v;
  }

  static fromArray(items: Array<JsonValue>): JsonValue {
    const v = new JsonValue(JsonKind.Array);
    v._items = items;
    return v;
  }

  /** An empty object; fill it with `addField`. */
  static newObject(): JsonValue {
    const v = new JsonValue(JsonKind.Object);
    v._keys = new Array<string>();
    v._values = new Array<JsonValue>();
    v._index = new Map<string, i32>();
    return v;
  }

  /**
   * Appends a field to an object. Returns false (and changes nothing) when the key already
   * exists or this is not an object, so the parser can report duplicates.
   */
  addField(key: string, value: JsonValue): bool {
    const keys = this._keys;
    const values = this._values;
    const index = this._index;
    if (keys === null || values === null || index === null) return false;
    if (index.has(key)) return false;
    index.set(key, keys.length);
    keys.push(key);
    values.push(value);
    return true;
  }

  isNull(): bool {
    return this.kind == JsonKind.Null;
  }
  isBool(): bool {
    return this.kind == JsonKind.Bool;
  }
  isNumber(): bool {
    return this.kind == JsonKind.Number;
  }
  isString(): bool {
    return this.kind == JsonKind.String;
  }
  isArray(): bool {
    return this.kind == JsonKind.Array;
  }
  isObject(): bool {
    return this.kind == JsonKind.Object;
  }

  /** True for numbers whose literal is exactly an integer representable as i64. */
  isInteger(): bool {
    return this.kind == JsonKind.Number && this._isInteger;
  }

  asBool(): bool {
    return this.kind == JsonKind.Bool ? this._bool : false;
  }

  asNumber(): f64 {
    return this.kind == JsonKind.Number ? this._number : 0;
  }

  /** The exact integer value; 0 unless `isInteger()`. */
  asInteger(): i64 {
    return this.isInteger() ? this._integer : 0;
  }

  asString(): string {
    return this.kind == JsonKind.String ? this._string : "";
  }

  /** Array elements (the live list: do not modify it); empty for non-arrays. */
  items(): Array<JsonValue> {
    const items = this._items;
    return items === null ? new Array<JsonValue>() : items;
  }

  /** Object keys in document order (the live list: do not modify it); empty for non-objects. */
  keys(): Array<string> {
    const keys = this._keys;
    return keys === null ? new Array<string>() : keys;
  }

  has(key: string): bool {
    const index = this._index;
    return index !== null && index.has(key);
  }

  /** The field's value; null when absent or when this is not an object. */
  get(key: string): JsonValue | null {
    const index = this._index;
    const values = this._values;
    if (index === null || values === null || !index.has(key)) return null;
    const i = index.get(key);
    if (i < 0 || i >= values.length) return null;
    return unchecked(values[i]);
  }
}

/** Outcome of a parse: `value` on success, otherwise `error` ("byte N: reason") and `offset`. */
export class JsonParseResult {
  constructor(
    public value: JsonValue | null,
    public error: string = "",
    /** Byte offset of the problem in the input; -1 on success. */
    public offset: i32 = -1,
  ) {}

  ok(): bool {
    return this.error.length == 0 && this.value !== null;
  }
}

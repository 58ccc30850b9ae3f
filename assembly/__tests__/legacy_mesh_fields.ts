// Helpers of the tree-based mesh parser kept as an oracle (legacy_mesh_parser.ts): field lists,
// the per-item reader and small text helpers, verbatim from the parser at commit eb2c51c.
import { ConfigReader, JsonValue, quoteForMessage } from "../json";
import { Address, FAMILY_V4 } from "../mesh/ip";

/** True when every key of `obj` is in `known` (obj must be an object). */
export function legacyOnlyKnown(obj: JsonValue, known: string[]): bool {
  const keys = obj.keys();
  for (let i = 0; i < keys.length; i++) {
    if (!known.includes(unchecked(keys[i]))) return false;
  }
  return true;
}

export function legacyAbsent(v: JsonValue | null): bool {
  return v === null || v.isNull();
}

/** Reads the fields of `list[index]` (or of `list[index].key` when a key is set). */
export class LegacyItemReader {
  private list: string = "";
  private index: i32 = 0;
  private key: string = "";

  constructor(readonly reader: ConfigReader) {}

  /** Points at `list[index]`; returns this for chaining. */
  at(list: string, index: i32): LegacyItemReader {
    this.list = list;
    this.index = index;
    this.key = "";
    return this;
  }

  /** Points at `list[index].key`. */
  atField(list: string, index: i32, key: string): LegacyItemReader {
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
    if (value.isObject() && legacyOnlyKnown(value, known)) return value;
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
    if (legacyAbsent(v)) return fallback;
    if (v !== null && v.isString()) return v.asString();
    return this.reader.optionalString(obj, key, this.path(), fallback);
  }

  optionalBool(obj: JsonValue, key: string, fallback: bool): bool {
    const v = obj.get(key);
    if (legacyAbsent(v)) return fallback;
    if (v !== null && v.isBool()) return v.asBool();
    return this.reader.optionalBool(obj, key, this.path(), fallback);
  }

  optionalEnum(obj: JsonValue, key: string, allowed: string[], fallback: string): string {
    const v = obj.get(key);
    if (legacyAbsent(v)) return fallback;
    if (v !== null && v.isString() && allowed.includes(v.asString())) return v.asString();
    return this.reader.optionalEnum(obj, key, this.path(), allowed, fallback);
  }

  optionalInteger(obj: JsonValue, key: string, min: i64, max: i64, fallback: i64): i64 {
    const v = obj.get(key);
    if (legacyAbsent(v)) return fallback;
    if (v !== null && v.isInteger() && v.asInteger() >= min && v.asInteger() <= max) return v.asInteger();
    return this.reader.optionalInteger(obj, key, this.path(), min, max, fallback);
  }

  optionalArray(obj: JsonValue, key: string): JsonValue | null {
    const v = obj.get(key);
    if (legacyAbsent(v)) return null;
    if (v !== null && v.isArray()) return v;
    return this.reader.optionalArray(obj, key, this.path());
  }

  optionalObject(obj: JsonValue, key: string): JsonValue | null {
    const v = obj.get(key);
    if (legacyAbsent(v)) return null;
    if (v !== null && v.isObject()) return v;
    return this.reader.optionalObject(obj, key, this.path());
  }

  /** Element `index` of the item's array field `key`, which must be a string. */
  elementString(value: JsonValue, key: string, index: i32): string {
    if (value.isString()) return value.asString();
    return this.reader.expectString(value, this.reader.indexPath(this.fieldPath(key), index));
  }
}

export const WORKLOAD_FIELDS = [
  "uid",
  "addresses",
  "network",
  "identity",
  "tlsMode",
  "healthy",
  "locality",
  "waypoint",
  "networkGateway",
];
export const SERVICE_FIELDS = [
  "hostname",
  "vips",
  "ports",
  "endpoints",
  "waypoint",
  "subjectAltNames",
  "headless",
  "cluster",
  "loadBalancing",
];
export const VIP_FIELDS = ["network", "address"];
export const ENDPOINT_FIELDS = ["workload", "ports"];
export const WAYPOINT_FIELDS = ["address", "hostname", "port"];
export const GATEWAY_FIELDS = ["address", "hostname", "hboneMtlsPort"];
export const LB_FIELDS = ["routingPreference", "mode"];
export const TLS_MODES = ["istio", "disabled"];
export const LB_MODES = ["failover", "standard"];
/** In Scope order: index + 1 is the Scope value. */
export const SCOPES = ["network", "region", "zone", "subzone"];

/** True when obj has `key` with a non-null value (the reader treats null as absent too). */
export function legacyPresent(obj: JsonValue, key: string): bool {
  const v = obj.get(key);
  return v !== null && !v.isNull();
}

export function legacyQ(text: string): string {
  return quoteForMessage(text);
}

export function legacyOnNetwork(name: string): string {
  return name.length == 0 ? "the default network" : "network " + legacyQ(name);
}

export const LEGACY_EMPTY_LIST = new Array<JsonValue>();

/** A key that identifies an address independent of how it was written. */
export function addressKey(a: Address): string {
  if (a.family == FAMILY_V4) return "4:" + a.v4.toString();
  return "6:" + a.hi.toString() + ":" + a.lo.toString();
}

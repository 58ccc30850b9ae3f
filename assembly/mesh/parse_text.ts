// Small helpers of the JSON mesh reader: message texts (quoting, "on network ..."), the current
// token read as an IP family, a port key or a bounded integer, and the default cluster name.
import { JsonStream, JsonToken, JsonValue, quoteForMessage } from "../json";
import { Address, IpParse, parseIpBytes, parseIpString } from "./ip";
import { parsePortKey } from "./validate";

export function q(text: string): string {
  return quoteForMessage(text);
}

export function onNetwork(name: string): string {
  return name.length == 0 ? "the default network" : "network " + q(name);
}

/** A one-field object, so ConfigReader.onlyKnownFields names `key` in its own words. */
export function objectWithKey(key: string): JsonValue {
  const obj = JsonValue.newObject();
  obj.addField(key, JsonValue.fromNull());
  return obj;
}

/** The family (FAMILY_V4 / FAMILY_V6) of the IP in the current string token, or 0. */
export function ipFamily(s: JsonStream, out: Address): i32 {
  if (!s.stringEscaped()) {
    return parseIpBytes(s.stringPtr(), s.stringByteLength(), out) == IpParse.Ok ? out.family : 0;
  }
  return parseIpString(s.stringValue(), out) == IpParse.Ok ? out.family : 0;
}

/** A port written as an object key (the current Key token), as parsePortKey; else -1. */
export function portOfKey(s: JsonStream): i32 {
  if (s.stringEscaped()) return parsePortKey(s.stringValue());
  const n = s.stringByteLength();
  if (n == 0 || n > 5) return -1;
  const ptr = s.stringPtr();
  if (n > 1 && load<u8>(ptr) == 0x30) return -1;
  let port = 0;
  for (let i = 0; i < n; i++) {
    const c = <i32>load<u8>(ptr + <usize>i);
    if (c < 0x30 || c > 0x39) return -1;
    port = port * 10 + (c - 0x30);
  }
  return port >= 1 && port <= 65535 ? port : -1;
}

/** The current Number token as an integer in [min, max], or -1 (min must be >= 0). */
export function integerIn(s: JsonStream, t: JsonToken, min: i64, max: i64): i64 {
  if (t != JsonToken.Number || !s.numberIsInteger()) return -1;
  const n = s.numberInteger();
  return n >= min && n <= max ? n : -1;
}

/**
 * "outbound|<port>||<hostname>" as UTF-8, written straight into its buffer (no intermediate
 * strings: a service with many ports would otherwise leave several per port as garbage).
 * Hostnames are ASCII (isHostname).
 */
export function defaultClusterName(port: i32, hostname: string): ArrayBuffer {
  const digits = portDigits(port);
  const n = hostname.length;
  const out = new ArrayBuffer(11 + digits + n);
  const at = writeClusterHead(changetype<usize>(out), port, digits);
  for (let i = 0; i < n; i++) store<u8>(at + <usize>i, <u8>hostname.charCodeAt(i));
  return out;
}

// @ts-ignore: decorator
@inline function portDigits(port: i32): i32 {
  return port >= 10000 ? 5 : port >= 1000 ? 4 : port >= 100 ? 3 : port >= 10 ? 2 : 1;
}

/** Writes "outbound|<port>||" at p; where the hostname goes. */
function writeClusterHead(p: usize, port: i32, digits: i32): usize {
  store<u64>(p, 0x646e756f6274756f); // "outbound", little-endian
  store<u8>(p + 8, 0x7c);
  let value = port;
  for (let i = digits - 1; i >= 0; i--) {
    store<u8>(p + 9 + <usize>i, <u8>(0x30 + value % 10));
    value /= 10;
  }
  const at = p + 9 + <usize>digits;
  store<u8>(at, 0x7c);
  store<u8>(at + 1, 0x7c);
  return at + 2;
}

/** The text of the key whose opening quote is at `keyAt` (for a message; moves `s`). */
export function keyText(s: JsonStream, keyAt: i32): string {
  s.valueAt(keyAt);
  return s.next() == JsonToken.String ? s.stringValue() : "";
}

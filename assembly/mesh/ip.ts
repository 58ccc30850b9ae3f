// IP addresses as compact keys, parsed without allocating.
//
// IPv4 is a u32 (10.0.0.1 = 0x0a000001), IPv6 a (hi, lo) pair of u64 in network order. An
// IPv4-mapped IPv6 address (::ffff:10.0.0.1) is stored as the IPv4 key, so it finds the IPv4
// entry. Every parser reads through `charAt`, bounded by the length it was given, and answers
// "invalid" instead of trapping; the same code reads UTF-8 bytes from the host (T = u8) and
// AssemblyScript strings from the configuration (T = u16).

import { ByteText } from "../runtime/text";

export const FAMILY_NONE: i32 = 0;
export const FAMILY_V4: i32 = 4;
export const FAMILY_V6: i32 = 6;

/** Longest text accepted as an address (the longest IPv6 form with a port is 53 bytes). */
const MAX_TEXT: i32 = 64;

/**
 * A parsed IP (and optionally port). Callers own one and reuse it for every connection, so
 * parsing allocates nothing.
 */
export class Address {
  family: i32 = FAMILY_NONE;
  v4: u32 = 0;
  hi: u64 = 0;
  lo: u64 = 0;
  /** -1 when the text had no port. */
  port: i32 = -1;

  clear(): void {
    this.family = FAMILY_NONE;
    this.v4 = 0;
    this.hi = 0;
    this.lo = 0;
    this.port = -1;
  }

  setV4(ip: u32): void {
    this.family = FAMILY_V4;
    this.v4 = ip;
    this.hi = 0;
    this.lo = 0;
  }

  /** Stores an IPv6 address; an IPv4-mapped one (::ffff:a.b.c.d) becomes its IPv4 key. */
  setV6(hi: u64, lo: u64): void {
    if (hi == 0 && lo >> 32 == 0xffff) {
      this.setV4(<u32>lo);
      return;
    }
    this.family = FAMILY_V6;
    this.v4 = 0;
    this.hi = hi;
    this.lo = lo;
  }

  copyFrom(other: Address): void {
    this.family = other.family;
    this.v4 = other.v4;
    this.hi = other.hi;
    this.lo = other.lo;
    this.port = other.port;
  }

  /** Same family and IP (the port is ignored). */
  sameIp(other: Address): bool {
    if (this.family != other.family) return false;
    if (this.family == FAMILY_V4) return this.v4 == other.v4;
    return this.hi == other.hi && this.lo == other.lo;
  }
}

/** Outcome of parsing an IP text. */
export enum IpParse {
  Ok = 0,
  Invalid = 1,
  /** A syntactically valid IPv6 address with a zone ("fe80::1%eth0"): refused by the mesh. */
  Zone = 2,
}

// Scratch for the eight IPv6 groups; allocated once, so parsing never allocates.
const groups = new StaticArray<u32>(8);

// @ts-ignore: decorator
@inline function charAt<T>(ptr: usize, i: i32): i32 {
  return <i32>load<T>(ptr + (<usize>i << alignof<T>()));
}

function hexValue(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/**
 * Dotted-quad IPv4 in [start, end): four decimal octets 0..255, no leading zeros (010 is octal
 * to some parsers, so it is refused rather than guessed). The value, or -1.
 */
function parseV4<T>(ptr: usize, start: i32, end: i32): i64 {
  let value: u32 = 0;
  let parts = 0;
  let i = start;
  while (true) {
    const first = i;
    let octet = 0;
    while (i < end) {
      const c = charAt<T>(ptr, i);
      if (c < 0x30 || c > 0x39) break;
      octet = octet * 10 + (c - 0x30);
      i++;
      if (i - first > 3) return -1;
    }
    const digits = i - first;
    if (digits == 0 || octet > 255) return -1;
    if (digits > 1 && charAt<T>(ptr, first) == 0x30) return -1;
    value = (value << 8) | <u32>octet;
    parts++;
    if (parts == 4) return i == end ? <i64>value : -1;
    if (i >= end || charAt<T>(ptr, i) != 0x2e) return -1;
    i++;
  }
  return -1; // unreachable: the loop returns after the fourth octet
}

/** RFC 4291 IPv6 text in [start, end) (with "::" and a trailing dotted quad) into `out`. */
function parseV6<T>(ptr: usize, start: i32, end: i32, out: Address): bool {
  if (end - start < 2) return false;
  let n = 0; // groups written
  let gap = -1; // group index where "::" stands
  let i = start;
  if (charAt<T>(ptr, i) == 0x3a) {
    if (charAt<T>(ptr, i + 1) != 0x3a) return false;
    gap = 0;
    i += 2;
    if (i == end) {
      out.setV6(0, 0);
      return true;
    }
  }
  while (true) {
    if (n >= 8) return false;
    const first = i;
    let v: u32 = 0;
    while (i < end && i - first < 5) {
      const h = hexValue(charAt<T>(ptr, i));
      if (h < 0) break;
      v = (v << 4) | <u32>h;
      i++;
    }
    if (i < end && charAt<T>(ptr, i) == 0x2e) {
      // A trailing dotted quad fills the last two groups.
      if (n > 6) return false;
      const quad = parseV4<T>(ptr, first, end);
      if (quad < 0) return false;
      unchecked((groups[n++] = <u32>(quad >> 16) & 0xffff));
      unchecked((groups[n++] = <u32>quad & 0xffff));
      break;
    }
    const digits = i - first;
    if (digits == 0 || digits > 4) return false;
    unchecked((groups[n++] = v));
    if (i == end) break;
    if (charAt<T>(ptr, i) != 0x3a) return false;
    i++;
    if (i == end) return false; // a single trailing ':'
    if (charAt<T>(ptr, i) == 0x3a) {
      if (gap >= 0) return false; // only one "::"
      gap = n;
      i++;
      if (i == end) break;
    }
  }
  if (gap < 0 ? n != 8 : n > 7) return false;
  const zeros = 8 - n;
  let hi: u64 = 0;
  let lo: u64 = 0;
  for (let k = 0; k < 8; k++) {
    let g: u32 = 0;
    if (gap < 0 || k < gap) g = unchecked(groups[k]);
    else if (k >= gap + zeros) g = unchecked(groups[k - zeros]);
    if (k < 4) hi = (hi << 16) | <u64>g;
    else lo = (lo << 16) | <u64>g;
  }
  out.setV6(hi, lo);
  return true;
}

/** An IP without port in [0, len): IPv4, or IPv6 (a zone is reported as IpParse.Zone). */
function parseIp<T>(ptr: usize, len: i32, out: Address): IpParse {
  out.clear();
  if (ptr == 0 || len <= 0 || len > MAX_TEXT) return IpParse.Invalid;
  let colon = false;
  for (let i = 0; i < len; i++) {
    const c = charAt<T>(ptr, i);
    if (c == 0x3a) colon = true;
    if (c == 0x25) {
      // '%': a zone is only worth naming when what precedes it is an IPv6 address.
      const ok = parseV6<T>(ptr, 0, i, out);
      out.clear();
      return ok ? IpParse.Zone : IpParse.Invalid;
    }
  }
  if (colon) return parseV6<T>(ptr, 0, len, out) ? IpParse.Ok : IpParse.Invalid;
  const v4 = parseV4<T>(ptr, 0, len);
  if (v4 < 0) return IpParse.Invalid;
  out.setV4(<u32>v4);
  return IpParse.Ok;
}

/** Parses an IP from configuration text ("10.0.0.1", "FD00:0::1", "::ffff:10.0.0.1"). */
export function parseIpString(text: string, out: Address): IpParse {
  return parseIp<u16>(changetype<usize>(text), text.length, out);
}

/** Parses an IP from UTF-8 bytes in linear memory. */
export function parseIpBytes(ptr: usize, len: i32, out: Address): IpParse {
  return parseIp<u8>(ptr, len, out);
}

/** Decimal port in [start, end): 1-5 digits, no leading zero, at most 65535; else -1. */
function parsePort<T>(ptr: usize, start: i32, end: i32): i32 {
  const digits = end - start;
  if (digits < 1 || digits > 5) return -1;
  if (digits > 1 && charAt<T>(ptr, start) == 0x30) return -1;
  let port = 0;
  for (let i = start; i < end; i++) {
    const c = charAt<T>(ptr, i);
    if (c < 0x30 || c > 0x39) return -1;
    port = port * 10 + (c - 0x30);
  }
  return port <= 65535 ? port : -1;
}

/** "ip:port" / "[ipv6]:port" in [0, len) into `out`; false (out cleared) when it is not one. */
function parseSocket<T>(ptr: usize, len: i32, out: Address): bool {
  out.clear();
  if (ptr == 0 || len <= 0 || len > MAX_TEXT) return false;
  let portStart = 0;
  let ok = false;
  if (charAt<T>(ptr, 0) == 0x5b) {
    let close = -1;
    for (let i = 1; i < len; i++) {
      if (charAt<T>(ptr, i) == 0x5d) {
        close = i;
        break;
      }
    }
    if (close < 0 || close + 1 >= len || charAt<T>(ptr, close + 1) != 0x3a) return false;
    portStart = close + 2;
    ok = parseV6<T>(ptr, 1, close, out);
  } else {
    let colon = -1;
    for (let i = 0; i < len; i++) {
      if (charAt<T>(ptr, i) == 0x3a) {
        if (colon >= 0) return false; // an unbracketed IPv6 address is ambiguous
        colon = i;
      }
    }
    if (colon <= 0) return false;
    portStart = colon + 1;
    const v4 = parseV4<T>(ptr, 0, colon);
    ok = v4 >= 0;
    if (ok) out.setV4(<u32>v4);
  }
  const port = ok ? parsePort<T>(ptr, portStart, len) : -1;
  if (port < 0) {
    out.clear();
    return false;
  }
  out.port = port;
  return true;
}

/**
 * Envoy's printed socket address ("10.0.0.1:80", "[fd00::1]:80"), read straight from linear
 * memory (e.g. hostValuePtr()/hostValueSize() after fetchProperty). Never allocates; false
 * for anything else, including a missing port, a zone, or a port above 65535.
 */
export function parseSocketAddress(ptr: usize, len: i32, out: Address): bool {
  return parseSocket<u8>(ptr, len, out);
}

/** parseSocketAddress for a string (tests, configuration). */
export function parseSocketAddressString(text: string, out: Address): bool {
  return parseSocket<u16>(changetype<usize>(text), text.length, out);
}

// ---- Formatting (allocates; once per decided connection) ----

const HEX = "0123456789abcdef";

function hexGroup(g: u32): string {
  let s = "";
  let started = false;
  for (let shift = 12; shift >= 0; shift -= 4) {
    const d = (g >> <u32>shift) & 15;
    if (d == 0 && !started && shift > 0) continue;
    started = true;
    s += HEX.charAt(<i32>d);
  }
  return s;
}

function v4Text(ip: u32): string {
  return (
    (ip >> 24).toString() +
    "." +
    ((ip >> 16) & 255).toString() +
    "." +
    ((ip >> 8) & 255).toString() +
    "." +
    (ip & 255).toString()
  );
}

/** RFC 5952: lowercase, no leading zeros, the first longest run of 2+ zero groups as "::". */
function v6Text(hi: u64, lo: u64): string {
  const g = new StaticArray<u32>(8);
  for (let k = 0; k < 4; k++) {
    unchecked((g[k] = <u32>(hi >> (<u64>(3 - k) * 16)) & 0xffff));
    unchecked((g[k + 4] = <u32>(lo >> (<u64>(3 - k) * 16)) & 0xffff));
  }
  let bestStart = -1;
  let bestLen = 1;
  for (let k = 0; k < 8; ) {
    if (unchecked(g[k]) != 0) {
      k++;
      continue;
    }
    let end = k;
    while (end < 8 && unchecked(g[end]) == 0) end++;
    if (end - k > bestLen) {
      bestStart = k;
      bestLen = end - k;
    }
    k = end;
  }
  const parts = new Array<string>();
  for (let k = 0; k < 8; k++) {
    if (k == bestStart) {
      parts.push("::");
      k += bestLen - 1;
      continue;
    }
    if (k > 0 && k != bestStart + bestLen) parts.push(":");
    parts.push(hexGroup(unchecked(g[k])));
  }
  return parts.join("");
}

/** The IP alone: "10.0.0.1", "fd00::1"; "" for an empty Address. */
export function formatIp(addr: Address): string {
  if (addr.family == FAMILY_V4) return v4Text(addr.v4);
  if (addr.family == FAMILY_V6) return v6Text(addr.hi, addr.lo);
  return "";
}

/**
 * As Envoy prints a socket address and expects it in filter state (`envoy.lb.address`,
 * original-destination overrides): "10.0.0.1:80", "[fd00::1]:80". Without a port (port < 0)
 * just the IP. An IPv4-mapped address prints as IPv4, the form the mesh stores it in.
 */
export function formatAddress(addr: Address): string {
  const ip = formatIp(addr);
  if (addr.port < 0 || addr.family == FAMILY_NONE) return ip;
  const port = addr.port.toString();
  return addr.family == FAMILY_V6 ? "[" + ip + "]:" + port : ip + ":" + port;
}

/** formatAddress as UTF-8 bytes, ready for setEnvoyFilterStateBytes. */
export function formatAddressUtf8(addr: Address): ArrayBuffer {
  return String.UTF8.encode(formatAddress(addr));
}

// ---- The same texts written into a reused ByteText: the hot path allocates nothing.

/** Group k (0..7, most significant first) of an IPv6 key. */
// @ts-ignore: decorator
@inline function v6Group(hi: u64, lo: u64, k: i32): u32 {
  const word = k < 4 ? hi : lo;
  return <u32>(word >> (<u64>(3 - (k & 3)) * 16)) & 0xffff;
}

/** Appends the IP as formatIp prints it (RFC 5952 for IPv6); nothing for an empty Address. */
export function writeIp(addr: Address, out: ByteText): ByteText {
  if (addr.family == FAMILY_V4) {
    const ip = addr.v4;
    return out.decimal(ip >> 24).byte(0x2e).decimal((ip >> 16) & 255).byte(0x2e).decimal((ip >> 8) & 255).byte(0x2e).decimal(ip & 255);
  }
  if (addr.family != FAMILY_V6) return out;
  const hi = addr.hi;
  const lo = addr.lo;
  // The first longest run of two or more zero groups becomes "::".
  let bestStart = -1;
  let bestLen = 1;
  for (let k = 0; k < 8; ) {
    if (v6Group(hi, lo, k) != 0) {
      k++;
      continue;
    }
    let end = k;
    while (end < 8 && v6Group(hi, lo, end) == 0) end++;
    if (end - k > bestLen) {
      bestStart = k;
      bestLen = end - k;
    }
    k = end;
  }
  for (let k = 0; k < 8; k++) {
    if (k == bestStart) {
      out.byte(0x3a).byte(0x3a);
      k += bestLen - 1;
      continue;
    }
    if (k > 0 && k != bestStart + bestLen) out.byte(0x3a);
    out.hex(v6Group(hi, lo, k));
  }
  return out;
}

/** Appends the socket address as formatAddress prints it ("10.0.0.1:80", "[fd00::1]:80"). */
export function writeAddress(addr: Address, out: ByteText): ByteText {
  if (addr.port < 0 || addr.family == FAMILY_NONE) return writeIp(addr, out);
  if (addr.family == FAMILY_V6) writeIp(addr, out.byte(0x5b)).byte(0x5d);
  else writeIp(addr, out);
  return out.byte(0x3a).decimal(<u32>addr.port);
}

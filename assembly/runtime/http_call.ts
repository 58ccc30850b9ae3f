// HTTP calls out of the VM from a root context (proxy_http_call) and the response Envoy hands to
// proxy_on_http_call_response: its headers (header map HttpCallResponseHeaders, ":status"
// among them), its body (buffer HttpCallResponseBody) and, for a reset, proxy_get_status.
// Both exist only during that callback; outside it Envoy answers BAD_ARGUMENT (header value) or
// NOT_FOUND (body). Every host status is a return value here, never a trap. Measured against
// Envoy 1.40.0: tests/envoy/http_call.test.ts; emulated by host/http_call.ts.
import {
  proxy_get_header_map_pairs,
  proxy_get_header_map_value,
  proxy_get_status,
  proxy_http_call,
} from "./abi";
import { getBufferBytes } from "./buffer";
import { outPtrSlot, outSizeSlot, releaseHostValue, resetOutSlots, takeHostString, takeHostValue } from "./host_value";
import { BufferType, HeaderMapType, WasmResult } from "./types";

/**
 * Header (or trailer) pairs in proxy-wasm's wire form: u32 count, then (u32 key length, u32
 * value length) per pair, then each key and value followed by a NUL.
 */
export class HeaderPairs {
  private readonly keys: Array<ArrayBuffer> = new Array<ArrayBuffer>();
  private readonly values: Array<ArrayBuffer> = new Array<ArrayBuffer>();

  add(key: string, value: string): HeaderPairs {
    this.keys.push(String.UTF8.encode(key));
    this.values.push(String.UTF8.encode(value));
    return this;
  }

  encode(): ArrayBuffer {
    const count = this.keys.length;
    let size = 4 + 8 * count;
    for (let i = 0; i < count; i++) size += unchecked(this.keys[i]).byteLength + unchecked(this.values[i]).byteLength + 2;
    const out = new ArrayBuffer(size);
    const base = changetype<usize>(out);
    store<u32>(base, <u32>count);
    let at = base + 4 + 8 * <usize>count;
    for (let i = 0; i < count; i++) {
      const key = unchecked(this.keys[i]);
      const value = unchecked(this.values[i]);
      store<u32>(base + 4 + 8 * <usize>i, <u32>key.byteLength);
      store<u32>(base + 8 + 8 * <usize>i, <u32>value.byteLength);
      memory.copy(at, changetype<usize>(key), key.byteLength);
      at += key.byteLength;
      store<u8>(at++, 0);
      memory.copy(at, changetype<usize>(value), value.byteLength);
      at += value.byteLength;
      store<u8>(at++, 0);
    }
    return out;
  }
}

const tokenSlot: usize = heap.alloc(4);
let lastToken: u32 = 0;

/**
 * Sends `headers` (encoded HeaderPairs; Envoy requires :method, :path and :authority) to the
 * Envoy cluster `cluster`, with `body` (none when null). `timeoutMs` 0 means no timeout. Returns the host status:
 * OK (the token is lastHttpCallToken()), BAD_ARGUMENT for an unknown cluster or a missing
 * pseudo-header, INTERNAL_FAILURE when Envoy could not start the request.
 */
export function httpCall(cluster: ArrayBuffer, headers: ArrayBuffer, timeoutMs: u32, body: ArrayBuffer | null = null): u32 {
  store<u32>(tokenSlot, 0);
  const status = proxy_http_call(
    changetype<usize>(cluster),
    <usize>cluster.byteLength,
    changetype<usize>(headers),
    <usize>headers.byteLength,
    body === null ? 0 : changetype<usize>(body),
    body === null ? 0 : <usize>body.byteLength,
    0,
    0,
    timeoutMs,
    tokenSlot,
  );
  lastToken = status == WasmResult.Ok ? load<u32>(tokenSlot) : 0;
  return status;
}

/** The token of the last call httpCall started (0 when it was refused). */
export function lastHttpCallToken(): u32 {
  return lastToken;
}

/** One response header (first value), or null when absent or outside the response callback. */
export function httpCallResponseHeader(name: string): string | null {
  const key = String.UTF8.encode(name);
  resetOutSlots();
  const status = proxy_get_header_map_value(
    <i32>HeaderMapType.HttpCallResponseHeaders,
    changetype<usize>(key),
    <usize>key.byteLength,
    outPtrSlot(),
    outSizeSlot(),
  );
  if (status != WasmResult.Ok) {
    releaseHostValue();
    return null;
  }
  return takeHostString();
}

/** The response's `:status` as a number (100-599), or 0 when it is missing or malformed. */
export function httpCallResponseStatus(): i32 {
  const text = httpCallResponseHeader(":status");
  if (text === null || text.length != 3) return 0;
  let value = 0;
  for (let i = 0; i < 3; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return 0;
    value = value * 10 + (c - 0x30);
  }
  return value >= 100 && value <= 599 ? value : 0;
}

/** The response body (size as passed to the callback), or null when the host refuses. */
export function httpCallResponseBody(size: u32): ArrayBuffer | null {
  if (size == 0) return new ArrayBuffer(0);
  return getBufferBytes(BufferType.HttpCallResponseBody, 0, size);
}

/**
 * Every response header as [key, value, key, value, ...] (diagnostics and tests; bounded
 * parse of the host's pairs, a malformed block yields what was read before it).
 */
export function httpCallResponseHeaderPairs(): Array<string> {
  const out = new Array<string>();
  resetOutSlots();
  if (proxy_get_header_map_pairs(<i32>HeaderMapType.HttpCallResponseHeaders, outPtrSlot(), outSizeSlot()) != WasmResult.Ok) {
    releaseHostValue();
    return out;
  }
  const block = takeHostValue();
  const size = <usize>block.byteLength;
  if (size < 4) return out;
  const base = changetype<usize>(block);
  const count = <usize>load<u32>(base);
  if (count > (size - 4) / 8) return out;
  let at: usize = 4 + 8 * count;
  for (let i: usize = 0; i < count; i++) {
    const keyLength = <usize>load<u32>(base + 4 + 8 * i);
    const valueLength = <usize>load<u32>(base + 8 + 8 * i);
    if (keyLength + valueLength + 2 > size - at) return out;
    out.push(String.UTF8.decodeUnsafe(base + at, keyLength));
    at += keyLength + 1;
    out.push(String.UTF8.decodeUnsafe(base + at, valueLength));
    at += valueLength + 1;
  }
  return out;
}

/** proxy_get_status after a failed call: Envoy reports a reset as 11 (BrokenConnection), "reset". */
export class CallStatus {
  constructor(readonly code: u32, readonly message: string) {}
}

const statusSlot: usize = heap.alloc(4);

export function lastCallStatus(): CallStatus {
  store<u32>(statusSlot, 0);
  resetOutSlots();
  if (proxy_get_status(statusSlot, outPtrSlot(), outSizeSlot()) != WasmResult.Ok) {
    releaseHostValue();
    return new CallStatus(0, "");
  }
  return new CallStatus(load<u32>(statusSlot), takeHostString());
}

// Reading and writing Envoy properties.
//
// A property path is a list of segments joined by NUL ("destination\0address"); the dotted
// form is NOT_FOUND in Envoy. Encodings: strings raw, integers 8-byte little-endian, bools one
// byte. Every reader returns the host status or a fallback value: a missing property is a
// normal outcome for the filter to handle, never a trap.
import { proxy_get_property, proxy_set_property } from "./abi";
import {
  hostValuePtr,
  hostValueSize,
  outPtrSlot,
  outSizeSlot,
  releaseHostValue,
  resetOutSlots,
  takeHostString,
  takeHostValue,
} from "./host_value";
import { ByteText } from "./text";
import { WasmResult } from "./types";

/** Encodes a property path once, so hot paths pass a ready buffer. */
export function propertyPath(segments: string[]): ArrayBuffer {
  return String.UTF8.encode(segments.join("\0"));
}

let lastStatus: u32 = WasmResult.Ok;

/** Status of the last property read or write. */
export function lastPropertyStatus(): u32 {
  return lastStatus;
}

/**
 * Asks the host for a property and leaves the value in the host-value slots (see host_value.ts)
 * for zero-copy decoding. The caller must call releaseHostValue() afterwards.
 */
export function fetchProperty(path: ArrayBuffer): u32 {
  resetOutSlots();
  lastStatus = proxy_get_property(
    changetype<usize>(path),
    <usize>path.byteLength,
    outPtrSlot(),
    outSizeSlot(),
  );
  return lastStatus;
}

/** Raw bytes of a property, or null when the host has none (status in lastPropertyStatus()). */
export function getPropertyBytes(path: ArrayBuffer): ArrayBuffer | null {
  if (fetchProperty(path) != WasmResult.Ok) {
    releaseHostValue();
    return null;
  }
  return takeHostValue();
}

/** A string property, or null when missing. */
export function getPropertyString(path: ArrayBuffer): string | null {
  if (fetchProperty(path) != WasmResult.Ok) {
    releaseHostValue();
    return null;
  }
  return takeHostString();
}

/** An integer property (8-byte little-endian), or `fallback` when missing or of another size. */
export function getPropertyU64(path: ArrayBuffer, fallback: u64): u64 {
  if (fetchProperty(path) != WasmResult.Ok || hostValueSize() != 8 || hostValuePtr() == 0) {
    releaseHostValue();
    return fallback;
  }
  const value = load<u64>(hostValuePtr());
  releaseHostValue();
  return value;
}

/** A bool property (one byte), or `fallback` when missing or of another size. */
export function getPropertyBool(path: ArrayBuffer, fallback: bool): bool {
  if (fetchProperty(path) != WasmResult.Ok || hostValueSize() != 1 || hostValuePtr() == 0) {
    releaseHostValue();
    return fallback;
  }
  const value = load<u8>(hostValuePtr()) != 0;
  releaseHostValue();
  return value;
}

/**
 * Stores bytes as filter state `wasm.<path>` (readable by formatters as
 * %FILTER_STATE(wasm.<path>:PLAIN)%). Returns the host status.
 */
export function setPropertyBytes(path: ArrayBuffer, value: ArrayBuffer): u32 {
  lastStatus = proxy_set_property(
    changetype<usize>(path),
    <usize>path.byteLength,
    changetype<usize>(value),
    <usize>value.byteLength,
  );
  return lastStatus;
}

/** setPropertyBytes with the bytes of a reused ByteText (no allocation). */
export function setPropertyText(path: ArrayBuffer, value: ByteText): u32 {
  lastStatus = proxy_set_property(changetype<usize>(path), <usize>path.byteLength, value.ptr, <usize>value.length);
  return lastStatus;
}

/** setPropertyBytes with a UTF-8 string value. */
export function setPropertyString(path: ArrayBuffer, value: string): u32 {
  return setPropertyBytes(path, String.UTF8.encode(value));
}

// Envoy's `set_envoy_filter_state` foreign function (Envoy 1.28+).
//
// Its argument is a protobuf message {1: path string, 2: value string, 3: span enum}. The path
// names both the object factory and the key, so only keys Envoy registers a factory for can be
// written (NOT_FOUND otherwise); a value the factory cannot parse is BAD_ARGUMENT.
import { proxy_call_foreign_function } from "./abi";
import { outPtrSlot, outSizeSlot, releaseHostValue, resetOutSlots } from "./host_value";
import { ByteText } from "./text";
import { FilterStateSpan } from "./types";

const FUNCTION_NAME = String.UTF8.encode("set_envoy_filter_state");

// One scratch buffer for the encoded message, grown on demand and reused: no allocation per call
// once it has reached the largest message seen.
let scratch: usize = heap.alloc(256);
let scratchCapacity: usize = 256;

function varintSize(value: u32): usize {
  let size: usize = 1;
  while (value >= 0x80) {
    value >>>= 7;
    size++;
  }
  return size;
}

function writeVarint(at: usize, value: u32): usize {
  while (value >= 0x80) {
    store<u8>(at++, <u8>((value & 0x7f) | 0x80));
    value >>>= 7;
  }
  store<u8>(at++, <u8>value);
  return at;
}

/** Size of the encoded SetEnvoyFilterStateArguments message. */
export function encodedFilterStateSize(keyLength: u32, valueLength: u32): usize {
  return (
    1 + varintSize(keyLength) + keyLength + 1 + varintSize(valueLength) + valueLength + 2
  );
}

/**
 * Encodes {1: key, 2: value, 3: span} at `out` (which must hold encodedFilterStateSize bytes).
 * Returns the end address. Exposed for the unit tests.
 */
export function encodeFilterStateArguments(
  out: usize,
  keyPtr: usize,
  keyLength: u32,
  valuePtr: usize,
  valueLength: u32,
  span: FilterStateSpan,
): usize {
  let at = out;
  store<u8>(at++, 0x0a); // field 1, length-delimited
  at = writeVarint(at, keyLength);
  memory.copy(at, keyPtr, keyLength);
  at += keyLength;
  store<u8>(at++, 0x12); // field 2, length-delimited
  at = writeVarint(at, valueLength);
  memory.copy(at, valuePtr, valueLength);
  at += valueLength;
  store<u8>(at++, 0x18); // field 3, varint
  store<u8>(at++, <u8>span);
  return at;
}

/** Writes Envoy filter state from pre-encoded UTF-8 key and value. Returns the host status. */
export function setEnvoyFilterStateBytes(
  key: ArrayBuffer,
  value: ArrayBuffer,
  span: FilterStateSpan = FilterStateSpan.FilterChain,
): u32 {
  return setEnvoyFilterStateRaw(key, changetype<usize>(value), <u32>value.byteLength, span);
}

/** setEnvoyFilterStateBytes with the bytes of a reused ByteText (no allocation). */
export function setEnvoyFilterStateText(
  key: ArrayBuffer,
  value: ByteText,
  span: FilterStateSpan = FilterStateSpan.FilterChain,
): u32 {
  return setEnvoyFilterStateRaw(key, value.ptr, <u32>value.length, span);
}

function setEnvoyFilterStateRaw(key: ArrayBuffer, valuePtr: usize, valueLength: u32, span: FilterStateSpan): u32 {
  const keyLength = <u32>key.byteLength;
  const size = encodedFilterStateSize(keyLength, valueLength);
  if (size > scratchCapacity) {
    heap.free(scratch);
    scratchCapacity = size * 2;
    scratch = heap.alloc(scratchCapacity);
  }
  const end = encodeFilterStateArguments(
    scratch,
    changetype<usize>(key),
    keyLength,
    valuePtr,
    valueLength,
    span,
  );
  resetOutSlots();
  const status = proxy_call_foreign_function(
    changetype<usize>(FUNCTION_NAME),
    <usize>FUNCTION_NAME.byteLength,
    scratch,
    end - scratch,
    outPtrSlot(),
    outSizeSlot(),
  );
  releaseHostValue();
  return status;
}

/** Writes Envoy filter state; `key` should be pre-encoded once with String.UTF8.encode. */
export function setEnvoyFilterState(
  key: ArrayBuffer,
  value: string,
  span: FilterStateSpan = FilterStateSpan.FilterChain,
): u32 {
  return setEnvoyFilterStateBytes(key, String.UTF8.encode(value), span);
}

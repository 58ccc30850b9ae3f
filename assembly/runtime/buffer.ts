// Connection data buffers and stream control.
import {
  proxy_close_stream,
  proxy_continue_stream,
  proxy_get_buffer_bytes,
  proxy_set_buffer_bytes,
} from "./abi";
import { outPtrSlot, outSizeSlot, releaseHostValue, resetOutSlots, takeHostValue } from "./host_value";
import { BufferType, StreamType, WasmResult } from "./types";

/**
 * Bytes [start, start+length) of a buffer (Envoy clamps the range), or null when the host
 * refuses. A refused read is a value, never a trap.
 */
export function getBufferBytes(type: BufferType, start: u32, length: u32): ArrayBuffer | null {
  resetOutSlots();
  const status = proxy_get_buffer_bytes(<i32>type, start, length, outPtrSlot(), outSizeSlot());
  if (status != WasmResult.Ok) {
    releaseHostValue();
    return null;
  }
  return takeHostValue();
}

/**
 * Envoy's buffer write: start 0 drains `length` bytes then prepends `data`; start ≥ the buffer's
 * size appends; any other start is BAD_ARGUMENT. Returns the host status.
 */
export function setBufferBytes(type: BufferType, start: u32, length: u32, data: ArrayBuffer): u32 {
  return proxy_set_buffer_bytes(
    <i32>type,
    start,
    length,
    changetype<usize>(data),
    <usize>data.byteLength,
  );
}

/** Resumes a downstream paused with StopIteration (Upstream is UNIMPLEMENTED in Envoy). */
export function continueDownstream(): u32 {
  return proxy_continue_stream(<i32>StreamType.Downstream);
}

/** Closes the connection (Envoy closes the downstream for either stream type). */
export function closeDownstream(): u32 {
  return proxy_close_stream(<i32>StreamType.Downstream);
}

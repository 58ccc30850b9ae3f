// A connection data buffer with Envoy's read and write rules (Buffer::copyTo / copyFrom and
// proxy_get_buffer_bytes in proxy-wasm-cpp-host).
import { WasmResult } from "./abi.js";

export class DataBuffer {
  private data: Uint8Array = new Uint8Array(0);

  get size(): number {
    return this.data.length;
  }

  bytes(): Uint8Array {
    return this.data;
  }

  /** Adds bytes at the end (new socket data arriving behind held data). */
  append(more: Uint8Array): void {
    if (more.length === 0) return;
    if (this.data.length === 0) {
      this.data = more.slice();
      return;
    }
    const joined = new Uint8Array(this.data.length + more.length);
    joined.set(this.data);
    joined.set(more, this.data.length);
    this.data = joined;
  }

  /** Takes everything out (the bytes passed on to the next filter). */
  drainAll(): Uint8Array {
    const out = this.data;
    this.data = new Uint8Array(0);
    return out;
  }

  /**
   * proxy_get_buffer_bytes: the range is clamped to the buffer. A start past the end is refused
   * (Envoy computes a wrapped length there and fails inside the copy).
   */
  read(start: number, length: number): { status: number; bytes?: Uint8Array } {
    if (start > this.data.length) return { status: WasmResult.BadArgument };
    const end = Math.min(this.data.length, start + length);
    return { status: WasmResult.Ok, bytes: this.data.subarray(start, end) };
  }

  /**
   * proxy_set_buffer_bytes: start 0 drains `length` bytes (at most the buffer) then prepends
   * `data`; start ≥ size appends; any other start is BAD_ARGUMENT.
   */
  write(start: number, length: number, data: Uint8Array): number {
    if (start === 0) {
      const rest = this.data.subarray(Math.min(length, this.data.length));
      const joined = new Uint8Array(data.length + rest.length);
      joined.set(data);
      joined.set(rest, data.length);
      this.data = joined;
      return WasmResult.Ok;
    }
    if (start >= this.data.length) {
      this.append(data);
      return WasmResult.Ok;
    }
    return WasmResult.BadArgument;
  }
}

/** Read-only bytes (VM and plugin configuration): readable, never writable. */
export class ConstBuffer {
  constructor(private readonly data: Uint8Array) {}

  get size(): number {
    return this.data.length;
  }

  read(start: number, length: number): { status: number; bytes?: Uint8Array } {
    if (start > this.data.length) return { status: WasmResult.BadArgument };
    return { status: WasmResult.Ok, bytes: this.data.subarray(start, Math.min(this.data.length, start + length)) };
  }

  write(): number {
    return WasmResult.BadArgument;
  }
}

export type HostBuffer = DataBuffer | ConstBuffer;

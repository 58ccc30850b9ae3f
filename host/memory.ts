// Access to the guest's linear memory from host functions.
//
// memory.grow() detaches the ArrayBuffer behind every view, so views are re-created whenever
// `memory.buffer` is no longer the buffer they were made from (checked on every access: the
// guest may grow memory in any call, including the `malloc` the host makes itself).
import { WasmResult } from "./abi.js";

/** A host call's failure status, thrown by helpers and turned into the call's return value. */
export class HostStatus extends Error {
  constructor(readonly status: number) {
    super(`host status ${status}`);
  }
}

const utf8 = new TextDecoder("utf-8");

export class GuestMemory {
  private bytes: Uint8Array;
  private view: DataView;

  constructor(private readonly memory: WebAssembly.Memory) {
    this.bytes = new Uint8Array(memory.buffer);
    this.view = new DataView(memory.buffer);
  }

  private fresh(): void {
    if (this.bytes.buffer !== this.memory.buffer) {
      this.bytes = new Uint8Array(this.memory.buffer);
      this.view = new DataView(this.memory.buffer);
    }
  }

  /** Bytes of linear memory (the VM's memory footprint as Envoy would see it). */
  get size(): number {
    return this.memory.buffer.byteLength;
  }

  private check(ptr: number, length: number): void {
    this.fresh();
    if (ptr < 0 || length < 0 || ptr + length > this.bytes.length) {
      throw new HostStatus(WasmResult.InvalidMemoryAccess);
    }
  }

  /** A copy of [ptr, ptr+length). */
  read(ptr: number, length: number): Uint8Array {
    ptr >>>= 0; // wasm32 pointers are unsigned: above 2 GiB they arrive as negative i32
    this.check(ptr, length);
    return this.bytes.slice(ptr, ptr + length);
  }

  readString(ptr: number, length: number): string {
    ptr >>>= 0; // wasm32 pointers are unsigned: above 2 GiB they arrive as negative i32
    this.check(ptr, length);
    return utf8.decode(this.bytes.subarray(ptr, ptr + length));
  }

  write(ptr: number, data: Uint8Array): void {
    ptr >>>= 0; // wasm32 pointers are unsigned: above 2 GiB they arrive as negative i32
    this.check(ptr, data.length);
    this.bytes.set(data, ptr);
  }

  readU32(ptr: number): number {
    ptr >>>= 0; // wasm32 pointers are unsigned: above 2 GiB they arrive as negative i32
    this.check(ptr, 4);
    return this.view.getUint32(ptr, true);
  }

  writeU32(ptr: number, value: number): void {
    ptr >>>= 0; // wasm32 pointers are unsigned: above 2 GiB they arrive as negative i32
    this.check(ptr, 4);
    this.view.setUint32(ptr, value >>> 0, true);
  }

  writeU64(ptr: number, value: bigint): void {
    ptr >>>= 0; // wasm32 pointers are unsigned: above 2 GiB they arrive as negative i32
    this.check(ptr, 8);
    this.view.setBigUint64(ptr, BigInt.asUintN(64, value), true);
  }
}

// What a host function needs from the context the guest is acting for: the root (plugin)
// context, a connection, or the VM context (id 0) that is current during `_initialize`.
import { WasmResult } from "./abi.js";
import type { HostBuffer } from "./buffers.js";
import type { HttpCallResponse } from "./http_call.js";

export interface PropertyResult {
  readonly status: number;
  readonly bytes?: Uint8Array;
}

export interface HostContext {
  readonly id: number;
  readonly kind: "vm" | "root" | "connection";
  /** Host functions invoked while this context was current (benchmarks read it). */
  hostCalls: number;
  getProperty(segments: readonly string[]): PropertyResult;
  setProperty(rawPath: string, value: Uint8Array): number;
  /** Called once the key and value passed the factory check. */
  setEnvoyFilterState(key: string, value: string, span: number): number;
  /** The buffer of `type`, or undefined for NOT_FOUND. */
  buffer(type: number): HostBuffer | undefined;
  continueStream(type: number): number;
  closeStream(type: number): number;
  /** Root contexts only: the HTTP call response being delivered (only during its callback). */
  httpResponse?: HttpCallResponse;
  /** What proxy_get_status answers (Envoy sets it for a reset call and never clears the code). */
  callStatus?: { code: number; message: string };
}

/** The VM context: current during `_initialize`/`main`; it has no stream and no plugin. */
export class VmContext implements HostContext {
  readonly id = 0;
  readonly kind = "vm" as const;
  hostCalls = 0;
  getProperty(): PropertyResult {
    return { status: WasmResult.NotFound };
  }
  setProperty(): number {
    return WasmResult.NotFound;
  }
  setEnvoyFilterState(): number {
    return WasmResult.NotFound;
  }
  buffer(): HostBuffer | undefined {
    return undefined;
  }
  continueStream(type: number): number {
    return type === 3 ? WasmResult.Unimplemented : type <= 2 ? WasmResult.Ok : WasmResult.BadArgument;
  }
  closeStream(type: number): number {
    return type <= 3 ? WasmResult.Ok : WasmResult.BadArgument;
  }
}

// The `env.proxy_*` host functions, bound to one VM. Each follows Envoy's implementation
// (proxy-wasm-cpp-host exports.cc + Envoy's Context); the context-specific parts (properties,
// buffers, stream control) live in the context classes (root.ts, connection.ts).
import { HOST_FUNCTIONS, LOG_LEVELS, WasmResult, type AbiVersion } from "./abi.js";
import {
  decodeFilterStateArguments,
  validateFilterState,
} from "./filter_state.js";
import { decodePairs, encodePairs, type HttpCalls } from "./http_call.js";
import type { LogSink } from "./logs.js";
import { splitPropertyPath } from "./properties.js";
import type { SharedData } from "./shared_data.js";
import type { WasmVm } from "./vm.js";
import { wasiFunctions, type WasiOptions } from "./wasi.js";

export interface HostServices extends WasiOptions {
  readonly logs: LogSink;
  readonly sharedData: SharedData;
  /** Wall clock in ns (proxy_get_current_time_nanoseconds). */
  readonly clock: () => bigint;
  /** Tick period requested by the guest, per root context id. */
  setTickPeriod(rootContextId: number, milliseconds: number): void;
  /** Root context a context belongs to (for ticks and proxy_done). */
  rootOf(contextId: number): number;
  /** proxy_done from a root whose on_done returned false. */
  rootDone(rootContextId: number): number;
  /** Configuration visible to proxy_get_configuration (ABI 0.1.0). */
  configurationFor(contextId: number): Uint8Array;
  /** Records a call to something the host does not emulate. */
  notice(message: string): void;
  /** This VM's HTTP calls (proxy_http_call). */
  readonly httpCalls: HttpCalls;
}

type HostFn = (...args: never[]) => number | void;

export function buildImports(vm: WasmVm, services: HostServices): WebAssembly.Imports {
  const mem = () => vm.memory;
  const ctx = () => vm.context();
  const readPath = (ptr: number, size: number): string[] => splitPropertyPath(mem().readString(ptr, size));
  const notEmulated = (name: string, status: number) => () => {
    services.notice(`${name} is not emulated by the test host (returned ${status})`);
    return status;
  };

  const proxy: Record<string, HostFn> = {
    proxy_log(level: number, ptr: number, size: number) {
      const name = LOG_LEVELS[level];
      if (name === undefined) return WasmResult.BadArgument;
      services.logs.add({
        level: name,
        message: mem().readString(ptr, size),
        contextId: ctx().id,
        vm: vm.kind,
        source: "proxy_log",
      });
      return WasmResult.Ok;
    },
    proxy_get_log_level(levelPtr: number) {
      mem().writeU32(levelPtr, services.logs.level);
      return WasmResult.Ok;
    },
    proxy_get_status(codePtr: number, messagePtrPtr: number, messageSizePtr: number) {
      // Set by a reset HTTP call (11, "reset" during its callback); gRPC is not emulated.
      const status = ctx().callStatus ?? { code: 0, message: "" };
      mem().writeU32(codePtr, status.code);
      vm.copyOut(new TextEncoder().encode(status.message), messagePtrPtr, messageSizePtr);
      return WasmResult.Ok;
    },
    proxy_get_property(pathPtr: number, pathSize: number, valuePtrPtr: number, valueSizePtr: number) {
      const result = ctx().getProperty(readPath(pathPtr, pathSize));
      if (result.status !== WasmResult.Ok) return result.status;
      vm.copyOut(result.bytes ?? new Uint8Array(0), valuePtrPtr, valueSizePtr);
      return WasmResult.Ok;
    },
    proxy_set_property(pathPtr: number, pathSize: number, valuePtr: number, valueSize: number) {
      return ctx().setProperty(mem().readString(pathPtr, pathSize), mem().read(valuePtr, valueSize));
    },
    proxy_continue_stream(type: number) {
      return ctx().continueStream(type);
    },
    proxy_close_stream(type: number) {
      return ctx().closeStream(type);
    },
    // No HTTP stream on a network filter: Envoy accepts and does nothing.
    proxy_send_local_response() {
      return WasmResult.Ok;
    },
    proxy_clear_route_cache() {
      return WasmResult.Ok;
    },
    proxy_continue_request() {
      return WasmResult.Ok;
    },
    proxy_continue_response() {
      return WasmResult.Ok;
    },
    proxy_get_configuration(valuePtrPtr: number, valueSizePtr: number) {
      vm.copyOut(services.configurationFor(ctx().id), valuePtrPtr, valueSizePtr);
      return WasmResult.Ok;
    },
    proxy_get_shared_data(keyPtr: number, keySize: number, valuePtrPtr: number, valueSizePtr: number, casPtr: number) {
      const got = services.sharedData.get(mem().readString(keyPtr, keySize));
      if (got.status !== WasmResult.Ok) return got.status;
      vm.copyOut(got.value!, valuePtrPtr, valueSizePtr);
      mem().writeU32(casPtr, got.cas!);
      return WasmResult.Ok;
    },
    proxy_set_shared_data(keyPtr: number, keySize: number, valuePtr: number, valueSize: number, cas: number) {
      return services.sharedData.set(mem().readString(keyPtr, keySize), mem().read(valuePtr, valueSize), cas >>> 0);
    },
    proxy_register_shared_queue: notEmulated("proxy_register_shared_queue", WasmResult.Unimplemented),
    proxy_resolve_shared_queue: notEmulated("proxy_resolve_shared_queue", WasmResult.NotFound),
    proxy_dequeue_shared_queue: notEmulated("proxy_dequeue_shared_queue", WasmResult.NotFound),
    proxy_enqueue_shared_queue: notEmulated("proxy_enqueue_shared_queue", WasmResult.NotFound),
    // A network filter has no HTTP stream: its only header maps are an HTTP call response's
    // (types 6 and 7), readable during proxy_on_http_call_response. Any other map, or those
    // outside the callback, is BAD_ARGUMENT (pairs: an empty list), as in Envoy.
    proxy_get_header_map_value(type: number, keyPtr: number, keySize: number, valuePtrPtr: number, valueSizePtr: number) {
      const response = ctx().httpResponse;
      const map = response === undefined ? undefined : type === 6 ? response.headers : type === 7 ? response.trailers : undefined;
      if (map === undefined || (type === 7 && map.length === 0)) return WasmResult.BadArgument;
      const key = mem().readString(keyPtr, keySize).toLowerCase();
      const entry = map.find(([k]) => k === key);
      if (entry === undefined) return WasmResult.NotFound;
      vm.copyOut(new TextEncoder().encode(entry[1]), valuePtrPtr, valueSizePtr);
      return WasmResult.Ok;
    },
    proxy_add_header_map_value() {
      return WasmResult.BadArgument;
    },
    proxy_replace_header_map_value() {
      return WasmResult.BadArgument;
    },
    proxy_remove_header_map_value() {
      return WasmResult.BadArgument;
    },
    proxy_set_header_map_pairs() {
      return WasmResult.BadArgument;
    },
    proxy_get_header_map_size() {
      return WasmResult.BadArgument;
    },
    proxy_get_header_map_pairs(type: number, ptrPtr: number, sizePtr: number) {
      const response = ctx().httpResponse;
      const map = response === undefined ? [] : type === 6 ? response.headers : type === 7 ? response.trailers : [];
      vm.copyOut(encodePairs(map), ptrPtr, sizePtr);
      return WasmResult.Ok;
    },
    proxy_get_buffer_status(type: number, lengthPtr: number, flagsPtr: number) {
      if (type > 8) return WasmResult.BadArgument;
      const buffer = ctx().buffer(type);
      if (buffer === undefined) return WasmResult.NotFound;
      mem().writeU32(lengthPtr, buffer.size);
      mem().writeU32(flagsPtr, 0);
      return WasmResult.Ok;
    },
    proxy_get_buffer_bytes(type: number, start: number, length: number, ptrPtr: number, sizePtr: number) {
      if (type > 8) return WasmResult.BadArgument;
      const buffer = ctx().buffer(type);
      if (buffer === undefined) return WasmResult.NotFound;
      const got = buffer.read(start >>> 0, length >>> 0);
      if (got.status !== WasmResult.Ok) return got.status;
      // Envoy leaves the out-params untouched for an empty range; the host writes 0/0.
      vm.copyOut(got.bytes!, ptrPtr, sizePtr);
      return WasmResult.Ok;
    },
    proxy_set_buffer_bytes(type: number, start: number, length: number, dataPtr: number, dataSize: number) {
      if (type > 8) return WasmResult.BadArgument;
      const buffer = ctx().buffer(type);
      if (buffer === undefined) return WasmResult.NotFound;
      return buffer.write(start >>> 0, length >>> 0, mem().read(dataPtr, dataSize));
    },
    proxy_http_call(
      uriPtr: number,
      uriSize: number,
      headersPtr: number,
      headersSize: number,
      bodyPtr: number,
      bodySize: number,
      _trailersPtr: number,
      _trailersSize: number,
      timeoutMs: number,
      tokenPtr: number,
    ) {
      const context = ctx();
      if (context.kind !== "root") {
        services.notice("proxy_http_call from a connection context is not emulated by the test host (returned 12)");
        return WasmResult.Unimplemented;
      }
      const started = services.httpCalls.start(
        context.id,
        mem().readString(uriPtr, uriSize),
        decodePairs(mem().read(headersPtr, headersSize)),
        mem().read(bodyPtr, bodySize).slice(),
        timeoutMs,
      );
      if (started.token !== undefined) mem().writeU32(tokenPtr, started.token);
      return started.status;
    },
    proxy_grpc_call: notEmulated("proxy_grpc_call", WasmResult.Unimplemented),
    proxy_grpc_stream: notEmulated("proxy_grpc_stream", WasmResult.Unimplemented),
    proxy_grpc_cancel: notEmulated("proxy_grpc_cancel", WasmResult.NotFound),
    proxy_grpc_close: notEmulated("proxy_grpc_close", WasmResult.NotFound),
    proxy_grpc_send: notEmulated("proxy_grpc_send", WasmResult.NotFound),
    proxy_set_tick_period_milliseconds(milliseconds: number) {
      services.setTickPeriod(services.rootOf(ctx().id), milliseconds >>> 0);
      return WasmResult.Ok;
    },
    proxy_get_current_time_nanoseconds(resultPtr: number) {
      mem().writeU64(resultPtr, services.clock());
      return WasmResult.Ok;
    },
    proxy_define_metric(type: number, namePtr: number, nameSize: number, idPtr: number) {
      const defined = vm.metricIds.define(type >>> 0, mem().readString(namePtr, nameSize));
      if (defined.status !== WasmResult.Ok) return defined.status;
      mem().writeU32(idPtr, defined.id!);
      return WasmResult.Ok;
    },
    proxy_increment_metric(id: number, offset: bigint) {
      return vm.metricIds.increment(id >>> 0, BigInt.asIntN(64, offset));
    },
    proxy_record_metric(id: number, value: bigint) {
      return vm.metricIds.record(id >>> 0, BigInt.asUintN(64, value));
    },
    proxy_get_metric(id: number, resultPtr: number) {
      const got = vm.metricIds.get(id >>> 0);
      if (got.status !== WasmResult.Ok) return got.status;
      mem().writeU64(resultPtr, got.value!);
      return WasmResult.Ok;
    },
    proxy_set_effective_context(contextId: number) {
      return vm.setEffectiveContext(contextId >>> 0);
    },
    proxy_done() {
      return services.rootDone(ctx().id);
    },
    proxy_call_foreign_function(
      namePtr: number,
      nameSize: number,
      argsPtr: number,
      argsSize: number,
      resultPtrPtr: number,
      resultSizePtr: number,
    ) {
      const name = mem().readString(namePtr, nameSize);
      let status: number;
      if (name === "set_envoy_filter_state") {
        const args = decodeFilterStateArguments(mem().read(argsPtr, argsSize));
        if (args === undefined) return WasmResult.BadArgument;
        status = validateFilterState(args.key, args.value);
        if (status === WasmResult.Ok) status = ctx().setEnvoyFilterState(args.key, args.value, args.span);
      } else if (name === "clear_route_cache") {
        status = WasmResult.Ok;
      } else {
        // Envoy also registers compress, uncompress, sign, verify_signature, declare_property and
        // expr_* here; the host does not emulate them.
        return WasmResult.NotFound;
      }
      if (status === WasmResult.Ok) vm.copyOut(new Uint8Array(0), resultPtrPtr, resultSizePtr);
      return status;
    },
    emscripten_notify_memory_growth() {
      // Views are re-created on access (memory.ts); nothing to do.
    },
    pthread_equal(left: number, right: number) {
      return left === right ? 1 : 0;
    },
  };

  const wasi = wasiFunctions(vm, services);
  const imports: Record<string, Record<string, HostFn>> = {};
  for (const spec of HOST_FUNCTIONS) {
    if (spec.abis && !spec.abis.includes(vm.abiVersion as AbiVersion)) continue;
    const impl = spec.module === "env" ? proxy[spec.name] : wasi[spec.name];
    if (impl === undefined) throw new Error(`host: no implementation for ${spec.module}.${spec.name}`);
    (imports[spec.module] ??= {})[spec.name] = vm.hostFunction(
      `${spec.module}.${spec.name}`,
      impl as (...args: unknown[]) => number | void,
    ) as HostFn;
  }
  return imports as WebAssembly.Imports;
}

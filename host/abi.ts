// The proxy-wasm ABI as Envoy links it: the host functions a module may import (with their exact
// wasm signatures), the callbacks Envoy looks up in a module's exports, and the numeric enums.
//
// Source of truth: proxy-wasm-cpp-host (the host library Envoy embeds), WasmBase::registerCallbacks
// and getFunctions. A module whose imports are not all in this table, or whose signatures differ,
// fails to link in Envoy; the host refuses it the same way (see module_check.ts).

export type ValType = "i32" | "i64" | "f32" | "f64" | "v128" | "funcref" | "externref";
export type AbiVersion = "0_1_0" | "0_2_0" | "0_2_1";

export interface Signature {
  readonly params: readonly ValType[];
  readonly results: readonly ValType[];
}

export interface HostFunctionSpec extends Signature {
  readonly module: string;
  readonly name: string;
  /** ABI versions that get this function linked; absent = every version. */
  readonly abis?: readonly AbiVersion[];
}

// Compact signature notation: one letter per value, `i` = i32, `l` = i64.
function sig(params: string, results: string): Signature {
  const decode = (letters: string): ValType[] =>
    [...letters].map((c) => {
      if (c === "i") return "i32";
      if (c === "l") return "i64";
      throw new Error(`abi.ts: bad signature letter ${c}`);
    });
  return { params: decode(params), results: decode(results) };
}

function env(name: string, params: string, results: string, abis?: AbiVersion[]): HostFunctionSpec {
  return { module: "env", name, ...sig(params, results), ...(abis ? { abis } : {}) };
}

// proxy_* functions linked for every ABI version (cpp-host FOR_ALL_HOST_FUNCTIONS).
const PROXY_FUNCTIONS: HostFunctionSpec[] = [
  env("proxy_log", "iii", "i"),
  env("proxy_get_status", "iii", "i"),
  env("proxy_set_property", "iiii", "i"),
  env("proxy_get_property", "iiii", "i"),
  env("proxy_send_local_response", "iiiiiiii", "i"),
  env("proxy_get_shared_data", "iiiii", "i"),
  env("proxy_set_shared_data", "iiiii", "i"),
  env("proxy_register_shared_queue", "iii", "i"),
  env("proxy_resolve_shared_queue", "iiiii", "i"),
  env("proxy_dequeue_shared_queue", "iii", "i"),
  env("proxy_enqueue_shared_queue", "iii", "i"),
  env("proxy_get_header_map_value", "iiiii", "i"),
  env("proxy_add_header_map_value", "iiiii", "i"),
  env("proxy_replace_header_map_value", "iiiii", "i"),
  env("proxy_remove_header_map_value", "iii", "i"),
  env("proxy_get_header_map_pairs", "iii", "i"),
  env("proxy_set_header_map_pairs", "iii", "i"),
  env("proxy_get_header_map_size", "ii", "i"),
  env("proxy_get_buffer_status", "iii", "i"),
  env("proxy_get_buffer_bytes", "iiiii", "i"),
  env("proxy_set_buffer_bytes", "iiiii", "i"),
  env("proxy_http_call", "iiiiiiiiii", "i"),
  env("proxy_grpc_call", "iiiiiiiiiiii", "i"),
  env("proxy_grpc_stream", "iiiiiiiii", "i"),
  env("proxy_grpc_close", "i", "i"),
  env("proxy_grpc_cancel", "i", "i"),
  env("proxy_grpc_send", "iiii", "i"),
  env("proxy_set_tick_period_milliseconds", "i", "i"),
  env("proxy_get_current_time_nanoseconds", "i", "i"),
  env("proxy_define_metric", "iiii", "i"),
  env("proxy_increment_metric", "il", "i"),
  env("proxy_record_metric", "il", "i"),
  env("proxy_get_metric", "ii", "i"),
  env("proxy_set_effective_context", "i", "i"),
  env("proxy_done", "", "i"),
  env("proxy_call_foreign_function", "iiiiii", "i"),
  // ABI-specific registrations (cpp-host registerCallbacks): 0.1.0 has its own stream calls, and
  // proxy_clear_route_cache is linked for 0.1.0 only (0.2.x modules use the foreign function).
  env("proxy_get_configuration", "ii", "i", ["0_1_0"]),
  env("proxy_continue_request", "", "i", ["0_1_0"]),
  env("proxy_continue_response", "", "i", ["0_1_0"]),
  env("proxy_clear_route_cache", "", "i", ["0_1_0"]),
  env("proxy_continue_stream", "i", "i", ["0_2_0", "0_2_1"]),
  env("proxy_close_stream", "i", "i", ["0_2_0", "0_2_1"]),
  env("proxy_get_log_level", "i", "i", ["0_2_1"]),
];

// WASI, registered under both module names (cpp-host FOR_ALL_WASI_FUNCTIONS).
const WASI_SIGNATURES: Array<[string, string, string]> = [
  ["fd_write", "iiii", "i"],
  ["fd_read", "iiii", "i"],
  ["fd_seek", "ilii", "i"],
  ["fd_close", "i", "i"],
  ["fd_fdstat_get", "ii", "i"],
  ["environ_get", "ii", "i"],
  ["environ_sizes_get", "ii", "i"],
  ["args_get", "ii", "i"],
  ["args_sizes_get", "ii", "i"],
  ["clock_time_get", "ili", "i"],
  ["random_get", "ii", "i"],
  ["proc_exit", "i", ""],
  ["path_open", "iiiiillii", "i"],
  ["fd_prestat_get", "ii", "i"],
  ["fd_prestat_dir_name", "iii", "i"],
];

export const WASI_MODULES = ["wasi_snapshot_preview1", "wasi_unstable"] as const;

const WASI_FUNCTIONS: HostFunctionSpec[] = WASI_MODULES.flatMap((module) =>
  WASI_SIGNATURES.map(([name, params, results]) => ({ module, name, ...sig(params, results) })),
);

// Emscripten/threads helpers cpp-host always links.
const EMSCRIPTEN_FUNCTIONS: HostFunctionSpec[] = [
  env("emscripten_notify_memory_growth", "i", ""),
  env("pthread_equal", "ii", "i"),
];

export const HOST_FUNCTIONS: readonly HostFunctionSpec[] = [
  ...PROXY_FUNCTIONS,
  ...WASI_FUNCTIONS,
  ...EMSCRIPTEN_FUNCTIONS,
];

/** `module.name` → spec, for the import check. */
export const HOST_FUNCTION_INDEX: ReadonlyMap<string, HostFunctionSpec> = new Map(
  HOST_FUNCTIONS.map((f) => [`${f.module}.${f.name}`, f]),
);

/**
 * Imports AssemblyScript adds by default. Envoy provides none of them, so a module built without
 * the runtime's abort override (asconfig `use abort=...`) or with `Math.random`/tracing is refused.
 */
export const ASSEMBLYSCRIPT_DEFAULT_IMPORTS: ReadonlyMap<string, string> = new Map([
  ["env.abort", "AssemblyScript's default abort; build with the runtime's abort override (asconfig `use abort=assembly/runtime/abort/abortHandler`)"],
  ["env.seed", "AssemblyScript's Math.random seed; avoid Math.random or provide a seed through `use`"],
  ["env.trace", "AssemblyScript's trace(); remove trace() calls"],
]);

/** ABI marker exports, most recent first. */
export const ABI_MARKERS: ReadonlyArray<[string, AbiVersion]> = [
  ["proxy_abi_version_0_2_1", "0_2_1"],
  ["proxy_abi_version_0_2_0", "0_2_0"],
  ["proxy_abi_version_0_1_0", "0_1_0"],
];

/**
 * Exports Envoy looks up, with the signature it requires (cpp-host getFunctions; a mismatch fails
 * the load with "Bad function signature"). Exports not listed here are ignored.
 */
export function guestExportSignatures(abi: AbiVersion): ReadonlyMap<string, Signature> {
  const entries: Array<[string, Signature]> = [
    ["_initialize", sig("", "")],
    ["_start", sig("", "")],
    ["main", sig("ii", "i")],
    ["malloc", sig("i", "i")],
    ["proxy_on_memory_allocate", sig("i", "i")],
    ["proxy_validate_configuration", sig("ii", "i")],
    ["proxy_on_vm_start", sig("ii", "i")],
    ["proxy_on_configure", sig("ii", "i")],
    ["proxy_on_tick", sig("i", "")],
    ["proxy_on_context_create", sig("ii", "")],
    ["proxy_on_new_connection", sig("i", "i")],
    ["proxy_on_downstream_data", sig("iii", "i")],
    ["proxy_on_upstream_data", sig("iii", "i")],
    ["proxy_on_downstream_connection_close", sig("ii", "")],
    ["proxy_on_upstream_connection_close", sig("ii", "")],
    ["proxy_on_request_headers", abi === "0_1_0" ? sig("ii", "i") : sig("iii", "i")],
    ["proxy_on_request_body", sig("iii", "i")],
    ["proxy_on_request_trailers", sig("ii", "i")],
    ["proxy_on_request_metadata", sig("ii", "i")],
    ["proxy_on_response_headers", abi === "0_1_0" ? sig("ii", "i") : sig("iii", "i")],
    ["proxy_on_response_body", sig("iii", "i")],
    ["proxy_on_response_trailers", sig("ii", "i")],
    ["proxy_on_response_metadata", sig("ii", "i")],
    ["proxy_on_http_call_response", sig("iiiii", "")],
    ["proxy_on_grpc_receive", sig("iii", "")],
    ["proxy_on_grpc_close", sig("iii", "")],
    ["proxy_on_grpc_receive_initial_metadata", sig("iii", "")],
    ["proxy_on_grpc_receive_trailing_metadata", sig("iii", "")],
    ["proxy_on_queue_ready", sig("ii", "")],
    ["proxy_on_done", sig("i", "i")],
    ["proxy_on_log", sig("i", "")],
    ["proxy_on_delete", sig("i", "")],
  ];
  if (abi !== "0_1_0") entries.push(["proxy_on_foreign_function", sig("iii", "")]);
  return new Map(entries);
}

export function formatSignature(s: Signature): string {
  return `(${s.params.join(", ")}) -> (${s.results.join(", ")})`;
}

export function sameSignature(a: Signature, b: Signature): boolean {
  return (
    a.params.length === b.params.length &&
    a.results.length === b.results.length &&
    a.params.every((p, i) => p === b.params[i]) &&
    a.results.every((r, i) => r === b.results[i])
  );
}

/** Status codes every host call returns (proxy-wasm WasmResult). */
export const WasmResult = {
  Ok: 0,
  NotFound: 1,
  BadArgument: 2,
  SerializationFailure: 3,
  ParseFailure: 4,
  BadExpression: 5,
  InvalidMemoryAccess: 6,
  Empty: 7,
  CasMismatch: 8,
  ResultMismatch: 9,
  InternalFailure: 10,
  BrokenConnection: 11,
  Unimplemented: 12,
} as const;

export const BufferType = {
  HttpRequestBody: 0,
  HttpResponseBody: 1,
  DownstreamData: 2,
  UpstreamData: 3,
  HttpCallResponseBody: 4,
  GrpcReceiveBuffer: 5,
  VmConfiguration: 6,
  PluginConfiguration: 7,
  CallData: 8,
} as const;

export const StreamType = { HttpRequest: 0, HttpResponse: 1, Downstream: 2, Upstream: 3 } as const;

/** Peer passed to the close callbacks (proxy-wasm CloseType). */
export const PeerType = { Unknown: 0, Local: 1, Remote: 2 } as const;

export const MetricType = { Counter: 0, Gauge: 1, Histogram: 2 } as const;

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "critical"] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

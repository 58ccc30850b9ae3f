// The host functions Envoy links into a proxy-wasm module (ABI 0.2.1).
//
// Most declarations come unchanged from @solo-io/proxy-runtime's imports.ts: they compile on
// AssemblyScript 0.27 and match Envoy's signatures. That file binds `proxy_set_buffer_status`
// to the wrong import and lacks `proxy_set_buffer_bytes` and `proxy_get_log_level`, so those
// are declared here instead, and the broken binding is never re-exported.
export {
  proxy_log,
  proxy_get_property,
  proxy_set_property,
  proxy_continue_stream,
  proxy_close_stream,
  proxy_get_buffer_bytes,
  proxy_get_buffer_status,
  proxy_define_metric,
  proxy_increment_metric,
  proxy_record_metric,
  proxy_get_metric,
  proxy_set_tick_period_milliseconds,
  proxy_get_current_time_nanoseconds,
  proxy_call_foreign_function,
  proxy_done,
  // Calls out of the VM (the mesh feed's long poll, assembly/runtime/http_call.ts).
  proxy_http_call,
  proxy_get_header_map_value,
  proxy_get_header_map_pairs,
  proxy_get_status,
  // A root acting for one of its connections (connections held until a model: mesh_root.ts).
  proxy_set_effective_context,
} from "@solo-io/proxy-runtime/assembly/imports";

// @ts-ignore: decorator
@external("env", "proxy_set_buffer_bytes")
export declare function proxy_set_buffer_bytes(
  bufferType: i32,
  start: u32,
  length: u32,
  dataPtr: usize,
  dataSize: usize,
): u32;

// Only linked by Envoy for modules that export proxy_abi_version_0_2_1.
// @ts-ignore: decorator
@external("env", "proxy_get_log_level")
export declare function proxy_get_log_level(levelPtr: usize): u32;

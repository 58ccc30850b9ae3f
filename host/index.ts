// Public API of the proxy-wasm test host. See host/README.md.
export { ProxyWasmHost, type FailurePolicy, type HostOptions } from "./host.js";
export {
  Connection,
  type CloseReason,
  type ConnectOptions,
  type DataResult,
  type DataStatus,
  type FilterStatusName,
  type UpstreamOptions,
} from "./connection.js";
export { ModuleRefusedError, checkModule } from "./module_check.js";
export type { FilterStateWrite } from "./filter_state.js";
export { REGISTERED_FILTER_STATE_KEYS } from "./filter_state.js";
export type { LogEntry, HostLogLevel } from "./logs.js";
export type { GuestCall } from "./vm.js";
export {
  bool,
  durationNs,
  float64,
  int64,
  string,
  timestampNs,
  uint64,
  type PropertyInput,
  type PropertyInputTree,
} from "./properties.js";
export { encodeNode, nodeSubProperty, type MetadataValue, type NodeInput } from "./node.js";
export { BufferType, LOG_LEVELS, MetricType, PeerType, StreamType, WasmResult } from "./abi.js";

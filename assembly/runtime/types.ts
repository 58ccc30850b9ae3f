// Numeric values of the proxy-wasm ABI 0.2.1 enums, as Envoy uses them.

/** Status returned by every host call. NOT_FOUND and friends are values, never traps. */
export namespace WasmResult {
  export const Ok: u32 = 0;
  export const NotFound: u32 = 1;
  export const BadArgument: u32 = 2;
  export const SerializationFailure: u32 = 3;
  export const ParseFailure: u32 = 4;
  export const BadExpression: u32 = 5;
  export const InvalidMemoryAccess: u32 = 6;
  export const Empty: u32 = 7;
  export const CasMismatch: u32 = 8;
  export const ResultMismatch: u32 = 9;
  export const InternalFailure: u32 = 10;
  export const BrokenConnection: u32 = 11;
  export const Unimplemented: u32 = 12;
}

/** What a network callback tells Envoy to do with the filter chain. */
export enum FilterStatus {
  Continue = 0,
  StopIteration = 1,
}

export enum LogLevel {
  Trace = 0,
  Debug = 1,
  Info = 2,
  Warn = 3,
  Error = 4,
  Critical = 5,
}

export enum BufferType {
  HttpRequestBody = 0,
  HttpResponseBody = 1,
  DownstreamData = 2,
  UpstreamData = 3,
  HttpCallResponseBody = 4,
  GrpcReceiveBuffer = 5,
  VmConfiguration = 6,
  PluginConfiguration = 7,
}

/** Stream argument of proxy_continue_stream / proxy_close_stream. */
export enum StreamType {
  HttpRequest = 0,
  HttpResponse = 1,
  Downstream = 2,
  Upstream = 3,
}

/** Who closed a connection, as passed to the close callbacks. */
export enum PeerType {
  Unknown = 0,
  Local = 1,
  Remote = 2,
}

export enum MetricType {
  Counter = 0,
  Gauge = 1,
  Histogram = 2,
}

/** Life span of a value written with set_envoy_filter_state. */
export enum FilterStateSpan {
  FilterChain = 0,
  DownstreamRequest = 1,
  DownstreamConnection = 2,
}

/** Header maps (proxy-wasm HeaderMapType). A network filter has only the HTTP call response's. */
export enum HeaderMapType {
  RequestHeaders = 0,
  RequestTrailers = 1,
  ResponseHeaders = 2,
  ResponseTrailers = 3,
  GrpcReceiveInitialMetadata = 4,
  GrpcReceiveTrailingMetadata = 5,
  HttpCallResponseHeaders = 6,
  HttpCallResponseTrailers = 7,
}

// Public surface of the network-filter runtime. A filter's entry file does:
//   export * from "../../assembly/runtime/exports";
//   registerRootContext("<name>", (id) => new MyRoot(id));
export * from "./types";
export { ConnectionContext, RootContext, registerRootContext } from "./context";
export { Counter, Gauge } from "./metrics";
export { currentLogLevel, log, logDebug, logEnabled, logError, logInfo, logTrace, logWarn } from "./log";
export {
  fetchProperty,
  getPropertyBool,
  getPropertyBytes,
  getPropertyString,
  getPropertyU64,
  lastPropertyStatus,
  propertyPath,
  setPropertyBytes,
  setPropertyString,
  setPropertyText,
} from "./property";
export { ByteText } from "./text";
export { HostBufferSource, readWhole } from "./config_source";
export { setEnvoyFilterState, setEnvoyFilterStateBytes, setEnvoyFilterStateText } from "./filter_state";
export { closeDownstream, continueDownstream, getBufferBytes, setBufferBytes } from "./buffer";
export { hostValuePtr, hostValueSize, releaseHostValue } from "./host_value";
export {
  DESTINATION_ADDRESS,
  DISABLE_TUNNELING,
  ORIGINAL_DST_ADDRESS,
  TCP_PROXY_CLUSTER,
  TRUE_VALUE,
  UPSTREAM_SUBJECT_ALT_NAMES,
} from "./envoy_state";
export {
  CallStatus,
  HeaderPairs,
  httpCall,
  httpCallResponseBody,
  httpCallResponseHeader,
  httpCallResponseHeaderPairs,
  httpCallResponseStatus,
  lastCallStatus,
  lastHttpCallToken,
} from "./http_call";
export { nowMilliseconds, setTickPeriod } from "./timer";

// The root contexts of this VM by id, and the root-level callbacks both export modules share
// (exports.ts, and exports_stateless.ts for filters that keep nothing per connection): create a
// root for the plugin Envoy names, start it, configure it, tick it. The log level is read from
// the host here, once per configuration (log.ts), not on every connection.
import { getBufferBytes } from "./buffer";
import { HostBufferSource } from "./config_source";
import { factoryFor, RootContext } from "./context";
import { logDebug, logEnabled, logError, refreshLogLevel } from "./log";
import { getPropertyString, propertyPath } from "./property";
import { BufferType, LogLevel } from "./types";

export const roots = new Map<u32, RootContext>();
const ROOT_ID_PATH = propertyPath(["plugin_root_id"]);

export function createRoot(id: u32): void {
  const rootId = getPropertyString(ROOT_ID_PATH);
  const factory = factoryFor(rootId === null ? "" : rootId);
  if (factory === null) {
    logError("no filter is registered in this module");
    return;
  }
  roots.set(id, factory(id));
}

function readBuffer(type: BufferType, size: u32): ArrayBuffer {
  if (size == 0) return new ArrayBuffer(0);
  const bytes = getBufferBytes(type, 0, size);
  return bytes === null ? new ArrayBuffer(0) : bytes;
}

export function startRoot(rootContextId: u32, vmConfigurationSize: u32): u32 {
  refreshLogLevel();
  if (!roots.has(rootContextId)) return 0;
  const vmConfiguration = readBuffer(BufferType.VmConfiguration, vmConfigurationSize);
  return roots.get(rootContextId).onStart(vmConfiguration) ? 1 : 0;
}

export function configureRoot(rootContextId: u32, configurationSize: u32): u32 {
  // Envoy has no callback for a log-level change: the level in force now holds until the next
  // configuration (or tick) of this plugin.
  refreshLogLevel();
  if (!roots.has(rootContextId)) return 0;
  // A configuration larger than 2 GB cannot be addressed by a wasm32 reader anyway.
  const size = configurationSize > <u32>i32.MAX_VALUE ? 0 : <i32>configurationSize;
  const configuration = new HostBufferSource(BufferType.PluginConfiguration, size);
  return roots.get(rootContextId).onConfigureSource(configuration) ? 1 : 0;
}

export function tickRoot(rootContextId: u32): void {
  refreshLogLevel();
  if (roots.has(rootContextId)) roots.get(rootContextId).onTick();
}

export function httpCallResponseRoot(rootContextId: u32, token: u32, headers: u32, bodySize: u32, trailers: u32): void {
  refreshLogLevel();
  if (roots.has(rootContextId)) {
    roots.get(rootContextId).onHttpCallResponse(token, headers, bodySize, trailers);
    return;
  }
  // A call made by a connection context, or by a root already deleted (Envoy cancels those:
  // tests/envoy/http_call.test.ts looks for this line and must not find it).
  if (logEnabled(LogLevel.Debug)) logDebug("http call response " + token.toString() + " for context " + rootContextId.toString() + ", which is no live root");
}

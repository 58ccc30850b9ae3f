// Logging through the host. Call sites check the level first (`if (logEnabled(LogLevel.Debug))`)
// because AssemblyScript builds the message string before any callee could drop it.
import { proxy_get_log_level, proxy_log } from "./abi";
import { LogLevel, WasmResult } from "./types";

const levelSlot: usize = heap.alloc(4);

/** The host's current level for this plugin. Unknown (call refused) → Info. */
export function currentLogLevel(): LogLevel {
  store<u32>(levelSlot, <u32>LogLevel.Info);
  if (proxy_get_log_level(levelSlot) != WasmResult.Ok) return LogLevel.Info;
  return <LogLevel>load<u32>(levelSlot);
}

/** True when a message at `level` would be printed. One host call. */
export function logEnabled(level: LogLevel): bool {
  return level >= currentLogLevel();
}

/** Writes one log line. Never traps; a refused call is dropped. */
export function log(level: LogLevel, message: string): void {
  const bytes = String.UTF8.encode(message);
  proxy_log(<usize>level, changetype<usize>(bytes), <usize>bytes.byteLength);
}

export function logTrace(message: string): void {
  log(LogLevel.Trace, message);
}
export function logDebug(message: string): void {
  log(LogLevel.Debug, message);
}
export function logInfo(message: string): void {
  log(LogLevel.Info, message);
}
export function logWarn(message: string): void {
  log(LogLevel.Warn, message);
}
export function logError(message: string): void {
  log(LogLevel.Error, message);
}

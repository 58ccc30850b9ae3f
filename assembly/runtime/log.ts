// Logging through the host. Call sites check the level first (`if (logEnabled(LogLevel.Debug))`)
// because AssemblyScript builds the message string before any callee could drop it.
import { proxy_get_log_level, proxy_log } from "./abi";
import { ByteText } from "./text";
import { LogLevel, WasmResult } from "./types";

const levelSlot: usize = heap.alloc(4);

/** The host's current level for this plugin. Unknown (call refused) → Info. */
export function currentLogLevel(): LogLevel {
  store<u32>(levelSlot, <u32>LogLevel.Info);
  if (proxy_get_log_level(levelSlot) != WasmResult.Ok) return LogLevel.Info;
  return <LogLevel>load<u32>(levelSlot);
}

/**
 * The level read at the last configuration (or start, or tick) of the plugin. Envoy has no
 * callback for a level change and reading it is a host call (~1 µs in Envoy), so connections
 * read this copy instead: a level changed at run time (`/logging?wasm=debug`) reaches the
 * filter's own lines at its next configuration (an xDS/ECDS update or a restart), not at once.
 */
let cachedLevel: LogLevel = LogLevel.Info;
let levelRead = false;

/** Reads the host's level into the copy logEnabled checks (the runtime calls it per configuration). */
export function refreshLogLevel(): void {
  cachedLevel = currentLogLevel();
  levelRead = true;
}

/** True when a message at `level` would be printed. No host call once the level was read. */
export function logEnabled(level: LogLevel): bool {
  if (!levelRead) refreshLogLevel();
  return level >= cachedLevel;
}

/**
 * A log line is encoded into one reused raw buffer, so writing it allocates nothing; only the
 * caller's concatenation leaves garbage (a few hundred bytes per line). AssemblyScript's
 * incremental collector lets garbage grow to about the live heap's size before it starts a
 * cycle, and after a large configuration the free heap is only the build's spare, so a burst of
 * warnings (refused connections, say) would make linear memory grow by its whole size (measured:
 * a 10k-pod tunnel_port server went from 1.2 to 2.4 MB within 132 refusals). A full collection
 * after every 64 KB of message text keeps that garbage inside the spare the mesh build leaves
 * free (>= 256 KB): about 2 ms at 1M pods (the model is a few large arrays), i.e. ~15 us per
 * warning line at that size, and nothing while nothing is logged.
 */
const COLLECT_AFTER_LOG_BYTES: i32 = 65536;
let loggedSinceCollect: i32 = 0;
const line = new ByteText(256);

/** Writes one log line. Never traps; a refused call is dropped. */
export function log(level: LogLevel, message: string): void {
  line.clear().string(message);
  proxy_log(<usize>level, line.ptr, <usize>line.length);
  // The message (UTF-16) and the pieces it was built from: about 4 bytes per character.
  loggedSinceCollect += message.length * 4 + 64;
  if (loggedSinceCollect >= COLLECT_AFTER_LOG_BYTES) {
    loggedSinceCollect = 0;
    __collect();
  }
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

// AssemblyScript `abort` replacement for the stock-runtime benchmark build (wired with
// `--use abort=bench/stock-runtime/abort/stockAbort` by build.mjs).
//
// The published runtime's own handler, `abort_proc_exit` (runtime.ts), ends with
// `proc_exit(255)` from `wasi_unstable`; Envoy provides neither that nor `env.abort`, and a module
// importing either is refused. So, like our own runtime (assembly/runtime/abort.ts), this logs at
// critical level through the runtime's own `proxy_log` import and then traps. The message format
// is the one `abort_proc_exit` uses.
import { proxy_log } from "../../build/stock-runtime/imports";

const LOG_LEVEL_CRITICAL: usize = 5;

export function stockAbort(
  message: string | null,
  fileName: string | null,
  lineNumber: u32,
  columnNumber: u32,
): void {
  let text = "wasm abort: " + (message === null ? "(no message)" : message);
  if (fileName !== null) {
    text += " at: " + fileName + "(" + lineNumber.toString() + ":" + columnNumber.toString() + ")";
  }
  const bytes = String.UTF8.encode(text);
  proxy_log(LOG_LEVEL_CRITICAL, changetype<usize>(bytes), <usize>bytes.byteLength);
  unreachable();
}

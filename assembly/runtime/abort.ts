// AssemblyScript's `abort` replacement (wired with `--use abort=...` in asconfig.json).
// Envoy provides no `env.abort`, so a module importing it would be refused. A runtime error
// still has to stop the VM; this logs what happened at critical level, then traps.
import { proxy_log } from "./abi";
import { LogLevel } from "./types";

export function abortHandler(
  message: string | null,
  fileName: string | null,
  line: u32,
  column: u32,
): void {
  const text =
    "wasm abort: " +
    (message === null ? "(no message)" : message) +
    " at " +
    (fileName === null ? "?" : fileName) +
    ":" +
    line.toString() +
    ":" +
    column.toString();
  const bytes = String.UTF8.encode(text);
  proxy_log(<usize>LogLevel.Critical, changetype<usize>(bytes), <usize>bytes.byteLength);
  unreachable();
}

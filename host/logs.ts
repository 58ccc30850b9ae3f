// Log capture. Envoy prints a wasm log line only when its level is at or above the logger's
// level (ENVOY_LOG), and proxy_get_log_level reports that level; the host does the same.
import { LOG_LEVELS, type LogLevelName } from "./abi.js";

export interface LogEntry {
  readonly level: LogLevelName;
  readonly message: string;
  /** Context that was current when the line was logged (0 = VM context, e.g. during _initialize). */
  readonly contextId: number;
  /** "canary" for lines from Envoy's throw-away configuration-check VM. */
  readonly vm: "main" | "canary";
  /** "proxy_log", or the WASI stream the guest wrote to. */
  readonly source: "proxy_log" | "stdout" | "stderr" | "host";
}

export type HostLogLevel = LogLevelName | "off";

export function levelNumber(level: HostLogLevel): number {
  return level === "off" ? 6 : LOG_LEVELS.indexOf(level);
}

export class LogSink {
  readonly entries: LogEntry[] = [];
  private threshold: number;

  constructor(level: HostLogLevel, private readonly echo: boolean) {
    this.threshold = levelNumber(level);
  }

  get level(): number {
    return this.threshold;
  }

  setLevel(level: HostLogLevel): void {
    this.threshold = levelNumber(level);
  }

  add(entry: LogEntry): void {
    if (levelNumber(entry.level) < this.threshold) return;
    this.entries.push(entry);
    if (this.echo) console.error(`[wasm ${entry.level}] ${entry.message}`);
  }
}

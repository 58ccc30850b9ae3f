// Runs the real Envoy for end-to-end tests: writes a config, starts Envoy on loopback ports,
// waits for readiness through the admin endpoint, reads /stats, and always stops it.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { stringify } from "yaml";
import { REPO_ROOT, scratchDir } from "./paths.js";

export const ENVOY_BINARY = resolve(REPO_ROOT, ".venv/envoy");

/** Fails loudly (never skips) when the pinned Envoy is missing. */
export function requireEnvoy(): string {
  if (!existsSync(ENVOY_BINARY)) {
    throw new Error(`Envoy not found at ${ENVOY_BINARY}: run \`npm run setup\` (npm test does it)`);
  }
  return ENVOY_BINARY;
}

const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

export interface EnvoyOptions {
  /** Bootstrap as an object (written as YAML) or YAML text. */
  config: object | string;
  /** Short name for the work directory and messages. */
  name: string;
  /** Admin port the config uses (the harness polls it). */
  adminPort: number;
  /** Admin address the config uses. Default 127.0.0.1. */
  adminAddress?: string;
  logLevel?: string;
  /** Extra component log levels, e.g. "wasm:debug". */
  componentLogLevel?: string;
  readyTimeoutMs?: number;
  /** Worker threads (`--concurrency`). Default 1. */
  concurrency?: number;
  /**
   * "json": the bootstrap is written as envoy.json and Envoy parses it as protobuf JSON (as
   * Istio's envoy-rev.json): numbers in node metadata stay numbers (its YAML loader turns a
   * non-integer or large number into a string). Default "yaml".
   */
  format?: "yaml" | "json";
  /** More command-line flags, e.g. `["--drain-time-s", "2"]` (as pilot-agent passes its own). */
  extraArgs?: string[];
}

export class EnvoyProcess {
  private constructor(
    readonly child: ChildProcess,
    readonly dir: string,
    readonly configPath: string,
    readonly logPath: string,
    readonly adminPort: number,
    readonly adminAddress: string,
  ) {}

  static async start(options: EnvoyOptions): Promise<EnvoyProcess> {
    const binary = requireEnvoy();
    const dir = scratchDir(`${options.name}-`);
    const json = options.format === "json";
    const configPath = join(dir, json ? "envoy.json" : "envoy.yaml");
    const logPath = join(dir, "envoy.log");
    const text = typeof options.config === "string" ? options.config : json ? JSON.stringify(options.config) : stringify(options.config);
    writeFileSync(configPath, text);
    const args = [
      "-c", configPath,
      "--use-dynamic-base-id",
      "--log-level", options.logLevel ?? "info",
      "--log-path", logPath,
      "--concurrency", String(options.concurrency ?? 1),
      // Tests read the log while Envoy runs: flush it promptly.
      "--file-flush-interval-msec", "50",
    ];
    if (options.componentLogLevel) args.push("--component-log-level", options.componentLogLevel);
    if (options.extraArgs) args.push(...options.extraArgs);
    // Access logs written to /dev/stdout land in <dir>/stdout (see accessLog()).
    const stdout = openSync(join(dir, "stdout"), "w");
    const child = spawn(binary, args, { stdio: ["ignore", stdout, "ignore"], cwd: REPO_ROOT });
    closeSync(stdout);
    running.add(child);
    child.on("exit", () => running.delete(child));
    const envoy = new EnvoyProcess(child, dir, configPath, logPath, options.adminPort, options.adminAddress ?? "127.0.0.1");
    try {
      await envoy.waitReady(options.readyTimeoutMs ?? 20_000);
    } catch (error) {
      await envoy.stop();
      throw error;
    }
    return envoy;
  }

  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** What Envoy wrote to stdout: the access logs of configs that log to /dev/stdout. */
  accessLog(): string {
    const path = join(this.dir, "stdout");
    return existsSync(path) ? readFileSync(path, "utf8") : "";
  }

  /** Waits until the access log (stdout) matches `pattern`; returns it either way. */
  async waitForAccessLog(pattern: RegExp, timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let text = this.accessLog();
    while (!pattern.test(text) && Date.now() < deadline) {
      await sleep(50);
      text = this.accessLog();
    }
    return text;
  }

  log(): string {
    return existsSync(this.logPath) ? readFileSync(this.logPath, "utf8") : "";
  }

  async admin(path: string, method = "GET"): Promise<string> {
    const response = await fetch(`http://${this.adminAddress}:${this.adminPort}${path}`, { method });
    return response.text();
  }

  private async waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.exited) {
        throw new Error(`Envoy exited during start-up (code ${this.child.exitCode}):\n${tail(this.log())}`);
      }
      try {
        if ((await this.admin("/ready")).trim() === "LIVE") return;
      } catch {
        // admin not listening yet
      }
      await sleep(50);
    }
    throw new Error(`Envoy not ready after ${timeoutMs} ms:\n${tail(this.log())}`);
  }

  /** Counters and gauges from /stats as name → value. */
  async stats(): Promise<Map<string, number>> {
    const text = await this.admin("/stats");
    const stats = new Map<string, number>();
    for (const line of text.split("\n")) {
      const match = /^(\S+): (\d+)$/.exec(line);
      if (match) stats.set(match[1], Number(match[2]));
    }
    return stats;
  }

  /** Value of the first stat whose name ends with `suffix` (wasm stats get a prefix). */
  async stat(suffix: string): Promise<number | undefined> {
    for (const [name, value] of await this.stats()) if (name.endsWith(suffix)) return value;
    return undefined;
  }

  /** Waits until `predicate(stats)` holds, for asynchronous counters. */
  async waitForStats(predicate: (stats: Map<string, number>) => boolean, timeoutMs = 5000): Promise<Map<string, number>> {
    const deadline = Date.now() + timeoutMs;
    let stats = await this.stats();
    while (!predicate(stats) && Date.now() < deadline) {
      await sleep(50);
      stats = await this.stats();
    }
    return stats;
  }

  async stop(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((done) => this.child.once("exit", () => done()));
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  }
}

/** `envoy --mode validate`: returns Envoy's exit status and output. */
export function validateConfig(configPath: string): { ok: boolean; output: string } {
  const result = spawnSync(requireEnvoy(), ["--mode", "validate", "-c", configPath, "--use-dynamic-base-id", "-l", "error"], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { ok: result.status === 0, output: `${result.stdout}${result.stderr}` };
}

/** Runs Envoy on a config expected to be refused at start-up; returns its log. */
export function runUntilExit(configText: string, name: string): { code: number | null; log: string } {
  const dir = scratchDir(`${name}-`);
  const configPath = join(dir, "envoy.yaml");
  writeFileSync(configPath, configText);
  const result = spawnSync(requireEnvoy(), ["-c", configPath, "--use-dynamic-base-id", "-l", "info", "--concurrency", "1"], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 30_000,
  });
  return { code: result.status, log: `${result.stdout}${result.stderr}` };
}

function tail(text: string, lines = 40): string {
  return text.split("\n").slice(-lines).join("\n");
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

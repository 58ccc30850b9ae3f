// One Envoy under `valgrind --tool=callgrind`, for the instruction-count benchmark (callgrind.ts).
// Valgrind starts it with instrumentation off (--instr-atstart=no: start-up, configuration and
// the wasm module's compilation run ~5x slower instead of ~50x, and are not counted), the
// benchmark switches instrumentation on before its warm-up batch and then zeroes and dumps the
// counters around each measured batch with callgrind_control (valgrind's gdbserver, vgdb).
// Counters are kept per thread (--separate-threads=yes) so the worker thread, which serves every
// connection, can be told apart from the main thread's timers.
// `--smc-check=all-non-file`: V8 writes the code it runs (wasm JIT) into anonymous memory.
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { requireEnvoy, sleep } from "../../tests/support/envoy.js";
import { REPO_ROOT } from "../../tests/support/paths.js";

const run = promisify(execFile);

/** Every Envoy started under valgrind, killed if this process exits without stopping it. */
const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** One dump of one thread: its instruction count (event Ir) and the file holding its call graph. */
export interface ThreadCount {
  thread: number;
  instructions: number;
  file: string;
}

export function requireValgrind(): void {
  for (const tool of ["valgrind", "callgrind_control"]) {
    try {
      execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
    } catch {
      throw new Error(`${tool} not found: scripts/setup-bench.sh installs valgrind (apt-get install valgrind)`);
    }
  }
}

export class CallgrindEnvoy {
  private dumps = 0;
  private constructor(
    readonly child: ChildProcess,
    readonly dir: string,
    readonly adminPort: number,
  ) {}

  static async start(name: string, config: object | string, adminPort: number, readyTimeoutMs = 600_000): Promise<CallgrindEnvoy> {
    const binary = requireEnvoy();
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    const dir = mkdtempSync(join(REPO_ROOT, ".tmp", `callgrind-${name}-`));
    const configPath = join(dir, "envoy.yaml");
    writeFileSync(configPath, typeof config === "string" ? config : stringify(config));
    const args = [
      "--tool=callgrind",
      "--smc-check=all-non-file",
      "--instr-atstart=no",
      "--separate-threads=yes",
      `--callgrind-out-file=${join(dir, "callgrind.out")}`,
      binary,
      "-c", configPath,
      "--use-dynamic-base-id",
      "--log-level", "warn",
      "--log-path", join(dir, "envoy.log"),
      "--concurrency", "1",
    ];
    const stderr = openSync(join(dir, "valgrind.log"), "w");
    const child = spawn("valgrind", args, { stdio: ["ignore", "ignore", stderr], cwd: REPO_ROOT });
    closeSync(stderr);
    const envoy = new CallgrindEnvoy(child, dir, adminPort);
    running.add(child);
    child.on("exit", () => running.delete(child));
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`Envoy under callgrind exited during start-up:\n${envoy.logTail()}`);
      try {
        if ((await envoy.admin("/ready")).trim() === "LIVE") break;
      } catch {
        // admin not listening yet
      }
      if (Date.now() > deadline) {
        await envoy.stop();
        throw new Error(`Envoy under callgrind not ready after ${readyTimeoutMs} ms:\n${envoy.logTail()}`);
      }
      await sleep(250);
    }
    return envoy;
  }

  private logTail(): string {
    const read = (file: string) => (existsSync(join(this.dir, file)) ? readFileSync(join(this.dir, file), "utf8").split("\n").slice(-15).join("\n") : "");
    return `${read("envoy.log")}\n${read("valgrind.log")}`;
  }

  async admin(path: string): Promise<string> {
    const response = await fetch(`http://127.0.0.1:${this.adminPort}${path}`);
    return response.text();
  }

  async stats(): Promise<Map<string, number>> {
    const stats = new Map<string, number>();
    for (const line of (await this.admin("/stats")).split("\n")) {
      const match = /^(\S+): (\d+)$/.exec(line);
      if (match) stats.set(match[1]!, Number(match[2]));
    }
    return stats;
  }

  private async control(...args: string[]): Promise<void> {
    await run("callgrind_control", [...args, String(this.child.pid)], { timeout: 300_000 });
  }

  /** Switches instrumentation (and so counting) on. */
  async instrument(): Promise<void> {
    await this.control("--instr=on");
  }

  async zero(): Promise<void> {
    await this.control("--zero");
  }

  /** Dumps (and zeroes) the counters since the last zero or dump: one count per thread. */
  async dump(label: string): Promise<ThreadCount[]> {
    this.dumps++;
    await this.control(`--dump=${label}`);
    const pattern = new RegExp(`^callgrind\\.out\\.${this.dumps}-(\\d+)$`);
    const counts: ThreadCount[] = [];
    for (const file of readdirSync(this.dir)) {
      const match = pattern.exec(file);
      if (!match) continue;
      const text = readFileSync(join(this.dir, file), "utf8");
      const totals = /^(?:totals|summary): (\d+)/m.exec(text);
      counts.push({ thread: Number(match[1]), instructions: totals ? Number(totals[1]) : 0, file: join(this.dir, file) });
    }
    if (counts.length === 0) throw new Error(`callgrind wrote no dump ${this.dumps} in ${this.dir}`);
    return counts.sort((a, b) => a.thread - b.thread);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((done) => this.child.once("exit", () => done()));
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 60_000);
    await exited;
    clearTimeout(timer);
  }
}

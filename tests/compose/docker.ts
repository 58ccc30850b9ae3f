// Runs docker and docker compose against the test's private engine (scripts/docker-engine.sh),
// from the repository, the way a user's shell would.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { REPO_ROOT } from "../support/paths.js";

/** DOCKER_HOST, DOCKER_CONFIG (with the compose plugin) and DOCKER_BUILDKIT=0 of the private engine. */
export function engineEnv(): Record<string, string> {
  const line = execFileSync("bash", ["scripts/docker-engine.sh", "env"], { cwd: REPO_ROOT, encoding: "utf8" });
  const env: Record<string, string> = {};
  for (const [, key, value] of line.matchAll(/(\w+)=(\S+)/g)) env[key!] = value!;
  return env;
}

export function docker(args: string[], timeoutMs = 120_000): string {
  return execFileSync("docker", args, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...engineEnv() },
    encoding: "utf8",
    timeout: timeoutMs,
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** A running command with its output so far (stdout and stderr interleaved, as a terminal shows them). */
export class Session {
  output = "";
  readonly exited: Promise<number | null>;
  private readonly child: ChildProcess;

  constructor(argv: string[], env: Record<string, string> = {}) {
    // Its own process group, so interrupt() is what Ctrl-C in a terminal sends.
    this.child = spawn(argv[0]!, argv.slice(1), {
      cwd: REPO_ROOT,
      env: { ...process.env, ...engineEnv(), ...env },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const take = (chunk: Buffer) => {
      this.output += chunk.toString();
      if (process.env.COMPOSE_TEST_VERBOSE) process.stderr.write(chunk);
    };
    this.child.stdout!.on("data", take);
    this.child.stderr!.on("data", take);
    this.exited = new Promise((done) => this.child.on("close", (code) => done(code)));
  }

  /** Resolves once the output matches `pattern` (rejects after `timeoutMs` or when the command ends first). */
  async waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    let ended = false;
    void this.exited.then(() => (ended = true));
    for (;;) {
      const match = this.output.match(pattern);
      if (match) return match;
      if (ended || Date.now() > deadline) {
        throw new Error(`${ended ? "ended" : "timed out"} before ${pattern}; output:\n${this.output}`);
      }
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  /** The exit code, or a rejection with the output after `timeoutMs`. */
  async finish(timeoutMs: number): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, fail) => {
      timer = setTimeout(() => {
        this.kill();
        fail(new Error(`still running after ${timeoutMs} ms; output:\n${this.output}`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  interrupt(): void {
    process.kill(-this.child.pid!, "SIGINT");
  }

  kill(): void {
    try {
      process.kill(-this.child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** Runs a command to its end and returns its output; fails with the output on a non-zero exit. */
export async function run(argv: string[], env: Record<string, string> = {}, timeoutMs = 180_000): Promise<string> {
  const session = new Session(argv, env);
  const code = await session.finish(timeoutMs);
  if (code !== 0) throw new Error(`${argv.join(" ")} exited with ${code}; output:\n${session.output}`);
  return session.output;
}

/** Lines an application printed ("<service>-1  | text"), without compose's prefix. */
export function appLines(output: string, service: string): string[] {
  const prefix = new RegExp(`^${service}-\\d+\\s+\\| ?`);
  return output.split("\n").filter((line) => prefix.test(line)).map((line) => line.replace(prefix, ""));
}

/** Counters the application printed ("<admin> counter <stat> = <value>"), keyed "<admin> <stat>"; the last print wins. */
export function counters(lines: string[]): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of lines) {
    const match = /^(\S+)\s+counter (\S+) = (\d+)$/.exec(line);
    if (match) values.set(`${match[1]} ${match[2]}`, Number(match[3]));
  }
  return values;
}

/** Where each destination went, from the application's "address:port  what  -> answer" lines. */
export function decisions(lines: string[]): Map<string, string> {
  const seen = new Map<string, string>();
  for (const line of lines) {
    // The answer follows the last " -> " (the description may contain arrows too).
    const match = /^(\d+\.\d+\.\d+\.\d+:\d+)\s.* -> (.*)$/.exec(line);
    if (match) seen.set(match[1]!, match[2]!.trim());
  }
  return seen;
}

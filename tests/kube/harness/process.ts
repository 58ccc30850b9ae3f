// Starts a control-plane binary (etcd, kube-apiserver, kube-controller-manager) so that it can
// never outlive the test process. Node's own 'exit' hook does not run when the runner is killed
// (node --test sends SIGTERM on a timeout; a crashed run gets SIGKILL), and an orphaned
// apiserver holds ~300 MB and a port on a machine shared by everyone. So each binary runs under
// a tiny bash guard that reads a pipe from this process: when the pipe closes (stop(), or this
// process dying for any reason) the guard sends the binary SIGTERM, then SIGKILL after a grace.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";

// $1: grace seconds; the rest: the command. The binary's stdin is /dev/null; fd 3 keeps the
// pipe for the watcher. The watcher's `cat` returns when the pipe closes.
const GUARD = `
grace="$1"; shift
exec 3<&0
"$@" </dev/null &
child=$!
{
  cat <&3 >/dev/null
  kill -TERM "$child" 2>/dev/null
  for _ in $(seq $((grace * 10))); do kill -0 "$child" 2>/dev/null || exit 0; sleep 0.1; done
  kill -KILL "$child" 2>/dev/null
} &
exec 3<&-
wait "$child"
`;

const running = new Set<ChildProcess>();
process.on("exit", () => {
  // Closing our end of the pipes happens anyway when we exit; this only speeds it up.
  for (const child of running) child.stdin?.destroy();
});

export class GuardedProcess {
  private readonly exit: Promise<void>;
  private exitCode: number | null = null;
  private exitSignal: NodeJS.Signals | null = null;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    readonly logPath: string,
  ) {
    this.exit = new Promise((done) =>
      child.once("exit", (code, signal) => {
        this.exitCode = code;
        this.exitSignal = signal;
        running.delete(child);
        done();
      }),
    );
  }

  /** Starts `binary args` with stdout and stderr appended to `logPath`. */
  static start(name: string, binary: string, args: string[], logPath: string, cwd: string, graceSeconds = 5): GuardedProcess {
    const log = openSync(logPath, "a");
    const child = spawn("bash", ["-c", GUARD, `guard-${name}`, String(graceSeconds), binary, ...args], {
      stdio: ["pipe", log, log],
      cwd,
    });
    closeSync(log);
    running.add(child);
    // The pipe is only a lifeline: never write to it, and a broken pipe is not an error here.
    child.stdin?.on("error", () => {});
    // Neither keeps the test process alive: a test file that forgets stop() still ends, and its
    // binaries go with it (the pipe closes). stop() holds a timer while it waits.
    child.unref();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return new GuardedProcess(name, child, logPath);
  }

  get exited(): boolean {
    return this.exitCode !== null || this.exitSignal !== null;
  }

  /** One line saying how it ended, for error messages. */
  get exitDescription(): string {
    return this.exitSignal ? `killed by ${this.exitSignal}` : `exited with status ${this.exitCode}`;
  }

  /** The last lines of its log, for error messages. */
  logTail(lines = 30): string {
    try {
      return readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }

  /** Resolves when the process has exited (whether asked to or not). */
  waitExit(): Promise<void> {
    return this.exit;
  }

  /** SIGTERM through the guard, SIGKILL after the grace; resolves once it is gone. */
  async stop(): Promise<void> {
    if (this.exited) return;
    this.child.stdin?.end();
    const backstop = setTimeout(() => this.child.kill("SIGKILL"), 30_000);
    await this.exit;
    clearTimeout(backstop);
  }
}

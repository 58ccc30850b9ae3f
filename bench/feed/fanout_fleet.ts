// The fan-out bench's pollers as seen from its driver: `processes` worker processes
// (fanout_worker.ts) sharing `pollers` pollers, asked questions over IPC and answered summed.
import { fork, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { cpuMicros } from "../envoy/proc.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { zeroCounters, type PollerCounters } from "./fanout_poller.js";
import type { HoldingAnswer, ReachAnswer, WorkerQuestion, WorkerStart } from "./fanout_worker.js";

interface Pending {
  done: (answer: unknown) => void;
  fail: (error: Error) => void;
}

class Worker {
  private next = 1;
  private readonly pending = new Map<number, Pending>();
  readonly child: ChildProcess;

  constructor() {
    // FANOUT_POLLER_PROFILE=<dir>: each poller process writes a V8 CPU profile there when it exits.
    const profile = process.env.FANOUT_POLLER_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.FANOUT_POLLER_PROFILE}`] : [];
    // FANOUT_POLLER_NICE=<n>: the poller processes start under `nice -n n` (every thread of theirs).
    const nice = process.env.FANOUT_POLLER_NICE;
    const through = nice ? { execPath: "nice", prefix: ["-n", nice, process.execPath] } : { execPath: process.execPath, prefix: [] };
    this.child = fork(join(REPO_ROOT, "bench/feed/fanout_worker.ts"), [], { execPath: through.execPath, execArgv: [...through.prefix, ...profile, "--import", "tsx"], cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit", "ipc"] });
    this.child.on("message", (m: { id: number; answer: unknown }) => {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      p?.done(m.answer);
    });
    const gone = (why: string) => {
      for (const p of this.pending.values()) p.fail(new Error(`poller process ${why}`));
      this.pending.clear();
    };
    this.child.on("exit", (code) => gone(`exited (${code})`));
    this.child.on("error", (e) => gone(`unreachable: ${e.message}`));
  }

  ask<T>(question: WorkerQuestion): Promise<T> {
    const id = this.next++;
    if (!this.child.connected) return Promise.reject(new Error(`poller process gone (${this.child.exitCode})`));
    return new Promise((done, fail) => {
      this.pending.set(id, { done: done as (a: unknown) => void, fail });
      this.child.send({ id, question });
    });
  }
}

export class PollerFleet {
  private readonly workers: Worker[];

  private constructor(processes: number) {
    this.workers = Array.from({ length: processes }, () => new Worker());
  }

  /** Starts `options.pollers` pollers shared between `processes` processes. */
  static async start(processes: number, options: Omit<WorkerStart, "type">): Promise<PollerFleet> {
    const fleet = new PollerFleet(processes);
    await Promise.all(
      fleet.workers.map((w, i) => {
        const share = Math.floor(options.pollers / processes) + (i < options.pollers % processes ? 1 : 0);
        return w.ask({ type: "start", ...options, pollers: share });
      }),
    );
    return fleet;
  }

  /** The CPU the poller processes used so far (µs). */
  cpuMicros(): number {
    return this.workers.reduce((sum, w) => sum + (w.child.exitCode === null && w.child.pid ? cpuMicros(w.child.pid) : 0), 0);
  }

  async counters(): Promise<PollerCounters> {
    const sum = zeroCounters();
    for (const c of await Promise.all(this.workers.map((w) => w.ask<PollerCounters>({ type: "counters" })))) {
      for (const k of Object.keys(sum) as Array<keyof PollerCounters>) sum[k] += c[k];
    }
    return sum;
  }

  /** How many pollers hold (epoch, version) from an answer at or after `after`, and when the last did. */
  async holding(epoch: number, version: number, after: number): Promise<HoldingAnswer> {
    const all = await Promise.all(this.workers.map((w) => w.ask<HoldingAnswer>({ type: "holding", epoch, version, after })));
    return { holding: all.reduce((s, a) => s + a.holding, 0), latest: Math.max(0, ...all.map((a) => a.latest)), times: all.flatMap((a) => a.times), sentAts: all.flatMap((a) => a.sentAts) };
  }

  /**
   * Per ascending version of `epoch`: when the last poller first held it (null while one has
   * not), and how many have not; the same over the pollers holding a model of `epoch` at `after`.
   */
  async reach(epoch: number, versions: number[], after: number): Promise<ReachAnswer> {
    const all = await Promise.all(this.workers.map((w) => w.ask<ReachAnswer>({ type: "reach", epoch, versions, after })));
    const latest = (pick: (a: ReachAnswer) => Array<number | null>) =>
      versions.map((_, i) => (all.some((a) => pick(a)[i] === null) ? null : Math.max(...all.map((a) => pick(a)[i] as number))));
    return {
      latest: latest((a) => a.latest),
      missing: versions.map((_, i) => all.reduce((s, a) => s + a.missing[i], 0)),
      modelled: all.reduce((s, a) => s + a.modelled, 0),
      latestModelled: latest((a) => a.latestModelled),
    };
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.workers.map(async (w) => {
        if (w.child.exitCode !== null) return;
        const gone = new Promise((done) => w.child.once("exit", done));
        await w.ask({ type: "stop" }).catch(() => undefined);
        const kill = setTimeout(() => w.child.kill("SIGKILL"), 5000);
        await gone;
        clearTimeout(kill);
      }),
    );
  }
}

// Which CPUs the feed runs on, and which the rest of the bench (the pollers' worker processes,
// the observer, the API server and etcd, the churn writer) shares. In a mesh the feed has its own
// CPU (its Deployment's request) and its 2,000 clients are Envoys on other nodes; on a small
// machine they would otherwise take the feed's CPU from it, and a figure would measure how the
// kernel shares one machine between a server and its clients, not the feed. So by default the
// feed gets CPU 0 to itself and everything else the other CPUs (`--feed-cpus=none`: no split, as
// before; a machine with one CPU: no split). The figures say which (`feedCpus`).
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";

export interface CpuSplit {
  /** taskset's list for the feed, e.g. "0". */
  feed: string;
  /** The other CPUs, e.g. "1" or "1-3". */
  rest: string;
}

/** `option`: undefined (default: CPU 0 for the feed), "none", or a taskset CPU list ("0", "0-1", "0,2"). */
export function cpuSplit(option: string | undefined, cpus = availableParallelism()): CpuSplit | undefined {
  if (option === "none" || cpus < 2) return undefined;
  const feed = cpuList(option ?? "0", cpus);
  const rest = [...Array(cpus).keys()].filter((c) => !feed.has(c));
  if (rest.length === 0) throw new Error(`--feed-cpus=${option}: leaves no CPU for the pollers (the machine has ${cpus})`);
  return { feed: [...feed].join(","), rest: rest.join(",") };
}

function cpuList(text: string, cpus: number): Set<number> {
  const out = new Set<number>();
  for (const part of text.split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`--feed-cpus: "${part}" is not a CPU number or range`);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from || to >= cpus) throw new Error(`--feed-cpus: "${part}" is not within CPUs 0-${cpus - 1}`);
    for (let c = from; c <= to; c++) out.add(c);
  }
  return out;
}

/**
 * Moves this process (every thread) to `cpus`; processes it starts afterwards inherit them.
 * Returns the CPUs it had (pinSelf(them) gives them back).
 */
export function pinSelf(cpus: string): string {
  const had = execFileSync("taskset", ["--pid", "--cpu-list", String(process.pid)], { encoding: "utf8" });
  // "pid 123's current affinity list: 0,1"
  const list = had.slice(had.lastIndexOf(":") + 1).trim();
  execFileSync("taskset", ["--all-tasks", "--pid", "--cpu-list", cpus, String(process.pid)], { stdio: "ignore" });
  return list;
}

/** The command line that runs `argv` on `cpus` (taskset execs it: the pid is the program's). */
export function onCpus(cpus: string | undefined, argv: string[]): string[] {
  return cpus === undefined ? argv : ["taskset", "--cpu-list", cpus, ...argv];
}

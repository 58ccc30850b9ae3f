// Which CPUs the bench's clients run on: the pollers' worker processes and the driver with its
// observer and churn writer. In a mesh the feed has its own CPU (its Deployment's request) and
// its 2,000 clients are Envoys on other nodes; on a small machine the clients would take the
// feed's CPU from it, and a figure would measure how the kernel shares one machine between a
// server and its clients, not the feed. So by default the clients run on every CPU but the
// first, and CPU 0 is left to the control plane: the feed, the API server and etcd stay on every
// CPU (the feed is not pinned: its TLS handshakes and collector may use any free CPU, as in a
// pod without a CPU limit). `--client-cpus=none`: no split, as before; a machine with one CPU: no
// split. The figures say which (`clientCpus`).
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";

/** `option`: undefined (default: CPUs 1 to n-1), "none", or a taskset CPU list ("1", "1-3", "1,3"). */
export function clientCpus(option: string | undefined, cpus = availableParallelism()): string | undefined {
  if (option === "none" || cpus < 2) return undefined;
  const list = cpuList(option ?? `1-${cpus - 1}`, cpus);
  if (list.size === cpus) throw new Error(`--client-cpus=${option}: leaves no CPU to the feed alone (the machine has ${cpus})`);
  return [...list].join(",");
}

function cpuList(text: string, cpus: number): Set<number> {
  const out = new Set<number>();
  for (const part of text.split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`--client-cpus: "${part}" is not a CPU number or range`);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from || to >= cpus) throw new Error(`--client-cpus: "${part}" is not within CPUs 0-${cpus - 1}`);
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

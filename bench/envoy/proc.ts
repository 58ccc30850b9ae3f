// What the kernel says a process used: CPU time (utime + stime from /proc/<pid>/stat) and
// resident memory (VmRSS from /proc/<pid>/status). Read before and after a run, the difference
// is the process's own CPU for that run, whatever else shares the machine.
import { readFileSync } from "node:fs";

/** Clock ticks per second for /proc times; 100 on every Linux this runs on (getconf CLK_TCK). */
const TICKS_PER_SECOND = 100;

/** utime and stime (clock ticks) from /proc/<pid>/stat. */
function cpuTicks(pid: number): { utime: number; stime: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) may contain spaces: count fields after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { utime: Number(fields[11]), stime: Number(fields[12]) };
}

/** CPU time (user + system) the process has used so far, in microseconds. */
export function cpuMicros(pid: number): number {
  const { utime, stime } = cpuTicks(pid);
  return ((utime + stime) * 1_000_000) / TICKS_PER_SECOND;
}

/**
 * User-mode CPU only, in microseconds: wasm plumbing is all user code, while most of the
 * run-to-run noise on a shared machine is kernel time (bench/envoy/profile.ts).
 */
export function userMicros(pid: number): number {
  return (cpuTicks(pid).utime * 1_000_000) / TICKS_PER_SECOND;
}

/** Resident set size in MB. */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  return match ? Number(match[1]) / 1024 : NaN;
}

/** Measures `pid`'s CPU over `work`: returns the work's result, the CPU µs and the wall µs. */
export async function withCpu<T>(pid: number, work: () => Promise<T>): Promise<{ result: T; cpuUs: number; wallUs: number }> {
  const cpuBefore = cpuMicros(pid);
  const started = process.hrtime.bigint();
  const result = await work();
  const wallUs = Number(process.hrtime.bigint() - started) / 1000;
  return { result, cpuUs: cpuMicros(pid) - cpuBefore, wallUs };
}

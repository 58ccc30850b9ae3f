// The load generators, run as child processes: wrk (new connections per second, and time to
// first byte with one connection at a time) and iperf3 (bulk throughput). Each run reports the
// generator's own CPU (bash's `times` after the tool exits), so the bench can show the generator
// was not the bottleneck. `captured: true` runs the tool as GENERATOR_UID, whose connections the
// sidecar captures; otherwise it runs as root and connects directly.
import { spawn } from "node:child_process";
import { GENERATOR_GID, GENERATOR_UID } from "./capture.js";

export interface ToolRun {
  stdout: string;
  /** CPU the tool used (user + system), µs. */
  cpuUs: number;
  /** Wall time of the run, µs. */
  wallUs: number;
}

/** `bash -c 'tool args; times'`: the second line of `times` is the children's user and system time. */
function runTool(tool: string, args: string[], captured: boolean, timeoutMs: number): Promise<ToolRun> {
  return new Promise((done, fail) => {
    const started = process.hrtime.bigint();
    const child = spawn("bash", ["-c", '"$@"; status=$?; times; exit $status', "bench-tool", tool, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      ...(captured ? { uid: GENERATOR_UID, gid: GENERATOR_GID } : {}),
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", fail);
    child.on("close", (code) => {
      clearTimeout(timer);
      const wallUs = Number(process.hrtime.bigint() - started) / 1000;
      if (code !== 0) return fail(new Error(`${tool} exited with ${code}: ${stderr.trim() || stdout.trim()}`.slice(0, 400)));
      const lines = stdout.trimEnd().split("\n");
      const children = lines.at(-1) ?? "";
      const times = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => (Number(m[1]) * 60 + Number(m[2])) * 1e6);
      if (times.length !== 2) return fail(new Error(`${tool}: cannot read its CPU time from "${children}"`));
      done({ stdout: lines.slice(0, -2).join("\n"), cpuUs: times[0]! + times[1]!, wallUs });
    });
  });
}

export interface WrkResult extends ToolRun {
  requests: number;
  perSecond: number;
  p50Us: number;
  p99Us: number;
}

function micros(value: string, unit: string): number {
  const scale: Record<string, number> = { us: 1, ms: 1000, s: 1_000_000 };
  const factor = scale[unit];
  if (factor === undefined) throw new Error(`wrk: unknown latency unit ${unit}`);
  return Number(value) * factor;
}

/**
 * wrk with `Connection: close`: every request opens its own connection, so requests per second
 * is new connections per second, and wrk's latency (first request byte written → response read,
 * after the TCP connect) is the time to first byte of the small response through the path.
 * Refuses a run with socket errors or non-2xx answers: the figure would not mean what it says.
 */
export async function wrk(url: string, connections: number, seconds: number, captured: boolean): Promise<WrkResult> {
  const args = ["-t1", `-c${connections}`, `-d${seconds}s`, "--latency", "-H", "Connection: close", url];
  const run = await runTool("wrk", args, captured, (seconds + 30) * 1000);
  const out = run.stdout;
  const requests = /(\d+) requests in/.exec(out);
  const perSecond = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const p50 = /^\s+50%\s+([\d.]+)(us|ms|s)$/m.exec(out);
  const p99 = /^\s+99%\s+([\d.]+)(us|ms|s)$/m.exec(out);
  if (!requests || !perSecond || !p50 || !p99) throw new Error(`wrk: unexpected output:\n${out}`);
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const failed = errors ? Number(errors[1]) + Number(errors[3]) + Number(errors[4]) : 0;
  if (failed > 0 || /Non-2xx or 3xx responses: (\d+)/.test(out)) throw new Error(`wrk: failed requests against ${url}:\n${out}`);
  return {
    ...run,
    requests: Number(requests[1]),
    perSecond: Number(perSecond[1]),
    p50Us: micros(p50[1]!, p50[2]!),
    p99Us: micros(p99[1]!, p99[2]!),
  };
}

export interface IperfResult extends ToolRun {
  /** Received throughput, MB/s (10^6 bytes). */
  mbPerSecond: number;
}

/** iperf3 client, one TCP stream, client → server, `seconds` long; the server's received rate. */
export async function iperf3(host: string, port: number, seconds: number, captured: boolean): Promise<IperfResult> {
  const args = ["-c", host, "-p", String(port), "-t", String(seconds), "-J"];
  const run = await runTool("iperf3", args, captured, (seconds + 30) * 1000);
  let report: any;
  try {
    report = JSON.parse(run.stdout);
  } catch {
    throw new Error(`iperf3: not JSON:\n${run.stdout.slice(0, 400)}`);
  }
  if (report.error) throw new Error(`iperf3: ${report.error}`);
  const bitsPerSecond = report.end?.sum_received?.bits_per_second;
  if (typeof bitsPerSecond !== "number" || bitsPerSecond <= 0) throw new Error("iperf3: no received throughput in its report");
  return { ...run, mbPerSecond: bitsPerSecond / 8 / 1e6 };
}

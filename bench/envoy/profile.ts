// Where does a wasm network filter's Envoy CPU per connection go? Runs one sidecar per arm side by
// side (all from the shipped envoy-configs/passthrough_mtls.yaml, one worker each), captures the
// generator's connections to one arm at a time (bench/envoy/capture.ts) and drives wrk with
// `Connection: close` at the tlsMode-disabled pod (the "plain" path: every arm does the same
// upstream work, PassthroughCluster in clear). Arms:
//   without      the wasm filter removed
//   bare         a wasm filter exporting no callback (profile_fixtures.ts)
//   callbacks    the 7 per-connection callbacks our runtime exports, all empty
//   getprop      callbacks + get_property(destination.address)
//   setprop      callbacks + set_property(lb_address)
//   hostcalls    callbacks + passthrough_mtls's plain-path host calls, nothing else
//   newconn, newconn_hostcalls, newconn_min, filterstate: see profile_fixtures.ts
//   noop         filters/noop (the AssemblyScript runtime, every callback at its default)
//   passthrough  the shipped passthrough_mtls filter (plain path)
//   mtls_with    the shipped filter, dialling the tlsMode-istio pod (mTLS through the filter)
//   mtls_native  no filter: a filter chain for that pod's IP -> a per-pod mTLS cluster verifying
//                its SAN (the bench's "native" arm, bench/envoy/passthrough_mtls.ts)
// Modes:
//   cpu   rounds in ABBA order; per arm and round the sidecar's utime+stime and utime alone
//         (/proc) over the wrk run ÷ connections; prints per-arm median/min/max and the per-round
//         differences to "without". On a shared 2-core machine these move by ±20-40 µs per run:
//         use perf mode to see effects of a few µs.
//   perf  one `perf record -e cpu-clock -c <period>` per arm over a wrk run, written to
//         build/profile/<arm>.perf.data with the connection count in <arm>.json, for
//         bench/envoy/profile_report.ts.
// Usage (root; private netns; not part of npm test):
//   bash bench/envoy/profile.sh [cpu|perf] [--rounds N] [--seconds S] [--arms a,b,...] [--callgraph fp|dwarf|none] [--period-us 1000] [--out build/profile]
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EnvoyProcess, sleep } from "../../tests/support/envoy.js";
import { wasmNetworkFilter } from "../../tests/support/envoy_config.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { median } from "./ab.js";
import { captureGeneratorTo, releaseGeneratorCapture } from "./capture.js";
import { wrk } from "./generators.js";
import { MTLS_POD, NATIVE_POD_CLUSTER, nativeMtls, PLAIN_POD, shipped, withWasmFilter } from "./passthrough_configs.js";
import { cpuMicros, userMicros } from "./proc.js";
import { buildFixtures, FIXTURES, type Fixture } from "./profile_fixtures.js";
import { startUpstream } from "./upstream.js";

function arg(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 && process.argv[at + 1] ? process.argv[at + 1]! : fallback;
}
const PLAIN_URL = `http://${PLAIN_POD.host}:${PLAIN_POD.httpPort}/`;
const MTLS_URL = `http://${MTLS_POD.host}:${MTLS_POD.httpPort}/`;
const OUT = join(REPO_ROOT, arg("out", "build/profile"));
// The perf call stacks (frame pointers) are read by bench/envoy/profile_report.ts.
const ALL_ARMS = ["without", ...FIXTURES, "noop", "passthrough", "mtls_with", "mtls_native"] as const;
/** The URL each arm dials and the cluster every connection must take. */
function route(arm: ArmName): { url: string; cluster: string } {
  if (arm === "mtls_with") return { url: MTLS_URL, cluster: "outbound_mtls_passthrough" };
  if (arm === "mtls_native") return { url: MTLS_URL, cluster: NATIVE_POD_CLUSTER };
  return { url: PLAIN_URL, cluster: "PassthroughCluster" };
}
type ArmName = (typeof ALL_ARMS)[number];

const mode = process.argv[2] === "perf" ? "perf" : "cpu";
const rounds = Number(arg("rounds", "5"));
const seconds = Number(arg("seconds", "4"));
const callgraph = arg("callgraph", "fp");
const period = Number(arg("period-us", "1000"));
const arms = arg("arms", ALL_ARMS.join(",")).split(",") as ArmName[];
for (const arm of arms) if (!ALL_ARMS.includes(arm)) throw new Error(`unknown arm ${arm}; arms: ${ALL_ARMS.join(",")}`);

function log(message: string): void {
  process.stderr.write(`[profile] ${message}\n`);
}

function armConfig(arm: ArmName, admin: number, outbound: number, fixtures: Record<Fixture, string>): any {
  switch (arm) {
    case "without":
      return withWasmFilter(admin, outbound, null);
    case "passthrough":
    case "mtls_with":
      return shipped(admin, outbound);
    case "mtls_native":
      return nativeMtls(admin, outbound);
    case "noop":
      return withWasmFilter(admin, outbound, wasmNetworkFilter({ name: "noop", wasm: "build/noop.wasm", configuration: "" }));
    default:
      return withWasmFilter(admin, outbound, wasmNetworkFilter({ name: `profile_${arm}`, wasm: fixtures[arm], configuration: "" }));
  }
}

interface Sidecar {
  arm: ArmName;
  envoy: EnvoyProcess;
  outbound: number;
}

interface Run {
  connections: number;
  cpuUs: number;
  userUs: number;
  wallUs: number;
  upstreamPerConn: number;
  downstreamPerConn: number;
  /** wrk's read errors (connections that closed without a response; they are not in `connections`). */
  readErrors: number;
  /** Nonzero deltas of the route's cluster, TLS and listener stats over the run. */
  stats: Record<string, number>;
}

async function measure(sidecar: Sidecar, during?: (pid: number) => Promise<() => Promise<void>>): Promise<Run> {
  captureGeneratorTo(sidecar.outbound);
  try {
    const pid = sidecar.envoy.child.pid!;
    const before = await sidecar.envoy.stats();
    const stop = during ? await during(pid) : undefined;
    const cpu0 = cpuMicros(pid);
    const user0 = userMicros(pid);
    const t0 = process.hrtime.bigint();
    const { url, cluster } = route(sidecar.arm);
    const result = await wrk(url, 16, seconds, true);
    const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
    const cpuUs = cpuMicros(pid) - cpu0;
    const userUs = userMicros(pid) - user0;
    if (stop) await stop();
    await sleep(150);
    const after = await sidecar.envoy.stats();
    const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
    const upstream = delta(`cluster.${cluster}.upstream_cx_total`);
    const downstream = delta("listener.127.0.0.1_" + sidecar.outbound + ".downstream_cx_total");
    if (upstream < result.requests * 0.99) throw new Error(`${sidecar.arm}: ${cluster} grew by ${upstream} for ${result.requests} connections`);
    const stats: Record<string, number> = {};
    for (const name of after.keys()) {
      if (!(name.startsWith(`cluster.${cluster}.`) || name.startsWith("listener.127.0.0.1_") || name.startsWith("tcp.") || name.startsWith("wasmcustom."))) continue;
      const d = delta(name);
      if (d !== 0 && !name.includes("_ms") && !/bytes|buffer|_active/.test(name)) stats[name] = d;
    }
    const readErrors = Number(/read (\d+)/.exec(result.stdout)?.[1] ?? 0);
    return { connections: result.requests, cpuUs, userUs, wallUs, upstreamPerConn: upstream / result.requests, downstreamPerConn: downstream / result.requests, readErrors, stats };
  } finally {
    releaseGeneratorCapture();
  }
}

/** perf record on `pid` until the returned stop() (SIGINT, then waits for perf to write). */
function perfRecorder(arm: ArmName): (pid: number) => Promise<() => Promise<void>> {
  return async (pid) => {
    const args = ["record", "-e", "cpu-clock", "-c", String(period * 1000), "-p", String(pid), "-o", join(OUT, `${arm}.perf.data`)];
    if (callgraph !== "none") args.push("--call-graph", callgraph === "dwarf" ? "dwarf,16384" : callgraph);
    const perf = spawn("perf", args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    perf.stderr.on("data", (chunk) => (stderr += chunk));
    await sleep(500); // perf attached
    return async () => {
      const exited = new Promise<void>((done) => perf.once("exit", () => done()));
      perf.kill("SIGINT");
      await exited;
      if (!/Captured and wrote/.test(stderr)) log(`perf ${arm}: ${stderr.trim().slice(0, 400)}`);
    };
  };
}

const round1 = (v: number) => Math.round(v * 10) / 10;

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const fixtures = buildFixtures(join(OUT, "wasm"));
  const upstream = await startUpstream(15290, PLAIN_POD, MTLS_POD);
  const sidecars: Sidecar[] = [];
  try {
    for (const [index, arm] of arms.entries()) {
      const admin = 15200 + 10 * index;
      const outbound = admin + 1;
      const envoy = await EnvoyProcess.start({ name: `profile-${arm}`, adminPort: admin, config: armConfig(arm, admin, outbound, fixtures), logLevel: "warn" });
      sidecars.push({ arm, envoy, outbound });
    }
    for (const sidecar of sidecars) await measure(sidecar); // warm-up: wasm tier-up, pools, TLS session caches
    if (mode === "perf") {
      for (const sidecar of sidecars) {
        const run = await measure(sidecar, perfRecorder(sidecar.arm));
        writeFileSync(join(OUT, `${sidecar.arm}.json`), JSON.stringify({ arm: sidecar.arm, periodUs: period, callgraph, ...run }) + "\n");
        log(`${sidecar.arm}: ${run.connections} connections (${run.readErrors} wrk read errors, ${round1(run.downstreamPerConn)} accepted per completed), ${round1(run.cpuUs / run.connections)} us CPU/conn (under perf)`);
      }
      return;
    }
    const samples = new Map<ArmName, Run[]>(arms.map((arm) => [arm, []]));
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 ? [...sidecars].reverse() : sidecars;
      for (const sidecar of order) {
        const run = await measure(sidecar);
        samples.get(sidecar.arm)!.push(run);
        const line = { figure: "envoy_profile_cpu", arm: sidecar.arm, round: round + 1, connections: run.connections, cpu_us_per_conn: round1(run.cpuUs / run.connections), user_us_per_conn: round1(run.userUs / run.connections), conn_per_s: Math.round(run.connections / (run.wallUs / 1e6)), upstream_per_conn: run.upstreamPerConn, downstream_per_conn: run.downstreamPerConn, read_errors: run.readErrors, envoy_cpu_pct: Math.round((100 * run.cpuUs) / run.wallUs), stats: run.stats };
        process.stdout.write(JSON.stringify(line) + "\n");
      }
    }
    const base = samples.get("without");
    for (const arm of arms) {
      const runs = samples.get(arm)!;
      const perConn = runs.map((r) => r.cpuUs / r.connections);
      const userPerConn = runs.map((r) => r.userUs / r.connections);
      const summary: Record<string, unknown> = {
        figure: "envoy_profile_cpu_summary", arm, runs: runs.length,
        cpu_us_per_conn_median: round1(median(perConn)), min: round1(Math.min(...perConn)), max: round1(Math.max(...perConn)),
        user_us_per_conn_median: round1(median(userPerConn)), user_min: round1(Math.min(...userPerConn)), user_max: round1(Math.max(...userPerConn)),
      };
      if (base && arm !== "without") {
        const added = runs.map((r, i) => r.cpuUs / r.connections - base[i]!.cpuUs / base[i]!.connections);
        const addedUser = runs.map((r, i) => r.userUs / r.connections - base[i]!.userUs / base[i]!.connections);
        const ratio = runs.map((r, i) => (r.cpuUs / r.connections) / (base[i]!.cpuUs / base[i]!.connections));
        Object.assign(summary, {
          added_us_median: round1(median(added)), added_min: round1(Math.min(...added)), added_max: round1(Math.max(...added)), ratio_median: Math.round(median(ratio) * 1000) / 1000,
          added_user_us_median: round1(median(addedUser)), added_user_min: round1(Math.min(...addedUser)), added_user_max: round1(Math.max(...addedUser)),
        });
      }
      process.stdout.write(JSON.stringify(summary) + "\n");
    }
  } finally {
    for (const sidecar of sidecars) await sidecar.envoy.stop();
    await upstream.stop();
  }
}

try {
  execFileSync("iptables", ["-w", "-t", "nat", "-S", "OUTPUT"], { stdio: "ignore" });
} catch {
  throw new Error("iptables not usable: run through bench/envoy/profile.sh (private netns)");
}
await main();

// Host soak: a million connections through each filter in the proxy-wasm host
// emulator, against a realistic snapshot (10,000 pods), with mixed outcomes (known pods and
// VIPs, unknown and malformed destinations, missing ones; for tunnel_port's server also good and
// bad peers and service ports). 64 connections stay open at a time; one in 16 carries data both
// ways. After warm-up the VM's linear memory must not grow, no callback may trap, and the
// outcome counters must add up to the number of connections (each bumps exactly one).
// Prints one JSON line per filter:
//   {"figure":"soak_host", filter, connections, vm_memory_bytes_after_warmup,
//    vm_memory_bytes_end, growth_bytes, seconds, ...}
// Usage: tsx scripts/soak/host.ts [--connections N] [--pods P] [--filter NAME]   (exit 1 on failure)
// or import { hostSoak } and await hostSoak() (true when every filter passed).
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { ProxyWasmHost, type Connection, type ConnectOptions } from "../../host/index.js";
import { destinationValue, peerValue, portValue } from "../../tests/fuzz/properties.js";
import { Rng } from "../../tests/fuzz/rng.js";
import { AUTHORITY_STATE, PEER_STATE, SERVICE_PORT_STATE } from "../../tests/fuzz/session.js";
import { meshSnapshot } from "../../tests/fuzz/snapshot.js";
import { FUZZ_PORTS, TARGETS, targetByName, type Target } from "../../tests/fuzz/targets.js";

export interface SoakOptions {
  /** Connections per filter (default 1,000,000). */
  readonly connections?: number;
  /** Pods in the snapshot (default 10,000). */
  readonly pods?: number;
  /** Target names (default all: probe, passthrough_mtls, tunnel_port_client/server, waypoint_route). */
  readonly filters?: readonly string[];
  /** Worker processes (default: one per core). */
  readonly jobs?: number;
}

export interface SoakFigure {
  readonly figure: "soak_host";
  readonly filter: string;
  readonly connections: number;
  readonly vm_memory_bytes_after_warmup: number;
  readonly vm_memory_bytes_end: number;
  readonly growth_bytes: number;
  readonly seconds: number;
  readonly connections_per_second: number;
  readonly outcomes: Record<string, number>;
  readonly trap: string | null;
  /** Why the soak failed for this filter, or null. */
  readonly problem: string | null;
}

const OPEN = 64;
const POOL = 8192;

/** Per-connection inputs, drawn once from a seeded pool and then cycled. */
function connectionPool(target: Target, known: readonly string[], rng: Rng, localWorkload: string): ConnectOptions[] {
  const pool: ConnectOptions[] = [];
  for (let i = 0; i < POOL; i++) {
    const destination = target.server && rng.chance(0.6)
      ? new TextEncoder().encode(`${localWorkload}:${rng.pick(FUZZ_PORTS)}`)
      : destinationValue(rng, known, FUZZ_PORTS).bytes;
    const filterState: Record<string, Uint8Array> = {};
    if (target.server) {
      const peer = peerValue(rng).bytes;
      const port = portValue(rng, FUZZ_PORTS).bytes;
      if (peer) filterState[PEER_STATE] = peer;
      if (port) filterState[SERVICE_PORT_STATE] = port;
      if (destination) filterState[AUTHORITY_STATE] = destination; // the CONNECT's :authority text
    }
    pool.push({ properties: destination ? { destination: { address: destination } } : {}, filterState, mtls: true });
  }
  return pool;
}

/** Soaks one target in this process. */
export function soakTarget(target: Target, connections: number, pods: number): SoakFigure {
  const snapshot = meshSnapshot(pods, Math.max(4, Math.floor(pods / 10)));
  const config = target.baseConfig(snapshot);
  if (target.name === "probe") {
    // probe's routing table at the same scale: one route per pod IP
    config.routes = Object.fromEntries(snapshot.knownDestinations.map((d, i) => [d.replace(/^\[|\]?:\d+$/g, ""), `backend_${i % 100}`]));
  }
  const wasm = new Uint8Array(readFileSync(new URL(`../../build/${target.filter}.wasm`, import.meta.url)));
  const host = ProxyWasmHost.fromBytes(wasm, { rootId: target.filter, pluginConfiguration: JSON.stringify(config) });
  if (!host.start()) throw new Error(`${target.name}: the soak snapshot is refused: ${host.startFailure} ${host.logs().map((l) => l.message).join(" | ")}`);
  const pool = connectionPool(target, snapshot.knownDestinations, new Rng(0x50a6), snapshot.localWorkload);
  const warmup = Math.min(100_000, Math.floor(connections / 10));
  const open: Connection[] = [];
  let afterWarmup = 0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < connections && !host.failed; i++) {
    if (i === warmup) afterWarmup = host.guestMemoryBytes;
    const conn = host.connect(pool[i % POOL]!);
    if (i % 16 === 0 && !conn.closed) {
      conn.downstreamData("ping");
      conn.upstreamData("pong");
    }
    open.push(conn);
    if (open.length > OPEN) open.shift()!.end();
    if ((i & 1023) === 0) host.clearLogs(); // refusals log a line each; the soak does not read them
  }
  for (const conn of open) conn.end();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const end = host.guestMemoryBytes;
  const metrics = host.metrics();
  const outcomes: Record<string, number> = {};
  let counted = 0;
  for (const name of target.outcomes) {
    const value = metrics.get(`${target.filter}.${name}`) ?? 0;
    if (value) outcomes[name] = value;
    counted += value;
  }
  const trap = host.failed ? (host.trapMessage ?? "trap") : null;
  const problem = trap
    ? `trapped: ${trap}`
    : end > afterWarmup
      ? `linear memory grew by ${end - afterWarmup} bytes after ${warmup} warm-up connections`
      : counted !== connections
        ? `outcome counters add up to ${counted}, not ${connections}`
        : host.liveContexts !== 1
          ? `${host.liveContexts - 1} connection contexts left alive`
          : null;
  return {
    figure: "soak_host",
    filter: target.name,
    connections,
    vm_memory_bytes_after_warmup: afterWarmup,
    vm_memory_bytes_end: end,
    growth_bytes: end - afterWarmup,
    seconds: Number(seconds.toFixed(1)),
    connections_per_second: Math.round(connections / seconds),
    outcomes,
    trap,
    problem,
  };
}

/** Soaks every filter (in worker processes, one per core); prints one JSON line each. */
export async function hostSoak(options: SoakOptions = {}): Promise<boolean> {
  const connections = options.connections ?? 1_000_000;
  const pods = options.pods ?? 10_000;
  const queue = (options.filters ?? TARGETS.map((t) => t.name)).map((name) => targetByName(name).name);
  const figures: SoakFigure[] = [];
  const script = fileURLToPath(import.meta.url);
  const workers = Math.max(1, Math.min(options.jobs ?? availableParallelism(), queue.length));
  await Promise.all(
    Array.from(
      { length: workers },
      () =>
        new Promise<void>((resolve, reject) => {
          const run = () => {
            const name = queue.shift();
            if (name === undefined) return resolve();
            const child = fork(script, ["--worker", name, String(connections), String(pods)], { execArgv: ["--import", "tsx"] });
            let figure: SoakFigure | undefined;
            child.on("message", (message: SoakFigure) => {
              figure = message;
              console.log(JSON.stringify(message));
            });
            child.on("error", reject);
            child.on("exit", (code) => {
              figures.push(
                figure ?? {
                  figure: "soak_host", filter: name, connections, vm_memory_bytes_after_warmup: 0, vm_memory_bytes_end: 0, growth_bytes: 0,
                  seconds: 0, connections_per_second: 0, outcomes: {}, trap: null, problem: `soak worker exited with status ${code}`,
                },
              );
              run();
            });
          };
          run();
        }),
    ),
  );
  const failed = figures.filter((f) => f.problem !== null);
  for (const f of failed) console.error(`soak_host ${f.filter}: ${f.problem}`);
  return failed.length === 0;
}

function usage(message: string): never {
  console.error(`soak/host: ${message}\nusage: tsx scripts/soak/host.ts [--connections N] [--pods P] [--filter NAME]`);
  process.exit(2);
}

const argv = process.argv.slice(2);
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (argv[0] === "--worker") {
    process.send!(soakTarget(targetByName(argv[1]!), Number(argv[2]), Number(argv[3])), () => process.disconnect?.());
  } else {
    let connections: number | undefined;
    let pods: number | undefined;
    const filters: string[] = [];
    for (let i = 0; i < argv.length; i++) {
      const value = argv[++i];
      if (value === undefined) usage(`${argv[i - 1]} needs a value`);
      if (argv[i - 1] === "--connections") connections = Number(value);
      else if (argv[i - 1] === "--pods") pods = Number(value);
      else if (argv[i - 1] === "--filter") {
        const matched = TARGETS.filter((t) => t.name === value || t.filter === value).map((t) => t.name);
        if (matched.length === 0) usage(`unknown filter ${value}; known: ${TARGETS.map((t) => t.name).join(", ")}`);
        filters.push(...matched);
      }
      else usage(`unknown argument ${argv[i - 1]}`);
    }
    if (connections !== undefined && !(Number.isSafeInteger(connections) && connections > 0)) usage("--connections: a positive integer");
    if (pods !== undefined && !(Number.isSafeInteger(pods) && pods > 0)) usage("--pods: a positive integer");
    const ok = await hostSoak({ ...(connections ? { connections } : {}), ...(pods ? { pods } : {}), ...(filters.length ? { filters } : {}) });
    process.exitCode = ok ? 0 : 1;
  }
}

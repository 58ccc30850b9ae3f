// What the abuse test (tests/feed/server_abuse.test.ts) and its bench (bench/feed/abuse.ts)
// share: a mesh written as files (the feed's file source, no API server needed for size), the
// real feed started as its own process (feed/src/main.ts: its RSS is its own), and the clients
// that abuse it or use it honestly over the mutual-TLS channel:
//   - never-readers: a TLS connection that asks for a full message and never reads a byte;
//   - a flood: loops asking for `epoch=0` (a full message) as fast as the feed answers;
//   - honest pollers: the filters' long poll, each holding a kept-alive connection, timing how
//     long after a change they get its delta;
//   - a health prober.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { join } from "node:path";
import { connect, type TLSSocket } from "node:tls";
import { stringify } from "yaml";
import { SIDECAR_PRINCIPAL, feedChannelFiles, meshCert, MESH_CA_FILE, FEED_IDENTITY } from "./feed_tls.js";
import { REPO_ROOT } from "./paths.js";
import { FEED_BUNDLE, preloadMissing, type NodeRuntime } from "./feed_runtime.js";

const PODS_PER_FILE = 10_000;

function podJson(i: number, ip: string, sa: string): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { namespace: `ns-${i % 50}`, name: `workload-${i}`, uid: `uid-${i}`, labels: { app: `app-${i % 500}`, "security.istio.io/tlsMode": "istio" } },
    spec: { serviceAccountName: sa },
    status: { phase: "Running", podIP: ip, conditions: [{ type: "Ready", status: "True" }] },
  };
}

function ipOf(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${(i & 255) + 1 > 254 ? 254 : (i & 255) + 1}`;
}

/**
 * Each pod its own service account with a long name (~200 characters, Kubernetes allows 253):
 * a full message of ~300 bytes per pod, so that a few tens of thousands of pods make one larger
 * than what the kernel's socket buffers take for a client that does not read (~4 MB on Linux).
 */
function serviceAccount(i: number): string {
  return `service-account-of-workload-${i}-`.padEnd(200, "x");
}

/** Writes `pods` pods into `dir` as JSON Lists (10,000 a file), and the churned pod. */
export function writeMesh(dir: string, pods: number): void {
  mkdirSync(dir, { recursive: true });
  for (let f = 0; f * PODS_PER_FILE < pods; f++) {
    const items = [];
    for (let i = f * PODS_PER_FILE; i < Math.min(pods, (f + 1) * PODS_PER_FILE); i++) items.push(podJson(i, `10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`, serviceAccount(i)));
    writeFileSync(join(dir, `pods-${f}.json`), JSON.stringify({ apiVersion: "v1", kind: "List", items }));
  }
  churn(dir, 0);
}

/** Moves the mesh by one object (a pod's IP): the feed publishes a new version. Atomic replace. */
export function churn(dir: string, n: number): void {
  const tmp = join(dir, ".churn.json");
  writeFileSync(tmp, JSON.stringify(podJson(1_000_000, ipOf(n % 60_000), "churned")));
  renameSync(tmp, join(dir, "churn.json"));
}

export interface FeedProcess {
  child: ChildProcess;
  channel: string;
  operator: string;
  health: string;
  stop(): Promise<void>;
}

/** Starts the feed as its own process on fixed ports (run inside the test netns); resolves once /readyz says ready. */
export async function startFeedProcess(dir: string, meshDir: string, ports: { channel: number; operator: number; health: number }, extra: { channelLimits?: object; delta?: object; runtime?: NodeRuntime; bundle?: boolean } = {}): Promise<FeedProcess> {
  const config = {
    trustDomain: "cluster.local",
    wasmDir: join(REPO_ROOT, "build"),
    operator: { address: "127.0.0.1", port: ports.operator },
    health: { address: "127.0.0.1", port: ports.health },
    channel: { address: "127.0.0.1", port: ports.channel, ...feedChannelFiles(), ...(extra.channelLimits && { limits: extra.channelLimits }) },
    ...(extra.delta && { delta: extra.delta }),
    clusters: [{ id: "cluster1", files: meshDir }],
    targets: [{ name: "mesh", filter: "passthrough_mtls", readers: [SIDECAR_PRINCIPAL] }],
  };
  const path = join(dir, "feed.yaml");
  writeFileSync(path, stringify(config));
  // `runtime`: Node's flags and environment as a deployment runs the feed (the chart's `node`
  // values); `bundle`: the image's bundle (bundleFeed() first) instead of the sources through tsx.
  const entry = extra.bundle ? [FEED_BUNDLE] : ["--import", "tsx", join(REPO_ROOT, "feed/src/main.ts")];
  const child = spawn(process.execPath, [...(extra.runtime?.args ?? []), ...entry, "--config", path], {
    cwd: REPO_ROOT,
    env: { ...process.env, FEED_LOG_LEVEL: "warn", ...extra.runtime?.env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const p: FeedProcess = {
    child,
    channel: `https://127.0.0.1:${ports.channel}`,
    operator: `http://127.0.0.1:${ports.operator}`,
    health: `http://127.0.0.1:${ports.health}`,
    async stop() {
      if (child.exitCode !== null) return;
      const gone = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      await gone;
      clearTimeout(t);
    },
  };
  const ready = async () => {
    try {
      return (await fetch(`${p.health}/readyz`)).status === 200;
    } catch {
      return false; // not listening yet
    }
  };
  const started = Date.now();
  while (Date.now() - started < 120_000) {
    if (child.exitCode !== null) throw new Error(`the feed exited (${child.exitCode}) before it was ready`);
    if (await ready()) {
      const missing = preloadMissing(child.pid ?? 0, extra.runtime);
      if (missing) {
        await p.stop();
        throw new Error(missing);
      }
      return p;
    }
    await new Promise((done) => setTimeout(done, 200));
  }
  await p.stop();
  throw new Error("the feed was not ready within 120 s");
}

/** The i-th of `peers` source addresses (127.0.1.1 ...): never-readers spread over pods. */
export function peerAddress(i: number, peers: number): string {
  const p = i % peers;
  return `127.0.${1 + Math.floor(p / 250)}.${1 + (p % 250)}`;
}

/** The feed's resident memory (bytes), from /proc. */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

/**
 * The feed's resting RSS: the lowest of samples over `ms` after it turned ready. Right after
 * ready it still holds the garbage of its initial read until V8's memory reducer runs (8-12 s
 * later in the abuse bench's runs: 450 MB, then 290 MB); a reading taken before would count
 * that as "rest" and hide what an attack adds.
 */
export async function restingRss(pid: number, ms = 20_000): Promise<number> {
  let low = rssOf(pid);
  for (const until = Date.now() + ms; Date.now() < until; ) {
    await new Promise((done) => setTimeout(done, 250));
    low = Math.min(low, rssOf(pid));
  }
  return low;
}

/** A value of one series in Prometheus text (0 when absent). */
export function metricValue(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

const TLS = () => {
  const id = meshCert("sidecar");
  return {
    ca: readFileSync(MESH_CA_FILE),
    cert: id.cert,
    key: id.key,
    checkServerIdentity: (_host: string, cert: { subjectaltname?: string }) => (cert.subjectaltname?.split(", ").includes(`URI:${FEED_IDENTITY}`) ? undefined : new Error(`not the feed: ${cert.subjectaltname}`)),
  };
};

/**
 * A client that asks for a full message on its own connection and never reads; `closed` once
 * the feed drops it. `localAddress` (any of 127/8 in the netns) makes it another peer: the feed
 * caps connections per caller identity and source address (one sidecar).
 */
export function neverReader(channel: string, localAddress = "127.0.0.1"): Promise<{ socket: TLSSocket; closed: Promise<void> }> {
  const url = new URL(channel);
  return new Promise((done, fail) => {
    const socket = connect({ host: url.hostname, port: Number(url.port), localAddress, ...TLS() }, () => {
      socket.write(`GET /delta/mesh?epoch=0&version=0 HTTP/1.1\r\nhost: feed\r\n\r\n`);
      // Stop reading: what the feed sends piles up in the kernel's buffers, then in the feed's.
      socket.pause();
      done({ socket, closed });
    });
    const closed = new Promise<void>((gone) => socket.once("close", () => gone()));
    socket.once("error", (e) => (socket.readyState === "opening" ? fail(e) : undefined));
    socket.on("error", () => undefined);
  });
}

/** One GET on the channel over `agent` (kept alive), reading the whole answer. */
export function channelFetch(agent: Agent, channel: string, path: string): Promise<{ status: number; epoch: number; version: number; kind: string; bytes: number }> {
  return new Promise((done, fail) => {
    const req = request(channel + path, { agent, ...TLS() }, (res) => {
      let bytes = 0;
      let head = Buffer.alloc(0);
      res.on("data", (c: Buffer) => {
        bytes += c.length;
        if (head.length < 16) head = Buffer.concat([head, c.subarray(0, 16 - head.length)]);
      });
      // The message header (delta/wire.ts): epoch u64 little-endian at byte 8.
      const epoch = () => (head.length >= 16 ? head.readUInt32LE(8) + head.readUInt32LE(12) * 2 ** 32 : 0);
      res.on("end", () => done({ status: res.statusCode ?? 0, epoch: epoch(), version: Number(res.headers["x-feed-version"] ?? 0), kind: String(res.headers["x-feed-kind"] ?? ""), bytes }));
      res.on("error", fail);
    });
    req.on("error", fail);
    req.end();
  });
}

/** `epoch=0` polls from `loops` kept-alive connections until `until()` is false; counts answers. */
export async function flood(channel: string, loops: number, until: () => boolean): Promise<{ answers: number; errors: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: loops });
  const out = { answers: 0, errors: 0 };
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (until()) {
        try {
          const a = await channelFetch(agent, channel, "/delta/mesh?epoch=0&version=0");
          if (a.status === 200) out.answers++;
          else out.errors++;
        } catch {
          out.errors++;
          await new Promise((done) => setTimeout(done, 50));
        }
      }
    }),
  );
  agent.destroy();
  return out;
}

/**
 * An honest poller (a filter VM): full once, then long polls from its version. Each delta's lag
 * is measured from the churn write that made it (`changedAt()`).
 */
export async function honestPoller(channel: string, until: () => boolean, changedAt: () => number, lags: number[]): Promise<{ deltas: number; errors: number; lastError: string }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let epoch = 0;
  let version = 0;
  const out = { deltas: 0, errors: 0, lastError: "" };
  while (until()) {
    try {
      const a = await channelFetch(agent, channel, `/delta/mesh?epoch=${epoch}&version=${version}&wait=5`);
      if (a.status !== 200) {
        out.errors++;
        out.lastError = `status ${a.status}`;
        continue;
      }
      if (a.kind === "delta") {
        out.deltas++;
        lags.push(Date.now() - changedAt());
      }
      epoch = a.epoch;
      version = a.version;
    } catch (error) {
      out.errors++;
      out.lastError = (error as Error).message;
      await new Promise((done) => setTimeout(done, 100));
    }
  }
  agent.destroy();
  return out;
}

/** GET `url` every `everyMs` until `until()` is false; the latency of each answer (ms) and the failures. */
export async function probe(url: string, everyMs: number, until: () => boolean): Promise<{ ms: number[]; failures: number }> {
  const out = { ms: [] as number[], failures: 0 };
  while (until()) {
    const t = performance.now();
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(10_000) });
      await r.text();
      if (r.status === 200) out.ms.push(performance.now() - t);
      else out.failures++;
    } catch {
      out.failures++;
    }
    await new Promise((done) => setTimeout(done, everyMs));
  }
  return out;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** What a running load measured, once it has stopped. */
export interface AbuseResult {
  peak: number;
  lags: number[];
  pollers: Array<{ deltas: number; errors: number; lastError: string }>;
  health: { ms: number[]; failures: number };
  /** The operator port's /healthz (the feed's own event loop), when asked for. */
  loop?: { ms: number[]; failures: number };
  flood: { answers: number; errors: number };
}

/**
 * The load the abuse test and its bench both run against a started feed: a new mesh version
 * every 250 ms, RSS sampled every 100 ms from `rest`, 20 honest pollers, /healthz probed every
 * 50 ms on the health worker (and on the operator port when `probeOperator`), and a flood of
 * 8 epoch=0 loops. The never-readers are the caller's to connect while it runs.
 */
export function startAbuseLoad(feed: FeedProcess, meshDir: string, rest: number, options: { probeOperator?: boolean } = {}): { stop(): Promise<AbuseResult> } {
  const pid = feed.child.pid ?? 0;
  let running = true;
  const until = () => running;
  let changedAt = Date.now();
  let n = 0;
  const churner = setInterval(() => {
    churn(meshDir, ++n);
    changedAt = Date.now();
  }, 250);
  let peak = rest;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 100);
  const lags: number[] = [];
  const pollers = Array.from({ length: 20 }, () => honestPoller(feed.channel, until, () => changedAt, lags));
  const health = probe(`${feed.health}/healthz`, 50, until);
  const loop = options.probeOperator ? probe(`${feed.operator}/healthz`, 50, until) : undefined;
  const flooding = flood(feed.channel, 8, until);
  return {
    async stop() {
      running = false;
      clearInterval(churner);
      const [p, h, l, f] = await Promise.all([Promise.all(pollers), health, loop, flooding]);
      clearInterval(sampler);
      return { peak, lags, pollers: p, health: h, ...(l && { loop: l }), flood: f };
    },
  };
}

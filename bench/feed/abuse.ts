// The feed under abuse (feed/docs/server-limits.md): the real feed as its own process, its mesh
// from files (default 20,000 pods with long service-account names: a ~5 MB full message, more than the
// kernel's socket buffers take for a client that does not read), a new
// version every 250 ms, and for `--seconds` (default 30) at once:
//   - `--clients` (default 1,000) TLS clients that ask for a full message and never read, from
//     `--peers` (default 40) source addresses with the sidecar's identity: 25 per peer, under the
//     cap per peer (32), so that every one of them is admitted (one compromised service account
//     with 40 pods; `--peers=1` shows one pod's share: 32 admitted, the rest refused);
//   - a flood of epoch=0 polls (8 kept-alive connections asking as fast as they are answered);
//   - 20 honest long pollers (the filters' poll), each delta's lag timed from the change;
//   - /healthz probed every 50 ms on the health worker's port and on the operator port (the
//     feed's own event loop: how long it blocks).
// Figures (one JSON line, bench/emit.ts) against the targets, each with met / missed: RSS peak
// vs resting (the model, one full message built) + 100 MB, /healthz p99 vs 100 ms, honest
// pollers' delta p99 vs 1 s; the load average beside them. Default limits. Run inside the netns:
//   bash scripts/in-netns.sh node --import tsx bench/feed/abuse.ts [--pods=N] [--clients=N] [--peers=N] [--seconds=N]
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { emit } from "../emit.js";
import { bundleFeed, chartRuntime } from "../../tests/support/feed_runtime.js";
import { metricValue, neverReader, peerAddress, percentile, restingRss, startAbuseLoad, startFeedProcess, writeMesh } from "../../tests/support/feed_abuse.js";
import { REPO_ROOT } from "../../tests/support/paths.js";

export interface AbuseOptions {
  pods: number;
  clients: number;
  peers: number;
  seconds: number;
  /**
   * `chart`: Node's heap flags and MALLOC_CONF as the chart's Deployment sets them, on the
   * image's jemalloc (values.yaml `node`, tests/support/feed_runtime.ts); `node-defaults`: plain
   * node on glibc's malloc, for comparison.
   */
  runtime: "chart" | "node-defaults";
}

export const ABUSE_DEFAULTS: AbuseOptions = { pods: 20_000, clients: 1000, peers: 40, seconds: 30, runtime: "chart" };

const say = (line: string) => console.error(`${new Date().toISOString()} abuse: ${line}`);

export async function abuseBench(options: Partial<AbuseOptions> = {}): Promise<void> {
  const { pods: PODS, clients: CLIENTS, peers: PEERS, seconds: SECONDS, runtime: RUNTIME } = { ...ABUSE_DEFAULTS, ...options };
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "bench-abuse-"));
  try {
    bundleFeed();
    writeMesh(join(dir, "mesh"), PODS);
    say(`${PODS} pods written; starting the feed`);
    const feed = await startFeedProcess(dir, join(dir, "mesh"), { channel: 19443, operator: 19090, health: 19091 }, { bundle: true, ...(RUNTIME === "chart" && { runtime: chartRuntime() }) });
    try {
      const pid = feed.child.pid ?? 0;
      const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
      // Rest: one full message built (the model's own cost), then the lowest RSS over 20 s.
      const first = await fetch(`${feed.operator}/metrics`).then((r) => r.text());
      const rest = await restingRss(pid);
      // Read after the rest is taken: right after ready the feed still holds its start's garbage.
      const restText = await fetch(`${feed.operator}/metrics`).then((r) => r.text());
      const ms = (v: number) => +v.toFixed(1);
      say(`ready, RSS ${(rest / 1e6).toFixed(0)} MB; connecting ${CLIENTS} never-readers`);
      const load = startAbuseLoad(feed, join(dir, "mesh"), rest, { probeOperator: true });
      // Where the RSS goes: the feed's own memory figures (prom-client's process metrics), the
      // sample with the highest RSS kept.
      const breakdown = (t: string) => ({
        rssMb: ms(metricValue(t, "process_resident_memory_bytes") / 1e6),
        heapTotalMb: ms(metricValue(t, "nodejs_heap_size_total_bytes") / 1e6),
        heapUsedMb: ms(metricValue(t, "nodejs_heap_size_used_bytes") / 1e6),
        newSpaceMb: ms(metricValue(t, 'nodejs_heap_space_size_total_bytes{space="new"}') / 1e6),
        externalMb: ms(metricValue(t, "nodejs_external_memory_bytes") / 1e6),
        bufferedBodiesMb: ms(metricValue(t, 'feed_buffered_bytes{server="channel"}') / 1e6),
        connections: metricValue(t, 'feed_connections{server="channel"}'),
      });
      const atRest = breakdown(restText);
      let atPeak = atRest;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          try {
            const b = breakdown(await fetch(`${feed.operator}/metrics`, { signal: AbortSignal.timeout(5000) }).then((r) => r.text()));
            if (b.rssMb > atPeak.rssMb) atPeak = b;
          } catch {
            /* the main loop busy: the next sample */
          }
          await sleep(1000);
        }
      })();
      const started = Date.now();
      // 25 handshakes at a time (one at a time, behind the flood, took two minutes for 1,000).
      const readers: Awaited<ReturnType<typeof neverReader>>[] = [];
      const loadAtStart = loadavg()[0];
      for (let i = 0; i < CLIENTS; i += 25) readers.push(...(await Promise.all(Array.from({ length: Math.min(25, CLIENTS - i) }, (_, k) => neverReader(feed.channel, peerAddress(i + k, PEERS))))));
      const connectSeconds = (Date.now() - started) / 1000;
      say(`connected in ${connectSeconds.toFixed(1)} s; holding ${SECONDS} s`);
      await sleep(SECONDS * 1000);
      const { peak, lags, pollers: p, health: h, loop, flood: f } = await load.stop();
      sampling = false;
      await sampler;
      const l = loop ?? { ms: [], failures: 0 };
      const m = await fetch(`${feed.operator}/metrics`).then((r) => r.text());
      for (const r of readers) r.socket.destroy();
      const dropped = (reason: string) => metricValue(m, `feed_clients_dropped_total{reason="${reason}",server="channel"}`);
      const met = (ok: boolean) => (ok ? "met" : "missed");
      const over = (peak - rest) / 1e6;
      const healthP99 = percentile(h.ms, 99);
      const deltaP99 = percentile(lags, 99);
      emit({
        figure: "feed_abuse",
        pods: PODS,
        fullBytes: metricValue(first, 'feed_delta_full_bytes{target="mesh"}'),
        neverReaders: CLIENTS,
        peers: PEERS,
        seconds: SECONDS,
        runtime: RUNTIME,
        connectSeconds: ms(connectSeconds),
        rssRestMb: ms(rest / 1e6),
        rssPeakMb: ms(peak / 1e6),
        rssOverRestMb: ms((peak - rest) / 1e6),
        rssTargetMb: 100,
        rss: met(over <= 100),
        healthzP99Ms: ms(percentile(h.ms, 99)),
        healthzMaxMs: ms(Math.max(...h.ms)),
        healthzFailures: h.failures,
        healthzTargetMs: 100,
        healthz: met(healthP99 < 100),
        operatorHealthzP99Ms: ms(percentile(l.ms, 99)),
        operatorHealthzMaxMs: ms(Math.max(...l.ms)),
        deltas: lags.length,
        deltaP50Ms: ms(percentile(lags, 50)),
        deltaP99Ms: ms(percentile(lags, 99)),
        deltaTargetMs: 1000,
        delta: met(lags.length > 0 && deltaP99 < 1000),
        pollerErrors: p.reduce((s, x) => s + x.errors, 0),
        pollerLastError: p.map((x) => x.lastError).find((e) => e !== "") ?? "",
        floodAnswers: f.answers,
        floodErrors: f.errors,
        droppedWriteTimeout: dropped("write_timeout"),
        droppedBufferBudget: dropped("buffer_budget"),
        droppedUnsentBytes: dropped("unsent_bytes"),
        droppedStalled: dropped("stalled"),
        refusedPerCaller: metricValue(m, 'feed_connections_refused_total{reason="per_caller",server="channel"}'),
        refusedPerPeer: metricValue(m, 'feed_connections_refused_total{reason="per_peer",server="channel"}'),
        versions: metricValue(m, 'feed_delta_version{target="mesh"}'),
        fullBuilds: metricValue(m, 'feed_delta_full_builds{target="mesh"}'),
        atRest,
        atPeak,
        loadAverageAtStart: +loadAtStart.toFixed(1),
        loadAverageAtEnd: +loadavg()[0].toFixed(1),
      });
    } finally {
      await feed.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { pods: { type: "string" }, clients: { type: "string" }, peers: { type: "string" }, seconds: { type: "string" }, runtime: { type: "string" } } });
  const runtime = values.runtime ?? ABUSE_DEFAULTS.runtime;
  if (runtime !== "chart" && runtime !== "node-defaults") throw new Error(`--runtime: expected chart or node-defaults, got ${runtime}`);
  const number = (v: string | undefined, fallback: number) => (v === undefined ? fallback : Number(v));
  await abuseBench({
    pods: number(values.pods, ABUSE_DEFAULTS.pods),
    clients: number(values.clients, ABUSE_DEFAULTS.clients),
    peers: number(values.peers, ABUSE_DEFAULTS.peers),
    seconds: number(values.seconds, ABUSE_DEFAULTS.seconds),
    runtime,
  });
}

// The feed under abuse (feed/docs/server-limits.md): the real feed as its own process, its mesh
// from files (default 20,000 pods with long service-account names: a ~5 MB full message, more than the
// kernel's socket buffers take for a client that does not read), a new
// version every 250 ms, and for `--seconds` (default 30) at once:
//   - `--clients` (default 1,000) TLS clients that ask for a full message and never read;
//   - a flood of epoch=0 polls (8 kept-alive connections asking as fast as they are answered);
//   - 20 honest long pollers (the filters' poll), each delta's lag timed from the change;
//   - /healthz probed every 50 ms on the health worker's port and on the operator port (the
//     feed's own event loop: how long it blocks).
// Figures (one JSON line, bench/emit.ts) against the targets: RSS peak vs resting + 100 MB,
// /healthz p99 vs 100 ms, honest pollers' delta p99 vs 1 s. Default limits, except where a flag
// says. Run inside the netns:
//   bash scripts/in-netns.sh node --import tsx bench/feed/abuse.ts [--pods=N] [--clients=N] [--seconds=N]
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { emit } from "../emit.js";
import { metricValue, neverReader, percentile, rssOf, startAbuseLoad, startFeedProcess, writeMesh } from "../../tests/support/feed_abuse.js";
import { REPO_ROOT } from "../../tests/support/paths.js";

const { values } = parseArgs({ options: { pods: { type: "string" }, clients: { type: "string" }, seconds: { type: "string" } } });
const PODS = Number(values.pods ?? 20_000);
const CLIENTS = Number(values.clients ?? 1000);
const SECONDS = Number(values.seconds ?? 30);
const say = (line: string) => console.error(`${new Date().toISOString()} abuse: ${line}`);

export async function abuseBench(): Promise<void> {
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "bench-abuse-"));
  try {
    writeMesh(join(dir, "mesh"), PODS);
    say(`${PODS} pods written; starting the feed`);
    const feed = await startFeedProcess(dir, join(dir, "mesh"), { channel: 19443, operator: 19090, health: 19091 });
    try {
      const pid = feed.child.pid ?? 0;
      const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
      // Rest: one full message built (the model's own cost), then a moment to settle.
      const first = await fetch(`${feed.operator}/metrics`).then((r) => r.text());
      await sleep(2000);
      const rest = rssOf(pid);
      say(`ready, RSS ${(rest / 1e6).toFixed(0)} MB; connecting ${CLIENTS} never-readers`);
      const load = startAbuseLoad(feed, join(dir, "mesh"), rest, { probeOperator: true });
      const started = Date.now();
      // 25 handshakes at a time (one at a time, behind the flood, took two minutes for 1,000).
      const readers: Awaited<ReturnType<typeof neverReader>>[] = [];
      for (let i = 0; i < CLIENTS; i += 25) readers.push(...(await Promise.all(Array.from({ length: Math.min(25, CLIENTS - i) }, () => neverReader(feed.channel)))));
      const connectSeconds = (Date.now() - started) / 1000;
      say(`connected in ${connectSeconds.toFixed(1)} s; holding ${SECONDS} s`);
      await sleep(SECONDS * 1000);
      const { peak, lags, pollers: p, health: h, loop, flood: f } = await load.stop();
      const l = loop ?? { ms: [], failures: 0 };
      const m = await fetch(`${feed.operator}/metrics`).then((r) => r.text());
      for (const r of readers) r.socket.destroy();
      const dropped = (reason: string) => metricValue(m, `feed_clients_dropped_total{reason="${reason}",server="channel"}`);
      const ms = (v: number) => +v.toFixed(1);
      emit({
        figure: "feed_abuse",
        pods: PODS,
        fullBytes: metricValue(first, 'feed_delta_full_bytes{target="mesh"}'),
        neverReaders: CLIENTS,
        seconds: SECONDS,
        connectSeconds: ms(connectSeconds),
        rssRestMb: ms(rest / 1e6),
        rssPeakMb: ms(peak / 1e6),
        rssOverRestMb: ms((peak - rest) / 1e6),
        rssTargetMb: 100,
        healthzP99Ms: ms(percentile(h.ms, 99)),
        healthzMaxMs: ms(Math.max(...h.ms)),
        healthzFailures: h.failures,
        healthzTargetMs: 100,
        operatorHealthzP99Ms: ms(percentile(l.ms, 99)),
        operatorHealthzMaxMs: ms(Math.max(...l.ms)),
        deltas: lags.length,
        deltaP50Ms: ms(percentile(lags, 50)),
        deltaP99Ms: ms(percentile(lags, 99)),
        deltaTargetMs: 1000,
        pollerErrors: p.reduce((s, x) => s + x.errors, 0),
        pollerLastError: p.map((x) => x.lastError).find((e) => e !== "") ?? "",
        floodAnswers: f.answers,
        floodErrors: f.errors,
        droppedWriteTimeout: dropped("write_timeout"),
        droppedBufferBudget: dropped("buffer_budget"),
        droppedUnsentBytes: dropped("unsent_bytes"),
        refusedPerCaller: metricValue(m, 'feed_connections_refused_total{reason="per_caller",server="channel"}'),
        versions: metricValue(m, 'feed_delta_version{target="mesh"}'),
        fullBuilds: metricValue(m, 'feed_delta_full_builds{target="mesh"}'),
      });
    } finally {
      await feed.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await abuseBench();

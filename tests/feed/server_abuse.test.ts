// The whole attack against the real feed as its own process (feed/docs/server-limits.md):
// 20,000 pods, a new version every 250 ms, 300 clients that ask for a full message and never
// read, a flood of epoch=0 polls and 20 honest long pollers at once, for 20 s. The feed's RSS
// stays within its resting RSS + 200 MB (derived below; the bench measures 1,000 clients against
// the target of + 100 MB), the honest pollers get their deltas, /healthz (the health worker) answers
// every probe, the never-readers are dropped and counted, and full messages are built at most
// once per version however many callers ask. Timing bounds here are generous on purpose (a
// loaded 2-core machine); the figures are the bench's (bench/feed/abuse.ts).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { metricValue, neverReader, peerAddress, percentile, restingRss, startAbuseLoad, startFeedProcess, writeMesh, type FeedProcess } from "../support/feed_abuse.js";
import { bundleFeed, chartRuntime, jemallocPin } from "../support/feed_runtime.js";
import { REPO_ROOT } from "../support/paths.js";
import { sleep } from "./harness.js";

describe("the feed under a flood of never-reading clients and epoch=0 polls", () => {
  const NEVER_READERS = 300;
  const SECONDS = 20;
  let dir: string;
  let feed: FeedProcess;
  let runtime: ReturnType<typeof chartRuntime>;
  let result: {
    rest: number;
    peak: number;
    closed: number;
    health: { ms: number[]; failures: number };
    lags: number[];
    pollers: Array<{ deltas: number; errors: number }>;
    flood: { answers: number; errors: number };
    metrics: string;
    allocator: { mapped: string[]; threads: string[] };
  };

  /** The allocator in the feed's process: the files named libjemalloc* it maps, and its threads' names. */
  const allocatorOf = (pid: number) => ({
    mapped: [...new Set(readFileSync(`/proc/${pid}/maps`, "utf8").split("\n").map((line) => line.split(/\s+/).slice(5).join(" ")).filter((file) => file.includes("libjemalloc")))],
    threads: readdirSync(`/proc/${pid}/task`).map((task) => readFileSync(`/proc/${pid}/task/${task}/comm`, "utf8").trim()),
  });

  before(async () => {
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "server-abuse-"));
    writeMesh(join(dir, "mesh"), 20_000);
    // The feed as a deployment runs it: the image's bundle under the chart's Node settings (the
    // sources through tsx, under Node's defaults, rest ~450 MB higher and move more).
    bundleFeed();
    // A short write timeout and buffer budget: the attack has to be dropped within the run.
    runtime = chartRuntime();
    feed = await startFeedProcess(dir, join(dir, "mesh"), { channel: 19443, operator: 19090, health: 19091 }, { bundle: true, runtime, channelLimits: { writeTimeoutMs: 3000, maxBufferedBytes: 16 << 20 } });
    await fetch(`${feed.operator}/metrics`);
    const rest = await restingRss(feed.child.pid ?? 0);
    const allocator = allocatorOf(feed.child.pid ?? 0);
    const load = startAbuseLoad(feed, join(dir, "mesh"), rest);
    const readers = [];
    // 25 per source address (12 peers), under the cap per peer: every one is admitted.
    for (let i = 0; i < NEVER_READERS; i++) readers.push(await neverReader(feed.channel, peerAddress(i, 12)));
    await sleep(SECONDS * 1000);
    const { peak, lags, pollers: p, health: h, flood: f } = await load.stop();
    const metrics = await (await fetch(`${feed.operator}/metrics`)).text();
    // A paused socket does not see its end: read what the kernel holds, then a dropped one closes.
    let closed = 0;
    for (const r of readers) {
      void r.closed.then(() => closed++);
      r.socket.on("data", () => undefined);
      r.socket.resume();
    }
    await sleep(3000);
    for (const r of readers) r.socket.destroy();
    result = { rest, peak, closed, health: h, lags, pollers: p, flood: f, metrics, allocator };
    console.log(
      `abuse: rss ${(rest / 1e6).toFixed(0)} -> peak ${(peak / 1e6).toFixed(0)} MB; never-readers dropped ${closed}/${NEVER_READERS}; ` +
        `healthz p99 ${percentile(h.ms, 99).toFixed(1)} ms (${h.ms.length} ok, ${h.failures} failed); ` +
        `deltas ${lags.length}, lag p50 ${percentile(lags, 50)} p99 ${percentile(lags, 99)} ms; flood answers ${f.answers}`,
    );
  });

  after(async () => {
    await feed?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // The bound: the 16 MiB budget, the newest full messages (~5 MB each), ~190 KB of TLS write
  // state for each stalled connection, and the native memory that comes and goes outside V8's
  // heap and Buffers (+30 to +115 MB over the bench's runs, bench/feed/README.md "Abuse"). The
  // feed runs as deployed (bundle, chart's Node settings); measured +76 MB. This is above the
  // + 100 MB target for 1,000 clients, which the bench reports met or missed.
  // Before bodies went out in slices, each never-reader held its own encrypted copy of the
  // message (measured: 300 of a 1.8 MB message, +400 MB, none dropped).
  // ld.so only warns when a preload fails and the feed then runs on glibc's malloc: the figures
  // below would not be the image's. The background threads exist only when jemalloc has read
  // the chart's MALLOC_CONF (background_thread:true).
  it("the feed runs on the image's allocator: the pinned jemalloc mapped, with the chart's MALLOC_CONF in force", () => {
    const version = jemallocPin().split("=")[1];
    assert.deepEqual(result.allocator.mapped, [realpathSync(runtime.env.LD_PRELOAD)]);
    assert.ok(result.allocator.mapped[0].includes(`/jemalloc/${version}/`), `${result.allocator.mapped[0]} is not the unpacked libjemalloc2 ${version}`);
    assert.match(runtime.env.MALLOC_CONF, /background_thread:true/);
    assert.ok(result.allocator.threads.includes("jemalloc_bg_thd"), `no jemalloc background thread among ${result.allocator.threads.join(", ")}`);
  });

  it("the feed's RSS stays within its resting RSS + 200 MB", () => {
    assert.ok(result.peak - result.rest <= 200e6, `rss ${result.rest} -> ${result.peak}`);
  });

  it("every honest poller keeps getting its deltas (lag p99 under 5 s, a generous bound)", () => {
    for (const [i, p] of result.pollers.entries()) assert.ok(p.deltas >= 5, `poller ${i}: ${p.deltas} deltas, ${p.errors} errors`);
    assert.ok(percentile(result.lags, 99) < 5000, `lag p99 ${percentile(result.lags, 99)} ms`);
  });

  it("/healthz (the health worker) answers every probe, within 2 s each", () => {
    assert.equal(result.health.failures, 0);
    assert.ok(result.health.ms.length >= 50, `${result.health.ms.length} probes`);
    assert.ok(Math.max(...result.health.ms) < 2000, `slowest ${Math.max(...result.health.ms)} ms`);
  });

  it("the never-readers are dropped (stalled, write timeout or buffer budget) and counted", () => {
    const dropped = ["stalled", "write_timeout", "buffer_budget"].reduce((s, reason) => s + metricValue(result.metrics, `feed_clients_dropped_total{reason="${reason}",server="channel"}`), 0);
    assert.ok(result.closed >= NEVER_READERS * 0.9, `${result.closed} of ${NEVER_READERS} dropped by the feed`);
    assert.ok(dropped >= result.closed, `counted ${dropped}, closed ${result.closed}`);
  });

  it("the flood is answered, and full messages are built at most once per version", () => {
    assert.ok(result.flood.answers > 0);
    const builds = metricValue(result.metrics, 'feed_delta_full_builds{target="mesh"}');
    const version = metricValue(result.metrics, 'feed_delta_version{target="mesh"}');
    assert.ok(builds <= version, `${builds} full builds for ${version} versions (flood: ${result.flood.answers} full answers)`);
  });
});

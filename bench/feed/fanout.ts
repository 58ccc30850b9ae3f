// Fan-out at scale: thousands of pollers (fanout_poller.ts: the filters' feed client without
// the filter, real long polls over the feed's mutual-TLS channel, in a few worker processes)
// against the real feed process, its mesh in a real kube-apiserver (or the N static pods in the
// feed's file source, fanout_mesh.ts) and every measured change an API write. Per case:
//   fanout_cold         feed ready → every poller holds the feed's version (first full messages)
//   fanout_propagation  `rate` pod changes per second for `churnSeconds`: API write → every
//                       poller holds a version carrying it, p50 / p99 / max; feed CPU, bytes
//   fanout_restart      the feed stopped (SIGTERM) and started again: stop → ready, and → every
//                       poller holds the restarted feed's version; bytes sent, full messages,
//                       feed CPU, clients the feed dropped
// Each figure carries the load average (the machine is shared) and met/missed for its target.
// Run inside the bench's network namespace:
//   bash scripts/in-netns.sh node --import tsx bench/feed/fanout.ts [--quick]
//   ... bench/feed/fanout.ts --pods=N [--pollers=N] [--base=files|apiserver] [--rate=N] [--seconds=N] [--churn-pods=N] [--spread=S] [--restart-wait=S] [--restart-missed=K] [--client-cpus=LIST|none] [--feed-runtime=chart|tsx] [--observers=8]
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { emit } from "../emit.js";
import { cpuMicros, rssMb } from "../envoy/proc.js";
import { startKubeCluster } from "../../tests/support/kube.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { FEED_IDENTITY, feedChannelFiles, meshCert } from "../../tests/support/feed_tls.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { BulkWriter } from "./writer.js";
import { PollerFleet } from "./fanout_fleet.js";
import { ChurnObserver, OBSERVERS } from "./fanout_observer.js";
import { clientCpus, pinSelf } from "./fanout_cpus.js";
import { FeedProcess, seriesValue, TARGET, writeFeedConfig, type FeedCluster, type FeedRuntime } from "./fanout_feed.js";
import { churnIp, churnPod, CHURN_NAMESPACE, createChurnPods, populateApiserver, writeMeshFiles } from "./fanout_mesh.js";
import { inFlight, now } from "./fanout_poller.js";
import type { PollerCounters } from "./fanout_poller.js";

export interface FanoutCase {
  pods: number;
  pollers: number;
  /** Where the N static pods live (the churned pods are always in the API server). */
  base: "apiserver" | "files";
  /** Pod changes per second (API writes) and for how long. */
  rate: number;
  churnSeconds: number;
  /** Pods the churn writes cycle through (default 1,000: at 100 writes/s each is written every 10 s). */
  churnPods?: number;
  /**
   * The pollers' first polls spread over this many seconds (default 2: sidecars starting
   * together). At 100k pods a full message each at once is more than the feed delivers within its
   * write timeout (README, measured): there the bench starts them as a rollout would, over minutes.
   */
  spreadSeconds?: number;
  /** How the feed runs (default `chart`: as its image does; fanout_feed.ts). */
  feedRuntime?: FeedRuntime;
  /** How long to wait for every poller after the restarted feed is ready (default 600 s). */
  restartWaitSeconds?: number;
  /**
   * Churn writes made while the feed is stopped (default 0: the restarted feed serves the content
   * every poller holds, a rebased no-change each). k > 0: every poller missed k changes and is
   * asked for its bucket digests, then repaired.
   */
  restartMissed?: number;
  /** Observers naming the version that first carried each churn write (fanout_observer.ts; default OBSERVERS). */
  observers?: number;
  /** The clients' CPUs (fanout_cpus.ts): undefined = every CPU but CPU 0; "none" = no split. */
  clientCpus?: string;
}

/** The targets. */
export const TARGETS = { restartSeconds: 10, propagationP99Ms: 1000 };
const WAIT_SECONDS = 25;
const POLLERS_PER_PROCESS = 500;
/** The churn's writes in flight at most (a writer slower than the rate must not pile up). */
const WRITES_IN_FLIGHT = 32;
/** The feed's counts of clients it dropped for not taking an answer in time, and of failed TLS handshakes (feed/docs/server-limits.md). */
const WRITE_TIMEOUTS = ["feed_clients_dropped_total", { server: "channel", reason: "write_timeout" }] as const;
const HANDSHAKES_FAILED = ["feed_channel_refused_total", { reason: "handshake" }] as const;

const load = () => +loadavg()[0].toFixed(2);
const say = (line: string) => console.error(`${new Date().toISOString()} fanout: ${line}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const round = (v: number, digits = 1) => +v.toFixed(digits);
const met = (ok: boolean) => (ok ? "met" : "missed");

function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

function diff(a: PollerCounters, b: PollerCounters): PollerCounters {
  return Object.fromEntries(Object.keys(a).map((k) => [k, b[k as keyof PollerCounters] - a[k as keyof PollerCounters]])) as unknown as PollerCounters;
}

/**
 * Waits until every poller holds the feed's current position (its own metrics say which, so no
 * poller, not even the observer, has to get a full message first) from an answer taken at or
 * after `after`; the time the last one did (ms, now() clock), NaN past `timeoutMs`.
 */
async function converged(fleet: PollerFleet, feed: FeedProcess, pollers: number, after: number, timeoutMs: number): Promise<{ at: number; holding: number; times: number[]; sentAts: number[] }> {
  const started = performance.now();
  let said = started;
  // The position read after one loop's check is the next loop's before (one /metrics read per
  // loop: each costs the feed CPU, fanout_feed.ts): nothing was published between that read and
  // the read after this loop's check when the two agree, so the check was against the current one.
  let before = await feed.position();
  for (;;) {
    const { epoch, version } = before;
    const h = epoch === 0 ? { holding: 0, latest: 0, times: [], sentAts: [] } : await fleet.holding(epoch, version, after);
    const still = await feed.position();
    before = still;
    if (h.holding === pollers && epoch === still.epoch && version === still.version) return { at: h.latest, holding: h.holding, times: h.times, sentAts: h.sentAts };
    if (performance.now() - started > timeoutMs) return { at: NaN, holding: h.holding, times: h.times, sentAts: h.sentAts };
    if (performance.now() - said > 15_000) {
      say(`${h.holding} of ${pollers} pollers hold ${epoch}/${version}`);
      said = performance.now();
    }
    await sleep(250);
  }
}

export async function fanoutCase(c: FanoutCase): Promise<void> {
  await writeDemoCerts();
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "bench-fanout-"));
  const clients = clientCpus(c.clientCpus);
  const base = { pods: c.pods, pollers: c.pollers, base: c.base, clientCpus: clients ?? "shared", feedRuntime: c.feedRuntime ?? "chart" };
  say(`${c.pods} pods (${c.base}), ${c.pollers} pollers; the clients on CPUs ${clients ?? "shared with the feed"}; load ${load()}`);
  const cluster = await startKubeCluster({ name: `bench-fanout-${c.pods}`, apiserverArgs: ["--max-requests-inflight=800", "--max-mutating-requests-inflight=400"] });
  // After the API server and etcd started (they stay on every CPU: the control plane, as the
  // feed, is not where its clients run), before the pollers' workers and the feed (the feed is
  // spawned unpinned); given back after the case: benches after this one run in this process.
  const ownCpus = clients ? pinSelf(clients) : undefined;
  const writer = await BulkWriter.forCluster(cluster, 64);
  let feed: FeedProcess | undefined;
  let fleet: PollerFleet | undefined;
  let observer: ChurnObserver | undefined;
  try {
    const clusters: FeedCluster[] = [{ id: "cluster1", kubeconfig: cluster.kubeconfigPath }];
    const seconds = c.base === "files" ? writeMeshFiles(join(dir, "mesh"), c.pods) : await populateApiserver(cluster, writer, c.pods);
    if (c.base === "files") clusters.push({ id: "static", files: join(dir, "mesh") });
    await createChurnPods(cluster, writer, c.churnPods ?? 1000);
    emit({ figure: "fanout_populate", ...base, seconds: round(seconds), podsPerSecond: Math.round(c.pods / seconds), load1: load() });
    const config = writeFeedConfig(dir, clusters);
    const log = join(dir, "feed.log");
    // On the CPUs the driver had before the clients' pin: every one.
    feed = await FeedProcess.start(config, log, 30 * 60_000, ownCpus, c.feedRuntime);
    say(`feed ready in ${round((feed.readyAt - feed.spawnedAt) / 1000)} s; starting the pollers`);
    observer = new ChurnObserver(feed.channel, TARGET, (a) => a.startsWith("172."), c.observers ?? OBSERVERS);
    const id = meshCert("sidecar");
    fleet = await PollerFleet.start(Math.max(1, Math.ceil(c.pollers / POLLERS_PER_PROCESS)), {
      channel: feed.channel,
      target: TARGET,
      pollers: c.pollers,
      waitSeconds: WAIT_SECONDS,
      spreadMs: (c.spreadSeconds ?? 2) * 1000,
      certFile: id.certPath,
      keyFile: id.keyPath,
      caFile: feedChannelFiles().caFile,
      feedIdentity: FEED_IDENTITY,
    });
    // From the pollers' start (their processes are up), spread over `spreadSeconds`.
    const pollersStarted = now();
    const feedCpuAtStart = cpuMicros(feed.pid);
    const cold = await converged(fleet, feed, c.pollers, 0, 10 * 60_000);
    const k = await fleet.counters();
    emit({
      figure: "fanout_cold",
      ...base,
      feedStartSeconds: round((feed.readyAt - feed.spawnedAt) / 1000, 2),
      spreadSeconds: c.spreadSeconds ?? 2,
      seconds: round((cold.at - pollersStarted) / 1000, 2),
      holding: cold.holding,
      fullMessages: k.full,
      fullMessageBytes: k.full ? Math.round(k.fullBytes / k.full) : 0,
      bytesSent: k.bytes,
      failures: k.unavailable + k.refused,
      feedCpuSeconds: round((cpuMicros(feed.pid) - feedCpuAtStart) / 1e6, 2),
      pollerCpuSeconds: round(fleet.cpuMicros() / 1e6, 2),
      clientsDropped: await feed.metric(...WRITE_TIMEOUTS),
      handshakesFailed: await feed.metric(...HANDSHAKES_FAILED),
      feedRssMb: round(rssMb(feed.pid)),
      load1: load(),
    });
    await churn(c, base, feed, fleet, observer, writer, controlPlaneProcesses(cluster.dir));
    // The restart is the pollers' alone (the observer would be one more full message).
    await observer.stop();
    await restart(c, base, feed, fleet, config, log, (next) => (feed = next), writer, ownCpus);
  } finally {
    await observer?.stop();
    await fleet?.stop();
    await feed?.stop();
    writer.close();
    await cluster.stop();
    if (ownCpus !== undefined) pinSelf(ownCpus);
  }
}

/**
 * `rate` API writes a second, each a churn pod's new address; → every poller holding it. A write
 * whose address no delta ever carried was overwritten (the same pod written again) before the
 * feed published it: it is counted `superseded` and timed by the version that carried its
 * pod's next address (what a poller needs to be past it).
 */
async function churn(c: FanoutCase, base: object, feed: FeedProcess, fleet: PollerFleet, observer: ChurnObserver, writer: BulkWriter, controlPlane: ControlPlaneProcess[]): Promise<void> {
  const writes = Math.round(c.rate * c.churnSeconds);
  const churnPods = c.churnPods ?? 1000;
  const writtenAt = new Float64Array(writes);
  const ackedAt = new Float64Array(writes);
  // The writes' connections open before the clock starts, not in its first second (writer.ts),
  // and before the CPU figures are taken.
  await writer.warm(WRITES_IN_FLIGHT, CHURN_NAMESPACE);
  const before = await fleet.counters();
  const feedBefore = await feedPath(feed);
  const feedCpu = cpuMicros(feed.pid);
  const pollerCpu = fleet.cpuMicros();
  const controlPlaneCpu = controlPlane.map((p) => cpuMicros(p.pid));
  const { epoch } = await feed.position();
  const t0 = now();
  const inFlight = new Set<Promise<void>>();
  let failed = 0;
  say(`churn: ${writes} writes at ${c.rate}/s`);
  for (let i = 0; i < writes; i++) {
    const w = churnPods + i;
    const due = t0 + (i * 1000) / c.rate;
    if (due > now()) await sleep(due - now());
    // A writer that falls behind (the API server is slower than the rate) must not pile up.
    while (inFlight.size >= WRITES_IN_FLIGHT) await Promise.race(inFlight);
    writtenAt[i] = now();
    const p: Promise<void> = writer
      .setPodStatus(CHURN_NAMESPACE, churnPod(w, churnPods), { podIP: churnIp(w) })
      .then(() => void (ackedAt[i] = now()), () => void failed++)
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  }
  await Promise.all(inFlight);
  const writeSeconds = (now() - t0) / 1000;
  // The feed's event-loop delay over the writes (prom-client's figures since the read before them).
  const atWritesEnd = await feedPath(feed);
  // The last write of every churn pod carried (as the observer saw it), then every poller at the feed's version.
  const lastWrites = Array.from({ length: Math.min(writes, churnPods) }, (_, k) => churnPods + writes - 1 - k);
  const seenBy = performance.now();
  while (!lastWrites.every((w) => observer.carried.has(churnIp(w))) && performance.now() - seenBy < 60_000) await sleep(100);
  const end = await converged(fleet, feed, c.pollers, t0, 120_000);
  const wall = ((Number.isNaN(end.at) ? now() : end.at) - t0) / 1000;
  const cpuSeconds = (cpuMicros(feed.pid) - feedCpu) / 1e6;
  const pollerCpuSeconds = (fleet.cpuMicros() - pollerCpu) / 1e6;
  const controlPlaneCores = Object.fromEntries(controlPlane.map((p, i) => [`${p.name}Cores`, round((cpuMicros(p.pid) - controlPlaneCpu[i]) / 1e6 / wall, 2)]));
  const during = diff(before, await fleet.counters());
  const feedAfter = await feedPath(feed);
  const mean = (sum: number, count: number) => (count > 0 ? round((1000 * sum) / count) : null);
  // Each write's carrying version, as all the observers saw it and as the first one alone did.
  const all = carryingVersions(observer.carried, writes, churnPods);
  const one = carryingVersions(observer.carriedByOne, writes, churnPods);
  const versions = [...new Set([...all.carried, ...one.carried].filter((x) => x !== undefined).map((x) => x.version))].sort((a, b) => a - b);
  const reach = await fleet.reach(epoch, versions, t0);
  const byVersion = new Map(versions.map((v, i) => [v, reach.latest[i]]));
  const byVersionModelled = new Map(versions.map((v, i) => [v, reach.latestModelled[i]]));
  const api: number[] = [];
  for (let i = 0; i < writes; i++) if (ackedAt[i] > 0) api.push(ackedAt[i] - writtenAt[i]);
  const { every, fromAck, first, modelled, notCarried, notEveryPoller } = timings(all.carried, byVersion, byVersionModelled, writtenAt, ackedAt);
  const alone = timings(one.carried, byVersion, byVersionModelled, writtenAt, ackedAt);
  const superseded = all.superseded;
  // Each write → every poller holding it (undefined: not carried, or not every poller got it).
  const everyOf = all.carried.map((x, i) => {
    const t = x ? byVersion.get(x.version) : undefined;
    return t === null || t === undefined ? undefined : t - writtenAt[i];
  });
  // FANOUT_DUMP=<file>: one JSON line per write (ms after the churn began, its API answer, the
  // first observer and every poller holding it), to find where a tail sits in the churn.
  if (process.env.FANOUT_DUMP) {
    const rows = all.carried.map((x, i) => JSON.stringify({ i, at: writtenAt[i] - t0, api: round(ackedAt[i] - writtenAt[i]), v: x?.version, first: x ? round(x.at - writtenAt[i]) : null, every: everyOf[i] === undefined ? null : round(everyOf[i]) }));
    writeFileSync(process.env.FANOUT_DUMP, rows.join("\n") + "\n");
  }
  const p99 = percentile(every, 99);
  // The churn's onset (its first second: the first version wakes every held poll at once) apart
  // from the rest, where the polls already arrive spread over the feed's queue.
  const onset: number[] = [];
  const afterOnset: number[] = [];
  everyOf.forEach((ms, i) => {
    if (ms !== undefined) (writtenAt[i] - t0 < 1000 ? onset : afterOnset).push(ms);
  });
  emit({
    figure: "fanout_propagation",
    ...base,
    rate: c.rate,
    achievedRate: round(writes / writeSeconds),
    writes,
    writeErrors: failed,
    churnPods: churnPods,
    observers: c.observers ?? OBSERVERS,
    versions: versions.length,
    p50Ms: round(percentile(every, 50)),
    p99Ms: round(p99),
    maxMs: round(Math.max(...every)),
    firstSecondMaxMs: onset.length > 0 ? round(Math.max(...onset)) : null,
    afterFirstSecondP99Ms: afterOnset.length > 0 ? round(percentile(afterOnset, 99)) : null,
    apiWriteP50Ms: round(percentile(api, 50)),
    apiWriteP99Ms: round(percentile(api, 99)),
    fromAckP50Ms: round(percentile(fromAck, 50)),
    fromAckP99Ms: round(percentile(fromAck, 99)),
    modelledPollers: reach.modelled,
    modelledP50Ms: round(percentile(modelled, 50)),
    modelledP99Ms: round(percentile(modelled, 99)),
    firstPollerP50Ms: round(percentile(first, 50)),
    firstPollerP99Ms: round(percentile(first, 99)),
    oneObserverP50Ms: round(percentile(alone.every, 50)),
    oneObserverP99Ms: round(percentile(alone.every, 99)),
    superseded,
    notCarried,
    notEveryPoller,
    feedCores: round(cpuSeconds / wall, 2),
    pollerCores: round(pollerCpuSeconds / wall, 2),
    ...controlPlaneCores,
    answersPerSecond: Math.round((during.delta + during.noChange + during.full) / wall),
    bytesPerSecond: Math.round(during.bytes / wall),
    fullMessages: during.full,
    failures: during.unavailable + during.refused,
    feedRenders: feedAfter.renders - feedBefore.renders,
    feedRenderMeanMs: mean(feedAfter.renderSeconds - feedBefore.renderSeconds, feedAfter.renders - feedBefore.renders),
    feedCheckMeanMs: mean(feedAfter.checkSeconds - feedBefore.checkSeconds, feedAfter.checks - feedBefore.checks),
    feedSeenToPublishMeanMs: mean(feedAfter.seenToPublishSeconds - feedBefore.seenToPublishSeconds, feedAfter.published - feedBefore.published),
    // Versions whose oldest change waited in the feed longer than that (its histogram's buckets).
    feedPublishedOver100Ms: feedAfter.published - feedBefore.published - (feedAfter.publishedWithin100Ms - feedBefore.publishedWithin100Ms),
    feedPublishedOver250Ms: feedAfter.published - feedBefore.published - (feedAfter.publishedWithin250Ms - feedBefore.publishedWithin250Ms),
    feedLoopDelayP99Ms: round(atWritesEnd.loopDelayP99Ms),
    feedLoopDelayMaxMs: round(atWritesEnd.loopDelayMaxMs),
    feedGcShare: round((feedAfter.gcSeconds - feedBefore.gcSeconds) / wall, 3),
    feedGcMajor: feedAfter.gcMajor - feedBefore.gcMajor,
    feedGcMajorMeanMs: mean(feedAfter.gcMajorSeconds - feedBefore.gcMajorSeconds, feedAfter.gcMajor - feedBefore.gcMajor),
    feedGcPausesOver100Ms: feedAfter.gcPausesOver100Ms - feedBefore.gcPausesOver100Ms,
    target: `p99 < ${TARGETS.propagationP99Ms} ms: ${met(every.length > 0 && notCarried + notEveryPoller === 0 && p99 < TARGETS.propagationP99Ms)}`,
    load1: load(),
  });
}

type ControlPlaneProcess = { name: "apiserver" | "etcd"; pid: number };

/** The cluster's kube-apiserver and etcd (their command lines name the cluster's directory). */
function controlPlaneProcesses(clusterDir: string): ControlPlaneProcess[] {
  let pids: number[];
  try {
    pids = execFileSync("pgrep", ["-f", "--", clusterDir], { encoding: "utf8" }).split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
  const out: ControlPlaneProcess[] = [];
  for (const pid of pids) {
    let comm = "";
    try {
      comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    } catch {
      continue; // gone since pgrep listed it
    }
    if (comm === "kube-apiserver") out.push({ name: "apiserver", pid });
    if (comm === "etcd") out.push({ name: "etcd", pid });
  }
  return out;
}

type Carried = { version: number; at: number } | undefined;

/** Each churn write's carrying version (as `seen` names them): its own, else its pod's next write's (superseded). */
function carryingVersions(seen: Map<string, { version: number; at: number }>, writes: number, churnPods: number): { carried: Carried[]; superseded: number } {
  const carried: Carried[] = new Array(writes).fill(undefined);
  let superseded = 0;
  for (let i = writes - 1; i >= 0; i--) {
    const own = seen.get(churnIp(churnPods + i));
    const next = i + churnPods < writes ? carried[i + churnPods] : undefined;
    if (!own && next) superseded++;
    carried[i] = own ?? next;
  }
  return { carried, superseded };
}

/** Write → every poller (and the rest) for each write, given its carrying version and when the pollers reached each version. */
function timings(carried: Carried[], byVersion: Map<number, number | null>, byVersionModelled: Map<number, number | null>, writtenAt: Float64Array, ackedAt: Float64Array) {
  const modelled: number[] = [];
  const every: number[] = [];
  const fromAck: number[] = [];
  const first: number[] = [];
  let notCarried = 0;
  let notEveryPoller = 0;
  carried.forEach((x, i) => {
    if (!x) return void notCarried++;
    first.push(x.at - writtenAt[i]);
    const m = byVersionModelled.get(x.version);
    if (m !== null && m !== undefined) modelled.push(m - writtenAt[i]);
    const t = byVersion.get(x.version);
    if (t === null || t === undefined) notEveryPoller++;
    else {
      every.push(t - writtenAt[i]);
      if (ackedAt[i] > 0) fromAck.push(t - ackedAt[i]);
    }
  });
  return { every, fromAck, first, modelled, notCarried, notEveryPoller };
}

/**
 * The feed's own account of its delta path (its histograms' sums and counts): renders, the
 * filters' check of each version, and watch event seen → version published.
 */
async function feedPath(feed: FeedProcess): Promise<FeedPath> {
  // One read: each costs the feed a render of every series (see metricsText).
  const text = await feed.metricsText();
  const value = (name: string, labels: Record<string, string> = {}) => seriesValue(text, name, labels);
  const delta = { path: "delta" };
  const published = { target: TARGET, path: "delta" };
  const pauses = GC_KINDS.reduce((sum, kind) => sum + value("nodejs_gc_duration_seconds_count", { kind }), 0);
  const pausesWithin100Ms = GC_KINDS.reduce((sum, kind) => sum + value("nodejs_gc_duration_seconds_bucket", { kind, le: "0.1" }), 0);
  return {
    renders: value("feed_delta_render_seconds_count"),
    renderSeconds: value("feed_delta_render_seconds_sum"),
    checks: value("feed_check_seconds_count", delta),
    checkSeconds: value("feed_check_seconds_sum", delta),
    published: value("feed_propagation_seconds_count", published),
    seenToPublishSeconds: value("feed_propagation_seconds_sum", published),
    publishedWithin100Ms: value("feed_propagation_seconds_bucket", { ...published, le: "0.1" }),
    publishedWithin250Ms: value("feed_propagation_seconds_bucket", { ...published, le: "0.25" }),
    gcMajor: value("nodejs_gc_duration_seconds_count", { kind: "major" }),
    gcMajorSeconds: value("nodejs_gc_duration_seconds_sum", { kind: "major" }),
    gcSeconds: GC_KINDS.reduce((sum, kind) => sum + value("nodejs_gc_duration_seconds_sum", { kind }), 0),
    gcPausesOver100Ms: pauses - pausesWithin100Ms,
    // prom-client's event-loop figures cover the time since the previous read (it resets them).
    loopDelayMaxMs: 1000 * value("nodejs_eventloop_lag_max_seconds"),
    loopDelayP99Ms: 1000 * value("nodejs_eventloop_lag_p99_seconds"),
  };
}

const GC_KINDS = ["major", "minor", "incremental", "weakcb"];

type FeedPath = {
  renders: number;
  renderSeconds: number;
  checks: number;
  checkSeconds: number;
  published: number;
  seenToPublishSeconds: number;
  publishedWithin100Ms: number;
  publishedWithin250Ms: number;
  gcMajor: number;
  gcMajorSeconds: number;
  gcSeconds: number;
  gcPausesOver100Ms: number;
  loopDelayMaxMs: number;
  loopDelayP99Ms: number;
};

/** The feed stopped and started again; → every poller holding the restarted feed's version. */
async function restart(c: FanoutCase, base: object, feed: FeedProcess, fleet: PollerFleet, config: string, log: string, started: (next: FeedProcess) => void, writer: BulkWriter, feedCpus: string | undefined): Promise<void> {
  const before = await fleet.counters();
  const pollerCpu = fleet.cpuMicros();
  const stoppedAt = now();
  const stoppedPerf = performance.now();
  say("restart: stopping the feed");
  await feed.stop();
  // Changes the pollers miss: new addresses for churn pods, past every churn write's (unique).
  const churnPods = c.churnPods ?? 1000;
  const missed = c.restartMissed ?? 0;
  let missedErrors = 0;
  await Promise.all(
    Array.from({ length: missed }, (_, i) => {
      const w = churnPods + Math.round(c.rate * c.churnSeconds) + i;
      return writer.setPodStatus(CHURN_NAMESPACE, churnPod(w, churnPods), { podIP: churnIp(w) }).catch(() => void missedErrors++);
    }),
  );
  const next = await FeedProcess.start(config, log, 30 * 60_000, feedCpus, c.feedRuntime);
  started(next);
  const readySeconds = (next.readyAt - stoppedPerf) / 1000;
  const readyAt = stoppedAt + (next.readyAt - stoppedPerf);
  const cpuAtReady = cpuMicros(next.pid);
  say(`restart: ready after ${round(readySeconds)} s`);
  const atReady = await fleet.counters();
  const end = await converged(fleet, next, c.pollers, stoppedAt, (c.restartWaitSeconds ?? 600) * 1000);
  const after = diff(before, await fleet.counters());
  const fromReady = (end.at - readyAt) / 1000;
  emit({
    figure: "fanout_restart",
    ...base,
    missedChanges: missed,
    missedWriteErrors: missedErrors,
    stopToReadySeconds: round(readySeconds, 2),
    readyToEveryPollerSeconds: round(fromReady, 2),
    stopToEveryPollerSeconds: round((end.at - stoppedAt) / 1000, 2),
    holding: end.holding,
    fullMessages: after.full,
    noChange: after.noChange,
    rebased: after.rebased,
    askBuckets: after.askBuckets,
    repairs: after.repair,
    repairBytes: after.repairBytes,
    postedBytes: after.postedBytes,
    deltas: after.delta,
    bytesSent: after.bytes,
    bytesPerPoller: Math.round(after.bytes / c.pollers),
    failures: after.unavailable + after.refused,
    // The pollers' failed attempts from the feed's ready on (each costs its poller a backoff),
    // and when the pollers got there: with every retry within 5 s of ready, p90 < 5 s.
    failuresAfterReady: after.unavailable + after.refused - (atReady.unavailable + atReady.refused - before.unavailable - before.refused),
    readyToPollerP50Seconds: round((percentile(end.times, 50) - readyAt) / 1000, 2),
    readyToPollerP90Seconds: round((percentile(end.times, 90) - readyAt) / 1000, 2),
    // Of those answers: ready → the request sent (the clients' retry), and sent → answered.
    readyToRequestP50Seconds: round((percentile(end.sentAts, 50) - readyAt) / 1000, 2),
    readyToRequestP90Seconds: round((percentile(end.sentAts, 90) - readyAt) / 1000, 2),
    requestToAnswerP50Ms: round(percentile(end.times.map((t, i) => t - end.sentAts[i]), 50)),
    requestToAnswerP90Ms: round(percentile(end.times.map((t, i) => t - end.sentAts[i]), 90)),
    // Pollers with a request out when the feed was told to stop: each is answered a no-change
    // (the stopping feed lets its held polls go) or fails (reset, or the next poll refused).
    inFlightAtStop: inFlight(before),
    feedCpuToReadySeconds: round(cpuAtReady / 1e6, 2),
    feedCpuReadyToConvergedSeconds: round((cpuMicros(next.pid) - cpuAtReady) / 1e6, 2),
    pollerCpuSeconds: round((fleet.cpuMicros() - pollerCpu) / 1e6, 2),
    clientsDropped: await next.metric(...WRITE_TIMEOUTS),
    handshakesFailed: await next.metric(...HANDSHAKES_FAILED),
    feedRebased: await next.metric("feed_delta_requests_total", { target: TARGET, kind: "rebased" }),
    feedAskBuckets: await next.metric("feed_delta_requests_total", { target: TARGET, kind: "ask_buckets" }),
    feedRepairs: await next.metric("feed_delta_requests_total", { target: TARGET, kind: "repair" }),
    feedRssMb: round(rssMb(next.pid)),
    target: `ready → every poller < ${TARGETS.restartSeconds} s: ${met(end.holding === c.pollers && fromReady < TARGETS.restartSeconds)}`,
    load1: load(),
  });
}

export const QUICK: FanoutCase[] = [{ pods: 10_000, pollers: 200, base: "apiserver", rate: 100, churnSeconds: 10 }];
export const FULL: FanoutCase[] = [
  { pods: 10_000, pollers: 2000, base: "apiserver", rate: 100, churnSeconds: 30 },
  { pods: 100_000, pollers: 2000, base: "files", rate: 100, churnSeconds: 30, spreadSeconds: 480 },
];

export async function fanoutBench({ quick }: { quick: boolean }): Promise<void> {
  for (const c of quick ? QUICK : FULL) await fanoutCase(c);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { quick: { type: "boolean" }, pods: { type: "string" }, pollers: { type: "string" }, base: { type: "string" }, rate: { type: "string" }, seconds: { type: "string" }, "churn-pods": { type: "string" }, spread: { type: "string" }, "restart-wait": { type: "string" }, "restart-missed": { type: "string" }, "client-cpus": { type: "string" }, "feed-runtime": { type: "string" }, observers: { type: "string" } } });
  if (values.pods) {
    const base = values.base === "files" ? "files" : values.base === "apiserver" ? "apiserver" : Number(values.pods) > 10_000 ? "files" : "apiserver";
    await fanoutCase({ pods: Number(values.pods), pollers: Number(values.pollers ?? 2000), base, rate: Number(values.rate ?? 100), churnSeconds: Number(values.seconds ?? 30), churnPods: Number(values["churn-pods"] ?? 1000), spreadSeconds: Number(values.spread ?? 2), restartWaitSeconds: Number(values["restart-wait"] ?? 600), restartMissed: Number(values["restart-missed"] ?? 0), clientCpus: values["client-cpus"], feedRuntime: (values["feed-runtime"] ?? "chart") as FeedRuntime, observers: values.observers === undefined ? undefined : Number(values.observers) });
  } else await fanoutBench({ quick: values.quick === true });
}

// The feed's /metrics as an operator scrapes it. First, the documented list
// (feed/docs/metrics.md) is the list a feed with every server declares, both ways, and every
// family it serves is documented. Then a real feed process (feed/src/main.ts) reading a real
// kube-apiserver (through a TCP relay the test can cut) and a file source: its histograms,
// feed_build_info, process metrics and per-cluster sync state carry real values; a cluster cut
// off from the feed shows feed_cluster_synced 0 while the other stays 1, 1 again once its watches
// are back, and 0 once its API server is stopped.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { LeaseElector } from "../../feed/src/leader.js";
import { RemoteSecretWatch } from "../../feed/src/remote_secrets.js";
import { feedChannelFiles, SIDECAR_PRINCIPAL } from "../support/feed_tls.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT } from "../support/paths.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { eventually, feedKubeconfig, runFeed, type FeedRun } from "./harness.js";

const README = readFileSync(join(REPO_ROOT, "feed/docs/metrics.md"), "utf8");

/** The rows of feed/docs/metrics.md's tables: name → type. */
function documented(prefix: RegExp): Map<string, string> {
  const rows = [...README.matchAll(/^\| `([a-z0-9_]+)` \| (gauge|counter|histogram) \|/gm)];
  return new Map(rows.filter((m) => prefix.test(m[1]!)).map((m) => [m[1]!, m[2]!]));
}

/** The families a scrape serves: name → type, from its `# TYPE` lines. */
function families(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** One series' value; undefined when absent. Labels are given in the order the feed prints them (sorted). */
function value(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** A histogram's buckets are cumulative, end in +Inf = _count, and its sum is that of real durations. */
function histogram(text: string, name: string, labels: string): { count: number; sum: number } {
  // prom-client prints `le` first, then the series' labels.
  const rest = labels ? `,${labels}`.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : "";
  const buckets = [...text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"${rest}\\} (\\S+)$`, "gm"))];
  const count = value(text, `${name}_count${labels ? `{${labels}}` : ""}`);
  const sum = value(text, `${name}_sum${labels ? `{${labels}}` : ""}`);
  assert.ok(count !== undefined && sum !== undefined, `${name}{${labels}}: no _count or _sum`);
  assert.ok(buckets.length >= 5, `${name}{${labels}}: ${buckets.length} buckets`);
  const counts = buckets.map((b) => Number(b[2]));
  for (let i = 1; i < counts.length; i++) assert.ok(counts[i]! >= counts[i - 1]!, `${name}{${labels}}: buckets not cumulative`);
  assert.equal(buckets.at(-1)![1], "+Inf");
  assert.equal(counts.at(-1), count);
  return { count, sum };
}

/** The shipped ECDS file of passthrough_mtls, copied into `dir` (the feed rewrites it on each delivery). */
function ecdsFile(dir: string): string {
  const file = join(dir, "passthrough_mtls.yaml");
  writeFileSync(file, readFileSync(join(REPO_ROOT, "envoy-configs/passthrough_mtls_plugin/passthrough_mtls.yaml"), "utf8"));
  return file;
}

async function scrape(base: string): Promise<string> {
  const r = await fetch(`${base}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return r.text();
}

describe("feed metrics: the documented list is the declared one", () => {
  let run: FeedRun;
  let dir: string;

  before(async () => {
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "feed-metrics-doc-"));
    mkdirSync(join(dir, "objects"));
    run = await runFeed([{ id: "files1", files: join(dir, "objects") }], [{ name: "sidecar", filter: "passthrough_mtls", ecds: { file: ecdsFile(dir) } }]);
  });
  after(async () => {
    await run?.feed.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("every feed_ metric the feed declares is in feed/docs/metrics.md with its type, and nothing else is", async () => {
    const docs = documented(/^feed_/);
    // What a configuration may add declares its metrics when built: the writers' Lease and the
    // remote secrets' watch, built here on the same registry and never started.
    const kc = new KubeConfig();
    kc.loadFromOptions({ clusters: [{ name: "c", server: "https://127.0.0.1:1" }], users: [{ name: "u" }], contexts: [{ name: "x", cluster: "c", user: "u" }], currentContext: "x" });
    const quiet = () => undefined;
    const lease = { cluster: "files1", namespace: "mesh-feed", name: "mesh-feed", identity: "metrics-test", leaseDurationMs: 30_000, renewDeadlineMs: 15_000, retryPeriodMs: 7_500 };
    new LeaseElector(kc, lease, { started: quiet, stopped: quiet }, run.feed.controller.metrics, quiet);
    new RemoteSecretWatch(kc, "mesh-feed", run.feed.clusters, run.feed.controller.metrics, quiet);
    const declared = run.feed.controller.metrics.names();
    assert.deepEqual(declared, [...docs.keys()].sort());
    for (const [name, type] of families(await scrape(run.base))) {
      if (name.startsWith("feed_")) assert.equal(type, docs.get(name), `${name}: served as ${type}, documented as ${docs.get(name)}`);
    }
  });

  it("every metric the operator docs name is in the table (a histogram's series by its name)", () => {
    const known = documented(/^(feed|process|nodejs)_/);
    for (const file of ["feed/README.md", "feed/docs/metrics.md", "feed/docs/channel.md", "feed/docs/high-availability.md", "feed/docs/clusters.md", "docs/metrics.md", "docs/runbook.md", "feed/docs/server-limits.md", "monitoring/README.md"]) {
      for (const m of readFileSync(join(REPO_ROOT, file), "utf8").matchAll(/`((?:feed|process|nodejs)_[a-z0-9_]+)/g)) {
        const name = m[1]!.replace(/_(bucket|sum|count)$/, "");
        assert.ok(known.has(m[1]!) || known.get(name) === "histogram", `${file} names ${m[1]}, which feed/docs/metrics.md does not list`);
      }
    }
  });

  it("serves the documented process metrics, and no family outside feed_, process_ and nodejs_", async () => {
    const served = families(await scrape(run.base));
    for (const [name, type] of documented(/^(process|nodejs)_/)) assert.equal(served.get(name), type, `${name}`);
    assert.deepEqual([...served.keys()].filter((n) => !/^(feed|process|nodejs)_/.test(n)), []);
  });
});

/** A port nothing listens on now (the feed binds it a moment later). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
  const port = (server.address() as { port: number }).port;
  await new Promise((done) => server.close(done));
  return port;
}

/** A TCP relay to the API server: cut() refuses and drops every connection, heal() listens again on the same port. */
class Relay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly target: number) {}

  async heal(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target, "127.0.0.1");
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((done) => server.listen(this.port, "127.0.0.1", () => done()));
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise((done) => server.close(done));
  }
}

describe("feed metrics: a real feed process against a real API server", () => {
  let cluster: KubeCluster;
  let child: ChildProcess | undefined;
  let dir: string;
  let base: string;
  let relay: Relay;
  const testStarted = Date.now() / 1000;

  before(async () => {
    await writeDemoCerts();
    cluster = await startKubeCluster({ name: "feed-metrics", crds: [] });
    await cluster.createNamespace("default");
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "feed-metrics-"));
    mkdirSync(join(dir, "objects"));
    const operatorPort = await freePort();
    // The feed reaches the API server through the relay (its certificate names 127.0.0.1, any port).
    relay = new Relay(Number(new URL(cluster.server).port));
    await relay.heal();
    const kubeconfig = join(dir, "feed.kubeconfig");
    writeFileSync(kubeconfig, readFileSync(await feedKubeconfig(cluster), "utf8").replaceAll(cluster.server, `https://127.0.0.1:${relay.port}`));
    const config = {
      trustDomain: "cluster.local",
      wasmDir: join(REPO_ROOT, "build"),
      operator: { address: "127.0.0.1", port: operatorPort },
      channel: { address: "127.0.0.1", port: 0, ...feedChannelFiles() },
      debounce: { quietMs: 100, maxMs: 1000 },
      clusters: [
        { id: "cluster1", kubeconfig },
        { id: "files1", files: join(dir, "objects") },
      ],
      targets: [{ name: "sidecar", filter: "passthrough_mtls", readers: [SIDECAR_PRINCIPAL], ecds: { file: ecdsFile(dir) } }],
    };
    writeFileSync(join(dir, "feed.yaml"), stringify(config));
    child = spawn(process.execPath, ["--import", "tsx", join(REPO_ROOT, "feed/src/main.ts"), "--config", join(dir, "feed.yaml")], {
      cwd: REPO_ROOT,
      env: { ...process.env, FEED_LOG_LEVEL: "error" },
      stdio: ["ignore", "ignore", "inherit"],
    });
    base = `http://127.0.0.1:${operatorPort}`;
    await eventually("the feed process is ready", 120_000, async () => ((await fetch(`${base}/readyz`)).status === 200 ? true : undefined), 200);
  });

  after(async () => {
    if (child && child.exitCode === null) {
      const gone = new Promise((done) => child!.once("exit", done));
      child.kill("SIGTERM");
      await gone;
    }
    await relay?.cut();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("shows feed_build_info and the process's own metrics", async () => {
    const text = await scrape(base);
    const version = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string }).version;
    assert.equal(value(text, `feed_build_info{nodejs="${process.versions.node}",revision="unknown",version="${version}"}`), 1);
    // The child's own process: started after this test did, tens of MB resident, some CPU spent.
    const start = value(text, "process_start_time_seconds")!;
    assert.ok(start >= Math.floor(testStarted) && start <= Date.now() / 1000, `process_start_time_seconds ${start}`);
    assert.ok(value(text, "process_resident_memory_bytes")! > 20e6, "process_resident_memory_bytes");
    assert.ok(value(text, "process_cpu_seconds_total")! > 0, "process_cpu_seconds_total");
    assert.ok(value(text, "nodejs_heap_size_used_bytes")! > 1e6, "nodejs_heap_size_used_bytes");
  });

  it("a pod written to the API server moves the propagation, render, check and push histograms and the timestamps", async () => {
    const before = await scrape(base);
    const propagated = (text: string) => value(text, 'feed_propagation_seconds_count{path="delta",target="sidecar"}') ?? 0;
    const delivered = (text: string) => value(text, 'feed_propagation_seconds_count{path="snapshot",target="sidecar"}') ?? 0;
    const written = Date.now() / 1000;
    await cluster.createPod({ namespace: "default", name: "app-0", labels: { app: "app" }, serviceAccountName: "app" });
    await cluster.setPodStatus("default", "app-0", { podIP: "10.60.0.7" });
    const { value: text } = await eventually("the pod is published and delivered", 30_000, async () => {
      const t = await scrape(base);
      return propagated(t) > propagated(before) && delivered(t) > delivered(before) ? t : undefined;
    }, 100);

    const delta = histogram(text, "feed_propagation_seconds", 'path="delta",target="sidecar"');
    const snapshot = histogram(text, "feed_propagation_seconds", 'path="snapshot",target="sidecar"');
    // Measured from the watch event's arrival: after nothing but a debounce and a render here.
    assert.ok(delta.sum > 0 && delta.sum / delta.count < 30, `delta propagation sum ${delta.sum} count ${delta.count}`);
    assert.ok(snapshot.sum > 0, `snapshot propagation sum ${snapshot.sum}`);
    assert.ok(histogram(text, "feed_render_seconds", "").count >= 2);
    assert.ok(histogram(text, "feed_delta_render_seconds", "").count >= 2);
    assert.ok(histogram(text, "feed_check_seconds", 'path="delta"').count >= 1);
    assert.ok(histogram(text, "feed_check_seconds", 'path="snapshot"').count >= 2);
    assert.ok(histogram(text, "feed_push_seconds", 'delivery="ecds",target="sidecar"').count >= 2);

    for (const series of ['feed_delta_published_timestamp_seconds{target="sidecar"}', 'feed_snapshot_delivered_timestamp_seconds{target="sidecar"}', 'feed_cluster_last_event_timestamp_seconds{cluster="cluster1"}']) {
      const t = value(text, series);
      assert.ok(t !== undefined && t >= written - 1 && t <= Date.now() / 1000 + 1, `${series} ${t} (pod written at ${written})`);
    }
    assert.ok(value(text, 'feed_objects{cluster="cluster1",kind="pods"}')! >= 1);
  });

  it("per-cluster sync state: a cluster cut off goes to 0 (the other stays 1), back to 1 once its watches are, 0 when its API server stops", async () => {
    const synced = (text: string, cluster: string) => value(text, `feed_cluster_synced{cluster="${cluster}"}`);
    const text = await scrape(base);
    assert.equal(synced(text, "cluster1"), 1);
    assert.equal(synced(text, "files1"), 1);
    assert.equal(value(text, 'feed_cluster_watch_errors_total{cluster="cluster1",kind="pods"}'), undefined);
    const notSynced = (what: string) =>
      eventually(what, 60_000, async () => {
        const t = await scrape(base);
        return synced(t, "cluster1") === 0 ? t : undefined;
      }, 200);

    await relay.cut();
    const { value: cut } = await notSynced("cluster1 reported not synced once cut off");
    assert.equal(synced(cut, "files1"), 1);
    // Every watch of the cluster broke: each kind's failure is counted (the first made it 0).
    await eventually("the pods watch's failure counted", 30_000, async () => ((value(await scrape(base), 'feed_cluster_watch_errors_total{cluster="cluster1",kind="pods"}') ?? 0) >= 1 ? true : undefined), 200);

    await relay.heal();
    await eventually("cluster1 synced again once reachable", 60_000, async () => (synced(await scrape(base), "cluster1") === 1 ? true : undefined), 200);
    // Synced again means watching again: a pod written now reaches the feed.
    const events = value(await scrape(base), 'feed_events_total{cluster="cluster1"}') ?? 0;
    await cluster.createPod({ namespace: "default", name: "app-1", labels: { app: "app" }, serviceAccountName: "app" });
    await eventually("an event after the heal", 30_000, async () => ((value(await scrape(base), 'feed_events_total{cluster="cluster1"}') ?? 0) > events ? true : undefined), 100);

    await cluster.stop();
    const { value: stopped } = await notSynced("cluster1 reported not synced once its API server stopped");
    assert.equal(synced(stopped, "files1"), 1);
  });
});

// Each limit of the feed's servers alone (feed/docs/server-limits.md), against the real feed in
// this process with small limits: the total cap (operator port), the cap per caller identity
// and the cap per peer (that identity from one source address) on the channel refuse and count,
// while another identity, or the same one from another address, still gets in; a client that pipelines requests and reads none is answered one at a time and dropped once stalled, a request that never
// finishes its headers and an idle connection are dropped and counted; full messages are built
// once per version, whoever asks; the health worker answers while the main thread is blocked
// and fails liveness once it stays blocked past staleAfterMs. The whole
// attack at once is server_abuse.test.ts.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect, type TLSSocket } from "node:tls";
import { after, before, describe, it } from "node:test";
import { FEED_IDENTITY, meshCert, MESH_CA_FILE, SIDECAR_PRINCIPAL } from "../support/feed_tls.js";
import { DEMO_IDENTITIES } from "../../scripts/demo-certs.js";
import { HealthServer } from "../../feed/src/health.js";
import { metricValue } from "../support/feed_abuse.js";
import { REPO_ROOT } from "../support/paths.js";
import { eventually, runFeed, sleep, type FeedRun } from "./harness.js";

const POD = (i: number) => `apiVersion: v1
kind: Pod
metadata: { namespace: default, name: pod-${i}, labels: { security.istio.io/tlsMode: istio } }
spec: { serviceAccountName: sa-${i} }
status: { phase: Running, podIP: 10.1.0.${i}, conditions: [{ type: Ready, status: "True" }] }
`;

/** Another reader of the target: a second mesh identity. */
const OTHER = "pod-a";

/**
 * A TLS connection to the channel as a demo identity (the sidecar unless told), from
 * `localAddress` (any of 127/8 in the test's netns); resolves once the handshake is done.
 */
function tlsTo(channel: string, name = "sidecar", localAddress = "127.0.0.1"): Promise<TLSSocket> {
  const url = new URL(channel);
  const id = meshCert(name);
  return new Promise((done, fail) => {
    const s = connect(
      {
        host: url.hostname,
        port: Number(url.port),
        localAddress,
        ca: readFileSync(MESH_CA_FILE),
        cert: id.cert,
        key: id.key,
        checkServerIdentity: (_h, cert) => (cert.subjectaltname?.includes(`URI:${FEED_IDENTITY}`) ? undefined : new Error("not the feed")),
      },
      () => done(s),
    );
    s.once("error", fail);
  });
}

/** Everything the server sends until it closes the connection (or `ms` pass). */
function readUntilClosed(s: TLSSocket, ms: number): Promise<{ text: string; closed: boolean }> {
  return new Promise((done) => {
    const chunks: Buffer[] = [];
    s.on("data", (c: Buffer) => chunks.push(c));
    s.on("error", () => undefined);
    const t = setTimeout(() => done({ text: Buffer.concat(chunks).toString("latin1"), closed: false }), ms);
    s.once("close", () => {
      clearTimeout(t);
      done({ text: Buffer.concat(chunks).toString("latin1"), closed: true });
    });
  });
}

describe("the feed's server limits, one at a time", () => {
  let run: FeedRun;
  let dir: string;
  const metrics = async () => (await fetch(`${run.base}/metrics`)).text();

  before(async () => {
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "server-limits-"));
    mkdirSync(join(dir, "mesh"));
    writeFileSync(join(dir, "mesh", "pods.yaml"), [1, 2, 3].map(POD).join("---\n"));
    run = await runFeed([{ id: "cluster1", files: join(dir, "mesh") }], [{ name: "mesh", filter: "passthrough_mtls" }], {
      delta: { maxWaitSeconds: 1 },
      operator: { address: "127.0.0.1", port: 0, limits: { maxConnections: 4 } },
      channel: { limits: { maxConnections: 50, maxConnectionsPerCaller: 50, idleTimeoutMs: 1500, headersTimeoutMs: 400, stallTimeoutMs: 1000 } },
    });
    await eventually("the first version", 20_000, async () => ((await run.get("/delta/mesh?epoch=0")).status === 200 ? true : undefined), 100);
  });

  after(async () => {
    await run?.feed.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("past the operator port's total cap, a connection is refused at accept and counted total", async () => {
    const before = metricValue(await metrics(), 'feed_connections_refused_total{reason="total",server="operator"}');
    const { connect: tcp } = await import("node:net");
    const port = Number(new URL(run.base).port);
    const opened = (s: import("node:net").Socket) =>
      new Promise<boolean>((done) => {
        s.on("error", () => undefined);
        s.once("close", () => done(false));
        setTimeout(() => done(!s.destroyed), 1000);
      });
    // Four fill the cap (with a kept-alive connection of fetch's own, three do); the next is refused.
    const held = [1, 2, 3, 4].map(() => tcp(port, "127.0.0.1"));
    await Promise.all(held.map(opened));
    const fifth = tcp(port, "127.0.0.1");
    assert.equal(await opened(fifth), false, "the connection past the cap is closed at once");
    for (const s of held) s.destroy();
    await eventually("the refusal counted", 5000, async () => (metricValue(await metrics(), 'feed_connections_refused_total{reason="total",server="operator"}') >= before + 1 ? true : undefined));
  });

  it("a client that pipelines requests without reading is answered one at a time: it holds one answer at most and is dropped once the socket's buffers are full, counted stalled", async () => {
    const m0 = await metrics();
    const stalled0 = metricValue(m0, 'feed_clients_dropped_total{reason="stalled",server="channel"}');
    const requests = 20_000;
    const s = await tlsTo(run.channel);
    s.pause();
    // ~1 MB of requests; their answers (full messages) are many times the kernel's buffers.
    s.write("GET /delta/mesh?epoch=0 HTTP/1.1\r\nhost: feed\r\n\r\n".repeat(requests));
    await eventually("the drop counted", 30_000, async () => (metricValue(await metrics(), 'feed_clients_dropped_total{reason="stalled",server="channel"}') >= stalled0 + 1 ? true : undefined), 200);
    // A paused socket does not see its end: read what was sent, then the connection is gone.
    s.resume();
    const end = await readUntilClosed(s, 10_000);
    assert.ok(end.closed, "dropped");
    const answered = end.text.split("HTTP/1.1 200 OK\r\n").length - 1;
    assert.ok(answered > 0 && answered < requests, `some answered, not all (${answered} of ${requests})`);
    const m1 = await metrics();
    // Dropped for its stall alone: never a write timeout (one answer at a time is never held long).
    assert.equal(metricValue(m1, 'feed_clients_dropped_total{reason="write_timeout",server="channel"}'), metricValue(m0, 'feed_clients_dropped_total{reason="write_timeout",server="channel"}'));
    assert.equal(metricValue(m1, 'feed_buffered_bytes{server="channel"}'), 0, "no answer left pinned");
  });

  it("a connection that does not finish its request headers in time gets 408 and is counted header_timeout; an idle one is closed and counted idle", async () => {
    const m0 = await metrics();
    const slow = await tlsTo(run.channel);
    slow.write("GET /delta/mesh?epoch=0 HTTP/1.1\r\nhost: fe");
    const a = await readUntilClosed(slow, 5000);
    assert.ok(a.closed);
    assert.match(a.text, /^HTTP\/1\.1 408 /);
    const idle = await tlsTo(run.channel);
    idle.write("GET /delta/mesh?epoch=0 HTTP/1.1\r\nhost: feed\r\n\r\n");
    const b = await readUntilClosed(idle, 8000);
    assert.ok(b.closed, "closed after idleTimeoutMs");
    assert.match(b.text, /^HTTP\/1\.1 200 OK\r\n/);
    const m1 = await metrics();
    const count = (m: string, reason: string) => metricValue(m, `feed_clients_dropped_total{reason="${reason}",server="channel"}`);
    assert.equal(count(m1, "header_timeout"), count(m0, "header_timeout") + 1);
    assert.equal(count(m1, "idle"), count(m0, "idle") + 1);
  });

  it("epoch=0 requests from many callers share one full message per version", async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => run.get("/delta/mesh?epoch=0")));
    assert.ok(answers.every((a) => a.status === 200));
    const m = await metrics();
    const builds = metricValue(m, 'feed_delta_full_builds{target="mesh"}');
    assert.ok(builds >= 1 && builds <= metricValue(m, 'feed_delta_version{target="mesh"}'), `${builds} builds for version ${metricValue(m, 'feed_delta_version{target="mesh"}')}`);
    await sleep(0);
  });
});

describe("the channel's caps per caller and per peer", () => {
  let run: FeedRun;
  let dir: string;
  const metrics = async () => (await fetch(`${run.base}/metrics`)).text();

  before(async () => {
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "server-caps-"));
    mkdirSync(join(dir, "mesh"));
    writeFileSync(join(dir, "mesh", "pods.yaml"), [1, 2, 3].map(POD).join("---\n"));
    // Timeouts far above the test's steps: every held connection stays counted until the end.
    run = await runFeed([{ id: "cluster1", files: join(dir, "mesh") }], [{ name: "mesh", filter: "passthrough_mtls", readers: [SIDECAR_PRINCIPAL, DEMO_IDENTITIES[OTHER].replace("spiffe://", "")] }], {
      channel: { limits: { maxConnections: 50, maxConnectionsPerCaller: 3, maxConnectionsPerPeer: 2, headersTimeoutMs: 60_000 } },
    });
    await eventually("the first version", 20_000, async () => ((await run.get("/delta/mesh?epoch=0")).status === 200 ? true : undefined), 100);
  });

  after(async () => {
    await run?.feed.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("past its cap per peer, then per caller, a mesh identity's connection gets a one-line 503 and is closed, counted per_peer / per_caller; another identity, and its own held connections, still get in", async () => {
    const refused = async (reason: string) => metricValue(await metrics(), `feed_connections_refused_total{reason="${reason}",server="channel"}`);
    const before = { peer: await refused("per_peer"), caller: await refused("per_caller") };
    const asked = async (s: TLSSocket) => {
      s.write("GET /delta/mesh?epoch=0 HTTP/1.1\r\nhost: feed\r\n\r\n");
      return s;
    };
    // Two from 127.0.0.1 fill the sidecar's cap per peer (2); a third from there is refused.
    const held = [await asked(await tlsTo(run.channel)), await asked(await tlsTo(run.channel))];
    const thirdHere = await readUntilClosed(await tlsTo(run.channel), 5000);
    assert.ok(thirdHere.closed, "the feed closes the connection past the cap per peer");
    assert.match(thirdHere.text, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
    assert.match(thirdHere.text, /\r\n\r\ntoo many connections for spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep from 127\.0\.0\.1 \(at most 2\)\n$/);
    assert.equal(await refused("per_peer"), before.peer + 1);
    // The same identity from another address (another of its pods) is a new peer: its third
    // connection gets in, its fourth (another address again) passes the cap per caller (3).
    held.push(await asked(await tlsTo(run.channel, "sidecar", "127.0.0.2")));
    const fourth = await readUntilClosed(await tlsTo(run.channel, "sidecar", "127.0.0.3"), 5000);
    assert.ok(fourth.closed, "the feed closes the connection past the cap per caller");
    assert.match(fourth.text, /\r\n\r\ntoo many connections for spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep \(at most 3\)\n$/);
    assert.equal(await refused("per_caller"), before.caller + 1);
    // Another mesh identity, from the full peer's address, is served.
    const other = await tlsTo(run.channel, OTHER);
    other.write("GET /delta/mesh?epoch=0 HTTP/1.1\r\nhost: feed\r\nconnection: close\r\n\r\n");
    const answer = await readUntilClosed(other, 5000);
    assert.match(answer.text, /^HTTP\/1\.1 200 OK\r\n/);
    // The held connections were answered and stay open.
    for (const s of held) {
      const got = await readUntilClosed(s, 300);
      assert.match(got.text, /^HTTP\/1\.1 200 OK\r\n/);
      assert.equal(got.closed, false, "a held connection stays open");
    }
    for (const s of held) s.destroy();
  });

});

describe("health from a worker thread (health.ts)", () => {
  // The main thread is blocked by execFileSync while curl asks the worker: what a render does.
  const ask = (url: string) => {
    try {
      return execFileSync("curl", ["-s", "-m", "5", "-w", " %{http_code}", url], { encoding: "utf8" });
    } catch (error) {
      return `curl failed: ${(error as Error).message}`;
    }
  };

  it("answers while the main thread is blocked; /healthz fails once the main loop has not turned for staleAfterMs; /readyz carries the feed's reason", async () => {
    let ready = { ready: false, reason: "waiting for the initial lists of cluster1" };
    const health = new HealthServer({ address: "127.0.0.1", port: 0, staleAfterMs: 1000 }, () => ready);
    const port = await health.listen();
    try {
      const base = `http://127.0.0.1:${port}`;
      assert.equal(ask(`${base}/healthz`), "ok\n 200");
      assert.equal(ask(`${base}/readyz`), "waiting for the initial lists of cluster1\n 503");
      ready = { ready: true, reason: "ok" };
      await sleep(500);
      assert.equal(ask(`${base}/readyz`), "ok\n 200");
      // Block the main thread past staleAfterMs (a hang, as far as the worker can tell).
      const until = Date.now() + 1500;
      while (Date.now() < until) {
        /* busy */
      }
      assert.match(ask(`${base}/healthz`), /^event loop stalled for \d+ ms\n 503$/);
      assert.match(ask(`${base}/readyz`), /^event loop stalled for \d+ ms\n 503$/);
      await sleep(500);
      assert.equal(ask(`${base}/healthz`), "ok\n 200", "alive again once the loop turns");
    } finally {
      await health.close();
    }
  });
});

// Two bounds on what a client can make the feed hold or do (feed/docs/server-limits.md):
//   - a client that stops reading a full message is dropped once it has taken nothing for
//     `stallTimeoutMs`, counted `stalled`, and the old version's body it held is released
//     (feed_buffered_bytes back to 0 after a newer version); a client that reads slowly but
//     steadily takes the whole body, though it takes longer than that timeout;
//   - full messages for callers are built from a bucket (`delta.fullBuildBurst`, 1 here) that
//     gains one per `delta.minFullIntervalMs`: an `epoch=0` poll after a change with the bucket
//     empty gets the last built full message (its own version), and the delta from there at once.
// The first part runs the real feed as its own process with a 20,000-pod mesh (a ~5 MB full
// message: more than the kernel's socket buffers take for a client that does not read); the
// second runs it in this process with a three-pod mesh. Run in the test netns.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { connect } from "node:tls";
import { readFileSync } from "node:fs";
import { churn, metricValue, neverReader, startFeedProcess, writeMesh, type FeedProcess } from "../support/feed_abuse.js";
import { FEED_IDENTITY, MESH_CA_FILE, meshCert } from "../support/feed_tls.js";
import { REPO_ROOT } from "../support/paths.js";
import { eventually, runFeed, sleep, type FeedRun } from "./harness.js";

const STALL_MS = 1500;

describe("a client that stops reading is dropped for lack of progress; a slow one is not", () => {
  let dir: string;
  let feed: FeedProcess;
  const metrics = async () => (await fetch(`${feed.operator}/metrics`)).text();
  const stalled = async () => metricValue(await metrics(), 'feed_clients_dropped_total{reason="stalled",server="channel"}');
  const buffered = async () => metricValue(await metrics(), 'feed_buffered_bytes{server="channel"}');

  before(async () => {
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "server-stall-"));
    writeMesh(join(dir, "mesh"), 20_000);
    // Only the stall can drop here: a write timeout of 10 minutes and a budget nothing reaches.
    feed = await startFeedProcess(dir, join(dir, "mesh"), { channel: 19543, operator: 19190, health: 19191 }, {
      channelLimits: { stallTimeoutMs: STALL_MS, writeTimeoutMs: 600_000, maxBufferedBytes: 2 ** 40 },
      delta: { minFullIntervalMs: 0 },
    });
  });

  after(async () => {
    await feed?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("a never-reader is dropped after stallTimeoutMs without progress, counted stalled, and no longer pins its (old) version", async () => {
    const before = await stalled();
    const reader = await neverReader(feed.channel);
    const asked = Date.now();
    // Its full message is being written (held in the feed) ...
    await eventually("the body held", 10_000, async () => ((await buffered()) > 0 ? true : undefined), 20);
    // ... and becomes an old version's.
    churn(join(dir, "mesh"), 1);
    await eventually("the drop counted", 30_000, async () => ((await stalled()) === before + 1 ? true : undefined), 50);
    const took = Date.now() - asked;
    assert.ok(took >= STALL_MS, `dropped after ${took} ms, before the stall timeout`);
    assert.ok(took < 30_000, `dropped after ${took} ms (the write timeout is 600 s: the stall dropped it)`);
    await eventually("the old body released", 5000, async () => ((await buffered()) === 0 ? true : undefined), 50);
    // A paused socket sees its end only once read: read what the kernel holds, then it closes.
    reader.socket.on("data", () => undefined);
    reader.socket.resume();
    await Promise.race([reader.closed, sleep(10_000)]);
    assert.ok(reader.socket.destroyed || reader.socket.readableEnded, "the feed closed the connection");
    reader.socket.destroy();
  });

  it("a client reading slowly but steadily takes the whole full message, over more than stallTimeoutMs", async () => {
    const before = await stalled();
    const url = new URL(feed.channel);
    const id = meshCert("sidecar");
    const started = Date.now();
    const got = await new Promise<{ bytes: number; length: number }>((done, fail) => {
      const s = connect({
        host: url.hostname,
        port: Number(url.port),
        ca: readFileSync(MESH_CA_FILE),
        cert: id.cert,
        key: id.key,
        checkServerIdentity: (_h, cert) => (cert.subjectaltname?.split(", ").includes(`URI:${FEED_IDENTITY}`) ? undefined : new Error("not the feed")),
      });
      s.write("GET /delta/mesh?epoch=0 HTTP/1.1\r\nhost: feed\r\nconnection: close\r\n\r\n");
      // 256 KiB every 200 ms (~1.3 MB/s): each slice well within the stall timeout, the whole
      // ~5 MB message well past it.
      let budget = 256 << 10;
      let bytes = 0;
      const tick = setInterval(() => {
        budget = 256 << 10;
        s.resume();
      }, 200);
      const chunks: Buffer[] = [];
      s.on("data", (c: Buffer) => {
        if (chunks.length < 2) chunks.push(c);
        bytes += c.length;
        budget -= c.length;
        if (budget <= 0) s.pause();
      });
      s.once("error", (e) => {
        clearInterval(tick);
        fail(e);
      });
      s.once("close", () => {
        clearInterval(tick);
        const head = Buffer.concat(chunks).toString("latin1");
        const m = /content-length: (\d+)\r\n/i.exec(head);
        const end = head.indexOf("\r\n\r\n");
        done({ bytes: bytes - (end + 4), length: m ? Number(m[1]) : -1 });
      });
    });
    const took = Date.now() - started;
    assert.ok(got.length > 4_000_000, `a full message of ${got.length} bytes`);
    assert.equal(got.bytes, got.length, "the whole body arrived");
    assert.ok(took > STALL_MS, `read in ${took} ms: not slower than the stall timeout, so this shows nothing`);
    assert.equal(await stalled(), before, "not dropped");
  });
});

describe("full messages for callers are built from a bucket of delta.fullBuildBurst, one more per delta.minFullIntervalMs", () => {
  let run: FeedRun;
  let dir: string;
  const POD = (i: number) => `apiVersion: v1
kind: Pod
metadata: { namespace: default, name: pod-${i}, labels: { security.istio.io/tlsMode: istio } }
spec: { serviceAccountName: sa-${i} }
status: { phase: Running, podIP: 10.1.0.${i}, conditions: [{ type: Ready, status: "True" }] }
`;
  const builds = async () => metricValue(await (await fetch(`${run.base}/metrics`)).text(), 'feed_delta_full_builds{target="mesh"}');
  const version = async () => metricValue(await (await fetch(`${run.base}/metrics`)).text(), 'feed_delta_version{target="mesh"}');

  before(async () => {
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "full-rate-"));
    mkdirSync(join(dir, "mesh"));
    writeFileSync(join(dir, "mesh", "pods.yaml"), [1, 2, 3].map(POD).join("---\n"));
    run = await runFeed([{ id: "cluster1", files: join(dir, "mesh") }], [{ name: "mesh", filter: "passthrough_mtls" }], { delta: { minFullIntervalMs: 600_000, fullBuildBurst: 1 } });
    await eventually("the first version", 20_000, async () => ((await run.get("/delta/mesh?epoch=0")).status === 200 ? true : undefined), 100);
  });

  after(async () => {
    await run?.feed.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the bucket's build is fresh; with the bucket empty an epoch=0 poll after a change gets the last full message (its version), the next poll the delta; no more builds", async () => {
    const first = await run.get("/delta/mesh?epoch=0");
    assert.equal(first.headers["x-feed-kind"], "full");
    const v1 = Number(first.headers["x-feed-version"]);
    const epoch = Number(first.body.readBigUInt64LE(8));
    const change = async (name: string, i: number, after: number) => {
      writeFileSync(join(dir, "mesh", `${name}.yaml`), POD(i));
      await eventually("a new version", 20_000, async () => ((await version()) > after ? true : undefined), 50);
      return version();
    };
    // The bucket's one token: a build for the new version.
    const v2 = await change("more", 4, v1);
    const fresh = await run.get("/delta/mesh?epoch=0");
    assert.equal(Number(fresh.headers["x-feed-version"]), v2, "the bucket's build is of the current version");
    const built = await builds();
    // The bucket is empty (one token per 600 s): a flood after the next change shares v2's.
    const v3 = await change("again", 5, v2);
    const flood = await Promise.all(Array.from({ length: 10 }, () => run.get("/delta/mesh?epoch=0")));
    for (const a of flood) {
      assert.equal(a.headers["x-feed-kind"], "full");
      assert.equal(Number(a.headers["x-feed-version"]), v2, "the last built full message, with its own version");
      assert.equal(Buffer.compare(a.body, fresh.body), 0);
    }
    assert.equal(await builds(), built, "no full message built for the new version");
    const next = await run.get(`/delta/mesh?epoch=${epoch}&version=${v2}`);
    assert.equal(next.headers["x-feed-kind"], "delta");
    assert.equal(Number(next.headers["x-feed-version"]), v3);
  });
});

// A full resync of a million pods through the real Envoy: the feed's full message (format 2: a
// text table and compact records) must fit the 32 MiB Envoy buffers for an HTTP call's response
// (`http.async_response_buffer_limit`), and every VM (two workers and the main thread) must load
// it and decide with it. The mesh is the benchmark's (bench/scale/mesh_update.ts: 1M pods in 10k
// services, 1,000 identities) plus one TLS pod the test dials: connections to it must go out over
// mTLS verifying its identity in every worker. Format 1's inline records made this message ~81 MB,
// which Envoy refuses (the call fails, the VM keeps what it has).
// Run inside a private network namespace: bash scripts/in-netns.sh node --import tsx --test ...
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { FakeFeed } from "../support/fake_feed.js";
import { feedServerTls } from "../support/feed_tls.js";
import { exchange } from "../support/tcp.js";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { Writer, writeWorkload } from "../support/mesh_wire.js";
import { meshFeedSidecarConfig } from "../feed/delta_envoy_config.js";
import { assembleFull } from "../../feed/src/delta/wire_full.js";
import { fullRecords } from "../../bench/scale/mesh_update.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";

const PODS = 1_000_000;
const SERVICES = PODS / 100;
const WORKERS = 2;
const VMS = WORKERS + 1;
const FEED_PORT = 15966;
const ADMIN = 15000; // envoy-configs/passthrough_mtls.yaml
const CAPTURE_PORT = 15001;
const POD_IP = "127.0.0.11";
const POD_PORT = 8443;
const ROUND = 24;
const ENVOY_RESPONSE_BUFFER = 32 * 1024 * 1024;

describe(`a full resync of ${PODS.toLocaleString("en")} pods in the real Envoy (--concurrency ${WORKERS})`, () => {
  let feed: FakeFeed;
  let envoy: EnvoyProcess;
  let pod: TlsPod;
  let body: Buffer;
  let startedAt = 0;

  before(async () => {
    await writeDemoCerts();
    pod = await startTlsPod("httpbin-0", POD_IP, POD_PORT, CERT_DIR, "pod-a");
    feed = new FakeFeed(FEED_PORT, feedServerTls());
    // Version 1 is the whole mesh; the records list only makes the fake feed speak the wire format.
    feed.publishRecords([]);
    const dialled = new Writer(128);
    writeWorkload(dialled, { id: PODS, istio: true, identity: DEMO_IDENTITIES["pod-a"], addresses: [POD_IP] });
    body = assembleFull(
      { epoch: Number(feed.epoch), base: 0, version: 1, workloadIdLimit: Math.ceil(PODS * 1.25), serviceIdLimit: SERVICES },
      [fullRecords(PODS, SERVICES), [dialled.copyFrom(0)]],
    );
    feed.fullBody = (epoch, version) => {
      assert.equal(epoch, feed.epoch);
      assert.equal(version, 1n);
      return body;
    };
    await feed.start();
    startedAt = Date.now();
    envoy = await EnvoyProcess.start({ name: "feed-full-1m", adminPort: ADMIN, concurrency: WORKERS, config: meshFeedSidecarConfig(FEED_PORT, "sidecar", 30) });
    captureOutbound(CAPTURE_PORT);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await feed?.kill();
    await pod?.close();
  });

  it("fits Envoy's response buffer, loads in every VM, and every worker decides with it", async (t) => {
    assert.ok(body.length < ENVOY_RESPONSE_BUFFER, `the full message is ${body.length} bytes`);
    const deadline = Date.now() + 120_000;
    const allHeld = () => feed.heldPositions().length === VMS && feed.heldPositions().every(([e, v]) => e === feed.epoch && v === 1n);
    while (!allHeld()) {
      if (Date.now() > deadline) throw new Error(`not every VM holds a poll at version 1: ${JSON.stringify(feed.heldPositions().map(String))}, full requests ${feed.requests.filter((r) => r.answer === "full").length}`);
      await sleep(100);
    }
    const loadedMs = Date.now() - startedAt;
    const stats = await envoy.stats();
    // The filter's counters carry Envoy's prefix for wasm stats: match by suffix.
    const counter = (suffix: string) => [...stats].find(([name]) => name.endsWith(suffix))?.[1] ?? 0;
    assert.equal(counter("passthrough_mtls.feed.applied_full"), VMS, "one full load per VM");
    assert.equal(counter("passthrough_mtls.feed.refused"), 0);
    assert.equal(counter("passthrough_mtls.feed.unavailable"), 0, "no call failed (a body over the buffer limit fails the call)");
    const before = Array.from({ length: WORKERS }, (_, i) => stats.get(`listener.127.0.0.1_${CAPTURE_PORT}.worker_${i}.downstream_cx_total`) ?? 0);
    for (let i = 0; i < ROUND; i++) {
      const payload = `after the full load ${i}`;
      const reply = (await exchange(POD_IP, POD_PORT, payload, 10_000, CLIENT_ADDRESS)).received.toString();
      assert.equal(reply, `httpbin-0 peer=URI:${DEMO_IDENTITIES.sidecar}\n${payload}`, "mTLS to the pod, its identity verified");
    }
    const afterStats = await envoy.stats();
    const perWorker = before.map((n, i) => (afterStats.get(`listener.127.0.0.1_${CAPTURE_PORT}.worker_${i}.downstream_cx_total`) ?? 0) - n);
    assert.ok(perWorker.every((n) => n > 0), `every worker took connections: ${perWorker.join(", ")}`);
    t.diagnostic(`full message ${(body.length / 1e6).toFixed(1)} MB (${(body.length / (PODS + 1)).toFixed(1)} B/pod); Envoy start → every VM loaded it and polling again: ${loadedMs} ms`);
  });
});

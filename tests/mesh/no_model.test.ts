// A sidecar started before its feed, in the real Envoy (--concurrency 2, the shipped direct-mode
// passthrough_mtls configuration with an empty snapshot and meshFeed): a connection made before
// any model is held (proxy_on_new_connection answers StopIteration; tcp_proxy keeps the socket
// read-disabled, so the client's bytes wait), and when the feed's first model arrives the root
// decides it (proxy_set_effective_context) and resumes it (proxy_continue_stream): the bytes
// reach the pod over mTLS verifying its identity. Without a model within startupWaitMs the held
// connection is closed, and so is every later one, counted as no_model, never as passthrough.
// Run inside a private network namespace: bash scripts/in-netns.sh node --import tsx --test ...
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { FakeFeed } from "../support/fake_feed.js";
import { feedServerTls } from "../support/feed_tls.js";
import { exchange } from "../support/tcp.js";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { meshFeedSidecarConfig } from "../feed/delta_envoy_config.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import type { WireRecord } from "../support/mesh_wire.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";

const WORKERS = 2;
const ADMIN = 15000; // envoy-configs/passthrough_mtls.yaml
const CAPTURE_PORT = 15001;
const FEED_PORT = 15966;
const POD_IP = "127.0.0.11";
const POD_PORT = 8443;
const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
const pod: WireRecord = { workload: { id: 0, istio: true, identity: DEMO_IDENTITIES["pod-a"], addresses: [POD_IP] } };

async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** One connection through the capture to the TLS pod: what came back, and after how long. */
async function dial(payload: string, timeoutMs = 20_000): Promise<{ reply: string; ms: number; errored: boolean }> {
  const started = Date.now();
  const result = await exchange(POD_IP, POD_PORT, payload, timeoutMs, CLIENT_ADDRESS);
  return { reply: result.received.toString(), ms: Date.now() - started, errored: result.errored };
}

describe("passthrough_mtls started before its feed (real Envoy): holds, then decides with the first model or closes", () => {
  let tlsPod: TlsPod;
  let feed: FakeFeed | undefined;
  let envoy: EnvoyProcess | undefined;

  before(async () => {
    await writeDemoCerts();
    tlsPod = await startTlsPod("httpbin-0", POD_IP, POD_PORT, CERT_DIR, "pod-a");
    captureOutbound(CAPTURE_PORT);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await feed?.kill();
    await tlsPod?.close();
  });

  it("holds a connection made before any model and sends it over mTLS once the feed's first model has the pod", async () => {
    envoy = await EnvoyProcess.start({
      name: "no-model-hold",
      adminPort: ADMIN,
      concurrency: WORKERS,
      config: meshFeedSidecarConfig(FEED_PORT, "sidecar-a", 2, { startupWaitMs: 15000 }),
    });
    // The feed is not up: the first polls fail, and nothing is decided yet.
    await until("a failed poll", async () => ((await envoy!.stat("passthrough_mtls.feed.unavailable")) ?? 0) >= 1);
    const pending = dial("held until the model");
    await until("the connection to wait", async () => ((await envoy!.stat("passthrough_mtls.waited_for_model")) ?? 0) === 1);
    await sleep(1000);
    assert.equal((await envoy.stat("passthrough_mtls.passthrough")) ?? 0, 0, "not passed through in clear meanwhile");
    // The feed speaks the channel's mutual TLS, as the shipped mesh_feed cluster expects.
    feed = new FakeFeed(FEED_PORT, feedServerTls());
    await feed.start();
    const published = Date.now();
    feed.publishRecords([pod]);
    const result = await pending;
    assert.equal(result.reply, `httpbin-0 peer=${SIDECAR}\nheld until the model`, "the held bytes reached the pod over mTLS, its identity pinned");
    assert.ok(result.ms >= 1000, `it waited (${result.ms} ms)`);
    assert.ok(Date.now() - published < 12_000, "released once the model came (the backoff is at most a few seconds here)");
    assert.equal(await envoy.stat("passthrough_mtls.mtls"), 1);
    assert.equal((await envoy.stat("passthrough_mtls.no_model")) ?? 0, 0);
    // Each VM gates on its own model: once every VM (the main thread's and each worker's) has
    // it, a new connection is decided at once, whichever worker takes it.
    await until("every VM's first model", async () => ((await envoy!.stat("passthrough_mtls.feed.applied_full")) ?? 0) >= WORKERS + 1);
    const waited = await envoy.stat("passthrough_mtls.waited_for_model");
    for (let i = 0; i < 4; i++) {
      const next = await dial(`after the model ${i}`);
      assert.equal(next.reply, `httpbin-0 peer=${SIDECAR}\nafter the model ${i}`);
    }
    assert.equal(await envoy.stat("passthrough_mtls.waited_for_model"), waited, "no connection waits once the model is in");
    const age = await envoy.stat("passthrough_mtls.feed.model_age_seconds");
    assert.ok(age !== undefined && age <= 5, `the model's age gauge: ${age} s`);
  });

  it("closes the held connection when startupWaitMs passes with no model, and every later one, counted as no_model", async () => {
    await envoy?.stop();
    await feed?.kill();
    feed = undefined;
    envoy = await EnvoyProcess.start({
      name: "no-model-close",
      adminPort: ADMIN,
      concurrency: WORKERS,
      config: meshFeedSidecarConfig(FEED_PORT, "sidecar-a", 2, { startupWaitMs: 3000 }),
    });
    const held = await dial("never decided");
    assert.equal(held.reply, "", "nothing reached the pod in clear, nothing came back");
    const stats = await envoy.stats();
    const stat = (name: string) => stats.get(`wasmcustom.passthrough_mtls.${name}`) ?? 0;
    assert.equal(stat("passthrough"), 0, "never an ordinary passthrough");
    assert.equal(stat("mtls"), 0);
    assert.ok(stat("waited_for_model") + stat("no_model") >= 1);
    const late = await dial("after the wait");
    assert.equal(late.reply, "");
    assert.ok(late.ms < 2000, `closed at once after the wait (${late.ms} ms)`);
    const noModel = await envoy.stat("passthrough_mtls.no_model");
    assert.equal(noModel, 2, "both counted under no_model");
    assert.equal((await envoy.stat("passthrough_mtls.passthrough")) ?? 0, 0);
    // Envoy flushes its log file on its own schedule: wait for the line.
    await until("the no-model line", () => /no mesh model 3000 ms after configuration: .* closed \(noModelPolicy close\)/.test(envoy!.log()), 15_000);
  });
});

// The feed client's retry rules (assembly/runtime/feed_retry.ts): one table of numbers, read by
// the filters' client (feed_client.ts, compiled, run here in the proxy-wasm host against a feed
// on loopback: tests/support/fake_feed.ts) and by the fan-out bench's poller
// (bench/feed/fanout_poller.ts). Both are checked against the same expected steps, derived here
// from the table: unavailable 500 ms doubling to 5 s with full jitter (its spread over many VMs:
// feed_backoff_jitter.test.ts), refused (a 4xx) 1 s doubling to 30 s with equal jitter, and an
// answer marked stopping (the feed's header, feed/src/http.ts) followed by a poll within a
// second, no failure counted, the unavailable backoff starting over.
// Run: node --import tsx --test tests/host/feed_retry.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import * as Retry from "../../assembly/runtime/feed_retry.js";
import { nextRetry, nextStoppingSpread } from "../../bench/feed/fanout_poller.js";
import { STOPPING_HEADER } from "../../feed/src/http.js";
import { ProxyWasmHost } from "../../host/index.js";
import { FeedProbeRig } from "./feed_probe_rig.js";
import { until } from "./helpers.js";

/** The nominal backoffs of `n` failures in a row: `first` doubling to `cap`. */
function steps(first: number, cap: number, n: number): number[] {
  const out = [first];
  while (out.length < n) out.push(Math.min(out[out.length - 1] * 2, cap));
  return out;
}

const UNAVAILABLE = steps(Retry.UNAVAILABLE_FIRST_MS, Retry.UNAVAILABLE_MAX_MS, 7);
const REFUSED = steps(Retry.REFUSED_FIRST_MS, Retry.REFUSED_MAX_MS, 7);

describe("feed client retry rules: one table for the filter and the bench's poller", () => {
  it("the table's shape, the poller's steps and bounds, and the feed's stopping header", () => {
    // What an operator is promised (filters' READMEs, feed/docs/high-availability.md).
    assert.deepEqual(UNAVAILABLE, [500, 1000, 2000, 4000, 5000, 5000, 5000]);
    assert.deepEqual(REFUSED, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    assert.equal(STOPPING_HEADER, Retry.STOPPING_HEADER, "the feed marks what the client reads");
    // Marked answers in a row: the spread doubles from 1 s to the unavailable cap.
    const spreads = [nextStoppingSpread(0)];
    while (spreads.length < 5) spreads.push(nextStoppingSpread(spreads[spreads.length - 1]));
    assert.deepEqual(spreads, [1000, 2000, 4000, 5000, 5000]);
    assert.deepEqual(spreads, steps(Retry.STOPPING_SPREAD_MS, Retry.UNAVAILABLE_MAX_MS, 5));
    for (const [refused, expected] of [[false, UNAVAILABLE], [true, REFUSED]] as const) {
      let low = 0;
      let high = 0;
      for (const b of expected) {
        const lo = nextRetry(low, refused, 0);
        const hi = nextRetry(high, refused, 1 - Number.EPSILON);
        low = lo.backoffMs;
        high = hi.backoffMs;
        assert.deepEqual([lo.backoffMs, hi.backoffMs], [b, b], `${refused ? "refused" : "unavailable"}: the step after ${b}`);
        assert.equal(lo.waitMs, refused ? b / 2 : 0, "the shortest wait: half (equal jitter) or none (full jitter)");
        assert.ok(hi.waitMs <= b && hi.waitMs > b - 1, `the longest wait: the backoff (${hi.waitMs} of ${b})`);
      }
    }
  });

  describe("the filter's client in the host", () => {
    // Backoffs are skipped ahead on the rig's clock, not waited out (feed_probe_rig.ts).
    const rig = new FeedProbeRig().hooks();
    const feed = rig.feed;
    let host: ProxyWasmHost;
    const metric = (name: string) => rig.metric(name);
    const calls = () => rig.calls();
    const tickAfter = (ms: number) => rig.tickAfter(ms);

    const start = async () => {
      host = await rig.start(JSON.stringify({ meshFeed: { cluster: "mesh_feed", target: "node-a", waitSeconds: 1 } }));
      host.tick();
      await until("the full model", () => metric("applied_full") === 1);
      await until("the held poll", () => feed.heldCount === 1);
    };

    it("a 4xx (the feed refused the request): the long backoff, each retry within [backoff/2, backoff]", async () => {
      feed.publish("a");
      await start();
      const rounds = REFUSED.slice(0, 4);
      feed.inject.push(...rounds.map(() => "403"));
      feed.publish("b"); // answers the held poll; the poll after it gets the first 403
      await until("the first 403", () => metric("unavailable") === 1);
      for (const [i, b] of rounds.entries()) {
        if (i === rounds.length - 1) break;
        // Wall time adds a few ms to the skipped time: 60 ms of margin on each side.
        const before = calls();
        tickAfter(b / 2 - 60);
        assert.equal(calls(), before, `no retry before half of ${b} ms`);
        tickAfter(b / 2 + 60);
        assert.equal(calls(), before + 1, `a retry by ${b} ms`);
        await until(`403 number ${i + 2}`, () => metric("unavailable") === i + 2);
      }
      assert.equal(metric("refused"), 0, "a refused request is no refused message: the model stays, no resync");
      const warnings = host.logLines("warn");
      assert.equal(warnings.length, 1);
      assert.match(warnings[0], /unavailable: HTTP 403 \(refused \(not_reader\): not yours\).*retrying with backoff up to 30 s$/);
    });

    it("an answer marked stopping: taken, no failure, the next poll within a second on the retry tick (two seconds after a second mark), then the short backoff from its first step", async () => {
      feed.publish("c");
      await start();
      const polls = feed.requests.length;
      feed.inject.push("stopping", "stopping");
      feed.publish("d"); // answers the held poll; the poll after it gets the stopping no-change
      await until("the stopping answer", () => feed.requests.length === polls + 1 && metric("no_change") === 1);
      await sleep(50);
      assert.equal(feed.requests.length, polls + 1, "not polled again at once");
      assert.equal(host.tickPeriodMs, Retry.RETRY_TICK_MS, "the retry is due within a second: fast ticks");
      assert.equal(metric("unavailable") + metric("refused"), 0);
      assert.deepEqual(host.logLines("warn"), []);
      // Within the spread: the next poll, marked again (the same process, still stopping).
      tickAfter(Retry.STOPPING_SPREAD_MS + 60);
      await until("the second stopping answer", () => feed.requests.length === polls + 2 && metric("no_change") === 2);
      await sleep(50);
      assert.equal(feed.requests.length, polls + 2, "not polled again at once");
      // The feed is gone (a restart): the poll within the doubled spread fails, and the next
      // wait is the unavailable backoff's first step.
      await feed.kill();
      tickAfter(2 * Retry.STOPPING_SPREAD_MS + 60);
      await until("the poll after the stop to fail", () => metric("unavailable") === 1);
      const before = calls();
      tickAfter(UNAVAILABLE[0] + 60);
      assert.equal(calls(), before + 1, `a retry within ${UNAVAILABLE[0]} ms`);
      await until("that retry to fail", () => metric("unavailable") === 2);
      await feed.start();
    });
  });
});

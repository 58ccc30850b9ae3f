// The delivery retry loop (feed/src/deliver/pusher.ts) alone, with deliveries that fail on
// command: backoff doubling to its cap with jitter, a newer snapshot superseding one that keeps
// failing, a follower that neither writes nor counts as behind, a new writer that reads what the
// place holds before writing, a write that never answers timed out and retried. The same loop
// against a real API server: tests/feed/replicas.test.ts.
// Run: node --import tsx --test tests/feed/pusher.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Pusher, type Delivery, type PushSnapshot } from "../../feed/src/deliver/pusher.js";
import { Metrics } from "../../feed/src/metrics.js";
import { sleep } from "./harness.js";

const snap = (n: number): PushSnapshot => ({ version: `1-${n}`, text: `{"n":${n}}`, bytes: 7, digest: `d${n}` });

/** A place that holds a digest; `fail` makes the next writes throw, `hang` makes them never answer. */
class Place implements Delivery {
  readonly kind = "wasmplugin";
  readonly where = "the test's place";
  held: string | undefined;
  writes: Array<{ at: number; digest: string }> = [];
  attempts: number[] = [];
  reads = 0;
  fail = false;
  hang = false;

  async landed(): Promise<string | undefined> {
    this.reads++;
    return this.held;
  }

  async push(s: PushSnapshot): Promise<void> {
    this.attempts.push(Date.now());
    if (this.hang) return new Promise(() => undefined);
    if (this.fail) throw Object.assign(new Error("HTTP-Code: 403\nMessage: x"), { code: 403, body: JSON.stringify({ message: "denied by the test" }) });
    this.held = s.digest;
    this.writes.push({ at: Date.now(), digest: s.digest });
  }
}

function setup(config: Partial<{ retryInitialMs: number; retryMaxMs: number; timeoutMs: number }> = {}) {
  const metrics = new Metrics();
  const logs: string[] = [];
  const pusher = new Pusher({ retryInitialMs: 40, retryMaxMs: 320, unreadyAfterMs: 1000, timeoutMs: 2000, ...config }, metrics, (level, m) => logs.push(`${level} ${m}`));
  const place = new Place();
  pusher.add("t", place);
  const behindSeconds = () => {
    pusher.refreshMetrics();
    return metrics.get("feed_target_behind_seconds", { target: "t", delivery: "wasmplugin" });
  };
  return { metrics, logs, pusher, place, behindSeconds };
}

async function until(what: string, ms: number, ok: () => boolean): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(5);
  }
}

describe("feed: deliveries retried until they land (deliver/pusher.ts)", () => {
  it("a failed push is retried with doubling waits up to the cap (each drawn from its upper half), and lands once the place accepts it", async () => {
    const { pusher, place, metrics, logs, behindSeconds } = setup();
    place.fail = true;
    await pusher.want("t", snap(1), Date.now());
    await until("7 attempts", 5000, () => place.attempts.length >= 7);
    const gaps = place.attempts.slice(1).map((t, i) => t - place.attempts[i]);
    const full = [40, 80, 160, 320, 320, 320];
    gaps.forEach((gap, i) => {
      assert.ok(gap >= full[i] / 2 - 5, `wait ${i + 1}: ${gap} ms, at least half of ${full[i]}`);
      // The upper bound allows 250 ms of timer lateness on a loaded machine (the property is the lower bound and the cap).
      assert.ok(gap <= full[i] + 250, `wait ${i + 1}: ${gap} ms, at most ${full[i]} (+ timer slack)`);
    });
    assert.ok((behindSeconds() ?? 0) > 0, "behind while failing");
    assert.equal(pusher.behind()[0].error, "403 denied by the test");
    assert.equal(logs.filter((l) => l.startsWith("error")).length, 1, "one error line per distinct error, not per attempt");
    place.fail = false;
    await until("landed", 2000, () => place.held === "d1");
    assert.equal(behindSeconds(), 0);
    assert.deepEqual(pusher.behind(), []);
    assert.equal(metrics.get("feed_push_errors_total", { target: "t", delivery: "wasmplugin" }), place.attempts.length - 1);
    assert.match(logs.at(-1) ?? "", /now holds 1-1 after \d+ failed attempt/);
    pusher.stop();
  });

  it("a newer snapshot replaces one that keeps failing: pushed at once with the backoff reset, and behind counts from the first one not landed", async () => {
    const { pusher, place } = setup({ retryInitialMs: 1000, retryMaxMs: 8000 });
    place.fail = true;
    const first = Date.now() - 5000;
    await pusher.want("t", snap(1), first);
    await pusher.want("t", snap(2), Date.now());
    assert.equal(place.attempts.length, 2, "the second pushed at once, not after the first's backoff");
    assert.equal(pusher.behind()[0].since, first, "behind since the first snapshot not landed");
    place.fail = false;
    await pusher.want("t", snap(3), Date.now());
    assert.deepEqual(place.writes.map((w) => w.digest), ["d3"], "only the latest is written");
    assert.deepEqual(pusher.behind(), []);
    pusher.stop();
  });

  it("a follower neither writes nor is behind; as the writer it reads the place first and writes only what differs; paused, it stops retrying", async () => {
    const { pusher, place, behindSeconds } = setup();
    let writer = false;
    pusher.gate(() => writer);
    await pusher.want("t", snap(1), Date.now() - 10_000);
    assert.equal(place.attempts.length, 0);
    assert.deepEqual(pusher.behind(), []);
    assert.equal(behindSeconds(), 0);
    // The old leader left d1 in place: the new one reads it and writes nothing.
    place.held = "d1";
    writer = true;
    pusher.resume();
    await until("read", 1000, () => place.reads === 1);
    await sleep(50);
    assert.equal(place.attempts.length, 0, "what already landed is not written again");
    assert.deepEqual(pusher.behind(), []);
    // A change while leading: written once.
    await pusher.want("t", snap(2), Date.now());
    assert.deepEqual(place.writes.map((w) => w.digest), ["d2"]);
    // Failing, then the Lease lost: no more attempts.
    place.fail = true;
    await pusher.want("t", snap(3), Date.now());
    const attempts = place.attempts.length;
    writer = false;
    pusher.pause();
    await sleep(400);
    assert.equal(place.attempts.length, attempts, "no retry after the Lease went");
    assert.equal(behindSeconds(), 0);
    pusher.stop();
  });

  it("a place that cannot be read is written anyway (unknown is not landed)", async () => {
    const { pusher, place } = setup();
    place.landed = async () => {
      place.reads++;
      throw Object.assign(new Error("HTTP-Code: 403"), { code: 403 });
    };
    await pusher.want("t", snap(1), Date.now());
    assert.equal(place.reads, 1);
    assert.deepEqual(place.writes.map((w) => w.digest), ["d1"]);
    assert.deepEqual(pusher.behind(), []);
    pusher.stop();
  });

  it("a write that never answers fails after push.timeoutMs and is retried; the render awaiting it is released", async () => {
    const { pusher, place } = setup({ timeoutMs: 150 });
    place.hang = true;
    const started = Date.now();
    await pusher.want("t", snap(1), Date.now());
    const waited = Date.now() - started;
    assert.ok(waited >= 140 && waited < 1000, `released after ${waited} ms`);
    assert.match(pusher.behind()[0].error ?? "", /writing took over 150 ms/);
    place.hang = false;
    await until("landed", 2000, () => place.held === "d1");
    pusher.stop();
  });
});

// The order in which the channel answers polls (feed/src/delta_endpoints.ts answerInTurn): one
// queue for the polls a version woke and the polls that came in behind, answered a slice at a
// time with the loop's timers and I/O between slices. What it must hold: no answer runs inside
// the call that queued it; answers run in the order queued; a poll queued during a burst waits
// for the rest of that burst; and a timer due during a long burst (the debounce that publishes
// the next version) runs before the burst ends instead of after it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DeltaEndpoints, type NetworkDelta } from "../../feed/src/delta_endpoints.js";
import { Metrics } from "../../feed/src/metrics.js";

function endpoints(): { ends: DeltaEndpoints; network: NetworkDelta } {
  // Only `waiters` of the network is read by waitForDelta; the rest is never touched here.
  const network = { waiters: new Set<() => void>() } as unknown as NetworkDelta;
  return { ends: new DeltaEndpoints(() => "net", new Map([["net", network]]), new Metrics(false)), network };
}

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** Resolves once nothing is queued (the queue drains within a few turns here). */
function settled(): Promise<void> {
  return new Promise((done) => setTimeout(done, 200));
}

test("an answer never runs inside the call that queues it, and answers run in the order queued", async () => {
  const { ends } = endpoints();
  const ran: number[] = [];
  for (let i = 0; i < 500; i++) ends.answerInTurn(() => ran.push(i));
  assert.equal(ran.length, 0, "answered synchronously");
  await settled();
  assert.deepEqual(ran, Array.from({ length: 500 }, (_, i) => i));
});

test("a timer due during a long burst runs between its slices, not after the whole burst", async () => {
  const { ends } = endpoints();
  const ran: string[] = [];
  // 60 answers of 1 ms each: far longer than one slice. The first sets a timer, as a watch event
  // arriving during a burst sets the debounce that publishes the next version.
  for (let i = 0; i < 60; i++)
    ends.answerInTurn(() => {
      if (i === 0) setTimeout(() => ran.push("timer"), 0);
      busy(1);
      ran.push(`a${i}`);
    });
  await settled();
  const at = ran.indexOf("timer");
  assert.ok(at > 0, `the timer ran before the answer that set it: ${ran.slice(0, 5).join(",")}`);
  assert.ok(at < 30, `the timer waited for most of the burst: it ran after ${at} answers`);
  assert.deepEqual(
    ran.filter((r) => r !== "timer"),
    Array.from({ length: 60 }, (_, i) => `a${i}`),
  );
});

test("a poll queued during a burst is answered after the rest of that burst", async () => {
  const { ends } = endpoints();
  const ran: string[] = [];
  for (let i = 0; i < 40; i++)
    ends.answerInTurn(() => {
      busy(1);
      ran.push(`burst${i}`);
      // The first poller answered is back at once, behind the version: it waits its turn.
      if (i === 0) ends.answerInTurn(() => ran.push("back"));
    });
  await settled();
  assert.equal(ran.length, 41);
  assert.equal(ran.at(-1), "back", `answered ahead of the burst: ${ran.indexOf("back")}`);
});

test("a held poll woken by the next version is answered in turn, behind the answers queued before it", async () => {
  const { ends, network } = endpoints();
  const ran: string[] = [];
  ends.waitForDelta("sidecar", 60_000, () => ran.push("held"));
  ends.answerInTurn(() => ran.push("before"));
  assert.equal(network.waiters.size, 1);
  // The publication wakes every waiter (controller.ts renderDeltas).
  for (const wake of [...network.waiters]) wake();
  assert.equal(network.waiters.size, 0);
  assert.equal(ran.length, 0, "woken inside the publication");
  ends.answerInTurn(() => ran.push("after"));
  await settled();
  assert.deepEqual(ran, ["before", "held", "after"]);
});

test("a held poll whose wait runs out, or that is cancelled, is answered once", async () => {
  const { ends, network } = endpoints();
  let answered = 0;
  const cancel = ends.waitForDelta("sidecar", 20, () => answered++);
  await new Promise((done) => setTimeout(done, 60));
  cancel();
  for (const wake of [...network.waiters]) wake();
  await settled();
  assert.equal(answered, 1);
  assert.equal(network.waiters.size, 0);
});

test("stopping answers everything queued at once, in order, and nothing twice", async () => {
  const { ends, network } = endpoints();
  const ran: string[] = [];
  for (let i = 0; i < 3; i++) ends.waitForDelta("sidecar", 60_000, () => ran.push(`held${i}`));
  for (let i = 0; i < 200; i++) ends.answerInTurn(() => ran.push(`q${i}`));
  // controller.ts stop: every held poll is woken, then everything queued is answered before the channel closes.
  for (const wake of [...network.waiters]) wake();
  ends.answerAllNow();
  assert.equal(ran.length, 203);
  assert.deepEqual(ran.slice(200), ["held0", "held1", "held2"]);
  await settled();
  assert.equal(ran.length, 203, "answered again after stopping");
  // The queue works after it: a later answer still comes in its turn.
  ends.answerInTurn(() => ran.push("later"));
  assert.equal(ran.length, 203);
  await settled();
  assert.equal(ran.at(-1), "later");
});

// The feed's metrics API over prom-client (feed/src/metrics.ts): what callers write is what
// Prometheus reads, each feed's registry is its own, and no write throws.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Metrics } from "../../feed/src/metrics.js";

/** The sample lines of one family (no HELP/TYPE), in the order served. */
function samples(text: string, name: string): string[] {
  return text.split("\n").filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
}

describe("feed metrics API", () => {
  it("gauges and counters: set, add, get, label names in order whatever order the caller gives", async () => {
    const m = new Metrics(false);
    m.declare("feed_things", "gauge", "things");
    m.declare("feed_done_total", "counter", "done");
    m.set("feed_things", { target: "a", kind: "pods" }, 3);
    m.add("feed_things", { kind: "pods", target: "a" }, -1);
    m.add("feed_done_total", { target: "a" });
    m.add("feed_done_total", { target: "a" }, 2);
    assert.equal(m.get("feed_things", { kind: "pods", target: "a" }), 2);
    assert.equal(m.get("feed_done_total", { target: "a" }), 3);
    assert.equal(m.get("feed_done_total", { target: "b" }), undefined);
    const text = await m.text();
    assert.deepEqual(samples(text, "feed_things"), ['feed_things{kind="pods",target="a"} 2']);
    assert.deepEqual(samples(text, "feed_done_total"), ['feed_done_total{target="a"} 3']);
    assert.match(text, /^# HELP feed_done_total done\n# TYPE feed_done_total counter$/m);
  });

  it("a label name first seen later re-creates the metric with every series kept", async () => {
    const m = new Metrics(false);
    m.declare("feed_refused_total", "counter", "refused");
    m.add("feed_refused_total", { target: "a" }, 4);
    m.add("feed_refused_total", { target: "a", reason: "epoch" });
    assert.deepEqual(samples(await m.text(), "feed_refused_total"), ['feed_refused_total{target="a"} 4', 'feed_refused_total{reason="epoch",target="a"} 1']);
  });

  it("a counter never goes down and a non-number is dropped, without throwing", async () => {
    const m = new Metrics(false);
    m.declare("feed_sent_total", "counter", "sent");
    m.add("feed_sent_total", {}, 5);
    m.add("feed_sent_total", {}, -2);
    m.set("feed_other", {}, Number.NaN);
    m.observe("feed_sent_total", {}, 1);
    assert.equal(m.get("feed_sent_total"), 5);
    assert.equal(m.get("feed_other"), undefined);
    assert.deepEqual(samples(await m.text(), "feed_sent_total"), ["feed_sent_total 5"]);
  });

  it("histograms: declared buckets, cumulative counts, sum; get() is the number of observations", async () => {
    const m = new Metrics(false);
    m.declare("feed_wait_seconds", "histogram", "wait", [0.1, 1]);
    for (const v of [0.05, 0.5, 0.7, 3]) m.observe("feed_wait_seconds", { path: "delta" }, v);
    assert.equal(m.get("feed_wait_seconds", { path: "delta" }), 4);
    const text = await m.text();
    assert.deepEqual(samples(text, "feed_wait_seconds_bucket"), [
      'feed_wait_seconds_bucket{le="0.1",path="delta"} 1',
      'feed_wait_seconds_bucket{le="1",path="delta"} 3',
      'feed_wait_seconds_bucket{le="+Inf",path="delta"} 4',
    ]);
    assert.deepEqual(samples(text, "feed_wait_seconds_sum"), ['feed_wait_seconds_sum{path="delta"} 4.25']);
    assert.deepEqual(samples(text, "feed_wait_seconds_count"), ['feed_wait_seconds_count{path="delta"} 4']);
  });

  it("clear drops every series of a name, which can then be written again", async () => {
    const m = new Metrics(false);
    m.declare("feed_gaps", "gauge", "gaps");
    m.set("feed_gaps", { reason: "host_network_pod" }, 2);
    m.clear("feed_gaps");
    assert.equal(m.get("feed_gaps", { reason: "host_network_pod" }), undefined);
    assert.deepEqual(samples(await m.text(), "feed_gaps"), []);
    m.set("feed_gaps", { reason: "external_name" }, 1);
    assert.deepEqual(samples(await m.text(), "feed_gaps"), ['feed_gaps{reason="external_name"} 1']);
  });

  it("remove drops only the series whose labels include the given ones", async () => {
    const m = new Metrics(false);
    m.add("feed_watch_errors_total", { cluster: "east", kind: "pods" });
    m.add("feed_watch_errors_total", { cluster: "east", kind: "services" });
    m.add("feed_watch_errors_total", { cluster: "west", kind: "pods" });
    m.remove("feed_watch_errors_total", { cluster: "east" });
    assert.equal(m.get("feed_watch_errors_total", { cluster: "east", kind: "pods" }), undefined);
    assert.deepEqual(samples(await m.text(), "feed_watch_errors_total"), ['feed_watch_errors_total{cluster="west",kind="pods"} 1']);
  });


  it("a frozen label object kept by its caller writes the same series as fresh objects, and survives clear, remove and a new label name", async () => {
    const m = new Metrics(false);
    const pods = Object.freeze({ cluster: "east", kind: "pods" });
    m.add("feed_watch_errors_total", pods);
    m.add("feed_watch_errors_total", { kind: "pods", cluster: "east" });
    m.add("feed_watch_errors_total", pods, 2);
    assert.equal(m.get("feed_watch_errors_total", { cluster: "east", kind: "pods" }), 4);
    // Removed: the kept object starts a new series, not the removed one's value.
    m.remove("feed_watch_errors_total", { cluster: "east" });
    m.add("feed_watch_errors_total", pods);
    assert.deepEqual(samples(await m.text(), "feed_watch_errors_total"), ['feed_watch_errors_total{cluster="east",kind="pods"} 1']);
    m.clear("feed_watch_errors_total");
    m.add("feed_watch_errors_total", pods, 5);
    assert.equal(m.get("feed_watch_errors_total", { cluster: "east", kind: "pods" }), 5);
    // A label name first seen later: the series the kept object writes stays the one served.
    m.add("feed_watch_errors_total", { cluster: "west", kind: "pods", reason: "gone" });
    m.add("feed_watch_errors_total", pods);
    assert.deepEqual(samples(await m.text(), "feed_watch_errors_total"), ['feed_watch_errors_total{cluster="east",kind="pods"} 6', 'feed_watch_errors_total{cluster="west",kind="pods",reason="gone"} 1']);
  });
  it("label values are escaped", async () => {
    const m = new Metrics(false);
    m.set("feed_odd", { cluster: 'a"b\\c\nd' }, 1);
    assert.deepEqual(samples(await m.text(), "feed_odd"), ['feed_odd{cluster="a\\"b\\\\c\\nd"} 1']);
  });

  it("two feeds in one process keep their own values; both serve the process's metrics", async () => {
    const a = new Metrics();
    const b = new Metrics();
    a.add("feed_events_total", { cluster: "c" }, 2);
    b.add("feed_events_total", { cluster: "c" }, 5);
    const [ta, tb] = [await a.text(), await b.text()];
    assert.deepEqual(samples(ta, "feed_events_total"), ['feed_events_total{cluster="c"} 2']);
    assert.deepEqual(samples(tb, "feed_events_total"), ['feed_events_total{cluster="c"} 5']);
    for (const t of [ta, tb]) assert.match(t, /^process_resident_memory_bytes \d+$/m);
    assert.doesNotMatch(await new Metrics(false).text(), /process_/);
  });
});

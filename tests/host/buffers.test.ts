// Connection data: buffer reads and writes, StopIteration and resume, closing from the filter,
// read-disable while on_new_connection holds the chain, and large chunks (memory growth).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { linesStarting, probe, text } from "./helpers.js";

// Destination ports select the probe's scenario (see tests/fixtures/host_probe/index.ts).
const STOP_THEN_CONTINUE = "10.0.0.1:2";
const CLOSE_ON_DATA = "10.0.0.1:3";
const EDIT_BUFFER = "10.0.0.1:4";
const STOP_UPSTREAM_ONCE = "10.0.0.1:6";
const STOP_NEW_CONNECTION = "10.0.0.1:7";

describe("data buffers", () => {
  it("passes bytes on when the filter continues, and records what reached each side", async () => {
    const host = await probe();
    const conn = host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(text(conn.downstreamData("hello ").forwarded), "hello ");
    conn.downstreamData("world");
    assert.equal(text(conn.upstreamData("reply").forwarded), "reply");
    assert.equal(text(conn.upstreamBytes), "hello world");
    assert.equal(text(conn.downstreamBytes), "reply");
  });

  it("set_buffer_bytes: start 0 drains then prepends, start ≥ size appends, other starts are BAD_ARGUMENT; reads clamp", async () => {
    const host = await probe();
    const conn = host.connect({ destination: EDIT_BUFFER });
    const result = conn.downstreamData("hello");
    // Drain 2 ("he") and prepend "AB", append "!", refuse start 1; read from 2 with a huge length.
    assert.equal(text(result.forwarded), "ABllo!");
    assert.deepEqual(linesStarting(host, "edit"), ["edit replaced=0 appended=0 bad=2 clamped=llo!"]);
  });

  it("StopIteration keeps the bytes; the next call delivers them accumulated; continue_stream(Downstream) forwards them", async () => {
    const host = await probe();
    const conn = host.connect({ destination: STOP_THEN_CONTINUE });
    const first = conn.downstreamData("hello ");
    assert.equal(first.status, "StopIteration");
    assert.equal(first.forwarded.length, 0);
    const second = conn.downstreamData("world");
    // The probe resumes with continue_stream(Downstream) and still returns StopIteration.
    assert.equal(second.status, "StopIteration");
    assert.equal(text(second.forwarded), "hello world");
    // continue_stream(Upstream) is UNIMPLEMENTED (12) in Envoy.
    assert.deepEqual(linesStarting(host, "continue"), ["continue status=0 upstream=12 size=11"]);
    assert.equal(text(conn.upstreamBytes), "hello world");
  });

  it("StopIteration on upstream data holds it until the next upstream data continues", async () => {
    const host = await probe();
    const conn = host.connect({ destination: STOP_UPSTREAM_ONCE });
    assert.equal(conn.upstreamData("abc").status, "StopIteration");
    const next = conn.upstreamData("def");
    assert.equal(next.status, "Continue");
    assert.equal(text(next.forwarded), "abcdef");
    assert.deepEqual(linesStarting(host, "upstream_data"), ["upstream_data size=6 got=6 eos=0"]);
  });

  it("close_stream closes the connection after the callback: nothing forwarded, close callbacks run, later data is not delivered", async () => {
    const host = await probe({ recordCalls: true });
    const conn = host.connect({ destination: CLOSE_ON_DATA });
    const result = conn.downstreamData("hello");
    assert.equal(result.closed, true);
    assert.equal(result.forwarded.length, 0);
    assert.equal(conn.closeReason, "filter");
    assert.ok(host.logLines().includes("downstream_close peer=1"));
    assert.deepEqual(
      host.calls.slice(-3).map((c) => c.fn),
      ["proxy_on_done", "proxy_on_log", "proxy_on_delete"],
    );
    assert.equal(conn.downstreamData("more").status, "Closed");
    assert.equal(conn.upstreamBytes.length, 0);
  });

  it("StopIteration in on_new_connection leaves reading disabled (tcp_proxy has not run); bytes wait in the socket", async () => {
    const host = await probe();
    const conn = host.connect({ destination: STOP_NEW_CONNECTION, upstream: { address: "10.1.1.1:80" } });
    assert.equal(conn.status, "StopIteration");
    assert.equal(conn.readDisabled, true);
    assert.equal(conn.downstreamData("early").status, "ReadDisabled");
    assert.deepEqual(linesStarting(host, "downstream_data"), []);
    assert.throws(() => conn.upstreamData("x"), /no upstream yet/);
  });

  it("with early data allowed, bytes reach the filter while on_new_connection holds the chain", async () => {
    const host = await probe();
    const conn = host.connect({ destination: STOP_NEW_CONNECTION, earlyData: true, upstream: { address: "10.1.1.1:80" } });
    const result = conn.downstreamData("early");
    assert.equal(result.status, "Continue");
    assert.equal(text(result.forwarded), "early");
    conn.downstreamData("next");
    // During the first callback tcp_proxy had not run yet (no upstream.address); once the filter
    // continued, the chain moved on and tcp_proxy connected.
    assert.deepEqual(linesStarting(host, "downstream_data"), [
      "downstream_data size=5 got=5 eos=0 upstream=<null>",
      "downstream_data size=4 got=4 eos=0 upstream=10.1.1.1:80",
    ]);
  });

  it("handles a 1 MiB chunk (guest memory grows; views are refreshed)", async () => {
    const host = await probe();
    const conn = host.connect({ destination: "10.0.0.1:80" });
    const chunk = new Uint8Array(1 << 20).map((_, i) => i & 0xff);
    const result = conn.downstreamData(chunk);
    assert.equal(result.status, "Continue");
    assert.deepEqual(result.forwarded, chunk);
    assert.equal(host.metrics().get("probe.bytes"), 1 << 20);
    const second = conn.downstreamData(chunk);
    assert.equal(second.forwarded.length, 1 << 20);
    assert.equal(host.metrics().get("probe.bytes"), 2 << 20);
  });
});

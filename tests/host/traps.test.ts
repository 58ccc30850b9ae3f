// Traps: the VM fails for good, later callbacks are skipped, and the failure policy decides what
// happens to the connections (FAIL_CLOSED closes them, FAIL_OPEN lets bytes bypass the filter).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ProxyWasmHost } from "../../host/index.js";
import { ensureBuilt, probe, text } from "./helpers.js";

const TRAP_ON_NEW_CONNECTION = "10.0.0.1:1";
const TRAP_ON_DATA = "10.0.0.1:5";
const ABORT_ON_NEW_CONNECTION = "10.0.0.1:8";

describe("traps with FAIL_CLOSED (the default)", () => {
  it("marks the VM failed, records the trap and closes the connection", async () => {
    const host = await probe({ recordCalls: true });
    const conn = host.connect({ destination: TRAP_ON_NEW_CONNECTION });
    assert.equal(host.failed, true);
    assert.match(host.trapMessage ?? "", /^Function: proxy_on_new_connection failed: RuntimeError: unreachable/);
    assert.equal(conn.status, "StopIteration");
    assert.equal(conn.closed, true);
    assert.equal(conn.closeReason, "vm_failed");
    // No callback runs on a failed VM: not even close/done/log/delete for this connection.
    assert.equal(host.calls.at(-1)?.fn, "proxy_on_new_connection");
    assert.equal(host.calls.at(-1)?.trapped, true);
    assert.ok(host.logs().some((e) => e.level === "error" && e.message.startsWith("Plugin Crash: Function: proxy_on_new_connection")));
  });

  it("closes later connections at once, and in-flight ones at their next event, without calling the guest", async () => {
    const host = await probe({ recordCalls: true });
    const inFlight = host.connect({ destination: "10.0.0.1:80" });
    host.connect({ destination: TRAP_ON_NEW_CONNECTION });
    const calls = host.calls.length;
    const later = host.connect({ destination: "10.0.0.1:80" });
    assert.equal(later.closed, true);
    assert.equal(later.status, "StopIteration");
    assert.equal(later.downstreamData("x").status, "Closed");
    const result = inFlight.downstreamData("hello");
    assert.equal(result.status, "StopIteration");
    assert.equal(result.closed, true);
    assert.equal(result.forwarded.length, 0);
    assert.equal(host.calls.length, calls);
  });

  it("a trap in a data callback closes that connection", async () => {
    const host = await probe();
    const conn = host.connect({ destination: TRAP_ON_DATA });
    const result = conn.downstreamData("boom");
    assert.equal(result.closed, true);
    assert.equal(result.forwarded.length, 0);
    assert.match(host.trapMessage ?? "", /proxy_on_downstream_data/);
  });

  it("an AssemblyScript throw goes through the runtime's abort handler: a critical log line, then the trap", async () => {
    const host = await probe();
    host.connect({ destination: ABORT_ON_NEW_CONNECTION });
    assert.equal(host.failed, true);
    const critical = host.logs().filter((e) => e.level === "critical").map((e) => e.message);
    assert.equal(critical.length, 1);
    assert.match(critical[0]!, /^wasm abort: probe abort at tests\/fixtures\/host_probe\/index\.ts:\d+:\d+$/);
  });

  it("a trap during configuration makes start() fail (the canary catches it)", async () => {
    const host = await ProxyWasmHost.fromFile(ensureBuilt("host_probe"), { rootId: "probe", pluginConfiguration: "trap=configure" });
    assert.equal(host.start(), false);
    assert.match(host.startFailure ?? "", /^canary: Function: proxy_on_configure failed: RuntimeError: unreachable/);
  });
});

describe("traps with FAIL_OPEN", () => {
  it("lets the trapping connection continue and passes bytes untouched", async () => {
    const host = await probe({ failurePolicy: "FAIL_OPEN" });
    const conn = host.connect({ destination: TRAP_ON_NEW_CONNECTION });
    assert.equal(host.failed, true);
    assert.equal(conn.status, "Continue");
    assert.equal(conn.closed, false);
    assert.equal(text(conn.downstreamData("hello").forwarded), "hello");
  });

  it("new connections skip the filter entirely", async () => {
    const host = await probe({ failurePolicy: "FAIL_OPEN", recordCalls: true });
    host.connect({ destination: TRAP_ON_NEW_CONNECTION });
    const calls = host.calls.length;
    const conn = host.connect({ destination: "10.0.0.1:80" });
    assert.equal(conn.bypassed, true);
    assert.equal(conn.id, 0);
    assert.equal(text(conn.downstreamData("up").forwarded), "up");
    assert.equal(text(conn.upstreamData("down").forwarded), "down");
    conn.end();
    assert.equal(host.calls.length, calls);
  });

  it("in-flight connections keep passing bytes without the filter", async () => {
    const host = await probe({ failurePolicy: "FAIL_OPEN" });
    const inFlight = host.connect({ destination: "10.0.0.1:2" }); // would StopIteration on data
    host.connect({ destination: TRAP_ON_NEW_CONNECTION });
    const result = inFlight.downstreamData("through");
    assert.equal(result.status, "Continue");
    assert.equal(text(result.forwarded), "through");
  });
});

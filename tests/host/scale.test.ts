// Per-connection cost must not depend on how many connections are open.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { linesStarting, probe } from "./helpers.js";

const QUIET = "10.0.0.1:9"; // the probe only counts the connection

describe("many connections", () => {
  it("keeps 10,000 connections open, then a new one still works with the same number of host calls", async () => {
    const host = await probe();
    const first = host.connect({ destination: QUIET });
    const open = [first];
    for (let i = 1; i < 10_000; i++) open.push(host.connect({ destination: QUIET }));
    assert.equal(host.metrics().get("probe.active"), 10_000);
    assert.equal(host.liveContexts, 10_001); // + the root context

    const last = host.connect({ destination: QUIET });
    assert.equal(last.status, "Continue");
    assert.equal(last.hostCalls, first.hostCalls);

    const full = host.connect({ destination: "10.0.0.1:80" });
    assert.equal(full.status, "Continue");
    assert.equal(full.filterState.get("envoy.tcp_proxy.cluster"), "cluster_80");
    assert.equal(linesStarting(host, "new_connection").length, 1);

    for (const conn of [...open, last, full]) conn.end();
    assert.equal(host.metrics().get("probe.active"), 0);
    assert.equal(host.liveContexts, 1);
  });
});

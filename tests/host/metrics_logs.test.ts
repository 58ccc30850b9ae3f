// Metrics (define/increment/record/get, Envoy's id scheme, unknown ids) and logs (levels,
// proxy_get_log_level, capture).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { linesStarting, probe } from "./helpers.js";

describe("metrics", () => {
  it("counts with counters and gauges, exposed by name", async () => {
    const host = await probe();
    const a = host.connect({ destination: "10.0.0.1:80" });
    host.connect({ destination: "10.0.0.1:80" });
    assert.equal(host.metrics().get("probe.connections"), 2);
    assert.equal(host.metrics().get("probe.active"), 2);
    a.end();
    assert.equal(host.metrics().get("probe.active"), 1);
  });

  it("keeps one stat per name: the canary and every root defining it share the value", async () => {
    const host = await probe({ canary: true });
    // probe.configured is a gauge set to value()+1 in each on_configure: canary, then main.
    assert.equal(host.metrics().get("probe.configured"), 2);
    const noCanary = await probe({ canary: false });
    assert.equal(noCanary.metrics().get("probe.configured"), 1);
    // A reconfigured root defines the same names again and keeps counting the same stats.
    noCanary.connect({ destination: "10.0.0.1:80" });
    assert.equal(noCanary.reconfigure("v=2"), true);
    noCanary.connect({ destination: "10.0.0.1:80" });
    assert.equal(noCanary.metrics().get("probe.connections"), 2);
  });

  it("uses Envoy's ids (type in the low 2 bits), NOT_FOUND for unknown ids, BAD_ARGUMENT for a counter decrement", async () => {
    const host = await probe({ pluginConfiguration: "badmetric=1", canary: false });
    // Counters get 4, 8, ...; gauges 5, 9, ... (probe.connections is the first counter, probe.active the first gauge).
    assert.deepEqual(linesStarting(host, "badmetric"), ["badmetric inc=1 record=1 get=1 negative=2 ids=4,5"]);
  });
});

describe("logs", () => {
  it("captures every proxy_log line with its level and context", async () => {
    const host = await probe();
    const conn = host.connect({ destination: "10.0.0.1:80" });
    const entry = host.logs().find((e) => e.vm === "main" && e.message.startsWith("new_connection"));
    assert.ok(entry);
    assert.equal(entry.level, "info");
    assert.equal(entry.contextId, conn.id);
    assert.equal(entry.source, "proxy_log");
  });

  it("proxy_get_log_level returns the configured level (default info), and lines below it are dropped", async () => {
    const info = await probe();
    info.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(info.logLines("debug"), []);

    const debug = await probe({ logLevel: "debug" });
    debug.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(debug.logLines("debug"), ["debug enabled"]);
  });

  it("a level changed at run time reaches the filter at its next configuration or tick (the runtime reads it once per configure, not per connection)", async () => {
    const host = await probe({ canary: false });
    host.setLogLevel("debug");
    host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(host.logLines("debug"), [], "read at configure: still info");
    assert.equal(host.reconfigure(""), true);
    host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(host.logLines("debug"), ["debug enabled"]);
    host.setLogLevel("warn");
    host.tick();
    host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(host.logLines("debug"), ["debug enabled"]);
    // The host itself still drops a line below its current level: the info line of the third
    // connection is not printed at warn.
    assert.equal(linesStarting(host, "new_connection").length, 2);
  });

  it("marks the canary VM's lines", async () => {
    const host = await probe({ pluginConfiguration: "x=1" });
    const configure = host.logs().filter((e) => e.message === "configure config=x=1");
    assert.deepEqual(configure.map((e) => e.vm), ["canary", "main"]);
  });
});

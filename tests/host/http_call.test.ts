// The host's emulation of proxy_http_call / proxy_on_http_call_response and the tick timer,
// checked against the same facts as the real Envoy (tests/support/http_call_facts.ts,
// tests/envoy/http_call.test.ts), on a real loopback upstream.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ProxyWasmHost } from "../../host/index.js";
import { CallUpstream, checkProbeFacts, checkUpstreamFacts, PROBE_CONFIGURATION } from "../support/http_call_facts.js";
import { freePort } from "../support/ports.js";
import { ensureBuilt } from "./helpers.js";

/** Fires ticks while the guest keeps a period, as Envoy's timer would. */
async function runTicks(host: ProxyWasmHost, limit: number): Promise<void> {
  for (let i = 0; i < limit && host.tickPeriodMs > 0; i++) {
    await sleep(host.tickPeriodMs);
    host.tick();
  }
}

describe("host: proxy_http_call as Envoy does it", () => {
  let upstream: CallUpstream;
  let refusedPort: number;
  before(async () => {
    upstream = await CallUpstream.start();
    refusedPort = await freePort(); // nothing listens there
  });
  after(() => upstream.close());

  const start = async () => {
    const host = await ProxyWasmHost.fromFile(ensureBuilt("http_call_probe"), {
      rootId: "http_call_probe",
      pluginConfiguration: PROBE_CONFIGURATION,
      clusters: { feed: { address: `127.0.0.1:${upstream.port}` }, refused: { address: `127.0.0.1:${refusedPort}` } },
    });
    assert.ok(host.start(), host.startFailure);
    return host;
  };

  it("answers each outcome with Envoy's statuses, headers, bodies and tokens", async () => {
    const host = await start();
    assert.equal(host.tickPeriodMs, 100);
    await runTicks(host, 10);
    await sleep(400); // the 300 ms timeout
    checkProbeFacts(host.logLines(), "host");
    checkUpstreamFacts(upstream, 1);
    assert.equal(host.httpCallsInFlight, 0);
    assert.deepEqual(host.notices, []);
    host.dispose();
  });

  it("cancels a pending call when its root is deleted, with no callback", async () => {
    const host = await start();
    const seenBefore = upstream.seen.length;
    host.tick(); // makes the calls
    while (!upstream.seen.slice(seenBefore).some((s) => s.path === "/slow")) await sleep(10);
    const slow = host.httpCalls.find((c) => c.path === "/slow");
    assert.ok(slow);
    const cancelledBefore = upstream.cancelled.length;
    assert.ok(host.reconfigure("tick=100"));
    assert.ok(host.logLines().includes("deleted root 1"));
    await sleep(500);
    assert.equal(host.logLines().filter((l) => l.startsWith(`response token=${slow.token} `)).length, 0, "no callback for the deleted root");
    assert.ok(upstream.cancelled.slice(cancelledBefore).includes("/slow"), `the upstream saw /slow closed: ${upstream.cancelled}`);
    host.dispose();
  });

  it("manual clusters: the test answers, resets or times out each call", async () => {
    const host = await ProxyWasmHost.fromFile(ensureBuilt("http_call_probe"), {
      rootId: "http_call_probe",
      pluginConfiguration: "call=feed|/a|1000;call=feed|/b|1000;call=feed|/c|1000",
      clusters: { feed: {} },
    });
    assert.ok(host.start(), host.startFailure);
    host.tick();
    const [a, b, c] = host.pendingHttpCalls;
    assert.deepEqual([a.path, a.authority, a.method, a.timeoutMs], ["/a", "feed", "GET", 1000]);
    assert.ok(host.respondHttpCall(a.token, { headers: [[":status", "200"], ["x-v", "1"]], body: new TextEncoder().encode("ok"), trailers: [] }));
    assert.ok(host.resetHttpCall(b.token));
    assert.ok(host.timeoutHttpCall(c.token));
    assert.equal(host.respondHttpCall(c.token, { headers: [], body: new Uint8Array(0), trailers: [] }), false, "answered once");
    const lines = host.logLines().filter((l) => l.startsWith("response"));
    assert.deepEqual(lines, [
      `response token=${a.token} headers=2 body=2 trailers=0 status=200 callstatus=0/ pairs=:status:200,x-v:1 text=ok`,
      `response token=${b.token} headers=0 body=0 trailers=0 status=0 callstatus=11/reset pairs= text=`,
      `response token=${c.token} headers=3 body=24 trailers=0 status=504 callstatus=11/ pairs=:status:504,content-length:24,content-type:text/plain text=upstream request timeout`,
    ]);
  });
});

// What a root context sees of proxy_http_call, stated once and checked twice: against the real
// Envoy (tests/envoy/http_call.test.ts) and against the test host's emulation
// (tests/host/http_call.test.ts), both running tests/fixtures/http_call_probe on the same
// loopback upstream. A fact that holds in Envoy but not in the host (or the reverse) fails one
// of the two.
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** The upstream: one path per outcome. */
export class CallUpstream {
  readonly seen: Array<{ path: string; headers: IncomingHttpHeaders }> = [];
  /** Paths whose request was closed by the client before any response was written. */
  readonly cancelled: string[] = [];
  private constructor(readonly server: Server) {}

  static async start(): Promise<CallUpstream> {
    const upstream = new CallUpstream(createServer());
    upstream.server.on("request", (req, res) => {
      const path = req.url ?? "";
      upstream.seen.push({ path, headers: req.headers });
      res.on("close", () => {
        if (!res.headersSent) upstream.cancelled.push(path);
      });
      if (path === "/ok" || path === "/timeout-zero-ok") {
        res.writeHead(200, { "content-type": "application/x-mesh-delta", "x-feed-version": "7" });
        res.end("hello");
      } else if (path === "/reset") {
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("part");
        setTimeout(() => req.socket.destroy(), 50);
      } else if (path === "/close") {
        req.socket.destroy();
      } else if (path === "/404") {
        res.writeHead(404);
        res.end("nope");
      }
      // "/slow" and "/hold" never answer.
    });
    await new Promise<void>((done) => upstream.server.listen(0, "127.0.0.1", done));
    return upstream;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((done) => this.server.close(() => done()));
  }
}

/** Cluster "feed" is the upstream, "refused" a loopback port nothing listens on. */
export const CALLS = [
  "feed|/ok|2000",
  "feed|/slow|300",
  "feed|/reset|2000",
  "feed|/close|2000",
  "feed|/404|2000",
  "refused|/ok|2000",
  "unknown_cluster|/ok|2000",
  "feed|/ok|2000|-",
  "feed|/timeout-zero-ok|0",
];

export const PROBE_CONFIGURATION = "tick=100;ticks=3;" + CALLS.map((call) => `call=${call}`).join(";");

export interface ProbeResponse {
  token: number;
  headers: number;
  body: number;
  trailers: number;
  status: number;
  callStatus: string;
  pairs: string;
  text: string;
  /** Position among this VM's response lines (callbacks arrive as outcomes happen). */
  order: number;
}

/** Parses one VM's probe lines: the call results by index and the responses by token. */
export function parseProbe(lines: string[]): { calls: Array<{ status: number; token: number }>; responses: Map<number, ProbeResponse>; ticks: number; outside: string[] } {
  const calls: Array<{ status: number; token: number }> = [];
  const responses = new Map<number, ProbeResponse>();
  let ticks = 0;
  const outside: string[] = [];
  for (const line of lines) {
    let m = /call (\d+) status=(\d+) token=(\d+)/.exec(line);
    if (m) calls[Number(m[1])] = { status: Number(m[2]), token: Number(m[3]) };
    m = /response token=(\d+) headers=(\d+) body=(\d+) trailers=(\d+) status=(\d+) callstatus=(\S*) pairs=(.*) text=(.*)$/.exec(line);
    if (m) {
      responses.set(Number(m[1]), {
        token: Number(m[1]),
        headers: Number(m[2]),
        body: Number(m[3]),
        trailers: Number(m[4]),
        status: Number(m[5]),
        callStatus: m[6],
        pairs: m[7],
        text: m[8],
        order: responses.size,
      });
    }
    if (/tick \d+ root/.test(line)) ticks++;
    m = /outside (header=\d+ body=\d+)/.exec(line);
    if (m) outside.push(m[1]);
  }
  return { calls, responses, ticks, outside };
}

const CONNECT_ERROR = "upstream connect error or disconnect/reset before headers. reset reason: ";

/** The facts, for one VM's lines (CALLS made once, on its first tick). */
export function checkProbeFacts(lines: string[], where: string): void {
  const { calls, responses, ticks, outside } = parseProbe(lines);
  assert.equal(calls.length, CALLS.length, `${where}: every call was made`);
  // Tokens count per VM from 4 in steps of 4; refused calls get none.
  assert.deepEqual(calls.map((c) => c.status), [0, 0, 0, 0, 0, 0, 2, 2, 0], `${where}: unknown cluster and missing :authority are BAD_ARGUMENT`);
  assert.deepEqual(calls.map((c) => c.token), [4, 8, 12, 16, 20, 24, 0, 0, 28], `${where}: tokens`);
  const response = (i: number): ProbeResponse => {
    const got = responses.get(calls[i].token);
    assert.ok(got, `${where}: a response for call ${i} (${CALLS[i]})`);
    return got;
  };
  const ok = response(0);
  assert.equal(ok.status, 200);
  assert.equal(ok.headers, 7, `${where}: 200 headers ${ok.pairs}`);
  assert.match(ok.pairs, /^:status:200,content-type:application\/x-mesh-delta,x-feed-version:7,date:[^,]+,[^,]+ GMT,connection:keep-alive,transfer-encoding:chunked,x-envoy-upstream-service-time:\d+$/);
  assert.equal(ok.body, 5);
  assert.equal(ok.text, "hello");
  assert.equal(ok.trailers, 0);
  const timeout = response(1);
  assert.deepEqual([timeout.status, timeout.headers, timeout.text], [504, 3, "upstream request timeout"], `${where}: timeout`);
  assert.equal(timeout.pairs, ":status:504,content-length:24,content-type:text/plain");
  const reset = response(2);
  assert.deepEqual([reset.headers, reset.body, reset.trailers, reset.status, reset.callStatus], [0, 0, 0, 0, "11/reset"], `${where}: reset after the headers`);
  const closed = response(3);
  assert.deepEqual([closed.status, closed.headers, closed.text], [503, 3, CONNECT_ERROR + "connection termination"], `${where}: closed before the headers`);
  const notFound = response(4);
  assert.deepEqual([notFound.status, notFound.text], [404, "nope"]);
  const refused = response(5);
  assert.deepEqual([refused.status, refused.headers, refused.text], [503, 3, CONNECT_ERROR + "remote connection failure"], `${where}: connection refused`);
  assert.equal(refused.pairs, ":status:503,content-length:98,content-type:text/plain");
  assert.equal(response(8).status, 200, `${where}: timeout 0 is no timeout`);
  // Envoy never clears the status code after a reset: a later callback still reads 11 (the
  // reset usually comes first, 50 ms after its headers; the timeout at 300 ms).
  const afterReset = [ok, timeout, closed, notFound, refused].filter((r) => r.order > reset.order);
  const beforeReset = [ok, timeout, closed, notFound, refused].filter((r) => r.order < reset.order);
  for (const r of afterReset) assert.equal(r.callStatus, "11/", `${where}: after the reset, status code 11 with no message (token ${r.token})`);
  for (const r of beforeReset) assert.equal(r.callStatus, "0/", `${where}: before any reset, status code 0 (token ${r.token})`);
  assert.ok(afterReset.length > 0, `${where}: a callback after the reset`);
  assert.equal(ticks, 3, `${where}: three ticks, then period 0 stops the timer`);
  assert.ok(outside.length >= 1 && outside.every((o) => o === "header=2 body=1"), `${where}: outside the callback header BAD_ARGUMENT, body NOT_FOUND: ${outside}`);
}

/** What the upstream saw of one VM's calls. */
export function checkUpstreamFacts(upstream: CallUpstream, vms: number): void {
  const ok = upstream.seen.filter((s) => s.path === "/ok");
  assert.equal(ok.length, vms, "one /ok call per VM (the one without :authority was refused)");
  for (const { headers } of ok) {
    assert.equal(headers.host, "feed");
    assert.equal(headers["x-envoy-internal"], "true");
    assert.equal(headers["x-envoy-expected-rq-timeout-ms"], "2000");
  }
  for (const { headers } of upstream.seen.filter((s) => s.path === "/timeout-zero-ok")) {
    assert.equal(headers["x-envoy-expected-rq-timeout-ms"], undefined, "no timeout header for timeout 0");
  }
}

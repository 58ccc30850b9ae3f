// The channel's own HTTP/1.1 (feed/src/channel_http.ts) on a real loopback socket: the narrow
// HTTP/1.1 that Envoy and the filters speak is served, one request at a time per connection;
// everything two parsers could read two ways (a bare LF, a folded line, two lengths, a
// transfer-encoding, ...) is refused with one line naming the field, the connection closed and
// the drop counted; a request not whole within its deadline gets 408, an idle connection goes.
// The same layer under the real feed, in both channel modes: channel_auth.test.ts,
// channel_istio_sidecar.test.ts, server_limits.test.ts, and behind a real Envoy sidecar
// tests/istio/envoy_feed_channel.test.ts.
import assert from "node:assert/strict";
import { connect, createServer, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { ChannelConnection, MAX_HEADER_BYTES, MAX_HEADER_LINES, type ChannelReply, type ChannelRequest } from "../../feed/src/channel_http.js";
import { parseHead } from "../../feed/src/channel_request_head.js";

const MAX_BODY = 64;

/** Everything the server sends until it closes the connection, or `ms` pass. */
function exchange(port: number, parts: (string | Buffer)[], ms = 3000, gapMs = 0): Promise<{ text: string; closed: boolean }> {
  return new Promise((done) => {
    const s: Socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    s.on("data", (c: Buffer) => chunks.push(c));
    s.on("error", () => undefined);
    const t = setTimeout(() => {
      s.destroy();
      done({ text: Buffer.concat(chunks).toString("latin1"), closed: false });
    }, ms);
    s.once("close", () => {
      clearTimeout(t);
      done({ text: Buffer.concat(chunks).toString("latin1"), closed: true });
    });
    void (async () => {
      for (const p of parts) {
        if (s.destroyed) return;
        s.write(p);
        if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
      }
    })();
  });
}

describe("the channel's HTTP/1.1 layer", () => {
  let server: Server;
  let port: number;
  const dropped: string[] = [];
  const held: ChannelReply[] = [];
  const seen: ChannelRequest[] = [];

  before(async () => {
    server = createServer((socket) => {
      new ChannelConnection(
        socket,
        (req, res) => {
          seen.push(req);
          if (req.url === "/hold") {
            held.push(res);
            return;
          }
          const text = `${req.method} ${req.url} body=${req.body?.length ?? 0} xfcc=${req.headers["x-forwarded-client-cert"] ?? "-"}\n`;
          res.writeHead(200, { "content-type": "text/plain", ...(req.url === "/close" ? { connection: "close" } : {}) }).end(text);
        },
        { headersTimeoutMs: 300, idleTimeoutMs: 1000, maxBodyBytes: MAX_BODY, dropped: (reason) => dropped.push(reason) },
      );
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
    port = (server.address() as { port: number }).port;
  });

  after(async () => {
    await new Promise<void>((done) => server.close(() => done()));
  });

  const GET = (path: string, extra = "") => `GET ${path} HTTP/1.1\r\nhost: feed\r\n${extra}\r\n`;
  const answers = (text: string) => text.split("HTTP/1.1 ").filter((a) => a !== "");

  it("answers a connection's requests in order, kept alive; pipelined ones one after the other; a request split byte by byte", async () => {
    const a = await exchange(port, [GET("/a") + GET("/b"), GET("/c")], 500, 50);
    assert.equal(a.closed, false, "kept alive");
    assert.deepEqual(
      answers(a.text).map((x) => x.split("\r\n\r\n")[1]),
      ["GET /a body=0 xfcc=-\n", "GET /b body=0 xfcc=-\n", "GET /c body=0 xfcc=-\n"],
    );
    assert.ok(a.text.startsWith(`HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${"GET /a body=0 xfcc=-\n".length}\r\n\r\n`), a.text);
    const bytes = [...GET("/split")].map((c) => c);
    const b = await exchange(port, bytes, 1000, 2);
    assert.match(b.text, /GET \/split body=0/);
  });

  it("takes a body by content-length, split over several writes, and the next request behind it", async () => {
    const body = "x".repeat(40);
    const a = await exchange(port, [`POST /p HTTP/1.1\r\nhost: feed\r\ncontent-length: 40\r\n\r\n${body.slice(0, 10)}`, body.slice(10) + GET("/after")], 500, 30);
    assert.deepEqual(
      answers(a.text).map((x) => x.split("\r\n\r\n")[1]),
      ["POST /p body=40 xfcc=-\n", "GET /after body=0 xfcc=-\n"],
    );
  });

  it("HEAD gets the headers only; connection: close (asked, or answered) closes after the answer", async () => {
    const h = await exchange(port, [`HEAD /h HTTP/1.1\r\nhost: feed\r\n\r\n`], 500);
    assert.equal(h.text, `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${"HEAD /h body=0 xfcc=-\n".length}\r\n\r\n`);
    const asked = await exchange(port, [GET("/a", "connection: keep-alive, Close\r\n") + GET("/never")]);
    assert.ok(asked.closed);
    assert.equal(answers(asked.text).length, 1);
    assert.match(asked.text, /connection: close\r\n/);
    const answered = await exchange(port, [GET("/close") + GET("/never")]);
    assert.ok(answered.closed);
    assert.equal(answers(answered.text).length, 1);
  });

  it("x-forwarded-client-cert on several lines is one value, joined with commas in order", async () => {
    const a = await exchange(port, [GET("/x", "x-forwarded-client-cert: URI=a\r\nx-forwarded-client-cert: URI=b\r\n")], 500);
    assert.match(a.text, /xfcc=URI=a,URI=b\n/);
  });

  const refusals: [string, string, number, RegExp][] = [
    ["a bare LF line end", "GET /a HTTP/1.1\nhost: feed\n\n", 400, /^request head: a line ends in LF without CR$/],
    ["a bare LF inside a head that ends in CRLF CRLF", "GET /a HTTP/1.1\r\nhost: feed\nx-a: 1\r\n\r\n", 400, /^request head: a line ends in LF without CR$/],
    ["a bare CR in a value", "GET /a HTTP/1.1\r\nhost: feed\rx\r\n\r\n", 400, /^host: a control character in the value/],
    ["a folded header line", "GET /a HTTP/1.1\r\nhost: feed\r\nx-a: 1\r\n  2\r\n\r\n", 400, /^request head: a folded header line/],
    ["a space before the colon", "GET /a HTTP/1.1\r\nhost: feed\r\ncontent-length : 5\r\n\r\nhello", 400, /^request head: "content-length " is no header name followed by a colon$/],
    ["a line without a colon", "GET /a HTTP/1.1\r\nhost: feed\r\nnocolon\r\n\r\n", 400, /^request head: "nocolon" is no header name/],
    ["two content-lengths", "POST /a HTTP/1.1\r\nhost: feed\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\nhello", 400, /^content-length: more than one$/],
    ["a content-length list", "POST /a HTTP/1.1\r\nhost: feed\r\ncontent-length: 5, 5\r\n\r\nhello", 400, /^content-length: expected digits$/],
    ["a signed content-length", "POST /a HTTP/1.1\r\nhost: feed\r\ncontent-length: +5\r\n\r\nhello", 400, /^content-length: expected digits$/],
    ["transfer-encoding chunked", "POST /a HTTP/1.1\r\nhost: feed\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501, /^transfer-encoding: not taken by the channel/],
    ["content-length and transfer-encoding", "POST /a HTTP/1.1\r\nhost: feed\r\ncontent-length: 5\r\ntransfer-encoding: identity\r\n\r\nhello", 501, /^transfer-encoding: /],
    ["a body over the largest the channel takes", `POST /a HTTP/1.1\r\nhost: feed\r\ncontent-length: ${MAX_BODY + 1}\r\n\r\n`, 413, /^content-length: 65 bytes, the channel takes at most 64$/],
    ["no host", "GET /a HTTP/1.1\r\nx-a: 1\r\n\r\n", 400, /^host: missing$/],
    ["two hosts", "GET /a HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n", 400, /^host: more than one$/],
    ["HTTP/1.0", "GET /a HTTP/1.0\r\nhost: feed\r\n\r\n", 505, /^request line: HTTP\/1\.0, the channel speaks HTTP\/1\.1$/],
    ["a request line with two spaces", "GET  /a HTTP/1.1\r\nhost: feed\r\n\r\n", 400, /^request line: expected METHOD SP request-target SP HTTP\/1\.1/],
    ["a leading empty line", "\r\nGET /a HTTP/1.1\r\nhost: feed\r\n\r\n", 400, /^request line: /],
    ["a NUL in a value", "GET /a HTTP/1.1\r\nhost: fe\0ed\r\n\r\n", 400, /^host: a control character in the value/],
    [`more than ${MAX_HEADER_LINES} header lines`, `GET /a HTTP/1.1\r\nhost: feed\r\n${"x-a: 1\r\n".repeat(MAX_HEADER_LINES)}\r\n`, 431, /^request head: more than 100 header lines$/],
    [`a head over ${MAX_HEADER_BYTES} bytes, never ended`, `GET /a HTTP/1.1\r\nhost: feed\r\nx-a: ${"a".repeat(MAX_HEADER_BYTES)}`, 431, /^request head: more than 16384 bytes$/],
  ];
  for (const [what, request, status, line] of refusals) {
    it(`refuses ${what}: ${status} with one line naming it, the connection closed, counted bad_request`, async () => {
      const before = dropped.filter((r) => r === "bad_request").length;
      const seenBefore = seen.length;
      const a = await exchange(port, [request + GET("/next")]);
      assert.ok(a.closed, "closed");
      const [head, body] = a.text.split("\r\n\r\n");
      assert.match(head, new RegExp(`^HTTP/1\\.1 ${status} `));
      assert.match(head, /\r\nconnection: close$/);
      assert.equal(body.split("\n").length, 2, `one line: ${JSON.stringify(body)}`);
      assert.match(body.trimEnd(), line);
      assert.equal(seen.length, seenBefore, "nothing reached the handler, not even the request behind it");
      assert.equal(dropped.filter((r) => r === "bad_request").length, before + 1);
    });
  }

  it("a request not whole within headersTimeoutMs of its first byte gets 408, counted header_timeout; its body too", async () => {
    const before = dropped.filter((r) => r === "header_timeout").length;
    const a = await exchange(port, ["GET /a HTTP/1.1\r\nhost: fe"]);
    assert.ok(a.closed);
    assert.match(a.text, /^HTTP\/1\.1 408 Request Timeout\r\n/);
    const b = await exchange(port, ["POST /a HTTP/1.1\r\nhost: feed\r\ncontent-length: 10\r\n\r\nabc"]);
    assert.ok(b.closed);
    assert.match(b.text, /^HTTP\/1\.1 408 /);
    assert.equal(dropped.filter((r) => r === "header_timeout").length, before + 2);
  });

  it("an idle connection is closed after idleTimeoutMs, counted idle; a held answer's connection waits for it, and its client's leaving is seen", async () => {
    const before = dropped.filter((r) => r === "idle").length;
    const a = await exchange(port, [GET("/a")], 3000);
    assert.ok(a.closed, "closed when idle");
    assert.equal(dropped.filter((r) => r === "idle").length, before + 1);
    // A held reply: the next request on its connection waits; the client going is a close.
    const s = connect(port, "127.0.0.1");
    const got: Buffer[] = [];
    s.on("data", (c: Buffer) => got.push(c));
    s.write(GET("/hold") + GET("/after"));
    while (held.length === 0) await new Promise((r) => setTimeout(r, 10));
    const reply = held.pop() as ChannelReply;
    let closed = false;
    reply.on("close", () => (closed = true));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(Buffer.concat(got).length, 0, "nothing answered while the first is held");
    reply.writeHead(200, { "content-type": "text/plain" }).end("held\n");
    while (!Buffer.concat(got).toString().includes("/after")) await new Promise((r) => setTimeout(r, 10));
    assert.ok(closed, "close follows the finish, as node:http's does");
    s.write(GET("/hold"));
    while (held.length === 0) await new Promise((r) => setTimeout(r, 10));
    const second = held.pop() as ChannelReply;
    let gone = false;
    second.on("close", () => (gone = true));
    s.destroy();
    while (!gone) await new Promise((r) => setTimeout(r, 10));
    assert.equal(second.destroyed, true);
  });

  it("bounded read-ahead: a client pipelining megabytes behind a held answer is read no further than a head and a body past the bound", async () => {
    const s = connect(port, "127.0.0.1");
    s.on("error", () => undefined);
    s.write(GET("/hold"));
    while (held.length === 0) await new Promise((r) => setTimeout(r, 10));
    const reply = held.pop() as ChannelReply;
    const connection = reply.req as ChannelConnection;
    // 16 MB of pipelined requests: more than the kernel's buffers take from a peer that stopped reading.
    const junk = GET("/more").repeat(Math.ceil((16 << 20) / GET("/more").length));
    s.write(junk);
    let last = -1;
    for (let i = 0; i < 100 && s.writableLength !== last; i++) {
      last = s.writableLength;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(s.writableLength > 0, "the client's writes back up: the server stopped reading");
    // The bound, plus at most one chunk read before the pause took effect.
    assert.ok(connection.readAhead <= MAX_HEADER_BYTES + MAX_BODY + (64 << 10), `read ahead ${connection.readAhead} bytes`);
    // A paused socket sees no reset from its peer: the server ends it (as the idle timeout would).
    reply.destroy();
    s.destroy();
  });

  it("parseHead: the fields it reads, each one value; names in any case", () => {
    const text = "POST /delta/mesh?x=1 HTTP/1.1\r\nHost: feed\r\nContent-Length: 3\r\nIf-None-Match: \"a\"\r\nif-none-match: \"b\"\r\nX-Other: \t spaced \t";
    const h = parseHead(Buffer.from(text, "latin1"), text.length, 10);
    assert.ok(!("status" in h));
    assert.deepEqual(h, { method: "POST", url: "/delta/mesh?x=1", contentLength: 3, close: false, headers: { "if-none-match": '"a", "b"' } });
  });

  it("parseHead reads the bytes up to `end` only, matches names in any case and keeps a value's other bytes as they came", () => {
    const head = (text: string, tail = "") => {
      const bytes = Buffer.from(text + tail, "latin1");
      return parseHead(bytes, text.length, 100);
    };
    // What follows `end` (the next request, or garbage in a reused buffer) is never read.
    assert.deepEqual(head("GET /a HTTP/1.1\r\nhost: feed", "\r\n\r\nx-forwarded-client-cert: URI=no\r\n"), { method: "GET", url: "/a", contentLength: 0, close: false, headers: {} });
    const mixed = head("PATCH /a HTTP/1.1\r\nHOST: feed\r\nConnection: keep-alive ,\tClose\r\nX-Forwarded-Client-Cert: URI=\xe9\tx\r\nCONTENT-LENGTH: 007");
    assert.deepEqual(mixed, { method: "PATCH", url: "/a", contentLength: 7, close: true, headers: { "x-forwarded-client-cert": "URI=\xe9\tx" } });
    assert.equal((head("GET /a HTTP/1.1\r\nhost: a\r\nconnection: closed") as { close: boolean }).close, false);
    assert.deepEqual(head("GET /a HTTP/1.1\r\nhost: a\r\nTransfer-Encoding: gzip"), { status: 501, text: "transfer-encoding: not taken by the channel (send the body with content-length)" });
    assert.deepEqual(head("GET /a HTTP/2.0\r\nhost: a"), { status: 505, text: "request line: HTTP/2.0, the channel speaks HTTP/1.1" });
    assert.deepEqual(head("GET /a HTTP/1.1 \r\nhost: a"), { status: 400, text: "request line: expected METHOD SP request-target SP HTTP/1.1, ending in CRLF" });
    assert.deepEqual(head("GET /a HTTP/1.1\r\nX-A: 1\r\r\nhost: a"), { status: 400, text: "x-a: a control character in the value (a line ends in CRLF only)" });
    assert.deepEqual(head("GET /a HTTP/1.1\r\nhost: a\r\ncontent-length: 1234567890123456"), { status: 400, text: "content-length: expected digits" });
    assert.deepEqual(head("GET /a HTTP/1.1\r\nhost: a\r\ncontent-length:"), { status: 400, text: "content-length: expected digits" });
    assert.deepEqual(head("GET /a HTTP/1.1\r\nho\x01st: a"), { status: 400, text: 'request head: "ho\\u0001st" is no header name followed by a colon' });
  });
});

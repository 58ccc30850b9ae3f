// The channel reads a request's head itself (feed/src/channel_request_head.ts). In front of it
// there may be another HTTP/1.1 parser (the feed's own Istio sidecar). Two parsers that both take
// a request must agree on what it says, or one request could be two: this test throws heads built
// from the pieces that parsers tend to read differently at both the channel's reader and Node's
// own parser (llhttp, on a real loopback server). Wherever both take a head, they must agree on
// the method, the target, the body's length (so that the request behind it starts at the same
// byte) and the values of the headers the channel reads. The channel refuses more than llhttp does
// (any transfer-encoding, a folded line, ...); a head only one of them takes is not a disagreement.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import { connect } from "node:net";
import type { AddressInfo } from "node:net";
import { parseHead } from "../../feed/src/channel_request_head.js";

const MAX_BODY = 64;

interface Seen {
  method: string;
  url: string;
  /** -1: the body never ended (llhttp waited for more than the channel read). */
  bodyBytes: number;
  xfcc: string | undefined;
  ifNoneMatch: string | undefined;
}

function joined(req: IncomingMessage, name: string, separator: string): string | undefined {
  const values = req.headersDistinct[name];
  return values === undefined ? undefined : values.join(separator);
}

test("where the channel's head reader and llhttp both take a request, they read the same request", async () => {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    // Recorded when llhttp took the head: a body it then waits for in vain stays at -1.
    const s: Seen = { method: req.method ?? "", url: req.url ?? "", bodyBytes: -1, xfcc: joined(req, "x-forwarded-client-cert", ","), ifNoneMatch: joined(req, "if-none-match", ", ") };
    seen.push(s);
    let bodyBytes = 0;
    req.on("data", (c: Buffer) => (bodyBytes += c.length));
    req.on("end", () => {
      s.bodyBytes = bodyBytes;
      res.end("ok");
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as AddressInfo).port;
  /** What llhttp read of `bytes` (sent whole on one connection), request by request. */
  const llhttp = (bytes: Buffer): Promise<Seen[]> =>
    new Promise((done) => {
      seen.length = 0;
      const s = connect(port, "127.0.0.1");
      s.on("data", () => undefined);
      s.on("error", () => undefined);
      const t = setTimeout(() => s.destroy(), 2000);
      s.once("close", () => {
        clearTimeout(t);
        done([...seen]);
      });
      s.end(bytes);
    });

  // A fixed seed (xorshift): the same heads every run.
  let state = 0x2545f491;
  const pick = <T>(xs: readonly T[]): T => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return xs[(state >>> 0) % xs.length];
  };
  // The well-formed pieces come several times: most heads should be taken by both.
  const methods = ["GET", "GET", "POST", "POST", "HEAD", "PUT", "G@T", "get"];
  const targets = ["/delta/mesh?epoch=1&version=2", "/a", "/%7e?x=%41", "*", "/a b"];
  const versions = ["HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/1.1 ", "http/1.1"];
  const names = ["host", "Host", "HOST", "content-length", "Content-Length", "CONTENT-LENGTH", "x-forwarded-client-cert", "X-Forwarded-Client-Cert", "if-none-match", "If-None-Match", "connection", "x-a", "transfer-encoding", "content-length ", " host", "x\u0001a", "content_length"];
  const separators = [": ", ": ", ": ", ":", ":\t", ":  ", " : "];
  const values = ["feed", "5", "05", "+5", "5, 5", "", "close", "keep-alive, close", "URI=spiffe://a/b", "URI=a,URI=b", '"a"', "v\u0080w", "a\tb", "a\rb", "a\u0000b", "0", "  7 ", "1e1", "0x5", "5 ", "99999999999999999999"];
  const endings = ["\r\n", "\r\n", "\r\n", "\r\n", "\r\n", "\r\n", "\r\n", "\r\n", "\r\n", "\n"];
  const next = Buffer.from("GET /behind HTTP/1.1\r\nhost: feed\r\n\r\n", "latin1");

  let both = 0;
  let withBody = 0;
  for (let i = 0; i < 4000; i++) {
    let head = `${pick(methods)} ${pick(targets)} ${pick(versions)}${pick(endings)}`;
    if (pick([true, true, true, false])) head += `host: feed${pick(endings)}`;
    if (pick([true, false, false])) head += `${pick(["content-length", "Content-Length"])}${pick(separators)}${pick(["3", "05", "0", "64", " 12 "])}${pick(endings)}`;
    const lines = pick([0, 1, 1, 2, 2, 3]);
    for (let l = 0; l < lines; l++) head += `${pick(names)}${pick(separators)}${pick(values)}${pick(endings)}`;
    const text = head.replace(/(\r?\n)$/, "");
    const headBytes = Buffer.from(text, "latin1");
    const ours = parseHead(headBytes, headBytes.length, MAX_BODY);
    if ("status" in ours) continue;
    const body = Buffer.alloc(ours.contentLength, 0x78);
    const got = await llhttp(Buffer.concat([headBytes, Buffer.from("\r\n\r\n"), body, next]));
    // llhttp refused the head: only the channel takes it, no disagreement.
    if (got.length === 0) continue;
    both++;
    if (ours.contentLength > 0) withBody++;
    const where = JSON.stringify(text);
    assert.equal(got[0].method, ours.method, `method of ${where}`);
    assert.equal(got[0].url, ours.url, `target of ${where}`);
    assert.equal(got[0].bodyBytes, ours.contentLength, `body length of ${where}`);
    assert.equal(got[0].xfcc, ours.headers["x-forwarded-client-cert"], `x-forwarded-client-cert of ${where}`);
    assert.equal(got[0].ifNoneMatch, ours.headers["if-none-match"], `if-none-match of ${where}`);
    // The request behind starts where both think this one ended.
    if (!/^connection:\s*(keep-alive, )?close\s*$/im.test(text)) assert.equal(got[1]?.url, "/behind", `the request behind ${where}`);
  }
  server.close();
  // Not vacuous: many heads were taken by both, some with a body.
  assert.ok(both >= 200, `${both} heads taken by both`);
  assert.ok(withBody >= 40, `${withBody} of them with a body`);
});

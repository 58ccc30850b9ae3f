// How much V8 heap one held long poll costs the feed's process: in node:http (the channel's
// server until 2026-12-05, still the operator port's), in the channel's own HTTP/1.1
// (feed/src/channel_http.ts), and in a bare socket reader that keeps only the socket and the
// request's text. The feed holds one poll per
// filter VM until the next version (thousands at once, each ~0.4 s under churn); what a held poll
// keeps is what every scavenge in that time copies (bench/feed/FANOUT.md). Plain TCP on
// loopback: TLS adds the same socket state to both.
//
//   node --expose-gc --import tsx bench/feed/held_request_heap.ts [--requests=2000]
//
// Prints one figure per server: `held_request_heap` with `server` (node_http | channel_http | bare_socket),
// `requests`, `bytesPerRequest` (heap used after a full collection, held minus connected-idle).
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { connect, createServer as createNetServer, type AddressInfo, type Server, type Socket } from "node:net";
import { ChannelConnection } from "../../feed/src/channel_http.js";
import { BUCKETS_BODY_BYTES } from "../../feed/src/http.js";

/** A poll of the shape the filters send (feed/docs/deltas.md), with the headers Envoy adds. */
const POLL =
  "GET /delta/mesh?epoch=1796438918&version=123&wait=25&format=3&digest=0123456789abcdef HTTP/1.1\r\n" +
  "host: mesh-feed\r\nuser-agent: envoy\r\nx-request-id: 0b6a3c5e-1f6e-4a43-9d2f-6c3c2f1f5c11\r\nx-envoy-expected-rq-timeout-ms: 30000\r\n\r\n";

const gc = (globalThis as { gc?: () => void }).gc;

async function settledHeap(): Promise<number> {
  gc!();
  await new Promise((done) => setTimeout(done, 200));
  gc!();
  return process.memoryUsage().heapUsed;
}

type Kind = "node_http" | "channel_http" | "bare_socket";

/** The channel's limits as configured by default (config.ts), with nothing counted. */
const CHANNEL_OPTIONS = { headersTimeoutMs: 10_000, idleTimeoutMs: 120_000, maxBodyBytes: BUCKETS_BODY_BYTES, dropped: () => undefined };

function serverOf(kind: Kind, held: unknown[]): Server {
  if (kind === "node_http") return createHttpServer((req: IncomingMessage, res: ServerResponse) => held.push([req, res]));
  if (kind === "channel_http") return createNetServer((socket: Socket) => new ChannelConnection(socket, (req, res) => held.push([req, res]), CHANNEL_OPTIONS));
  return createNetServer((socket: Socket) => socket.on("data", (chunk: Buffer) => held.push([socket, chunk.toString("latin1")])));
}

async function measure(kind: Kind, requests: number): Promise<number> {
  const held: unknown[] = [];
  const server = serverOf(kind, held);
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  const clients: Socket[] = [];
  for (let i = 0; i < requests; i++) clients.push(await new Promise<Socket>((done) => { const c = connect(port, "127.0.0.1", () => done(c)); }));
  // Connected and idle: what every kept-alive connection costs either way.
  const idle = await settledHeap();
  for (const c of clients) c.write(POLL);
  while (held.length < requests) await new Promise((done) => setTimeout(done, 20));
  const holding = await settledHeap();
  for (const c of clients) c.destroy();
  server.close();
  held.length = 0;
  return Math.round((holding - idle) / requests);
}

async function main(): Promise<void> {
  if (!gc) throw new Error("run with node --expose-gc (the figure is the heap after a full collection)");
  const arg = process.argv.find((a) => a.startsWith("--requests="));
  const requests = arg ? Number(arg.slice("--requests=".length)) : 2000;
  for (const server of ["node_http", "channel_http", "bare_socket"] as const) {
    const bytesPerRequest = await measure(server, requests);
    console.log(JSON.stringify({ figure: "held_request_heap", server, requests, bytesPerRequest }));
  }
}

await main();

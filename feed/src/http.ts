// The feed's two HTTP faces share these handlers:
// - the channel (channel.ts, mutual TLS): what the filters read, each caller only its targets
//   GET /delta/<target>?epoch=E&version=V&wait=S
//                           the mesh as a format-v2 message (delta/wire.ts, wire_full.ts): full, delta from V,
//                           or no-change after holding the request up to S seconds for a change
//   GET /snapshot/<target>  the target's current plugin configuration (exactly what its filter
//                           is given), ETag = its version; If-None-Match with that version → 304
// - the operator's plain port (FeedHttpServer below, 127.0.0.1 unless configured otherwise):
//   GET /snapshot/<target>  of any target
//   GET /snapshots          every target's version, size and publication time (JSON)
//   GET /healthz            200 while the process runs
//   GET /readyz             200 once every cluster has synced and every target has published
//   GET /metrics            Prometheus text
// Whoever reaches the operator port reads every target: the whole pod-IP → identity map.
// Versions are "<epoch>-<n>": the epoch is the feed's start time, so a version from before a
// restart never matches one after it (a client holding it gets the full snapshot again).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { answerParts, PREVIOUS_CLIENT, type ClientState, type DeltaAnswer } from "./delta/channel.js";
import { BUCKET_COUNT, parseDigest } from "./delta/digest.js";
import { FORMAT_VERSION, PREVIOUS_FORMAT } from "./delta/wire.js";
import { admitBody, bodyProgress, ServerGuard, type ServerLimits } from "./server_guard.js";
import type { Reply, RequestHead } from "./reply.js";
import { headLines } from "./channel_http.js";
import { Metrics } from "./metrics.js";
import type { QueryParams } from "./query.js";
import { DEFAULT_OPERATOR_LIMITS } from "./config.js";

export interface PublishedSnapshot {
  target: string;
  version: string;
  text: string;
  bytes: number;
  publishedAt: number;
}

export interface SnapshotSource {
  /** A lazy target is rendered and checked on request (the check off the event loop). */
  snapshot(target: string): PublishedSnapshot | undefined | Promise<PublishedSnapshot | undefined>;
  snapshots(): PublishedSnapshot[] | Promise<PublishedSnapshot[]>;
  ready(): { ready: boolean; reason: string };
  /** Prometheus' text format (prom-client renders it asynchronously). */
  metricsText(): string | Promise<string>;
}

/** What /delta needs from the controller (FeedController implements it). */
export interface DeltaSource {
  hasTarget(target: string): boolean;
  deltaVersion(target: string): number;
  deltaUpToDate(target: string, epoch: number, version: number): boolean;
  /** `woken` once, in its turn (answerInTurn), on the next version or after `ms`; returns a cancel function. */
  waitForDelta(target: string, ms: number, woken: () => void): () => void;
  /** Runs `answer` after every answer queued before it, in a later turn of the loop (one queue for all polls). */
  answerInTurn?(answer: () => void): void;
  deltaAnswer(target: string, epoch: number, version: number, client?: ClientState): DeltaAnswer | undefined;
  heldChanged(delta: number): void;
  /** The feed is stopping (SIGTERM): every poll is answered at once and marked (STOPPING_HEADER). */
  stopping?(): boolean;
  /** Why the feed does not serve the channel now (a replica cut off from its API server); counted when `answered`. */
  notServing?(answered?: boolean): string | undefined;
}

/**
 * The 503 of a replica that does not serve: the filter keeps its model and polls again. The
 * connection is closed, so that the next poll opens a new one, which a Service balances anew
 * (kube-proxy places connections, not requests; a kept-alive one would come back here).
 */
export function answerNotServing(res: Reply, why: string): void {
  res.writeHead(503, { "content-type": "text/plain", "retry-after": "1", connection: "close" }).end(`not serving: ${why}\n`);
}

/**
 * On the answers of a feed that is stopping, with `connection: close`: the filters poll again
 * within a second, on a new connection (another replica, or this one restarted), instead of
 * climbing their backoff (assembly/runtime/feed_retry.ts holds the same name for the client;
 * tests/host/feed_retry.test.ts checks they agree). What istiod's GOAWAY does for xDS.
 */
export const STOPPING_HEADER = "x-feed-stopping";

export const DELTA_CONTENT_TYPE = "application/x-mesh-delta";

/** x-feed-kind by message kind (a rebased no-change is "rebased"). */
const KIND_NAMES: Record<number, string> = { 1: "full", 2: "delta", 3: "no-change", 4: "repair", 5: "ask-buckets" };

/** A query parameter as a non-negative safe integer; undefined when absent; NaN when malformed. */
function uintParam(query: QueryParams, name: string): number | undefined {
  const v = query.get(name);
  if (v === null || v === "") return undefined;
  return /^\d{1,16}$/.test(v) && Number.isSafeInteger(Number(v)) ? Number(v) : NaN;
}

/** The request as /delta reads it: its method and, for a POST, the whole body (the channel's HTTP layer bounds it). */
export interface DeltaRequest {
  readonly method: string;
  readonly body: Buffer | undefined;
}

/** The largest body the channel takes: a repair's bucket digests (channel_http.ts refuses more with 413). */
export const BUCKETS_BODY_BYTES = BUCKET_COUNT * 8;

export function handleDelta(source: SnapshotSource & DeltaSource, target: string, query: QueryParams, req: DeltaRequest, res: Reply, maxWaitSeconds: number): void {
  if (req.method === "POST") {
    // A client's bucket digests (format 3, after KIND_ASK_BUCKETS), answered at once.
    const buckets = parseBuckets(req.body);
    if (typeof buckets === "string") {
      res.writeHead(400, { "content-type": "text/plain", connection: "close" }).end(`${buckets}\n`);
      return;
    }
    answerDelta(source, target, query, req, res, maxWaitSeconds, buckets);
    return;
  }
  answerDelta(source, target, query, req, res, maxWaitSeconds);
}

/** The POST body of a repair poll: BUCKET_COUNT little-endian u64 digests, nothing more; a string is the 400's line. */
function parseBuckets(body: Buffer | undefined): BigUint64Array | string {
  const got = body?.length ?? 0;
  if (!body || got !== BUCKETS_BODY_BYTES) return `body: ${got} bytes, expected ${BUCKETS_BODY_BYTES} (${BUCKET_COUNT} bucket digests, 8 bytes each)`;
  const buckets = new BigUint64Array(BUCKET_COUNT);
  for (let i = 0; i < BUCKET_COUNT; i++) buckets[i] = body.readBigUInt64LE(i * 8);
  return buckets;
}

function answerDelta(source: SnapshotSource & DeltaSource, target: string, query: QueryParams, req: DeltaRequest, res: Reply, maxWaitSeconds: number, buckets?: BigUint64Array): void {
  if (!source.hasTarget(target)) {
    res.writeHead(404, { "content-type": "text/plain" }).end(`no target ${JSON.stringify(target)}\n`);
    return;
  }
  const epoch = uintParam(query, "epoch") ?? 0;
  const version = uintParam(query, "version") ?? 0;
  const wait = uintParam(query, "wait") ?? 0;
  const malformed = Number.isNaN(epoch) ? "epoch" : Number.isNaN(version) ? "version" : Number.isNaN(wait) ? "wait" : undefined;
  if (malformed !== undefined) {
    res.writeHead(400, { "content-type": "text/plain" }).end(`${malformed}: expected a non-negative integer\n`);
    return;
  }
  // What the answer needs of the request, so that a held poll keeps nothing else of it.
  const headOnly = req.method === "HEAD";
  const parsed = clientState(query);
  if (typeof parsed === "string") {
    res.writeHead(400, { "content-type": "text/plain" }).end(`${parsed}\n`);
    return;
  }
  if (buckets && (parsed.format < FORMAT_VERSION || parsed.digest === undefined || query.get("repair") !== "1")) {
    res.writeHead(400, { "content-type": "text/plain" }).end("repair: a POST of bucket digests needs format=3, digest and repair=1\n");
    return;
  }
  const client: ClientState = buckets ? { ...parsed, buckets } : parsed;
  const send = () => {
    // The client may have gone, or been answered, while the poll waited (its turn, or its hold).
    if (res.destroyed || res.writableEnded) return;
    // A held poll released because this replica stopped serving (serving_gate.ts).
    const down = source.notServing?.(true);
    if (down !== undefined) return answerNotServing(res, down);
    const a = source.deltaAnswer(target, epoch, version, client);
    if (!a) {
      res.writeHead(503, { "content-type": "text/plain", "retry-after": "1" }).end(`nothing published yet for target ${JSON.stringify(target)}\n`);
      return;
    }
    const stopping = source.stopping?.() === true;
    // The common answer, framed once for every poller it goes to (below): one write of one
    // shared Buffer, nothing built per answer. The guard counts that Buffer.
    const framed = !headOnly && !stopping && res.sendFramed && res.closing !== true ? framedAnswer(a) : undefined;
    if (framed && res.sendFramed) {
      if (!admitBody(res, framed)) return;
      bodyProgress(res);
      res.sendFramed(framed);
      return;
    }
    // A client that cannot take more is dropped instead (server_guard.ts); the budget counts
    // the shared body (one per version and format), not the per-answer head.
    const out = answerParts(a);
    if (!headOnly && !admitBody(res, out.shared)) return;
    const headers = answerHeaders(a, out.bytes);
    if (stopping) {
      headers[STOPPING_HEADER] = "1";
      headers.connection = "close";
    }
    res.writeHead(200, headers);
    if (headOnly) res.end();
    else {
      if (out.head) res.write(out.head);
      writeBody(res, out.shared);
    }
  };
  const waitMs = Math.min(wait, maxWaitSeconds) * 1000;
  // A stopping feed holds nothing: the poll is answered now, marked (send).
  if (waitMs === 0 || buckets || source.stopping?.() === true || source.deltaVersion(target) === 0 || !source.deltaUpToDate(target, epoch, version)) {
    // In turn behind the polls already waiting for an answer (a version's burst), with the
    // version current then.
    if (source.answerInTurn) source.answerInTurn(send);
    else send();
    return;
  }
  // Up to date: hold the request until the next version or the wait runs out (then no-change).
  const cancel = source.waitForDelta(target, waitMs, () => {
    source.heldChanged(-1);
    res.off("close", cancel);
    send();
  });
  source.heldChanged(1);
  res.on("close", cancel);
}

function answerHeaders(a: DeltaAnswer, bytes: number): Record<string, string> {
  return {
    "content-type": DELTA_CONTENT_TYPE,
    "content-length": String(bytes),
    "cache-control": "no-store",
    "x-feed-kind": a.rebased ? "rebased" : (KIND_NAMES[a.kind] ?? "?"),
    "x-feed-version": String(a.version),
  };
}

/** Answers up to this size go out framed whole, in one write; larger ones in slices (writeBody). */
const FRAMED_MAX = 16 << 10;

/** Each answer's whole response (status line, headers, body), built on its first send. */
const framedAnswers = new WeakMap<DeltaAnswer, Buffer>();

/**
 * The whole HTTP/1.1 response of an answer up to FRAMED_MAX bytes, the same bytes for every
 * poller it goes to: after a version, thousands of polls get one cached delta (delta/channel.ts),
 * and each used to build its own headers, status line and write list, all alive until the
 * socket took them (a scavenge or two later, so copied and promoted: bench/feed/FANOUT.md).
 * Undefined for a larger answer.
 */
function framedAnswer(a: DeltaAnswer): Buffer | undefined {
  const cached = framedAnswers.get(a);
  if (cached) return cached;
  const out = answerParts(a);
  if (out.bytes > FRAMED_MAX) return undefined;
  const head = `${headLines(200, answerHeaders(a, out.bytes))}\r\n`;
  const framed = Buffer.concat([Buffer.from(head, "latin1"), ...(out.head ? [out.head] : []), out.shared]);
  framedAnswers.set(a, framed);
  return framed;
}

/**
 * The client's `format` (the newest wire format it reads; absent: a filter built before format 3,
 * served format 2) and, from format 3 on, `digest` (its model's content digest, 16 hex digits).
 * A format newer than this feed's is served this feed's (the filters read the previous one too).
 * A string: the one-line error for a 400.
 */
export function clientState(query: QueryParams): ClientState | string {
  const f = query.get("format");
  if (f === null) return PREVIOUS_CLIENT;
  if (!/^\d{1,5}$/.test(f) || Number(f) < PREVIOUS_FORMAT) return `format: expected a wire format number >= ${PREVIOUS_FORMAT}`;
  const format = Number(f) >= FORMAT_VERSION ? FORMAT_VERSION : PREVIOUS_FORMAT;
  const d = query.get("digest");
  if (d === null || format < FORMAT_VERSION) return { format };
  const digest = parseDigest(d);
  if (digest === undefined) return "digest: expected 16 lowercase hex digits";
  return { format, digest };
}

/** Bytes handed to the socket at a time (server_guard.ts: why a body is never written whole). */
const CHUNK = 16 << 10;

/**
 * Writes a body in slices, each after the socket took the one before. Written whole, TLS would
 * encrypt all of it at once into memory of its own, per client and outside the shared Buffer,
 * and report it written: a client that never reads then held a private copy of every full
 * message it asked for (measured: 300 such clients of a 1.8 MB message, +640 MB; in slices +110 MB). In slices,
 * what waits for a slow client is the kernel's socket buffer and the shared Buffer, which the
 * guard's write timeout and budgets bound. Each slice taken is progress: a client that takes
 * none for the guard's stall timeout is dropped.
 */
function writeBody(res: Reply, body: Buffer): void {
  let at = 0;
  const more = (): void => {
    bodyProgress(res);
    while (body.length - at > CHUNK) {
      const taken = res.write(body.subarray(at, at + CHUNK));
      at += CHUNK;
      if (!taken) {
        res.once("drain", more);
        return;
      }
    }
    res.end(body.subarray(at));
  };
  more();
}

export function etagOf(version: string): string {
  return `"${version}"`;
}

/** RFC 9110 If-None-Match: a list of entity tags (weak ones compared weakly), or `*`. */
function matches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === "*") return true;
  return header.split(",").some((t) => t.trim().replace(/^W\//, "") === etag);
}

function handleOperator(source: SnapshotSource, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? "/", "http://feed");
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(405, { allow: "GET, HEAD" }).end();
    return;
  }
  if (url.pathname === "/healthz") {
    res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    return;
  }
  if (url.pathname === "/readyz") {
    const r = source.ready();
    res.writeHead(r.ready ? 200 : 503, { "content-type": "text/plain" }).end(`${r.reason}\n`);
    return;
  }
  if (url.pathname === "/metrics") {
    Promise.resolve(source.metricsText()).then(
      (text) => res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(text),
      (error) => res.writeHead(500, { "content-type": "text/plain" }).end(`metrics: ${(error as Error).message}\n`),
    );
    return;
  }
  if (url.pathname === "/snapshots") {
    Promise.resolve(source.snapshots()).then(
      (snaps) => {
        const list = snaps.map(({ target, version, bytes, publishedAt }) => ({ target, version, bytes, publishedAt: new Date(publishedAt).toISOString() }));
        if (!res.destroyed) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(list) + "\n");
      },
      (error) => res.destroyed || res.writeHead(500, { "content-type": "text/plain" }).end(`snapshots: ${(error as Error).message}\n`),
    );
    return;
  }
  const m = /^\/snapshot\/([^/]+)$/.exec(url.pathname);
  if (m) {
    handleSnapshot(source, decodeURIComponent(m[1]), req, res).catch(() => res.destroy());
    return;
  }
  res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
}

/** GET /snapshot/<target>: the published JSON with its ETag (304 when the client holds it). */
export async function handleSnapshot(source: SnapshotSource, target: string, req: RequestHead, res: Reply): Promise<void> {
  const snap = await source.snapshot(target);
  // The client may have gone while a lazy target was checked.
  if (res.destroyed) return;
  if (!snap) {
    res.writeHead(404, { "content-type": "text/plain" }).end(`no published snapshot for target ${JSON.stringify(target)}\n`);
    return;
  }
  const etag = etagOf(snap.version);
  const headers = { etag, "x-feed-version": snap.version, "cache-control": "no-cache" };
  if (matches(req.headers["if-none-match"], etag)) {
    res.writeHead(304, headers).end();
    return;
  }
  if (req.method === "HEAD") {
    res.writeHead(200, { ...headers, "content-type": "application/json", "content-length": String(snap.bytes) }).end();
    return;
  }
  const body = snapshotBody(snap);
  if (!admitBody(res, body)) return;
  res.writeHead(200, { ...headers, "content-type": "application/json", "content-length": String(body.length) });
  writeBody(res, body);
}

/**
 * A published snapshot's bytes, encoded once: every request for that version writes the same
 * Buffer (a string body would be encoded anew, and held, per request).
 */
const bodies = new WeakMap<PublishedSnapshot, Buffer>();
function snapshotBody(snap: PublishedSnapshot): Buffer {
  let b = bodies.get(snap);
  if (!b) {
    b = Buffer.from(snap.text);
    bodies.set(snap, b);
  }
  return b;
}

/** The operator's plain server (no /delta: the filters read only over the channel). */
export class FeedHttpServer {
  private server: Server | undefined;
  private readonly guard: ServerGuard;

  constructor(
    private readonly source: SnapshotSource,
    limits: ServerLimits = DEFAULT_OPERATOR_LIMITS,
    metrics: Metrics = new Metrics(),
  ) {
    this.guard = new ServerGuard("operator", limits, metrics);
  }

  async listen(port: number, host: string): Promise<AddressInfo> {
    const server = createServer(
      this.guard.serverOptions(),
      this.guard.wrap((req: IncomingMessage, res: ServerResponse) => {
        try {
          handleOperator(this.source, req, res);
        } catch (error) {
          res.writeHead(500, { "content-type": "text/plain" }).end(`${(error as Error).message}\n`);
        }
      }),
    );
    this.guard.attach(server);
    this.server = server;
    await new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen(port, host, () => done());
    });
    return server.address() as AddressInfo;
  }

  async close(): Promise<void> {
    const s = this.server;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((done) => s.close(() => done()));
  }
}

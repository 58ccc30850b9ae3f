// Delivery (c) and the operator's window: an HTTP server with
//   GET /snapshot/<target>  the target's current plugin configuration (exactly what its filter
//                           is given), ETag = its version; If-None-Match with that version → 304
//   GET /snapshots          every target's version, size and publication time (JSON)
//   GET /healthz            200 while the process runs
//   GET /readyz             200 once every cluster has synced and every target has published
//   GET /metrics            Prometheus text
// Versions are "<epoch>-<n>": the epoch is the feed's start time, so a version from before a
// restart never matches one after it (a client holding it gets the full snapshot again).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface PublishedSnapshot {
  target: string;
  version: string;
  text: string;
  bytes: number;
  publishedAt: number;
}

export interface SnapshotSource {
  snapshot(target: string): PublishedSnapshot | undefined;
  snapshots(): PublishedSnapshot[];
  ready(): { ready: boolean; reason: string };
  metricsText(): string;
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

function handle(source: SnapshotSource, req: IncomingMessage, res: ServerResponse): void {
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
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(source.metricsText());
    return;
  }
  if (url.pathname === "/snapshots") {
    const list = source.snapshots().map(({ target, version, bytes, publishedAt }) => ({ target, version, bytes, publishedAt: new Date(publishedAt).toISOString() }));
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(list) + "\n");
    return;
  }
  const m = /^\/snapshot\/([^/]+)$/.exec(url.pathname);
  if (m) {
    const snap = source.snapshot(decodeURIComponent(m[1]));
    if (!snap) {
      res.writeHead(404, { "content-type": "text/plain" }).end(`no published snapshot for target ${JSON.stringify(m[1])}\n`);
      return;
    }
    const etag = etagOf(snap.version);
    const headers = { etag, "x-feed-version": snap.version, "cache-control": "no-cache" };
    if (matches(req.headers["if-none-match"], etag)) {
      res.writeHead(304, headers).end();
      return;
    }
    res.writeHead(200, { ...headers, "content-type": "application/json", "content-length": String(snap.bytes) });
    res.end(req.method === "HEAD" ? undefined : snap.text);
    return;
  }
  res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
}

export class FeedHttpServer {
  private server: Server | undefined;

  constructor(private readonly source: SnapshotSource) {}

  async listen(port: number, host: string): Promise<AddressInfo> {
    const server = createServer((req, res) => {
      try {
        handle(this.source, req, res);
      } catch (error) {
        res.writeHead(500, { "content-type": "text/plain" }).end(`${(error as Error).message}\n`);
      }
    });
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

// A small stand-in for the mesh feed's long-poll endpoint (the real one is feed/,
// `/delta/<target>`), for the channel's tests: the protocol and the message header are the
// real ones, the records are opaque text the feed_probe fixture's test sink understands.
// The "model" is the texts published so far joined with "+"; a full message carries all of
// them, a delta the ones after the client's version, joined the same way.
// Wire mode (publishRecords): each version is a list of real v1 records (tests/support/mesh_wire.ts),
// a full message the state they add up to, a delta every record after the client's version (the
// model's rule: the last record of each id wins), so the filters' real decoder applies them.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { Socket } from "node:net";
import { encodeMessage, type WireRecord } from "./mesh_wire.js";

export const KIND_FULL = 1;
export const KIND_DELTA = 2;
export const KIND_NO_CHANGE = 3;

/** A feed message: the 56-byte v2 header, then `records` (opaque here). */
export function feedMessage(kind: number, epoch: bigint, base: bigint, version: bigint, records: Uint8Array | string = "", count = 0): Buffer {
  const body = typeof records === "string" ? Buffer.from(records) : Buffer.from(records);
  const header = Buffer.alloc(56);
  header.writeUInt32LE(0x3148534d, 0);
  header.writeUInt16LE(2, 4);
  header.writeUInt16LE(kind, 6);
  header.writeBigUInt64LE(epoch, 8);
  header.writeBigUInt64LE(base, 16);
  header.writeBigUInt64LE(version, 24);
  header.writeUInt32LE(1024, 32);
  header.writeUInt32LE(1024, 36);
  header.writeUInt32LE(count, 40);
  header.writeUInt32LE(body.length, 44);
  return Buffer.concat([header, body]);
}

export interface FeedRequest {
  readonly target: string;
  readonly epoch: bigint;
  readonly version: bigint;
  readonly wait: number;
  /** The client's TCP source port: one per connection (Envoy keeps one pool per worker). */
  readonly remotePort: number;
  readonly authority: string;
  /** What the feed answered: full, delta, no-change, or an injected failure. */
  answer?: string;
}

interface Held {
  readonly request: FeedRequest;
  readonly res: ServerResponse;
  readonly timer: NodeJS.Timeout;
}

export class FakeFeed {
  epoch = 1000n;
  /** Texts by version: texts[v - 1] was published as version v. */
  readonly texts: string[] = [];
  readonly requests: FeedRequest[] = [];
  /** The next answers to give instead of the protocol's: "bad-delta", "bad-wire-delta:<why>", "bad-header", "html", "500", "403", "reset", "no-change-now", "stopping" (a no-change marked x-feed-stopping, connection: close, as a stopping feed answers). */
  readonly inject: string[] = [];
  /** What "bad-wire-delta:..." sends: real records, the model must refuse them whole. */
  invalidDelta: WireRecord[] = [];
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private held: Held[] = [];

  /** Wire mode: the records of each version (records[v - 1]); texts then hold labels. */
  readonly records: WireRecord[][] = [];
  /** Wire mode: id limits in the header (every id below them). */
  workloadIdLimit = 64;
  serviceIdLimit = 64;

  /** `tls`: speak the real feed's channel TLS with this certificate (tests/support/feed_tls.ts feedServerTls), for a real Envoy's mesh_feed cluster. */
  constructor(
    readonly port = 0,
    private readonly tls?: { cert: string; key: string; ca: string },
  ) {}

  /** A change made of real records (wire mode): the next version. */
  publishRecords(records: WireRecord[], label = `v${this.texts.length + 1}`): bigint {
    this.records.push(records);
    return this.publish(label);
  }

  /** Wire mode: the records the current state adds up to (workloads and services alive now). */
  stateRecords(): WireRecord[] {
    const services = new Map<number, WireRecord>();
    const workloads = new Map<number, WireRecord>();
    for (const change of this.records) {
      for (const r of change) {
        if ("service" in r) services.set(r.service.id, r);
        else if ("removeService" in r) {
          services.delete(r.removeService);
          // A service's memberships go with it.
          for (const [id, w] of workloads) {
            if ("workload" in w) workloads.set(id, { workload: { ...w.workload, memberships: (w.workload.memberships ?? []).filter((m) => m.service !== r.removeService) } });
          }
        } else if ("workload" in r) workloads.set(r.workload.id, r);
        else workloads.delete(r.removeWorkload);
      }
    }
    return [...services.values(), ...workloads.values()];
  }

  /**
   * Wire mode: a prebuilt full message for (epoch, version) instead of one encoded from the
   * records (a mesh too large to hold as record objects: tests/mesh/feed_full_1m.test.ts).
   */
  fullBody: ((epoch: bigint, version: bigint) => Buffer) | undefined;

  private wire(kind: number, base: bigint, version: bigint): Buffer {
    if (kind === KIND_FULL && this.fullBody) return this.fullBody(this.epoch, version);
    const records = kind === KIND_FULL ? this.stateRecords() : kind === KIND_DELTA ? this.records.slice(Number(base)).flat() : [];
    return Buffer.from(encodeMessage({ kind, epoch: this.epoch, baseVersion: base, version, workloadIdLimit: this.workloadIdLimit, serviceIdLimit: this.serviceIdLimit, records }));
  }

  private message(kind: number, base: bigint, version: bigint, records: string): Buffer {
    if (this.records.length > 0) return this.wire(kind, base, version);
    return feedMessage(kind, this.epoch, base, version, records);
  }

  /** Requests held open right now (up to date, waiting for a change). */
  get heldCount(): number {
    return this.held.length;
  }

  /** The (epoch, version) of each request held open right now: one per up-to-date client. */
  heldPositions(): Array<[bigint, bigint]> {
    return this.held.map((h) => [h.request.epoch, h.request.version]);
  }

  get version(): bigint {
    return BigInt(this.texts.length);
  }

  async start(): Promise<number> {
    const handler = (req: IncomingMessage, res: ServerResponse) => this.handle(req, res);
    const server: Server = this.tls ? createTlsServer({ ...this.tls, requestCert: true, rejectUnauthorized: true }, handler) : createServer(handler);
    server.on("connection", (socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
    await new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen(this.boundPort ?? this.port, "127.0.0.1", () => done());
    });
    this.server = server;
    this.boundPort = (server.address() as { port: number }).port;
    return this.boundPort;
  }

  boundPort: number | undefined;

  /** The feed dies: every connection is dropped (held requests see a reset), nothing listens. */
  async kill(): Promise<void> {
    for (const held of this.held) clearTimeout(held.timer);
    this.held = [];
    for (const socket of this.sockets) socket.destroy();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((done) => server.close(() => done()));
  }

  /** A feed restart loses the journal: a new epoch, so every client resyncs with a full model. */
  restartEpoch(): void {
    this.epoch += 1n;
  }

  /** A change: the next version; held requests get their delta at once. */
  publish(text: string): bigint {
    this.texts.push(text);
    const held = this.held;
    this.held = [];
    for (const h of held) {
      clearTimeout(h.timer);
      this.answer(h.request, h.res);
    }
    return this.version;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://feed");
    const match = /^\/delta\/([^/]+)$/.exec(url.pathname);
    if (!match || req.method !== "GET") {
      res.writeHead(404).end("not a feed path");
      return;
    }
    const request: FeedRequest = {
      target: match[1],
      epoch: BigInt(url.searchParams.get("epoch") ?? "0"),
      version: BigInt(url.searchParams.get("version") ?? "0"),
      wait: Number(url.searchParams.get("wait") ?? "0"),
      remotePort: req.socket.remotePort ?? 0,
      authority: req.headers.host ?? "",
    };
    this.requests.push(request);
    const injected = this.inject.shift();
    if (injected !== undefined) return this.injectAnswer(injected, request, req, res);
    const current = request.epoch === this.epoch && request.version === this.version;
    if (!current) return this.answer(request, res);
    // Up to date: hold the request until a change or the wait runs out.
    const timer = setTimeout(() => {
      this.held = this.held.filter((h) => h.res !== res);
      request.answer = "no-change";
      this.send(res, this.message(KIND_NO_CHANGE, 0n, this.version, ""));
    }, request.wait * 1000);
    this.held.push({ request, res, timer });
    res.on("close", () => {
      clearTimeout(timer);
      this.held = this.held.filter((h) => h.res !== res);
    });
  }

  private answer(request: FeedRequest, res: ServerResponse): void {
    const version = this.version;
    if (request.epoch === this.epoch && request.version > 0n && request.version < version) {
      request.answer = "delta";
      this.send(res, this.message(KIND_DELTA, request.version, version, this.texts.slice(Number(request.version)).join("+")));
    } else {
      request.answer = "full";
      this.send(res, this.message(KIND_FULL, 0n, version, this.texts.join("+")));
    }
  }

  private injectAnswer(what: string, request: FeedRequest, req: IncomingMessage, res: ServerResponse): void {
    request.answer = what;
    if (what === "bad-delta") {
      // A delta from the client's own version whose records the sink refuses.
      this.send(res, feedMessage(KIND_DELTA, this.epoch, request.version, request.version + 1n, "BAD record"));
    } else if (what.startsWith("bad-wire-delta:")) {
      // Wire mode: a delta whose first records are valid and whose last is not (invalidDelta).
      this.send(res, Buffer.from(encodeMessage({ kind: KIND_DELTA, epoch: this.epoch, baseVersion: request.version, version: request.version + 1n,
        workloadIdLimit: this.workloadIdLimit, serviceIdLimit: this.serviceIdLimit, records: this.invalidDelta })));
    } else if (what === "no-change-now") {
      this.send(res, feedMessage(KIND_NO_CHANGE, this.epoch, 0n, this.version));
    } else if (what === "bad-header") {
      this.send(res, Buffer.concat([Buffer.from("XXXX"), feedMessage(KIND_FULL, this.epoch, 0n, this.version).subarray(4)]));
    } else if (what === "html") {
      res.writeHead(200, { "content-type": "text/html" }).end("<html>");
    } else if (what === "500") {
      res.writeHead(500, { "content-type": "text/plain" }).end("feed broken");
    } else if (what === "403") {
      res.writeHead(403, { "content-type": "text/plain" }).end("refused (not_reader): not yours");
    } else if (what === "stopping") {
      const message = feedMessage(KIND_NO_CHANGE, this.epoch, 0n, this.version);
      res.writeHead(200, { "content-type": "application/x-mesh-delta", "content-length": String(message.length), "x-feed-stopping": "1", connection: "close" }).end(message);
    } else if (what === "reset") {
      res.writeHead(200, { "content-type": "application/x-mesh-delta" });
      res.write("MSH1");
      setTimeout(() => req.socket.destroy(), 20);
    }
  }

  private send(res: ServerResponse, message: Buffer): void {
    if (res.writableEnded || res.destroyed) return;
    res.writeHead(200, { "content-type": "application/x-mesh-delta", "content-length": String(message.length) }).end(message);
  }
}

// The filters' channel: `/delta/<target>` and `/snapshot/<target>`, each caller identified as
// istiod identifies xDS clients, in one of two ways (`channel.identityFrom`, caller_identity.ts):
//   tls            the feed serves mutual TLS itself: it presents its own workload certificate
//                  (certFile/keyFile), asks every caller for one and checks it against the mesh's
//                  trust root (caFile); the files are re-read when they change (tls_files.ts).
//   istio-sidecar  the feed runs in the mesh behind its own Istio sidecar, which terminates
//                  Istio's mutual TLS (STRICT PeerAuthentication, an AuthorizationPolicy): the
//                  feed serves plain HTTP on the pod port, takes requests only from the sidecar's
//                  inbound source address and the caller's identity from the element the sidecar
//                  appended to x-forwarded-client-cert.
// The caller's SPIFFE id must be among the target's readers (readers.ts). Everything else is
// refused and counted in feed_channel_refused_total{reason}:
//   handshake       (tls) the TLS handshake failed (plain HTTP, no common protocol, a broken hello)
//   no_certificate  (tls) TLS without a client certificate
//   untrusted       (tls) a client certificate that does not chain to the mesh's root (or expired)
//   no_spiffe_id    a trusted certificate (or the sidecar's element) without exactly one SPIFFE URI
//   not_sidecar     (istio-sidecar) a connection from another address than the sidecar's
//   no_forwarded_identity   (istio-sidecar) no x-forwarded-client-cert: the sidecar saw no client certificate
//   bad_forwarded_identity  (istio-sidecar) an x-forwarded-client-cert that does not parse whole
//   not_reader      a mesh identity asking for a target it may not read (or that does not exist:
//                   the answer is the same 403, so target names are not disclosed)
// Refusals are 403 with a one-line reason and `connection: close`; the TLS layer itself accepts
// any client certificate so that the refusal can say why and be counted (istiod refuses in the
// handshake; a caller here learns nothing more than the reason).
import { createServer as createPlainServer, type AddressInfo, type Server, type Socket } from "node:net";
import { createServer as createTlsServer, type Server as TlsServer, type TLSSocket } from "node:tls";
import { forwardedIdentity, socketIdentity, type CallerIdentity } from "./caller_identity.js";
import { ChannelConnection, type ChannelHttpOptions, type ChannelRequest } from "./channel_http.js";
import type { ChannelConfig } from "./config.js";
import type { Logger } from "./controller.js";
import { answerNotServing, BUCKETS_BODY_BYTES, handleDelta, handleSnapshot, type DeltaSource, type SnapshotSource } from "./http.js";
import type { Reply } from "./reply.js";
import type { Metrics } from "./metrics.js";
import { parseQuery, type QueryParams } from "./query.js";
import { mayRead } from "./readers.js";
import { ServerGuard } from "./server_guard.js";
import { TlsFiles } from "./tls_files.js";

export const REFUSED = "feed_channel_refused_total";
/**
 * The accept queue asked for: the kernel caps it at net.core.somaxconn (4096 by default), as Go
 * servers like istiod get. Node's default, 511, overflowed when 2,000 VMs came back within the
 * seconds after a restart (the fan-out bench counted thousands of ListenOverflows): a connection
 * dropped there waits for its SYN to be sent again, 1 s, then 2 s more, with the feed idle.
 */
const ACCEPT_BACKLOG = 65_535;
/** Distinct (caller, target) pairs logged on their first read; past it, no more such lines. */
const MAX_READERS_LOGGED = 10_000;

/** A target's name as the configuration allows it (config.ts): the only spelling served. */
const TARGET_NAME = /^[A-Za-z0-9._-]+$/;

/** A channel request's endpoint, target and query, parsed once per request. */
export interface ChannelPath {
  endpoint: "delta" | "snapshot";
  target: string;
  query: QueryParams;
}

/**
 * `/delta/<target>` or `/snapshot/<target>`, then an optional query; undefined for anything
 * else. The target is taken as written, never decoded or normalized: a name has one spelling,
 * so whoever decides who may read it and whoever serves it read the same name (the channel
 * parses once, in handle, and passes the result on). No `URL` object: this runs for every poll.
 */
function channelPath(rawUrl: string | undefined): ChannelPath | undefined {
  if (rawUrl === undefined) return undefined;
  const q = rawUrl.indexOf("?");
  const path = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const endpoint = path.startsWith("/delta/") ? "delta" : path.startsWith("/snapshot/") ? "snapshot" : undefined;
  if (endpoint === undefined) return undefined;
  const target = path.slice(endpoint.length + 2);
  if (!TARGET_NAME.test(target)) return undefined;
  return { endpoint, target, query: parseQuery(q < 0 ? "" : rawUrl.slice(q + 1)) };
}

/**
 * What the channel serves once a caller may read the target: /delta/<t> and /snapshot/<t>.
 * Exported for in-process tests of the controller's answers, which have no TLS to speak; the
 * channel decides who may read with the same parse (channelPath), so the target authorized is
 * the target served.
 */
export function routeChannel(source: SnapshotSource & DeltaSource, req: ChannelRequest, res: Reply, maxWaitSeconds: number, parsed?: ChannelPath): void {
  const path = parsed ?? channelPath(req.url);
  // POST only on /delta: a filter's bucket digests (feed/docs/deltas.md, "Repair").
  const post = req.method === "POST" && path?.endpoint === "delta";
  if (req.method !== "GET" && req.method !== "HEAD" && !post) {
    res.writeHead(405, { allow: path?.endpoint === "delta" ? "GET, HEAD, POST" : "GET, HEAD" }).end();
    return;
  }
  if (!path) {
    res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    return;
  }
  if (path.endpoint === "delta") handleDelta(source, path.target, path.query, req, res, maxWaitSeconds);
  else handleSnapshot(source, path.target, req, res).catch(() => res.destroy());
}

export class FeedChannelServer {
  private server: Server | undefined;
  /** Open connections (closed at once by close()). */
  private readonly sockets = new Set<Socket>();
  /** tls only: the certificate files, watched for rotation. */
  private readonly files: TlsFiles | undefined;
  private readonly readers: Map<string, readonly string[]>;
  private readonly guard: ServerGuard;
  /** Who has read what, by target: each caller's first read of a target is logged with its SPIFFE id (bounded). */
  private readonly readersSeen = new Map<string, Set<string>>();
  private readersLogged = 0;
  private readonly log: Logger;

  /** A target's readers changed in the configuration (config_reload.ts); the next request uses them. */
  setReaders(target: string, readers: readonly string[]): void {
    if (this.readers.has(target)) this.readers.set(target, readers);
  }

  constructor(
    private readonly source: SnapshotSource & DeltaSource,
    private readonly config: ChannelConfig,
    targets: { name: string; readers: readonly string[] }[],
    private readonly metrics: Metrics,
    log: Logger,
    private readonly maxWaitSeconds: number,
  ) {
    this.log = log;
    this.readers = new Map(targets.map((t) => [t.name, t.readers]));
    this.guard = new ServerGuard("channel", config.limits, metrics);
    metrics.declare(REFUSED, "counter", "channel callers refused, by reason (handshake, no_certificate, untrusted, no_spiffe_id, not_sidecar, no_forwarded_identity, bad_forwarded_identity, not_reader)");
    if (config.identityFrom === "istio-sidecar") {
      this.files = undefined;
      return;
    }
    metrics.declare("feed_channel_tls_reloads_total", "counter", "certificate sets loaded after a change of certFile, keyFile or caFile");
    metrics.declare("feed_channel_tls_reload_errors_total", "counter", "changed certificate sets that did not load (the previous stays)");
    this.files = new TlsFiles(config, {
      loaded: (options) => {
        // Only the TLS mode has files, so the server is the TLS one.
        (this.server as TlsServer | undefined)?.setSecureContext(options);
        metrics.add("feed_channel_tls_reloads_total", {});
        log("info", "channel: certificate files changed, new connections get the new set");
      },
      refused: (reason) => {
        metrics.add("feed_channel_tls_reload_errors_total", {});
        log("warn", `channel: certFile/keyFile/caFile: ${reason}; the previous set stays in force`);
      },
    });
  }

  private refuse(res: Reply, reason: string, detail: string): void {
    this.metrics.add(REFUSED, { reason });
    res.writeHead(403, { "content-type": "text/plain", connection: "close" }).end(`refused (${reason}): ${detail}\n`);
  }

  private identify(req: ChannelRequest): CallerIdentity {
    return this.config.identityFrom === "istio-sidecar" ? forwardedIdentity(req.socket, req.headers["x-forwarded-client-cert"], this.config.sidecarAddresses) : socketIdentity(req.socket as TLSSocket);
  }

  private handle(req: ChannelRequest, res: Reply): void {
    const caller = this.identify(req);
    if (!caller.ok) {
      this.refuse(res, caller.reason, caller.detail);
      return;
    }
    const path = channelPath(req.url);
    if (!path) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    const target = path.target;
    const readers = this.readers.get(target);
    if (!readers || !mayRead(readers, caller.spiffeId)) {
      this.refuse(res, "not_reader", `${caller.spiffeId} may not read target ${JSON.stringify(target)}`);
      return;
    }
    // Looked up without building a key: this runs for every poll.
    let seen = this.readersSeen.get(target);
    if (!seen?.has(caller.spiffeId) && this.readersLogged < MAX_READERS_LOGGED) {
      if (!seen) this.readersSeen.set(target, (seen = new Set()));
      seen.add(caller.spiffeId);
      this.readersLogged++;
      this.log("info", `channel: ${caller.spiffeId} reads target ${JSON.stringify(target)}`);
    }
    // A replica cut off from its API server (serving_gate.ts): after the caller is known, so
    // that an impostor learns nothing about this replica's state.
    const down = this.source.notServing?.(true);
    if (down !== undefined) {
      answerNotServing(res, down);
      return;
    }
    routeChannel(this.source, req, res, this.maxWaitSeconds, path);
  }

  /** Whether the channel accepts connections now (main.ts: once the feed has a model). */
  get listening(): boolean {
    return this.server?.listening === true;
  }

  /**
   * Builds the server (the certificate files are read here: a bad set fails the start at once)
   * without listening: the feed listens once it has a model to serve (main.ts, listen()).
   * Each connection speaks the channel's own HTTP/1.1 (channel_http.ts).
   */
  prepare(): Server {
    if (this.server) return this.server;
    const handler = this.guard.wrap((req: ChannelRequest, res: Reply) => {
      try {
        this.handle(req, res);
      } catch (error) {
        if (!res.writableEnded) res.writeHead(500, { "content-type": "text/plain" }).end(`${(error as Error).message}\n`);
      }
    });
    const l = this.config.limits;
    const options: ChannelHttpOptions = {
      headersTimeoutMs: l.headersTimeoutMs,
      idleTimeoutMs: l.idleTimeoutMs,
      maxBodyBytes: BUCKETS_BODY_BYTES,
      dropped: (reason) => this.guard.clientDropped(reason),
    };
    const serve = (socket: Socket) => new ChannelConnection(socket, handler, options);
    const files = this.files;
    let server: Server;
    if (!files) {
      // Behind the sidecar: plain HTTP on the pod port, every request judged by its peer address
      // and forwarded identity (the sidecar pools callers on its connections: no cap per caller).
      server = createPlainServer(serve);
      this.guard.attachConnections(server);
    } else {
      // Ask every caller for a certificate; judge it in the request (counted, with a reason).
      const tls = createTlsServer({ ...files.load(), requestCert: true, rejectUnauthorized: false, minVersion: "TLSv1.2", handshakeTimeout: l.headersTimeoutMs });
      this.guard.attachConnections(tls);
      // The cap per caller: its identity is known once the handshake is done (callers without a
      // mesh identity share one bucket, so they cannot crowd out the mesh's own).
      tls.on("secureConnection", (socket: TLSSocket) => {
        const id = socketIdentity(socket);
        if (this.guard.callerConnected(socket, id.ok ? id.spiffeId : "")) serve(socket);
      });
      tls.on("tlsClientError", (_error, socket) => {
        this.metrics.add(REFUSED, { reason: "handshake" });
        socket.destroy();
      });
      server = tls;
    }
    // Every accepted connection (before TLS too), so that close() ends a handshake under way.
    server.on("connection", (socket: Socket) => {
      // An answer goes out as it is written (TCP_NODELAY, as Envoy and node:http set it): a
      // large one is written in slices, which must not wait for the client's delayed ACK.
      socket.setNoDelay(true);
      this.sockets.add(socket);
      socket.once("close", () => this.sockets.delete(socket));
    });
    this.server = server;
    // Watched from now: a rotation during a long start is in force when the channel listens.
    files?.watch(this.config.reloadMs);
    return server;
  }

  async listen(): Promise<AddressInfo> {
    const server = this.prepare();
    await new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen({ port: this.config.port, host: this.config.address, backlog: ACCEPT_BACKLOG }, () => done());
    });
    return server.address() as AddressInfo;
  }

  async close(): Promise<void> {
    this.files?.stop();
    const s = this.server;
    if (!s) return;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((done) => s.close(() => done()));
  }
}

// Bounds on what a client of the feed's servers (the channel and the operator port) can hold,
// as Envoy bounds its own listeners (feed/docs/server-limits.md):
//   - connections: a total cap (refused at accept by the kernel-facing server: `maxConnections`)
//     and, on the channel, a cap per caller identity (the TLS peer's SPIFFE id; every caller
//     without one shares one bucket) and a smaller one per peer (that identity from one source
//     address: one sidecar, whose Envoy workers poll on a connection each): the connection past
//     either gets a one-line 503 and is closed;
//   - time: the TLS handshake and the request headers within `headersTimeoutMs` (else 408), a socket idle
//     for `idleTimeoutMs` is closed (a held long poll is no idleness: the config keeps
//     `idleTimeoutMs` above the longest wait), each response body taken within `writeTimeoutMs`,
//     and no body left without progress (no slice taken) for `stallTimeoutMs`: a client that
//     stops reading is dropped once the kernel's buffers are full and that long has passed,
//     whatever the body's size (a stalled TLS write holds ~90 KB of the feed's memory outside
//     its heap). Under pressure that time shrinks, as Envoy's overload manager scales its
//     timeouts down (`reduce_timeouts`): past STALL_SCALE_FROM large bodies being written at once,
//     a new one gets stallTimeoutMs × STALL_SCALE_FROM / their number, never under
//     STALL_FLOOR_MS, so a thousand never-readers are let go in about a second each instead of
//     five. A stall seen right after the event loop was held (a long render) is checked again
//     after the loop has taken in the sockets' completed writes: only a body that still made
//     no progress is dropped;
//   - memory: a response body is the feed's shared Buffer of that version (delta/channel.ts), so
//     a client that does not read pins it. A client whose bytes not yet taken from earlier
//     responses pass `maxUnsentBytes` (pipelined requests, on the operator port: the channel
//     answers a connection's requests one at a time, channel_http.ts) is dropped, and when the distinct
//     bodies still being written pass `maxBufferedBytes` the clients holding the oldest ones are
//     dropped (never the newest: the current version is always served; never one under 64 KiB:
//     a delta or no-change answer of an honest poller).
// Every refusal and drop is counted by server and reason.
import type { Server } from "node:http";
import type { Server as NetServer, Socket } from "node:net";
import type { Metrics } from "./metrics.js";
import type { Reply } from "./reply.js";

export interface ServerLimits {
  maxConnections: number;
  /** 0: no cap per caller (the operator port, which knows no identities). */
  maxConnectionsPerCaller: number;
  /** Per caller and source address (one sidecar); 0 where callers have no identities. */
  maxConnectionsPerPeer: number;
  idleTimeoutMs: number;
  headersTimeoutMs: number;
  writeTimeoutMs: number;
  stallTimeoutMs: number;
  maxUnsentBytes: number;
  maxBufferedBytes: number;
}

/** Bodies under this size are never the reason for a drop under the budget (enforceBudget), nor count as large below. */
const SMALL_BODY = 64 << 10;
/** Large bodies being written at once up to which each gets the whole stallTimeoutMs. */
export const STALL_SCALE_FROM = 64;
/** The shortest stall timeout the scaling gives (never above stallTimeoutMs itself). */
export const STALL_FLOOR_MS = 1000;

/** The stall timeout of a large body admitted while `large` of them (itself included) are being written. */
export function scaledStallMs(stallTimeoutMs: number, large: number): number {
  if (large <= STALL_SCALE_FROM) return stallTimeoutMs;
  return Math.max(Math.min(stallTimeoutMs, STALL_FLOOR_MS), Math.floor((stallTimeoutMs * STALL_SCALE_FROM) / large));
}

export const CONNECTIONS_REFUSED = "feed_connections_refused_total";
export const CLIENTS_DROPPED = "feed_clients_dropped_total";

/** A response being written: its body, how to drop its client, and its deadlines. */
interface InFlight {
  socket: Socket;
  state: SocketState;
  body: Buffer;
  large: boolean;
  /** performance.now() past which the whole response took too long (writeTimeoutMs). */
  writeBy: number;
  stallMs: number;
  /** When the socket last took a slice of the body (performance.now()). */
  progressAt: number;
  done: boolean;
}

interface SocketState {
  unsent: number;
}

/**
 * The guard of each response (http.ts asks it before writing a body) and each response whose
 * body is being written: kept on the response itself where it has the fields (the channel's
 * replies, channel_http.ts), else here (node:http's, on the operator port). A WeakMap entry per
 * poll, thousands a second, is an ephemeron that every young-generation collection traces.
 */
const guards = new WeakMap<Reply, ServerGuard>();
const inFlight = new WeakMap<Reply, InFlight>();

function guardOf(res: Reply): ServerGuard | undefined {
  return ("guard" in res ? res.guard : guards.get(res)) as ServerGuard | undefined;
}

function inFlightOf(res: Reply): InFlight | undefined {
  return ("guardEntry" in res ? res.guardEntry : inFlight.get(res)) as InFlight | undefined;
}

function setInFlight(res: Reply, entry: InFlight | undefined): void {
  if ("guardEntry" in res) res.guardEntry = entry;
  else if (entry) inFlight.set(res, entry);
  else inFlight.delete(res);
}

/** How often a guard with responses being written checks their deadlines. */
const SWEEP_MS = 100;

/**
 * Called by the handlers (http.ts) with the body they are about to write. Returns false when
 * the client was dropped instead (the handler writes nothing). Unguarded responses (in-process
 * tests) always go on.
 */
export function admitBody(res: Reply, body: Buffer): boolean {
  const g = guardOf(res);
  return g ? g.admit(res, body) : true;
}

/** http.ts: the socket took another slice of `res`'s body (the client is reading). */
export function bodyProgress(res: Reply): void {
  const e = inFlightOf(res);
  if (e) e.progressAt = performance.now();
}

export class ServerGuard {
  private readonly sockets = new WeakMap<Socket, SocketState>();
  /** Bodies being written, oldest first, with the responses writing each. */
  private readonly bodies = new Map<Buffer, Set<InFlight>>();
  private bufferedBytes = 0;
  /** Responses with a body of SMALL_BODY or more being written (scaledStallMs). */
  private largeInFlight = 0;
  /** Checks the deadlines while responses are being written (sweep). */
  private sweeper: NodeJS.Timeout | undefined;
  private readonly perCaller = new Map<string, number>();
  private readonly perPeer = new Map<string, number>();
  private open = 0;

  constructor(
    private readonly name: "channel" | "operator",
    private readonly limits: ServerLimits,
    private readonly metrics: Metrics,
  ) {
    metrics.declare(CONNECTIONS_REFUSED, "counter", "connections refused, by server and reason (total: past maxConnections, per_caller: past maxConnectionsPerCaller, per_peer: past maxConnectionsPerPeer)");
    metrics.declare(CLIENTS_DROPPED, "counter", "clients dropped, by server and reason (idle, header_timeout, bad_request, write_timeout, stalled, unsent_bytes, buffer_budget)");
    metrics.declare("feed_connections", "gauge", "open connections, by server");
    metrics.declare("feed_buffered_bytes", "gauge", "distinct response bodies being written (pinned by clients still reading them), by server");
    metrics.set("feed_connections", { server: name }, 0);
    metrics.set("feed_buffered_bytes", { server: name }, 0);
  }

  /** Server options for createServer (http or https): the timeouts Node enforces itself. */
  serverOptions(): { headersTimeout: number; requestTimeout: number; keepAliveTimeout: number; connectionsCheckingInterval: number; handshakeTimeout: number } {
    const l = this.limits;
    return {
      headersTimeout: l.headersTimeoutMs,
      requestTimeout: l.headersTimeoutMs,
      // Past the counted idle timeout (attach), so that the one that closes is the counted one.
      keepAliveTimeout: l.idleTimeoutMs + 1000,
      // Node checks header and request timeouts on this period (30 s by default).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(l.headersTimeoutMs / 4))),
      handshakeTimeout: l.headersTimeoutMs,
    };
  }

  /**
   * The total cap and the count of open connections, on any server about to listen (the
   * channel's own HTTP layer, channel_http.ts, keeps its timeouts itself and counts its drops
   * with clientDropped).
   */
  attachConnections(server: NetServer): void {
    server.maxConnections = this.limits.maxConnections;
    server.on("drop", () => this.metrics.add(CONNECTIONS_REFUSED, { server: this.name, reason: "total" }));
    server.on("connection", (socket: Socket) => {
      this.open++;
      this.metrics.set("feed_connections", { server: this.name }, this.open);
      socket.once("close", () => {
        this.open--;
        this.metrics.set("feed_connections", { server: this.name }, this.open);
      });
    });
  }

  /** A client dropped by the server's HTTP layer itself (the socket is closed there). */
  clientDropped(reason: "idle" | "header_timeout" | "bad_request"): void {
    this.metrics.add(CLIENTS_DROPPED, { server: this.name, reason });
  }

  /** Caps, idle timeout and counting on a node:http server that is about to listen (the operator port). */
  attach(server: Server): void {
    this.attachConnections(server);
    server.setTimeout(this.limits.idleTimeoutMs, (socket: Socket) => this.drop(socket, "idle"));
    // Node reports a request not received within headersTimeoutMs (and unparsable ones) here.
    server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => {
      const timeout = error.code === "ERR_HTTP_REQUEST_TIMEOUT";
      this.metrics.add(CLIENTS_DROPPED, { server: this.name, reason: timeout ? "header_timeout" : "bad_request" });
      if (socket.writable && error.code !== "ECONNRESET") {
        socket.end(timeout ? "HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n" : "HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
        setTimeout(() => socket.destroy(), 1000).unref();
      } else socket.destroy();
    });
  }

  /**
   * A channel connection whose caller is now known (after the handshake): past the caller's cap,
   * or the peer's (that caller from this source address), it gets a one-line 503 and is closed.
   * `caller` is the SPIFFE id, or "" without one.
   */
  callerConnected(socket: Socket, caller: string): boolean {
    const who = caller || "callers without a mesh identity";
    const peer = `${caller} ${socket.remoteAddress ?? "?"}`;
    const { maxConnectionsPerCaller: callerCap, maxConnectionsPerPeer: peerCap } = this.limits;
    if (callerCap > 0 && (this.perCaller.get(caller) ?? 0) >= callerCap) return this.refuseCaller(socket, "per_caller", `too many connections for ${who} (at most ${callerCap})`);
    if (peerCap > 0 && (this.perPeer.get(peer) ?? 0) >= peerCap) return this.refuseCaller(socket, "per_peer", `too many connections for ${who} from ${socket.remoteAddress ?? "?"} (at most ${peerCap})`);
    if (callerCap > 0) count(this.perCaller, caller, socket);
    if (peerCap > 0) count(this.perPeer, peer, socket);
    return true;
  }

  private refuseCaller(socket: Socket, reason: "per_caller" | "per_peer", text: string): false {
    this.metrics.add(CONNECTIONS_REFUSED, { server: this.name, reason });
    const line = `${text}\n`;
    socket.end(`HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(line)}\r\nconnection: close\r\n\r\n${line}`);
    setTimeout(() => socket.destroy(), 1000).unref();
    return false;
  }

  /** Wraps a request handler so that its responses are guarded. */
  wrap<Q, R extends Reply>(handler: (req: Q, res: R) => void): (req: Q, res: R) => void {
    return (req, res) => {
      if ("guard" in res) res.guard = this;
      else guards.set(res, this);
      handler(req, res);
    };
  }

  admit(res: Reply, body: Buffer): boolean {
    // The request's socket: a pipelined response has none of its own until those before it end.
    const socket = res.req.socket;
    if (socket.destroyed) return false;
    let state = this.sockets.get(socket);
    if (!state) {
      state = { unsent: 0 };
      this.sockets.set(socket, state);
    }
    // One response may be larger than the bound (a full message); more behind it may not.
    if (state.unsent > 0 && state.unsent + body.length > this.limits.maxUnsentBytes) {
      this.drop(socket, "unsent_bytes");
      return false;
    }
    // The gauge is written when the distinct bodies change (a body first held, or let go by the
    // budget), not per answer: thousands of polls are answered with one version's body.
    const bufferedBefore = this.bufferedBytes;
    const large = body.length >= SMALL_BODY;
    if (large) this.largeInFlight++;
    const now = performance.now();
    // No timers per response: one sweep per guard checks the deadlines (sweep), as thousands of
    // answers go out after each version and each timer would live until its response is taken.
    const entry: InFlight = {
      socket,
      state,
      body,
      large,
      writeBy: now + this.limits.writeTimeoutMs,
      stallMs: large ? scaledStallMs(this.limits.stallTimeoutMs, this.largeInFlight) : this.limits.stallTimeoutMs,
      progressAt: now,
      done: false,
    };
    state.unsent += body.length;
    let holders = this.bodies.get(body);
    if (!holders) {
      holders = new Set();
      this.bodies.set(body, holders);
      this.bufferedBytes += body.length;
    }
    holders.add(entry);
    setInFlight(res, entry);
    this.sweeper ??= setInterval(() => this.sweep(), SWEEP_MS).unref();
    const finished = () => this.finished(res, entry);
    res.once("finish", finished);
    res.once("close", finished);
    this.enforceBudget(body);
    if (this.bufferedBytes !== bufferedBefore) this.metrics.set("feed_buffered_bytes", { server: this.name }, this.bufferedBytes);
    return true;
  }

  private finished(res: Reply, e: InFlight): void {
    if (e.done) return;
    e.done = true;
    if (e.large) this.largeInFlight--;
    setInFlight(res, undefined);
    e.state.unsent -= e.body.length;
    const set = this.bodies.get(e.body);
    if (!set) return;
    set.delete(e);
    if (set.size > 0) return;
    this.bodies.delete(e.body);
    this.bufferedBytes -= e.body.length;
    this.metrics.set("feed_buffered_bytes", { server: this.name }, this.bufferedBytes);
  }

  /**
   * The deadlines of the responses being written: past writeTimeoutMs the client is dropped; a
   * body of which no slice was taken for its stall time is decided after the loop's next turn
   * for I/O (setImmediate runs after it): when the loop was held (a long render), the sockets'
   * completed writes may still be waiting behind it, so only one that still made no progress
   * is dropped.
   */
  private sweep(): void {
    if (this.bodies.size === 0) {
      if (this.sweeper) clearInterval(this.sweeper);
      this.sweeper = undefined;
      return;
    }
    const now = performance.now();
    let stalled: InFlight[] | undefined;
    for (const holders of this.bodies.values()) {
      for (const e of holders) {
        if (now >= e.writeBy) this.drop(e.socket, "write_timeout");
        else if (now - e.progressAt >= e.stallMs) (stalled ??= []).push(e);
      }
    }
    if (stalled) {
      const suspects = stalled;
      setImmediate(() => {
        for (const e of suspects) if (!e.done && e.progressAt <= now) this.drop(e.socket, "stalled");
      });
    }
  }

  /** Drops the clients holding the oldest bodies until the distinct bodies fit the budget. */
  private enforceBudget(newest: Buffer): void {
    if (this.bufferedBytes <= this.limits.maxBufferedBytes) return;
    for (const [body, holders] of [...this.bodies]) {
      if (this.bufferedBytes <= this.limits.maxBufferedBytes) return;
      // Small bodies (deltas, no-change answers) are honest pollers' and never what fills it.
      if (body === newest || body.length < SMALL_BODY) continue;
      for (const h of [...holders]) this.drop(h.socket, "buffer_budget");
      // A destroyed socket closes its response on a later tick; the body is no longer held.
      if (this.bodies.delete(body)) this.bufferedBytes -= body.length;
    }
  }

  private drop(socket: Socket, reason: "idle" | "write_timeout" | "stalled" | "unsent_bytes" | "buffer_budget"): void {
    if (socket.destroyed) return;
    this.metrics.add(CLIENTS_DROPPED, { server: this.name, reason });
    socket.destroy();
  }
}

/** Counts a connection under `key` until it closes. */
function count(counts: Map<string, number>, key: string, socket: Socket): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
  socket.once("close", () => {
    const left = (counts.get(key) ?? 1) - 1;
    if (left <= 0) counts.delete(key);
    else counts.set(key, left);
  });
}

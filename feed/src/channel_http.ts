// The channel's own HTTP/1.1, server side, on the sockets the channel accepts (mutual TLS, or
// plain behind the feed's Istio sidecar). Not node:http: the channel holds a long poll per
// filter VM (thousands), and node:http keeps a request and a response object with their stream
// states per poll, ~2.2 KB of heap that lives until the next version and is copied by every
// young-generation collection on the way (bench/feed/FANOUT.md, held_request_heap.ts). Here a
// held poll is a small request, a small reply and the closures of its wait.
//
// What it takes is the narrow HTTP/1.1 that Envoy and the filters speak, and nothing that two
// parsers could read two ways (a proxy in front, the feed's own sidecar, must never see one
// request where the feed sees another). Anything else is answered with one line naming the
// field, the connection closed, counted feed_clients_dropped_total{reason="bad_request"}
// (channel_request_head.ts reads the head, from its bytes):
//   - a request line `METHOD SP target SP HTTP/1.1` (another version: 505);
//   - header lines `name: value` ending in CRLF: a bare LF, a folded line (starting with a
//     space or tab), a name that is no token (a space before the colon), a control character
//     in a value: 400;
//   - at most MAX_HEADER_BYTES of head and MAX_HEADER_LINES header lines: 431;
//   - exactly one host: 400;
//   - a body only by content-length, digits, one value: 400; above `maxBodyBytes`: 413;
//     transfer-encoding in any form: 501 (the filters' one body, a repair's bucket digests, has
//     its length: Envoy sends it with content-length);
//   - the whole request within headersTimeoutMs of its first byte: else 408, counted
//     header_timeout. A connection with no read or write for idleTimeoutMs is closed, counted
//     idle (one sweep checks every connection, so it goes within IDLE_SWEEP_MS more).
// A connection's requests are answered one at a time, as Envoy's HTTP/1 codec serves them: the
// next one is parsed only once the answer before it has been written to the socket, so a client
// that pipelines and never reads holds one answer at most, and the guard's stall timeout drops it
// (server_guard.ts). Bytes read ahead are bounded (MAX_HEADER_BYTES + maxBodyBytes, then the
// socket is paused) and kept in one growing buffer: any input costs linear time and memory.
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { bareLf, MAX_HEADER_BYTES, parseHead, type ChannelHeaders, type Head } from "./channel_request_head.js";
import type { Reply } from "./reply.js";

export { MAX_HEADER_BYTES, MAX_HEADER_LINES, type ChannelHeaders } from "./channel_request_head.js";

/** A request as the channel's handler sees it: the headers it reads, each one value. */
export interface ChannelRequest {
  readonly method: string;
  /** The request-target exactly as sent (channel.ts parses it once). */
  readonly url: string;
  readonly headers: ChannelHeaders;
  /** The whole body (only ever a repair's bucket digests); undefined without one. */
  readonly body: Buffer | undefined;
  readonly socket: Socket;
}

export interface ChannelHttpOptions {
  headersTimeoutMs: number;
  idleTimeoutMs: number;
  maxBodyBytes: number;
  /** A client this layer dropped: a refused request, one not received in time, an idle connection. */
  dropped(reason: "bad_request" | "header_timeout" | "idle"): void;
}

export type ChannelHandler = (req: ChannelRequest, res: ChannelReply) => void;

const CRLFCRLF = Buffer.from("\r\n\r\n");

/**
 * A response's status line and header lines, each ending in CRLF, without the empty line that
 * ends the head: the one way the channel writes a head, whether per reply (ChannelReply) or
 * once for an answer every poller gets (http.ts framedAnswer).
 */
export function headLines(status: number, headers: Record<string, string>): string {
  let text = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\n`;
  for (const name in headers) text += `${name}: ${headers[name]}\r\n`;
  return text;
}

/**
 * Every open channel connection, whose idle deadline one sweep checks every IDLE_SWEEP_MS: a
 * socket timer (socket.setTimeout) is re-armed on every read and write, thousands a second under
 * a version's fan-out. A connection idle for idleTimeoutMs is closed within IDLE_SWEEP_MS more.
 */
const idle = new Set<ChannelConnection>();
let idleSweeper: NodeJS.Timeout | undefined;
export const IDLE_SWEEP_MS = 250;

function watchIdle(connection: ChannelConnection): void {
  idle.add(connection);
  idleSweeper ??= setInterval(sweepIdle, IDLE_SWEEP_MS).unref();
}

function sweepIdle(): void {
  if (idle.size === 0) {
    clearInterval(idleSweeper);
    idleSweeper = undefined;
    return;
  }
  const now = performance.now();
  for (const connection of idle) connection.checkIdle(now);
}

/** Listeners of a reply's event: none, one (the common case: no array per answer), or several. */
type Listeners = (() => void) | (() => void)[] | undefined;

function withListener(list: Listeners, listener: () => void): Listeners {
  if (list === undefined) return listener;
  if (typeof list === "function") return [list, listener];
  list.push(listener);
  return list;
}

function withoutListener(list: Listeners, listener: () => void): Listeners {
  if (list === listener) return undefined;
  if (Array.isArray(list)) {
    const at = list.indexOf(listener);
    if (at >= 0) list.splice(at, 1);
  }
  return list;
}

function callListeners(list: Listeners): void {
  if (typeof list === "function") list();
  else if (list) for (const f of list) f();
}

/** One connection of the channel: its requests parsed and answered one at a time. */
export class ChannelConnection {
  /** Bytes received and not parsed yet (a growing buffer; `length` of it are used). */
  private pending: Buffer | undefined;
  private length = 0;
  /** Where the search for the head's end resumes (what was searched does not hold it). */
  private scanFrom = 0;
  private head: Head | undefined;
  /** The answer being written: the next request waits for it. */
  private reply: ChannelReply | undefined;
  /** The request's deadline, from its first byte to its last. */
  private deadline: NodeJS.Timeout | undefined;
  /** Whether `pending` is the connection's own buffer (else a view of a chunk received). */
  private owned = false;
  private paused = false;
  private refused = false;

  /** performance.now() of the connection's last read or write (the idle sweep's clock). */
  private activeAt = performance.now();
  /** The write callback of every reply on this connection: one function, not one per answer. */
  readonly written = (): void => this.reply?.finished();

  constructor(
    readonly socket: Socket,
    private readonly handler: ChannelHandler,
    private readonly options: ChannelHttpOptions,
  ) {
    socket.on("data", (chunk: Buffer) => this.received(chunk));
    socket.on("close", () => this.closed());
    // A reset or a write after the peer left: "close" follows, which ends the reply.
    socket.on("error", () => undefined);
    watchIdle(this);
  }

  /** A read or a write on the connection: it is not idle. */
  active(): void {
    this.activeAt = performance.now();
  }

  /** The idle sweep: a connection with no read or write for idleTimeoutMs is closed, counted idle. */
  checkIdle(now: number): void {
    if (now - this.activeAt < this.options.idleTimeoutMs || this.socket.destroyed) return;
    this.options.dropped("idle");
    this.socket.destroy();
  }

  /** Bytes received and not parsed yet: bounded while an answer is written (then the socket is paused). */
  get readAhead(): number {
    return this.length;
  }

  private received(chunk: Buffer): void {
    this.activeAt = performance.now();
    if (this.refused) return;
    if (this.length === 0) {
      // The common case, a whole poll in one chunk: parsed from the chunk itself, no copy.
      this.pending = chunk;
      this.length = chunk.length;
      this.owned = false;
    } else this.append(chunk);
    if (this.reply) {
      // Read ahead while an answer is written: kept, bounded, then the socket waits.
      this.own();
      if (this.length > MAX_HEADER_BYTES + this.options.maxBodyBytes && !this.paused) {
        this.paused = true;
        this.socket.pause();
      }
      return;
    }
    this.parse();
  }

  /** Adds a chunk to the bytes kept: a buffer that doubles, so any input is copied linearly. */
  private append(chunk: Buffer): void {
    const need = this.length + chunk.length;
    if (!this.pending || !this.owned || need > this.pending.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, 2 * this.length, 1024));
      this.pending?.copy(grown, 0, 0, this.length);
      this.pending = grown;
      this.owned = true;
    }
    chunk.copy(this.pending, this.length);
    this.length = need;
  }

  /** Bytes kept past this turn are the connection's own, never a view of a chunk received. */
  private own(): void {
    if (this.pending && !this.owned) this.append(Buffer.alloc(0));
  }

  /** Drops the first `n` bytes parsed. */
  private consume(n: number): void {
    const rest = this.length - n;
    this.scanFrom = 0;
    if (rest <= 0 || !this.pending) {
      this.pending = undefined;
      this.length = 0;
      return;
    }
    this.pending = this.pending.subarray(n, this.length);
    this.length = rest;
    // A view: of the chunk received (the fast path) or of the connection's buffer; copied when kept.
    this.owned = false;
  }

  private parse(): void {
    while (!this.reply && !this.refused && !this.socket.destroyed && (this.length > 0 || this.head)) {
      if (!this.head) {
        const pending = this.pending as Buffer;
        // The bytes received: the chunk itself in the common case (no view built per poll).
        const data = pending.length === this.length ? pending : pending.subarray(0, this.length);
        const end = data.indexOf(CRLFCRLF, this.scanFrom);
        if (end < 0) {
          if (bareLf(data, Math.max(0, this.scanFrom - 1))) return this.refuse(400, "request head: a line ends in LF without CR");
          if (data.length > MAX_HEADER_BYTES) return this.refuse(431, `request head: more than ${MAX_HEADER_BYTES} bytes`);
          this.scanFrom = Math.max(0, data.length - 3);
          this.own();
          return this.startDeadline();
        }
        if (end + 4 > MAX_HEADER_BYTES) return this.refuse(431, `request head: more than ${MAX_HEADER_BYTES} bytes`);
        const head = parseHead(data, end, this.options.maxBodyBytes);
        if ("status" in head) return this.refuse(head.status, head.text);
        this.head = head;
        this.consume(end + 4);
        continue;
      }
      const head = this.head;
      if (this.length < head.contentLength) {
        this.own();
        return this.startDeadline();
      }
      this.head = undefined;
      let body: Buffer | undefined;
      if (head.contentLength > 0) {
        body = Buffer.from((this.pending as Buffer).subarray(0, head.contentLength));
        this.consume(head.contentLength);
      }
      this.stopDeadline();
      this.dispatch(head, body);
    }
    // Bytes left behind an answer being written (a pipelined request) are kept as the connection's own.
    this.own();
  }

  private dispatch(head: Head, body: Buffer | undefined): void {
    const reply = new ChannelReply(this, head.method === "HEAD", head.close);
    this.reply = reply;
    this.handler({ method: head.method, url: head.url, headers: head.headers, body, socket: this.socket }, reply);
  }

  /** The reply's last bytes were written: the connection closes, or the next request is read. */
  replied(close: boolean): void {
    this.reply = undefined;
    this.activeAt = performance.now();
    if (close) {
      this.socket.end();
      setTimeout(() => this.socket.destroy(), 1000).unref();
      return;
    }
    if (this.paused) {
      this.paused = false;
      this.socket.resume();
    }
    this.parse();
  }

  private startDeadline(): void {
    this.deadline ??= setTimeout(() => this.refuse(408, `the request was not received within ${this.options.headersTimeoutMs} ms`, "header_timeout"), this.options.headersTimeoutMs);
  }

  private stopDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = undefined;
  }

  private refuse(status: number, text: string, reason: "bad_request" | "header_timeout" = "bad_request"): void {
    this.stopDeadline();
    this.refused = true;
    this.pending = undefined;
    this.length = 0;
    this.options.dropped(reason);
    if (this.socket.destroyed || !this.socket.writable) {
      this.socket.destroy();
      return;
    }
    const line = `${text}\n`;
    this.socket.end(`${headLines(status, { "content-type": "text/plain", "content-length": String(Buffer.byteLength(line)), connection: "close" })}\r\n${line}`);
    setTimeout(() => this.socket.destroy(), 1000).unref();
  }

  private closed(): void {
    idle.delete(this);
    this.stopDeadline();
    this.pending = undefined;
    this.length = 0;
    this.reply?.socketClosed();
  }
}

/** One answer on a channel connection: the surface of node:http's ServerResponse the handlers use. */
export class ChannelReply implements Reply {
  writableEnded = false;
  /** The guard's state for this reply (server_guard.ts): fields, not a WeakMap entry per poll. */
  guard: unknown = undefined;
  guardEntry: unknown = undefined;
  /** The status line and headers until the first bytes go out with them. */
  private head: string | undefined;
  private status = 0;
  private hasLength = false;
  private done = false;
  private finishListeners: Listeners;
  private closeListeners: Listeners;

  constructor(
    private readonly connection: ChannelConnection,
    /** A HEAD request: headers only, whatever the handler writes. */
    private readonly headOnly: boolean,
    /** Close after this answer (the request asked, or the handler says `connection: close`). */
    private close: boolean,
  ) {}

  get req(): { readonly socket: Socket } {
    return this.connection;
  }

  get destroyed(): boolean {
    return this.connection.socket.destroyed;
  }

  get closing(): boolean {
    return this.close;
  }

  writeHead(status: number, headers: Record<string, string> = {}): this {
    // `connection` is this layer's to write (headBytes), with the framing.
    const { connection, ...rest } = headers;
    if (connection === "close") this.close = true;
    this.hasLength = "content-length" in rest;
    this.status = status;
    this.head = headLines(status, rest);
    return this;
  }

  /** The head with its framing: content-length for a body known whole, else close-delimited. */
  private headBytes(wholeBody: number | undefined): string {
    let text = this.head ?? headLines(200, {});
    this.head = undefined;
    // Sent: a write or end without writeHead is a 200, once.
    this.status ||= 200;
    if (!this.hasLength && this.status !== 304 && this.status !== 204) {
      if (wholeBody === undefined) this.close = true;
      else text += `content-length: ${wholeBody}\r\n`;
    }
    if (this.close) text += "connection: close\r\n";
    return `${text}\r\n`;
  }

  write(chunk: Buffer): boolean {
    const socket = this.connection.socket;
    this.connection.active();
    if (this.head !== undefined || this.status === 0) {
      socket.cork();
      socket.write(this.headBytes(undefined), "latin1");
      const taken = this.headOnly || socket.write(chunk);
      socket.uncork();
      return taken;
    }
    return this.headOnly || socket.write(chunk);
  }

  end(chunk?: Buffer | string): this {
    if (this.writableEnded) return this;
    this.writableEnded = true;
    const socket = this.connection.socket;
    if (socket.destroyed) return this;
    this.connection.active();
    const finished = this.connection.written;
    const body = this.headOnly || this.status === 304 || this.status === 204 ? undefined : chunk;
    if (this.head !== undefined || this.status === 0) {
      const bytes = chunk === undefined ? 0 : typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.length;
      const head = this.headBytes(bytes);
      if (body === undefined || body.length === 0) socket.write(head, "latin1", finished);
      else if (typeof body === "string") socket.write(head + body, "utf8", finished);
      else {
        socket.cork();
        socket.write(head, "latin1");
        socket.write(body, finished);
        socket.uncork();
      }
      return this;
    }
    if (body !== undefined && body.length > 0) socket.write(body, finished);
    else socket.write(Buffer.alloc(0), finished);
    return this;
  }

  sendFramed(response: Buffer): void {
    if (this.writableEnded) return;
    this.writableEnded = true;
    this.head = undefined;
    const socket = this.connection.socket;
    if (socket.destroyed) return;
    this.connection.active();
    socket.write(response, this.connection.written);
  }

  /** The answer's last bytes were written (the connection's write callback): listeners, then the next request. */
  finished(): void {
    if (this.done) return;
    this.done = true;
    const finish = this.finishListeners;
    const close = this.closeListeners;
    this.finishListeners = undefined;
    this.closeListeners = undefined;
    callListeners(finish);
    callListeners(close);
    if (!this.connection.socket.destroyed) this.connection.replied(this.close);
  }

  /** The connection closed before the answer was written (or while it was held). */
  socketClosed(): void {
    if (this.done) return;
    this.done = true;
    const close = this.closeListeners;
    this.finishListeners = undefined;
    this.closeListeners = undefined;
    callListeners(close);
  }

  once(event: "drain" | "finish" | "close", listener: () => void): this {
    if (event === "drain") this.connection.socket.once("drain", listener);
    else if (this.done) return this;
    else if (event === "finish") this.finishListeners = withListener(this.finishListeners, listener);
    else this.closeListeners = withListener(this.closeListeners, listener);
    return this;
  }

  on(event: "close", listener: () => void): this {
    return this.once(event, listener);
  }

  off(_event: "close", listener: () => void): this {
    this.closeListeners = withoutListener(this.closeListeners, listener);
    return this;
  }

  destroy(): this {
    this.connection.socket.destroy();
    return this;
  }
}

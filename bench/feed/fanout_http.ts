// The pollers' HTTP/1.1 over one kept-alive mutual-TLS connection, written on a bare TLS socket.
// 2,000 pollers stand for 500 sidecars' Envoys, whose C++ client costs them little; with Node's
// https client (a ClientRequest, an agent and an IncomingMessage per poll) they cost more CPU per
// answer than the feed spends giving it, and on a small machine the bench then measured its own
// clients. This is only what the feed's channel speaks: one exchange at a time, a response with a
// content-length (every channel answer has one) or else ended by the connection's close, no
// chunked bodies (refused as an error), `connection: close` honoured.
import { connect, type SecureContext, type TLSSocket } from "node:tls";

export interface ExchangeHandlers {
  /** Status and headers. */
  response(status: number, headers: ResponseHead): void;
  data(chunk: Buffer): void;
  /** The whole body was read. */
  end(): void;
  /** No complete response: not reached, reset, closed early, timed out or unreadable. */
  error(): void;
}

export interface HttpTls {
  secureContext: SecureContext;
  checkServerIdentity: (host: string, cert: { subjectaltname?: string }) => Error | undefined;
}

/**
 * A response's header lines, each looked up when asked for (names in any case): a Map of them per
 * answer, thousands a second, was among the pollers' costliest steps.
 */
export class ResponseHead {
  /** `text`: the status line and header lines, without the empty line that ends them. */
  constructor(private readonly text: string) {}

  /** Whether each header line has a name before a colon. */
  wellFormed(): boolean {
    const t = this.text;
    for (let at = t.indexOf("\r\n"); at >= 0; ) {
      const from = at + 2;
      const end = t.indexOf("\r\n", from);
      const colon = t.indexOf(":", from);
      if (colon <= from || (end >= 0 && colon > end)) return false;
      at = end;
    }
    return true;
  }

  /** The first value of `name` (lowercase), trimmed; undefined when absent. */
  get(name: string): string | undefined {
    const t = this.text;
    for (let at = t.indexOf("\r\n"); at >= 0; ) {
      const from = at + 2;
      const end = t.indexOf("\r\n", from);
      const colon = t.indexOf(":", from);
      if (colon - from === name.length && t.slice(from, colon).toLowerCase() === name) return t.slice(colon + 1, end < 0 ? t.length : end).trim();
      at = end;
    }
    return undefined;
  }
}

/** Longest response head taken (the channel's are a few hundred bytes). */
const MAX_HEAD_BYTES = 16 << 10;
const HEAD_END = Buffer.from("\r\n\r\n");

/**
 * Exchanges past their deadline are ended by one sweep a second per process: a socket timeout
 * re-armed on every read and write of 500 pollers cost them more than the check it makes.
 */
const live = new Set<KeptAliveTls>();
let sweeper: NodeJS.Timeout | undefined;
function sweep(): void {
  const t = performance.now();
  for (const c of live) c.expire(t);
}

export class KeptAliveTls {
  private socket: TLSSocket | undefined;
  /** The exchange in progress and the connection it was sent on. */
  private current: Exchange | undefined;
  private currentSocket: TLSSocket | undefined;
  /** When the exchange in progress times out (performance.now()). */
  private deadline = Infinity;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly tls: HttpTls,
  ) {}

  /** Sends one request (the previous exchange must have ended) on the kept-alive connection, or a new one. */
  send(method: "GET" | "POST", path: string, headers: Record<string, string>, body: Buffer | undefined, timeoutMs: number, handlers: ExchangeHandlers): void {
    const socket = this.socket && !this.socket.destroyed ? this.socket : this.open();
    let head = `${method} ${path} HTTP/1.1\r\nhost: ${this.host}:${this.port}\r\n`;
    for (const name in headers) head += `${name}: ${headers[name]}\r\n`;
    if (body) head += `content-length: ${body.length}\r\n`;
    head += "\r\n";
    this.current = new Exchange(handlers, () => this.finished(socket));
    this.currentSocket = socket;
    this.deadline = performance.now() + timeoutMs;
    live.add(this);
    sweeper ??= setInterval(sweep, 1000).unref();
    socket.write(body ? Buffer.concat([Buffer.from(head, "latin1"), body]) : head);
  }

  destroy(): void {
    live.delete(this);
    this.socket?.destroy();
    this.socket = undefined;
  }

  /** Ends the exchange in progress if its deadline passed (`t`: performance.now()); the sweep's. */
  expire(t: number): void {
    if (this.current && t > this.deadline) this.currentSocket?.destroy();
  }

  private open(): TLSSocket {
    const socket = connect({ host: this.host, port: this.port, secureContext: this.tls.secureContext, checkServerIdentity: this.tls.checkServerIdentity });
    // As Envoy's upstream connections: a request goes out as it is written.
    socket.setNoDelay(true);
    // Bytes or a close of an earlier connection never reach a later exchange.
    socket.on("data", (chunk: Buffer) => {
      if (this.currentSocket === socket) this.current?.take(chunk);
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      if (this.socket === socket) this.socket = undefined;
      if (this.currentSocket !== socket) return;
      const e = this.current;
      this.current = undefined;
      this.currentSocket = undefined;
      e?.closed();
    });
    this.socket = socket;
    return socket;
  }

  /** The exchange ended: the connection stays for the next unless the server said close. */
  private finished(socket: TLSSocket): void {
    const e = this.current;
    this.current = undefined;
    this.currentSocket = undefined;
    this.deadline = Infinity;
    if (e?.closeAfter) {
      if (this.socket === socket) this.socket = undefined;
      socket.destroy();
    }
  }
}

/** One request's response as it arrives. */
class Exchange {
  private headParts: Buffer[] = [];
  private headBytes = 0;
  /** Body bytes still expected (-1: until the connection closes; NaN: the head is not in yet). */
  private remaining = NaN;
  private done = false;
  closeAfter = false;

  constructor(
    private readonly handlers: ExchangeHandlers,
    private readonly onFinished: () => void,
  ) {}

  take(chunk: Buffer): void {
    if (this.done) return;
    if (Number.isNaN(this.remaining)) {
      this.headParts.push(chunk);
      this.headBytes += chunk.length;
      const all = this.headParts.length === 1 ? chunk : Buffer.concat(this.headParts, this.headBytes);
      const at = all.indexOf(HEAD_END);
      if (at < 0) {
        if (this.headBytes > MAX_HEAD_BYTES) this.fail();
        else if (this.headParts.length > 1) this.headParts = [all];
        return;
      }
      if (!this.head(all.toString("latin1", 0, at))) return this.fail();
      chunk = all.subarray(at + HEAD_END.length);
      if (this.remaining === 0) return this.finish();
      if (chunk.length === 0) return;
    }
    if (this.remaining < 0) return this.handlers.data(chunk);
    const part = chunk.length > this.remaining ? chunk.subarray(0, this.remaining) : chunk;
    this.remaining -= part.length;
    this.handlers.data(part);
    if (this.remaining === 0) this.finish();
  }

  /** The connection closed: the end of a body read to the close, else an error. */
  closed(): void {
    if (this.done) return;
    if (this.remaining < 0) return this.finish();
    this.fail();
  }

  /** Parses the status line and headers; false when unreadable. */
  private head(text: string): boolean {
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(text);
    if (!status) return false;
    const headers = new ResponseHead(text);
    if (!headers.wellFormed() || headers.get("transfer-encoding") !== undefined) return false;
    const length = headers.get("content-length");
    if (length !== undefined && !/^\d+$/.test(length)) return false;
    this.remaining = length === undefined ? -1 : Number(length);
    this.closeAfter = length === undefined || (headers.get("connection") ?? "").toLowerCase() === "close";
    this.handlers.response(Number(status[1]), headers);
    return true;
  }

  private finish(): void {
    this.done = true;
    this.onFinished();
    this.handlers.end();
  }

  private fail(): void {
    this.done = true;
    this.closeAfter = true;
    this.onFinished();
    this.handlers.error();
  }
}

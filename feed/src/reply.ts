// What the feed's handlers (http.ts) read of a request and write a response to. Two servers
// satisfy it: node:http on the operator port (IncomingMessage, ServerResponse), and the
// channel's own HTTP/1.1 layer (channel_http.ts), which holds thousands of long polls and
// keeps far less per poll than node:http does (bench/feed/FANOUT.md).
import type { Socket } from "node:net";

/** What a handler reads of a request beyond its path: the method and one header. */
export interface RequestHead {
  readonly method?: string;
  readonly headers: { readonly "if-none-match"?: string };
}

/** The part of node:http's ServerResponse the handlers and the guard (server_guard.ts) use. */
export interface Reply {
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  /** The request's connection: the guard counts a client's unsent bytes and drops it by its socket. */
  readonly req: { readonly socket: Socket };
  writeHead(status: number, headers?: Record<string, string>): Reply;
  /** false: the socket's buffer is full, wait for "drain". */
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer | string): unknown;
  once(event: "drain" | "finish" | "close", listener: () => void): unknown;
  on(event: "close", listener: () => void): unknown;
  off(event: "close", listener: () => void): unknown;
  destroy(): unknown;
  /**
   * The channel's own replies (channel_http.ts): writes a whole response, status line, headers
   * and body already framed, in one write; the reply ends with it. node:http has no such call.
   */
  sendFramed?(response: Buffer): void;
  /** The channel's replies: the connection closes after this one (its response must say so). */
  readonly closing?: boolean;
  /**
   * The channel's replies keep their guard's state (server_guard.ts) in these two fields; the
   * guard keeps node:http's in WeakMaps. Only the guard reads or writes them.
   */
  guard?: unknown;
  guardEntry?: unknown;
}

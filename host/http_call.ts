// proxy_http_call from a root context and the response Envoy hands back through
// proxy_on_http_call_response, as measured in Envoy 1.40.0 (tests/envoy/http_call.test.ts):
// - unknown cluster, or a request without :method, :path or :authority: BAD_ARGUMENT, no token;
// - tokens count per VM from 4 in steps of 4;
// - the upstream sees an HTTP/1.1 request with `host` = :authority, `x-envoy-internal: true` and,
//   when the timeout is not 0, `x-envoy-expected-rq-timeout-ms`;
// - a response: headers = its header count with `:status` first (the upstream's headers but
//   `keep-alive`, then `x-envoy-upstream-service-time`), body size, 0 trailers for HTTP/1;
// - refused connection: a local 503 (3 headers: :status, content-length, content-type), body
//   "upstream connect error or disconnect/reset before headers. reset reason: remote connection
//   failure"; a connection closed before the headers: the same with "connection termination";
// - timeout: a local 504, body "upstream request timeout";
// - reset after the headers: (0, 0, 0) and proxy_get_status 11 (BrokenConnection) "reset"
//   during the callback; the message is cleared after it, the code stays 11 until the next reset
//   (Envoy never resets it: later callbacks still read 11);
// - the root deleted (a configuration update) while a call is pending: the request is cancelled
//   (the upstream sees it closed) and no callback arrives;
// - outside the callback: header values BAD_ARGUMENT, body NOT_FOUND, pairs empty.
import { Agent, request, type ClientRequest } from "node:http";
import { WasmResult } from "./abi.js";

export type HeaderList = Array<[string, string]>;

/** A response as the guest sees it in proxy_on_http_call_response. */
export interface HttpCallResponse {
  /** `:status` first, then the other headers (keys lower-case). Empty for a reset. */
  readonly headers: HeaderList;
  readonly body: Uint8Array;
  readonly trailers: HeaderList;
}

/** A call the guest made, as the upstream would see it. */
export interface HttpCallRequest {
  readonly token: number;
  readonly rootId: number;
  readonly cluster: string;
  readonly method: string;
  readonly path: string;
  readonly authority: string;
  /** Every request header the guest passed, pseudo-headers included, in order. */
  readonly headers: HeaderList;
  readonly body: Uint8Array;
  readonly timeoutMs: number;
}

/**
 * A cluster of the emulated Envoy. `address` (`IP:PORT` on loopback): the host sends real
 * HTTP/1.1 requests there and delivers the outcome asynchronously, as Envoy would. Without it the
 * cluster is manual: calls wait in `pendingHttpCalls` for the test to answer them.
 */
export interface HttpCluster {
  readonly address?: string;
}

const encoder = new TextEncoder();

function localReply(status: number, text: string): HttpCallResponse {
  const body = encoder.encode(text);
  return {
    headers: [[":status", String(status)], ["content-length", String(body.length)], ["content-type", "text/plain"]],
    body,
    trailers: [],
  };
}

/** The local replies Envoy's async client produces for failures before a response. */
export const LOCAL_REPLIES = {
  refused: () => localReply(503, "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure"),
  terminated: () => localReply(503, "upstream connect error or disconnect/reset before headers. reset reason: connection termination"),
  timeout: () => localReply(504, "upstream request timeout"),
};

/** A reset after the response started: nothing but proxy_get_status 11 "reset". */
export const RESET: HttpCallResponse = { headers: [], body: new Uint8Array(0), trailers: [] };

/** Builds a response from plain values: `:status` first, keys lower-cased. */
export function httpResponse(status: number, headers: Record<string, string> | HeaderList = [], body: string | Uint8Array = ""): HttpCallResponse {
  const list: HeaderList = [[":status", String(status)]];
  for (const [key, value] of Array.isArray(headers) ? headers : Object.entries(headers)) list.push([key.toLowerCase(), value]);
  return { headers: list, body: typeof body === "string" ? encoder.encode(body) : body, trailers: [] };
}

/** Decodes proxy-wasm header pairs (u32 count, (u32, u32) sizes, NUL-terminated strings). */
export function decodePairs(bytes: Uint8Array): HeaderList | undefined {
  if (bytes.length === 0) return [];
  if (bytes.length < 4) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = view.getUint32(0, true);
  if (count > (bytes.length - 4) / 8) return undefined;
  let at = 4 + 8 * count;
  const decoder = new TextDecoder();
  const out: HeaderList = [];
  for (let i = 0; i < count; i++) {
    const keyLength = view.getUint32(4 + 8 * i, true);
    const valueLength = view.getUint32(8 + 8 * i, true);
    if (at + keyLength + valueLength + 2 > bytes.length) return undefined;
    const key = decoder.decode(bytes.subarray(at, at + keyLength));
    at += keyLength + 1;
    const value = decoder.decode(bytes.subarray(at, at + valueLength));
    at += valueLength + 1;
    out.push([key, value]);
  }
  return out;
}

/** Encodes header pairs the way Envoy hands them to the guest. */
export function encodePairs(pairs: HeaderList): Uint8Array {
  if (pairs.length === 0) return new Uint8Array(0);
  const keys = pairs.map(([k]) => encoder.encode(k));
  const values = pairs.map(([, v]) => encoder.encode(v));
  const size = 4 + 8 * pairs.length + keys.reduce((n, k, i) => n + k.length + values[i].length + 2, 0);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint32(0, pairs.length, true);
  let at = 4 + 8 * pairs.length;
  for (let i = 0; i < pairs.length; i++) {
    view.setUint32(4 + 8 * i, keys[i].length, true);
    view.setUint32(8 + 8 * i, values[i].length, true);
    out.set(keys[i], at);
    at += keys[i].length + 1;
    out.set(values[i], at);
    at += values[i].length + 1;
  }
  return out;
}

interface InFlight {
  readonly request: HttpCallRequest;
  /** The real request for a cluster with an address (aborted on cancel). */
  client?: ClientRequest;
  timer?: NodeJS.Timeout;
}

/**
 * The calls of one VM: tokens, the pending ones, and delivery to the guest. `deliver` runs the
 * callback (the host makes the response readable during it); it is not called for a cancelled
 * call or once the VM has failed.
 */
export class HttpCalls {
  /** Every call the guest made, in order (including those already answered). */
  readonly made: HttpCallRequest[] = [];
  private readonly inFlight = new Map<number, InFlight>();
  private nextToken = 4;
  /** Kept-alive connections per VM, as Envoy's per-worker connection pool. */
  private readonly agent = new Agent({ keepAlive: true });

  constructor(
    private readonly clusters: Readonly<Record<string, HttpCluster>>,
    private readonly deliver: (request: HttpCallRequest, response: HttpCallResponse, reset: boolean) => void,
  ) {}

  /** proxy_http_call: validates like Envoy, records the call, starts it. */
  start(rootId: number, cluster: string, headers: HeaderList | undefined, body: Uint8Array, timeoutMs: number): { status: number; token?: number } {
    if ((timeoutMs | 0) < 0) return { status: WasmResult.BadArgument };
    const upstream = this.clusters[cluster];
    if (upstream === undefined || headers === undefined) return { status: WasmResult.BadArgument };
    const find = (name: string) => headers.find(([k]) => k.toLowerCase() === name)?.[1];
    const method = find(":method");
    const path = find(":path");
    const authority = find(":authority") ?? find("host");
    if (method === undefined || path === undefined || authority === undefined) return { status: WasmResult.BadArgument };
    const token = this.nextToken;
    this.nextToken += 4;
    const call: HttpCallRequest = { token, rootId, cluster, method, path, authority, headers, body, timeoutMs };
    this.made.push(call);
    const flight: InFlight = { request: call };
    this.inFlight.set(token, flight);
    if (upstream.address !== undefined) this.send(flight, upstream.address);
    return { status: WasmResult.Ok, token };
  }

  /** Manual clusters: the calls waiting for an answer. */
  get pending(): HttpCallRequest[] {
    return [...this.inFlight.values()].filter((f) => f.client === undefined).map((f) => f.request);
  }

  /** Calls not yet answered (real and manual). */
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Answers a pending call (manual clusters); false when the token is not pending. */
  respond(token: number, response: HttpCallResponse, reset = false): boolean {
    const flight = this.inFlight.get(token);
    if (flight === undefined) return false;
    this.finish(flight, response, reset);
    return true;
  }

  /** The root was deleted: Envoy cancels its calls and never calls back for them. */
  cancelRoot(rootId: number): void {
    for (const flight of [...this.inFlight.values()]) {
      if (flight.request.rootId !== rootId) continue;
      this.inFlight.delete(flight.request.token);
      if (flight.timer) clearTimeout(flight.timer);
      flight.client?.destroy();
    }
  }

  /** Cancels everything (the host is being dropped). */
  cancelAll(): void {
    for (const flight of this.inFlight.values()) {
      if (flight.timer) clearTimeout(flight.timer);
      flight.client?.destroy();
    }
    this.inFlight.clear();
    this.agent.destroy();
  }

  private finish(flight: InFlight, response: HttpCallResponse, reset: boolean): void {
    if (!this.inFlight.delete(flight.request.token)) return;
    if (flight.timer) clearTimeout(flight.timer);
    this.deliver(flight.request, response, reset);
  }

  private send(flight: InFlight, address: string): void {
    const call = flight.request;
    const colon = address.lastIndexOf(":");
    const started = Date.now();
    const headers: Record<string, string> = { host: call.authority, "x-envoy-internal": "true" };
    for (const [key, value] of call.headers) if (!key.startsWith(":") && key.toLowerCase() !== "host") headers[key.toLowerCase()] = value;
    if (call.timeoutMs > 0) headers["x-envoy-expected-rq-timeout-ms"] = String(call.timeoutMs);
    let headersSeen = false;
    const client = request({
      host: address.slice(0, colon).replace(/^\[|\]$/g, ""),
      port: Number(address.slice(colon + 1)),
      method: call.method,
      path: call.path,
      headers,
      agent: this.agent,
    });
    flight.client = client;
    client.on("response", (res) => {
      headersSeen = true;
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const list: HeaderList = [[":status", String(res.statusCode ?? 0)]];
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
          const key = res.rawHeaders[i].toLowerCase();
          // Envoy's HTTP/1 codec drops the upstream's `keep-alive` header (measured); the rest
          // reaches the guest as sent.
          if (key !== "keep-alive") list.push([key, res.rawHeaders[i + 1]]);
        }
        list.push(["x-envoy-upstream-service-time", String(Date.now() - started)]);
        this.finish(flight, { headers: list, body: new Uint8Array(Buffer.concat(chunks)), trailers: [] }, false);
      });
      res.on("aborted", () => this.finish(flight, RESET, true));
      res.on("error", () => this.finish(flight, RESET, true));
    });
    client.on("error", (error: NodeJS.ErrnoException) => {
      if (headersSeen) this.finish(flight, RESET, true);
      else this.finish(flight, error.code === "ECONNREFUSED" ? LOCAL_REPLIES.refused() : LOCAL_REPLIES.terminated(), false);
    });
    if (call.timeoutMs > 0) {
      flight.timer = setTimeout(() => {
        this.finish(flight, LOCAL_REPLIES.timeout(), false);
        client.destroy();
      }, call.timeoutMs);
    }
    client.end(call.body.length > 0 ? Buffer.from(call.body) : undefined);
  }
}

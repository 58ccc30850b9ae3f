// HBONE by hand, for tests: a client (an HTTP/2 CONNECT over mTLS straight to a server sidecar's
// 15008, with whatever :authority and headers a forging client would send) and a terminator (the
// far end of a sidecar's tunnel: a pod's or waypoint's 15008, or an east-west gateway that passes
// the tunnel's bytes on), which records every CONNECT it accepts.
import { readFileSync } from "node:fs";
import {
  connect as http2Connect,
  createSecureServer,
  type Http2SecureServer,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from "node:http2";
import { connect, type Socket } from "node:net";
import type { TLSSocket } from "node:tls";

export interface ConnectResult {
  /** :status of the CONNECT response, 0 when none came. */
  status: number;
  /** Bytes that came back through the tunnel. */
  received: Buffer;
}

/** A header given as an array is sent as that many separate header fields, in order. */
export type ConnectHeaders = Record<string, string | string[]>;

export function hboneConnect(
  server: string,
  authority: string,
  headers: ConnectHeaders,
  certDir: string,
  certName: string,
  payload = "forged",
  timeoutMs = 3000,
): Promise<ConnectResult> {
  return new Promise((done) => {
    let status = 0;
    const chunks: Buffer[] = [];
    const session = http2Connect(`https://${server}`, {
      cert: readFileSync(`${certDir}/${certName}.crt`),
      key: readFileSync(`${certDir}/${certName}.key`),
      ca: readFileSync(`${certDir}/ca.crt`),
      checkServerIdentity: () => undefined, // SPIFFE identities carry no DNS name
    });
    const finish = () => {
      clearTimeout(timer);
      session.destroy();
      done({ status, received: Buffer.concat(chunks) });
    };
    const timer = setTimeout(finish, timeoutMs);
    session.on("error", finish);
    const stream = session.request({ ":method": "CONNECT", ":authority": authority, ...headers });
    stream.on("response", (response) => {
      status = Number(response[":status"] ?? 0);
      if (status === 200) stream.write(payload);
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", finish);
    stream.on("close", finish);
  });
}

/** One CONNECT an HBONE terminator accepted, as it saw it. */
export interface SeenConnect {
  authority: string;
  headers: IncomingHttpHeaders;
  /** The client certificate's SANs as Node prints them (`URI:spiffe://…`). */
  peer: string;
  /** The TCP peer of the TLS connection the CONNECT came on (`ip:port`). */
  from: string;
}

export interface HboneTerminator {
  name: string;
  host: string;
  port: number;
  /** Every CONNECT accepted, in order (refused ones included: see `forward`). */
  seen: SeenConnect[];
  /** TLS handshakes that failed (e.g. the client refused this terminator's certificate). */
  failedHandshakes: number;
  /**
   * Presents another certificate (`<certName>.crt/.key` of the same directory) from the next
   * handshake on, and closes every open session so that pooled HTTP/2 connections handshake again.
   */
  presentCertificate(certName: string): void;
  close(): Promise<void>;
}

export interface TerminatorOptions {
  name: string;
  host: string;
  port: number;
  certDir: string;
  /** The certificate presented (`<certName>.crt/.key`); the CA is `ca.crt` in the same directory. */
  certName: string;
  /**
   * Unset: the terminator is the destination: it answers 200, sends `<name> authority=<:authority>\n`
   * and echoes. Set: it is a gateway: the stream's bytes go raw (e.g. an inner TLS session it cannot
   * read) to the address this returns for the CONNECT's :authority, from `host`; undefined: 503.
   */
  forward?: (authority: string) => { host: string; port: number } | undefined;
}

/**
 * An HBONE terminator: mTLS with a client certificate from the CA required (as a waypoint, a
 * ztunnel or an east-west gateway requires), HTTP/2 CONNECT, recording what each CONNECT carried.
 */
export function startHboneTerminator(options: TerminatorOptions): Promise<HboneTerminator> {
  const read = (certName: string) => ({
    cert: readFileSync(`${options.certDir}/${certName}.crt`),
    key: readFileSync(`${options.certDir}/${certName}.key`),
    ca: readFileSync(`${options.certDir}/ca.crt`),
  });
  const server: Http2SecureServer = createSecureServer({ ...read(options.certName), requestCert: true, rejectUnauthorized: true });
  const sessions = new Set<ServerHttp2Session>();
  const sockets = new Set<Socket>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
    session.on("error", () => session.destroy());
  });
  server.on("tlsClientError", () => terminator.failedHandshakes++);
  server.on("stream", (stream: ServerHttp2Stream, headers) => {
    stream.on("error", () => stream.destroy());
    if (headers[":method"] !== "CONNECT") return stream.respond({ ":status": 405 }, { endStream: true });
    const socket = stream.session?.socket as TLSSocket | undefined;
    const authority = String(headers[":authority"]);
    terminator.seen.push({
      authority,
      headers,
      peer: socket?.getPeerCertificate?.()?.subjectaltname ?? "",
      from: `${socket?.remoteAddress}:${socket?.remotePort}`,
    });
    if (!options.forward) {
      stream.respond({ ":status": 200 });
      stream.write(`${options.name} authority=${authority}\n`);
      stream.pipe(stream);
      return;
    }
    const target = options.forward(authority);
    if (!target) return stream.respond({ ":status": 503 }, { endStream: true });
    const upstream = connect({ host: target.host, port: target.port, localAddress: options.host, allowHalfOpen: true });
    sockets.add(upstream);
    upstream.on("close", () => {
      sockets.delete(upstream);
      stream.destroy();
    });
    upstream.on("error", () => upstream.destroy());
    upstream.on("connect", () => {
      stream.respond({ ":status": 200 });
      stream.pipe(upstream);
      upstream.pipe(stream);
    });
    stream.on("close", () => upstream.destroy());
  });
  const terminator: HboneTerminator = {
    name: options.name,
    host: options.host,
    port: options.port,
    seen: [],
    failedHandshakes: 0,
    presentCertificate(certName: string) {
      server.setSecureContext({ ...read(certName) });
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
    },
    close: () =>
      new Promise((done) => {
        for (const session of sessions) session.destroy();
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  };
  return new Promise((done, fail) => {
    server.once("error", fail);
    server.listen(options.port, options.host, () => done(terminator));
  });
}

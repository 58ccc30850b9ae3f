// A loopback server for "nothing lost" tests: every connection starts with a small header
// (connection id, bytes the client wants back); the server sends that many bytes from a shared
// random pool, half-closes (at once, or after the client's FIN when the client asks), keeps
// reading to EOF, and records SHA-256 checksums of both
// directions under the connection id so the client can compare them with its own.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer as createTcpServer, type Server, type Socket } from "node:net";
import { createServer as createTlsServer } from "node:tls";

/** id (u32 BE) + bytes wanted back (u32 BE, at most 2^31 - 1) with the flag below in its top bit. */
export const HEADER_BYTES = 8;
/** Set by the client: "send your bytes but hold your FIN until you have read mine", the order of a
 *  request/response protocol. Without it the server half-closes as soon as it has sent, while
 *  the client may still be uploading (tests/support/known_loss.ts: HBONE loses that upload). */
export const HOLD_FIN_UNTIL_CLIENT_EOF = 0x8000_0000;

/** Random bytes both sides slice payloads from: cheap to produce, different per connection. */
export class PayloadPool {
  readonly bytes: Buffer;
  constructor(readonly maxPayload: number, seed: number) {
    this.bytes = Buffer.alloc(maxPayload * 2);
    let state = seed >>> 0 || 1;
    for (let i = 0; i < this.bytes.length; i += 4) {
      // xorshift32: deterministic per seed, so a failing run can be replayed.
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      this.bytes.writeUInt32LE(state >>> 0, i);
    }
  }

  /** `size` bytes starting at an offset that depends on the connection id and direction. */
  slice(id: number, size: number, direction: 0 | 1): Buffer {
    const offset = this.offset(id, direction);
    return this.bytes.subarray(offset, offset + size);
  }

  offset(id: number, direction: 0 | 1): number {
    return ((id * 2654435761 + direction * 40503) >>> 0) % (this.maxPayload + 1);
  }
}

export interface ServerRecord {
  server: string;
  /** SHA-256 (hex) and length of everything received after the header, up to EOF. */
  receivedSha: string;
  receivedBytes: number;
  /** SHA-256 (hex) and length of what the server sent. */
  sentSha: string;
  sentBytes: number;
  /** An error or reset the server saw on this connection. */
  error?: string;
  /** Offset of the first received byte that differs from what the client sends (-1: none). */
  firstMismatch: number;
}

export interface ChecksumServer {
  name: string;
  host: string;
  port: number;
  accepted: number;
  /** Finished connections by id; the client takes (and removes) its record when it checks. */
  records: Map<number, ServerRecord>;
  /** Connections that ended before a full header arrived or with an error, by message. */
  broken: string[];
  close(): Promise<void>;
}

export interface TlsIdentity {
  certDir: string;
  /** `<certName>.crt/.key` in certDir; clients must present a certificate from `ca.crt`. */
  certName: string;
}

export function sha256(chunks: Buffer[]): string {
  const hash = createHash("sha256");
  for (const chunk of chunks) hash.update(chunk);
  return hash.digest("hex");
}

export function startChecksumServer(name: string, host: string, port: number, pool: PayloadPool, tls?: TlsIdentity): Promise<ChecksumServer> {
  const sockets = new Set<Socket>();
  const handle = (socket: Socket): void => {
    socket.setNoDelay(true);
    server.accepted++;
    const hash = createHash("sha256");
    let header = Buffer.alloc(0);
    let id = -1;
    let receivedBytes = 0;
    let firstMismatch = -1;
    let expectedStart = 0;
    let sent = { sha: "", bytes: 0 };
    let error: string | undefined;
    let holdFin = false;
    socket.on("data", (chunk: Buffer) => {
      let reply: Buffer | undefined;
      if (id < 0) {
        header = Buffer.concat([header, chunk]);
        if (header.length < HEADER_BYTES) return;
        id = header.readUInt32BE(0);
        const wanted = header.readUInt32BE(4);
        holdFin = (wanted & HOLD_FIN_UNTIL_CLIENT_EOF) !== 0;
        reply = pool.slice(id, wanted & ~HOLD_FIN_UNTIL_CLIENT_EOF, 1);
        sent = { sha: sha256([reply]), bytes: reply.length };
        expectedStart = pool.offset(id, 0);
        chunk = header.subarray(HEADER_BYTES);
      }
      hash.update(chunk);
      // The client's bytes are known (the pool at its offset): locate a corruption, not just flag it.
      if (firstMismatch < 0) {
        const expected = pool.bytes.subarray(expectedStart + receivedBytes, expectedStart + receivedBytes + chunk.length);
        if (!expected.equals(chunk)) {
          let i = 0;
          while (i < chunk.length && i < expected.length && chunk[i] === expected[i]) i++;
          firstMismatch = receivedBytes + i;
        }
      }
      receivedBytes += chunk.length;
      // Last: end() can re-enter this socket's handlers synchronously (seen on TLS sockets ending
      // with nothing to send: the next 'data' ran inside it, before this chunk was counted).
      if (reply) {
        if (holdFin) socket.write(reply);
        else socket.end(reply);
      }
    });
    socket.on("error", (failure: NodeJS.ErrnoException) => {
      error = failure.code ?? failure.message;
    });
    socket.on("end", () => {
      if (id < 0) {
        server.broken.push(`EOF after ${header.length} header bytes`);
        socket.end();
        return;
      }
      server.records.set(id, { server: name, receivedSha: hash.digest("hex"), receivedBytes, sentSha: sent.sha, sentBytes: sent.bytes, error, firstMismatch });
      if (holdFin) socket.end();
    });
    socket.on("close", () => {
      if (error !== undefined) {
        if (id >= 0) {
          const record = server.records.get(id);
          if (record) record.error = error;
          else server.records.set(id, { server: name, receivedSha: "", receivedBytes, sentSha: sent.sha, sentBytes: sent.bytes, error, firstMismatch });
        } else server.broken.push(error);
      }
    });
  };
  const listener: Server = tls
    ? createTlsServer(
        {
          cert: readFileSync(`${tls.certDir}/${tls.certName}.crt`),
          key: readFileSync(`${tls.certDir}/${tls.certName}.key`),
          ca: readFileSync(`${tls.certDir}/ca.crt`),
          requestCert: true,
          rejectUnauthorized: true,
          allowHalfOpen: true,
        },
        handle,
      )
    : createTcpServer({ allowHalfOpen: true }, handle);
  // Raw TCP sockets, including TLS ones still in their handshake: close() must end them all.
  listener.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const server: ChecksumServer = {
    name,
    host,
    port,
    accepted: 0,
    records: new Map(),
    broken: [],
    close: () =>
      new Promise((done) => {
        for (const socket of sockets) socket.destroy();
        listener.close(() => done());
      }),
  };
  return new Promise((done, fail) => {
    listener.once("error", fail);
    listener.listen({ port, host, backlog: 1024 }, () => done(server));
  });
}

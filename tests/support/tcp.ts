// Real TCP peers on loopback for end-to-end tests.
import { connect, createServer, type Server, type Socket } from "node:net";

export interface Backend {
  name: string;
  host: string;
  port: number;
  /** Connections accepted so far. */
  accepted: number;
  close(): Promise<void>;
}

/**
 * A server-first backend: on accept it sends `<name>\n` before reading anything (so nothing in
 * the path may wait for client bytes), then echoes every byte back, and half-closes when the
 * client does.
 */
export function startBackend(name: string, host: string, port: number): Promise<Backend> {
  const sockets = new Set<Socket>();
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => {
    backend.accepted++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.write(`${name}\n`);
    socket.pipe(socket);
  });
  const backend: Backend = {
    name,
    host,
    port,
    accepted: 0,
    close: () =>
      new Promise((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  };
  return new Promise((done, fail) => {
    server.once("error", fail);
    server.listen(port, host, () => done(backend));
  });
}

export interface Exchange {
  /** Everything the server side sent until it closed. */
  received: Buffer;
  /** True when the connection ended with an error or reset. */
  errored: boolean;
}

/**
 * Connects (from `localAddress` when given), sends `payload`, half-closes, and collects the
 * reply until the peer closes.
 */
export function exchange(
  host: string,
  port: number,
  payload: Buffer | string,
  timeoutMs = 10_000,
  localAddress?: string,
): Promise<Exchange> {
  return new Promise((done) => {
    const chunks: Buffer[] = [];
    let errored = false;
    const socket = connect({ host, port, allowHalfOpen: true, ...(localAddress ? { localAddress } : {}) });
    const timer = setTimeout(() => {
      errored = true;
      socket.destroy();
    }, timeoutMs);
    socket.on("connect", () => socket.end(payload));
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", () => {
      errored = true;
    });
    socket.on("close", () => {
      clearTimeout(timer);
      done({ received: Buffer.concat(chunks), errored });
    });
  });
}

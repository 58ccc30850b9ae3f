// Mesh pods for end-to-end tests: TLS servers that require a client certificate from the mesh CA
// (as an Istio sidecar's inbound does) and say who connected, or plain TCP servers.
import { readFileSync } from "node:fs";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { createServer, type Server } from "node:tls";
import type { Backend } from "./tcp.js";

export interface TlsPod extends Backend {
  /** URI SANs of the client certificates this pod accepted, in order. */
  peers: string[];
  /** TLS handshakes that failed (e.g. the client refused this pod's certificate). */
  failedHandshakes: number;
}

/**
 * The mesh pod's TLS server: requires a client certificate from the mesh CA, then sends
 * `<name> peer=<client URI SAN>\n` and echoes. `certName` names files in `certDir`
 * (`<certName>.crt/.key`, CA `ca.crt`). Counts into `pod`; tracks its sockets in `sockets`.
 */
function meshTlsServer(name: string, certDir: string, certName: string, pod: TlsPod, sockets: Set<Socket>): Server {
  const server = createServer(
    {
      cert: readFileSync(`${certDir}/${certName}.crt`),
      key: readFileSync(`${certDir}/${certName}.key`),
      ca: readFileSync(`${certDir}/ca.crt`),
      requestCert: true,
      rejectUnauthorized: true,
      allowHalfOpen: true,
    },
    (socket) => {
      pod.accepted++;
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => socket.destroy());
      const peer = socket.getPeerCertificate().subjectaltname ?? "";
      pod.peers.push(peer);
      socket.write(`${name} peer=${peer}\n`);
      socket.pipe(socket);
    },
  );
  server.on("tlsClientError", () => pod.failedHandshakes++);
  return server;
}

/** A pod's handle: counters, and a close that ends its connections and the server `listener()` gives. */
function podHandle(name: string, host: string, port: number, sockets: Set<Socket>, listener: () => NetServer): TlsPod {
  return {
    name,
    host,
    port,
    accepted: 0,
    peers: [],
    failedHandshakes: 0,
    close: () =>
      new Promise((done) => {
        for (const socket of sockets) socket.destroy();
        listener().close(() => done());
      }),
  };
}

function listen(server: NetServer, pod: TlsPod): Promise<TlsPod> {
  return new Promise((done, fail) => {
    server.once("error", fail);
    server.listen(pod.port, pod.host, () => done(pod));
  });
}

/** A server-first mTLS pod (meshTlsServer) on host:port. */
export function startTlsPod(name: string, host: string, port: number, certDir: string, certName: string): Promise<TlsPod> {
  const sockets = new Set<Socket>();
  const pod = podHandle(name, host, port, sockets, () => server);
  const server = meshTlsServer(name, certDir, certName, pod, sockets);
  return listen(server, pod);
}

/** A stream that yields `first`, then whatever `socket` reads; writes go to `socket`. */
function replaying(socket: Socket, first: Buffer): Duplex {
  const stream = new Duplex({
    allowHalfOpen: true,
    read: () => socket.resume(),
    write: (chunk, _encoding, done) => socket.write(chunk, done),
    final: (done) => socket.end(done),
    destroy: (error, done) => {
      socket.destroy();
      done(error);
    },
  });
  stream.push(first);
  socket.on("data", (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.on("end", () => stream.push(null));
  socket.on("close", () => stream.destroy());
  return stream;
}

/**
 * A pod that speaks mTLS or plain TCP on one port, as an address whose holder changes between a
 * mesh pod and a plain one needs: it looks at the first byte the client sends. A TLS handshake
 * (0x16) gets the mTLS pod above (`<name> peer=<client URI SAN>\n`, then the echo); anything
 * else gets `<name> plain\n`, then the echo. So each connection says which way it arrived.
 */
export function startDualPod(name: string, host: string, port: number, certDir: string, certName: string): Promise<TlsPod> {
  const sockets = new Set<Socket>();
  const pod = podHandle(name, host, port, sockets, () => server);
  const tls = meshTlsServer(name, certDir, certName, pod, sockets);
  const server = createNetServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.once("data", (first: Buffer) => {
      socket.pause();
      if (first[0] === 0x16) {
        // The TLS server takes the connection with the bytes already read. Not the socket
        // itself: Node's TLS would read from its handle, past what was read here.
        tls.emit("connection", replaying(socket, first));
        return;
      }
      pod.accepted++;
      socket.unshift(first);
      socket.write(`${name} plain\n`);
      socket.pipe(socket);
      socket.resume();
    });
  });
  return listen(server, pod);
}

// Mesh pods for end-to-end tests: TLS servers that require a client certificate from the mesh CA
// (as an Istio sidecar's inbound does) and say who connected, or plain TCP servers.
import { readFileSync } from "node:fs";
import { createServer, type TLSSocket } from "node:tls";
import type { Backend } from "./tcp.js";

export interface TlsPod extends Backend {
  /** URI SANs of the client certificates this pod accepted, in order. */
  peers: string[];
  /** TLS handshakes that failed (e.g. the client refused this pod's certificate). */
  failedHandshakes: number;
}

/**
 * A server-first mTLS pod: after the handshake it sends `<name> peer=<client URI SAN>\n`, then
 * echoes. `certName` names files in `certDir` (`<certName>.crt/.key`, CA `ca.crt`).
 */
export function startTlsPod(name: string, host: string, port: number, certDir: string, certName: string): Promise<TlsPod> {
  const sockets = new Set<TLSSocket>();
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
  const pod: TlsPod = {
    name,
    host,
    port,
    accepted: 0,
    peers: [],
    failedHandshakes: 0,
    close: () =>
      new Promise((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  };
  return new Promise((done, fail) => {
    server.once("error", fail);
    server.listen(port, host, () => done(pod));
  });
}

// A hand-driven HBONE client for negative tests: an HTTP/2 CONNECT over mTLS straight to a
// server sidecar's 15008, with whatever :authority and headers a forging client would send.
import { connect as http2Connect } from "node:http2";
import { readFileSync } from "node:fs";

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

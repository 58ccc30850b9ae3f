// Who is calling on the channel: the one place the feed learns a caller's identity, in one of
// two ways (`channel.identityFrom`):
//   tls            the client certificate of the TLS connection (channel.ts asks for one and
//                  checks it against the mesh's trust root);
//   istio-sidecar  the feed runs behind its own Istio sidecar, which terminates Istio's mutual
//                  TLS and names the certificate it verified in the last element of
//                  x-forwarded-client-cert (xfcc.ts); the request must come from the sidecar's
//                  inbound source address (Istio binds 127.0.0.6 for it), or anyone who reaches
//                  the pod's port in clear could write that header.
//
// A caller is a mesh workload when its certificate chains to the mesh's root and carries exactly
// one URI SAN that is a SPIFFE id (the X.509-SVID rule); anything else is refused, by reason.
import type { TLSSocket } from "node:tls";
import { parseXfcc, valuesOf } from "./xfcc.js";
// @peculiar/x509 resolves its services through tsyringe, which needs the Reflect metadata polyfill.
import "reflect-metadata";
import { SubjectAlternativeNameExtension, X509Certificate } from "@peculiar/x509";

export type RefusalReason = "no_certificate" | "untrusted" | "no_spiffe_id" | "not_sidecar" | "no_forwarded_identity" | "bad_forwarded_identity";

export type CallerIdentity = { ok: true; spiffeId: string } | { ok: false; reason: RefusalReason; detail: string };

/** spiffe://<trust domain>/<path>: the trust domain and each path segment as the SPIFFE spec allows. */
const SPIFFE_ID = /^spiffe:\/\/[a-z0-9._-]+(\/[A-Za-z0-9._-]+)+$/;

/** One answer per connection: the certificate does not change within it. */
const known = new WeakMap<object, CallerIdentity>();

/**
 * The URI SANs of DER certificates already parsed, by the whole DER (base64): the same bytes are
 * the same certificate, so no hash has to be trusted. Parsing one costs ~3 ms of CPU (measured
 * in the fan-out bench's profile: 9% of the feed's CPU with 2,000 pollers reconnecting), and
 * every VM of a sidecar (and every reconnection after a feed restart) presents the same
 * certificate. Bounded: past CERTS_CACHED the oldest entry goes (a mesh rotates certificates
 * daily; a cache miss only costs the parse). Whether the certificate chains to the root is
 * checked per connection by TLS (socket.authorized), never cached.
 */
const sansByDer = new Map<string, string[]>();
const CERTS_CACHED = 4096;

/** The URI SANs of a DER certificate ([] when it has none or cannot be read). */
function uriSans(der: Buffer): string[] {
  const key = der.toString("base64");
  const cached = sansByDer.get(key);
  if (cached) return cached;
  let uris: string[];
  try {
    const san = new X509Certificate(new Uint8Array(der)).getExtension(SubjectAlternativeNameExtension);
    uris = san ? san.names.items.filter((n) => n.type === "url").map((n) => n.value) : [];
  } catch {
    uris = [];
  }
  if (sansByDer.size >= CERTS_CACHED) sansByDer.delete(sansByDer.keys().next().value as string);
  sansByDer.set(key, uris);
  return uris;
}

/** For tests: how many certificates' SANs are cached. */
export function cachedCertificates(): number {
  return sansByDer.size;
}

function fromSocket(socket: TLSSocket): CallerIdentity {
  const peer = socket.getPeerCertificate();
  if (!peer || !peer.raw) return { ok: false, reason: "no_certificate", detail: "no client certificate" };
  if (!socket.authorized) return { ok: false, reason: "untrusted", detail: `client certificate not from the mesh's root: ${String(socket.authorizationError)}` };
  const uris = uriSans(peer.raw);
  if (uris.length !== 1) return { ok: false, reason: "no_spiffe_id", detail: `expected exactly one URI SAN, found ${uris.length}` };
  if (!SPIFFE_ID.test(uris[0])) return { ok: false, reason: "no_spiffe_id", detail: `URI SAN is no SPIFFE id: ${JSON.stringify(uris[0].slice(0, 200))}` };
  return { ok: true, spiffeId: uris[0] };
}

/**
 * The caller on this connection, once its handshake is done: channel.ts caps connections by it
 * and judges every request on the connection by it.
 */
export function socketIdentity(socket: TLSSocket): CallerIdentity {
  if (typeof socket.getPeerCertificate !== "function") return { ok: false, reason: "no_certificate", detail: "not a TLS connection" };
  let id = known.get(socket);
  if (!id) {
    id = fromSocket(socket);
    known.set(socket, id);
  }
  return id;
}

/** The address a socket's peer connected from, IPv4-mapped IPv6 written as IPv4. */
export function peerAddress(socket: { remoteAddress?: string }): string {
  const a = socket.remoteAddress ?? "";
  return a.startsWith("::ffff:") && a.includes(".") ? a.slice(7) : a;
}

/**
 * The caller of this request behind the feed's own Istio sidecar: the request must come from one
 * of `sidecarAddresses` (where Istio's inbound sidecar connects from) and carry the identity the
 * sidecar appended last to x-forwarded-client-cert. Elements before it are whatever the caller
 * sent and are never read.
 */
export function forwardedIdentity(socket: { remoteAddress?: string }, header: string | undefined, sidecarAddresses: readonly string[]): CallerIdentity {
  const from = peerAddress(socket);
  if (!sidecarAddresses.includes(from)) return { ok: false, reason: "not_sidecar", detail: `connection from ${from}, not from the sidecar (${sidecarAddresses.join(", ")})` };
  // Several header lines arrive joined with "," (channel_http.ts): the sidecar's element is still last.
  if (header === undefined || header === "") return { ok: false, reason: "no_forwarded_identity", detail: "no x-forwarded-client-cert: the sidecar verified no client certificate (is PeerAuthentication STRICT?)" };
  const parsed = parseXfcc(header);
  if (!parsed.ok) return { ok: false, reason: "bad_forwarded_identity", detail: `x-forwarded-client-cert: ${parsed.detail}` };
  const uris = valuesOf(parsed.elements[parsed.elements.length - 1], "URI");
  if (uris.length !== 1) return { ok: false, reason: "no_spiffe_id", detail: `x-forwarded-client-cert: expected exactly one URI in the sidecar's element, found ${uris.length}` };
  if (!SPIFFE_ID.test(uris[0])) return { ok: false, reason: "no_spiffe_id", detail: `x-forwarded-client-cert: URI is no SPIFFE id: ${JSON.stringify(uris[0].slice(0, 200))}` };
  return { ok: true, spiffeId: uris[0] };
}

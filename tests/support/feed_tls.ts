// TLS material and a client for the feed's channel in tests. The mesh's own certificates are
// the demo's (build/certs: the CA, the feed, the sidecar that polls it); the impostors' are made
// here, once, under build/certs/impostors: a second root with its own "feed" and "sidecar"
// (right names, wrong root), a self-signed certificate claiming the feed's identity, and two
// from the mesh root that must still be refused: one with another SPIFFE id, one with none.
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";
import { createCa, createSelfSigned, loadCa, spiffe, type PemPair } from "./certs.js";
import { REPO_ROOT } from "./paths.js";

export const FEED_IDENTITY = DEMO_IDENTITIES.feed;
/** The principal (SPIFFE id without spiffe://) of the demo sidecar that polls the feed. */
export const SIDECAR_PRINCIPAL = DEMO_IDENTITIES.sidecar.replace("spiffe://", "");

const MESH = join(REPO_ROOT, CERT_DIR);
export const IMPOSTOR_DIR = join(MESH, "impostors");

function pair(dir: string, name: string): PemPair {
  const certPath = join(dir, `${name}.crt`);
  const keyPath = join(dir, `${name}.key`);
  return { certPath, keyPath, cert: readFileSync(certPath, "utf8"), key: readFileSync(keyPath, "utf8") };
}

/** A mesh workload's certificate from build/certs (demo identities: "sidecar", "feed", "pod-a"...). */
export function meshCert(name: string): PemPair {
  return pair(MESH, name);
}

export const MESH_CA_FILE = join(MESH, "ca.crt");

/** The feed's channel files as the feed's configuration names them. */
export function feedChannelFiles(): { certFile: string; keyFile: string; caFile: string } {
  return { certFile: join(MESH, "feed.crt"), keyFile: join(MESH, "feed.key"), caFile: MESH_CA_FILE };
}

/** What a server presenting the feed's certificate needs (a fake feed speaking the channel's TLS). */
export function feedServerTls(): { cert: string; key: string; ca: string } {
  const feed = meshCert("feed");
  return { cert: feed.cert, key: feed.key, ca: readFileSync(MESH_CA_FILE, "utf8") };
}

export const IMPOSTORS = {
  /** Another root, its "feed" carrying the feed's SPIFFE id. */
  otherRootFeed: "other-root-feed",
  /** Another root, its "sidecar" carrying the sidecar's SPIFFE id. */
  otherRootSidecar: "other-root-sidecar",
  /** Self-signed, carrying the feed's SPIFFE id. */
  selfSignedFeed: "self-signed-feed",
  /** The mesh root, another identity (a workload that is not the feed). */
  meshOtherIdentity: "mesh-other-identity",
  /** The mesh root, a DNS name and no URI SAN at all. */
  meshNoSpiffe: "mesh-no-spiffe",
} as const;

/** Writes the impostors' certificates (once) and the demo's; returns the impostors by name. */
export async function impostorCerts(): Promise<Record<keyof typeof IMPOSTORS, PemPair>> {
  await writeDemoCerts();
  // Made against the current mesh CA: redone whenever build/certs was rewritten after them.
  const stamp = join(IMPOSTOR_DIR, "mesh-ca.crt");
  const fresh = existsSync(stamp) && readFileSync(stamp, "utf8") === readFileSync(MESH_CA_FILE, "utf8") && Object.values(IMPOSTORS).every((n) => existsSync(join(IMPOSTOR_DIR, `${n}.crt`)));
  if (!fresh) {
    const other = await createCa(IMPOSTOR_DIR, "other-ca");
    await other.issue(IMPOSTORS.otherRootFeed, [FEED_IDENTITY]);
    await other.issue(IMPOSTORS.otherRootSidecar, [DEMO_IDENTITIES.sidecar]);
    await createSelfSigned(IMPOSTOR_DIR, IMPOSTORS.selfSignedFeed, [FEED_IDENTITY]);
    // The mesh CA's own key signs the two that chain to the mesh root.
    const mesh = await loadCa(MESH, "ca", IMPOSTOR_DIR);
    await mesh.issue(IMPOSTORS.meshOtherIdentity, [spiffe("default", "not-the-feed")]);
    await mesh.issue(IMPOSTORS.meshNoSpiffe, [], ["mesh-feed.mesh-feed.svc"]);
    copyFileSync(MESH_CA_FILE, stamp);
  }
  return Object.fromEntries(Object.entries(IMPOSTORS).map(([k, n]) => [k, pair(IMPOSTOR_DIR, n)])) as Record<keyof typeof IMPOSTORS, PemPair>;
}

export interface ChannelAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  /** SHA-256 fingerprint of the certificate the feed presented. */
  peerFingerprint: string;
}

/**
 * GET on the feed's channel as a caller holding `identity` (default: the demo sidecar; null:
 * no client certificate), trusting only the mesh CA and checking the feed's SPIFFE id as
 * Envoy's mesh_feed cluster does; a POST of `body` when given (a filter's bucket digests).
 * `rawPath` replaces the URL's path as written. Rejects on a refused handshake.
 */
export function channelGet(url: string, identity: PemPair | null = meshCert("sidecar"), headers: Record<string, string> = {}, body?: Buffer, rawPath?: string): Promise<ChannelAnswer> {
  return new Promise((done, fail) => {
    const req = request(url, {
      // Sent as written (a URL string is normalized first: dot segments, case of escapes).
      ...(rawPath !== undefined && { path: rawPath }),
      method: body ? "POST" : "GET",
      headers,
      ca: readFileSync(MESH_CA_FILE),
      ...(identity && { cert: identity.cert, key: identity.key }),
      agent: false,
      // The feed's certificate names it by SPIFFE id (no DNS name): check that instead of a host name.
      checkServerIdentity: (_host, cert) => (cert.subjectaltname?.split(", ").includes(`URI:${FEED_IDENTITY}`) ? undefined : new Error(`not the feed: ${cert.subjectaltname}`)),
    });
    req.on("response", (res) => {
      const peerFingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256 ?? "";
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), peerFingerprint }));
      res.on("error", fail);
    });
    req.on("error", fail);
    req.end(body);
  });
}

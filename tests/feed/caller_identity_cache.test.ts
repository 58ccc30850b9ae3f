// The channel's caller identity (feed/src/caller_identity.ts) caches each certificate's URI SANs
// by the certificate's whole DER, so that 2,000 VMs presenting one sidecar's certificate cost one
// parse, not 2,000 (the fan-out bench's profile). The cache must never let one certificate's
// identity stand for another's: certificates from the mesh root with other SPIFFE ids, and one
// with no SPIFFE id, presented in turn on fresh connections, each keep their own answer; trust
// (socket.authorized) is judged per connection, never cached.
// Run: node --import tsx --test tests/feed/caller_identity_cache.test.ts
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { describe, it } from "node:test";
import type { TLSSocket } from "node:tls";
import { cachedCertificates, socketIdentity } from "../../feed/src/caller_identity.js";
import { impostorCerts, meshCert } from "../support/feed_tls.js";
import { DEMO_IDENTITIES } from "../../scripts/demo-certs.js";

/** A connection as the TLS server hands it over: its peer's certificate and whether it chained. */
function socket(pem: string, authorized = true): TLSSocket {
  const raw = new X509Certificate(pem).raw;
  return { getPeerCertificate: () => ({ raw }), authorized, authorizationError: authorized ? undefined : "UNABLE_TO_VERIFY_LEAF_SIGNATURE" } as unknown as TLSSocket;
}

describe("caller identity: the SAN cache by certificate", () => {
  it("each certificate keeps its own identity however the connections interleave; trust is per connection", async () => {
    // This file may run first on a clean clone: make the demo's and the impostors' certificates.
    const impostors = await impostorCerts();
    const sidecar = meshCert("sidecar").cert;
    const podA = meshCert("pod-a").cert;
    const other = impostors.meshOtherIdentity.cert;
    const noSpiffe = impostors.meshNoSpiffe.cert;
    const before = cachedCertificates();
    for (let round = 0; round < 3; round++) {
      assert.deepEqual(socketIdentity(socket(sidecar)), { ok: true, spiffeId: DEMO_IDENTITIES.sidecar });
      const a = socketIdentity(socket(podA));
      assert.ok(a.ok && a.spiffeId !== DEMO_IDENTITIES.sidecar, `pod-a is not the sidecar: ${JSON.stringify(a)}`);
      const o = socketIdentity(socket(other));
      assert.ok(o.ok && o.spiffeId !== DEMO_IDENTITIES.sidecar && (!a.ok || o.spiffeId !== a.spiffeId), `another identity: ${JSON.stringify(o)}`);
      assert.equal(socketIdentity(socket(noSpiffe)).ok, false);
      // The sidecar's own certificate on a connection that did not chain to the root: refused.
      const untrusted = socketIdentity(socket(sidecar, false));
      assert.equal(untrusted.ok, false);
      assert.equal(!untrusted.ok && untrusted.reason, "untrusted");
    }
    assert.equal(cachedCertificates() - before, 4, "four certificates parsed once each");
  });
});

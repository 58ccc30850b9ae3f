// Envoy 1.40's SPIFFE certificate validator also checks the SANs a filter writes into
// `envoy.network.upstream_subject_alt_names` (before 1.40 it ignored them, so a cluster using it
// accepted any certificate of the trust domain). passthrough_mtls verifies each pod's own identity
// through that key, so an operator whose mTLS cluster validates with the SPIFFE validator (Istio
// uses it for trust-domain bundles) must still get a refusal for a pod presenting another
// identity. The shipped direct-mode config, with its mTLS cluster switched to that validator.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { parse, stringify } from "yaml";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange } from "../support/tcp.js";
import { writeDemoCerts, CERT_DIR, DEMO_IDENTITIES } from "../../scripts/demo-certs.js";

const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;

/** passthrough_mtls.yaml with every TLS cluster validating through the SPIFFE validator. */
function withSpiffeValidator(): string {
  const config = parse(shippedConfig("passthrough_mtls.yaml"));
  const trustDomain = new URL(DEMO_IDENTITIES.sidecar!).host;
  let switched = 0;
  for (const cluster of config.static_resources.clusters) {
    const context = cluster.transport_socket?.typed_config?.common_tls_context;
    if (!context?.validation_context) continue;
    context.validation_context = {
      custom_validator_config: {
        name: "envoy.tls.cert_validator.spiffe",
        typed_config: {
          "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.SPIFFECertValidatorConfig",
          trust_domains: [{ name: trustDomain, trust_bundle: { filename: `${CERT_DIR}/ca.crt` } }],
        },
      },
    };
    switched++;
  }
  assert.ok(switched >= 1, "the shipped config has no TLS cluster to switch");
  return stringify(config);
}

describe("passthrough_mtls with Envoy's SPIFFE validator (Envoy 1.40 checks the filter's SANs)", () => {
  let envoy: EnvoyProcess;
  let httpbin: TlsPod;
  let reviews: TlsPod;

  before(async () => {
    await writeDemoCerts();
    httpbin = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
    reviews = await startTlsPod("reviews-0", "127.0.0.13", 8443, CERT_DIR, "pod-c"); // presents "imposter"
    envoy = await EnvoyProcess.start({ name: "passthrough-spiffe", adminPort: 15000, config: withSpiffeValidator() });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await httpbin?.close();
    await reviews?.close();
  });

  it("reaches the pod whose certificate carries its own identity", async () => {
    const reply = await exchange("127.0.0.11", 8443, "hello", 10_000, CLIENT_ADDRESS);
    assert.equal(reply.received.toString(), `httpbin-0 peer=${SIDECAR}\nhello`);
  });

  it("refuses a pod presenting another identity of the same trust domain", async () => {
    const reply = await exchange("127.0.0.13", 8443, "secret", 10_000, CLIENT_ADDRESS);
    assert.equal(reply.received.length, 0, "no byte may reach or come from the wrong pod");
    assert.equal(reviews.accepted, 0);
    const stats = await envoy.stats();
    assert.ok((stats.get("cluster.outbound_mtls_passthrough.ssl.fail_verify_san") ?? 0) + (stats.get("cluster.outbound_mtls_passthrough.upstream_cx_connect_fail") ?? 0) >= 1);
  });
});

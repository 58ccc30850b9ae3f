// Nothing lost through passthrough_mtls in the real Envoy (envoy-configs/passthrough_mtls.yaml,
// unchanged): 1,000 captured connections, 200 at a time, random sizes up to 1 MiB each way,
// half-closed on both sides, spread over the three routes the filter picks (mTLS to a pod,
// a tlsMode-disabled pod in clear, an address that is no pod). Every byte must arrive with the
// same SHA-256 both ways, nothing may be reset, and the filter's outcome counters must add up.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { chooseSeed, describeFailures, runLoad } from "../support/checksum_load.js";
import { PayloadPool, startChecksumServer, type ChecksumServer } from "../support/checksum_server.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { CERT_DIR, writeDemoCerts } from "../../scripts/demo-certs.js";

const CONNECTIONS = 1000;
const CONCURRENCY = 200;
const MAX_PAYLOAD = 1024 * 1024;
const ROUTES = [
  { host: "127.0.0.11", port: 8443 }, // httpbin-0: mTLS, identity checked by Envoy
  { host: "127.0.0.12", port: 8080 }, // legacy-0: tlsMode disabled, clear
  { host: "127.0.0.30", port: 9000 }, // not a pod: plain passthrough
];

function counter(stats: Map<string, number>, name: string): number {
  return stats.get(`wasmcustom.passthrough_mtls.${name}`) ?? 0;
}

describe("passthrough_mtls loses nothing under load (real Envoy, mesh capture)", () => {
  let envoy: EnvoyProcess;
  let servers: ChecksumServer[] = [];
  const seed = chooseSeed();
  const pool = new PayloadPool(MAX_PAYLOAD, seed);

  before(async () => {
    await writeDemoCerts();
    servers = [
      await startChecksumServer("httpbin-0", ROUTES[0]!.host, ROUTES[0]!.port, pool, { certDir: CERT_DIR, certName: "pod-a" }),
      await startChecksumServer("legacy-0", ROUTES[1]!.host, ROUTES[1]!.port, pool),
      await startChecksumServer("outside", ROUTES[2]!.host, ROUTES[2]!.port, pool),
    ];
    envoy = await EnvoyProcess.start({ name: "passthrough-mtls-load", adminPort: 15000, config: shippedConfig("passthrough_mtls.yaml") });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    for (const server of servers) await server.close();
  });

  it("1,000 connections, 200 at a time, 0-1 MiB each way: every byte arrives, checksums equal, no reset", async () => {
    const result = await runLoad({
      count: CONNECTIONS,
      concurrency: CONCURRENCY,
      seed,
      maxPayload: MAX_PAYLOAD,
      pool,
      target: (index) => ROUTES[index % ROUTES.length]!,
      servers,
      localAddress: CLIENT_ADDRESS,
    });
    console.log(JSON.stringify({ figure: "nothing_lost", filter: "passthrough_mtls", seed, connections: CONNECTIONS, bytes_up: result.bytesUp, bytes_down: result.bytesDown, seconds: Number(result.seconds.toFixed(1)) }));
    assert.equal(result.failures.length, 0, describeFailures(result));
    assert.deepEqual(servers.map((server) => server.broken), [[], [], []], `seed ${seed}`);
    // Each route got its third of the connections, and the pod saw only the sidecar's certificate.
    const perServer = servers.map((server) => result.outcomes.filter((outcome) => outcome.server === server.name).length);
    assert.deepEqual(perServer, [334, 333, 333], `seed ${seed}`);

    // Each connection bumps exactly one outcome; plaintext_pod is the tlsMode-disabled part of passthrough.
    const stats = await envoy.waitForStats((s) => counter(s, "mtls") + counter(s, "passthrough") >= CONNECTIONS);
    assert.equal(counter(stats, "mtls"), 334);
    assert.equal(counter(stats, "passthrough"), 666);
    assert.equal(counter(stats, "plaintext_pod"), 333);
    assert.equal(counter(stats, "rejected"), 0);
    assert.equal(stats.get("cluster.outbound_mtls_passthrough.upstream_cx_total"), 334);
    assert.equal(stats.get("cluster.PassthroughCluster.upstream_cx_total"), 666);
    assert.equal(stats.get("cluster.outbound_mtls_passthrough.ssl.handshake"), 334);
    assert.equal(stats.get("listener.127.0.0.1_15001.downstream_cx_total"), CONNECTIONS);
  });

  it("300 uploads up to 1 MiB against downloads of at most 64 bytes: the pod half-closes first and still gets every byte", async () => {
    const result = await runLoad({ count: 300, concurrency: 20, seed: seed + CONNECTIONS, maxPayload: MAX_PAYLOAD, maxDownload: 64, pool, target: (index) => ROUTES[index % ROUTES.length]!, servers, localAddress: CLIENT_ADDRESS, firstId: CONNECTIONS });
    console.log(JSON.stringify({ figure: "nothing_lost", filter: "passthrough_mtls", path: "pod_half_closes_first", seed: result.seed, connections: 300, seconds: Number(result.seconds.toFixed(1)) }));
    assert.equal(result.failures.length, 0, describeFailures(result));
  });
});

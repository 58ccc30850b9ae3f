// Nothing lost through tunnel_port in the real Envoy (the shipped client and server configs):
// the application's connection is captured by the client sidecar, carried in an HBONE tunnel
// (HTTP/2 CONNECT over mTLS) to the chosen pod's server sidecar, checked there and handed to the
// app. 1,000 connections, 200 at a time, random sizes up to 1 MiB each way, half-closed on both
// sides: every byte must arrive with the same SHA-256 both ways, nothing reset, counters agree.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { chooseSeed, describeFailures, runLoad } from "../support/checksum_load.js";
import { PayloadPool, startChecksumServer, type ChecksumServer } from "../support/checksum_server.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { assertOnlyKnownHboneLoss } from "../support/known_loss.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { serverForPod } from "../../scripts/demo/tunnel_port.js";

const CONNECTIONS = 1000;
const CONCURRENCY = 200;
const MAX_PAYLOAD = 1024 * 1024;
const VIP = { host: "127.10.0.1", port: 80 }; // my-service: 80 -> p1:9376, p2:9377 (round robin)

function counter(stats: Map<string, number>, name: string): number {
  return stats.get(`wasmcustom.tunnel_port.${name}`) ?? 0;
}

describe("tunnel_port loses nothing under load (client sidecar -> HBONE mTLS -> server sidecar -> app)", () => {
  let client: EnvoyProcess;
  let serverP1: EnvoyProcess;
  let serverP2: EnvoyProcess;
  let apps: ChecksumServer[] = [];
  const seed = chooseSeed();
  const pool = new PayloadPool(MAX_PAYLOAD, seed);

  before(async () => {
    await writeDemoCerts();
    apps = [await startChecksumServer("app-p1", "127.0.0.21", 9376, pool), await startChecksumServer("app-p2", "127.0.0.22", 9377, pool)];
    const serverConfig = shippedConfig("tunnel_port_server.yaml");
    serverP1 = await EnvoyProcess.start({ name: "tunnel-load-p1", adminPort: 15000, adminAddress: "127.0.0.21", config: serverConfig });
    serverP2 = await EnvoyProcess.start({ name: "tunnel-load-p2", adminPort: 15000, adminAddress: "127.0.0.22", config: serverForPod(serverConfig, "127.0.0.22") });
    client = await EnvoyProcess.start({ name: "tunnel-load-client", adminPort: 15000, config: shippedConfig("tunnel_port_client.yaml") });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    for (const envoy of [client, serverP1, serverP2]) await envoy?.stop();
    for (const app of apps) await app.close();
  });

  it("1,000 connections, 200 at a time, 0-1 MiB each way: every byte arrives, checksums equal, no reset", async () => {
    // The app's FIN follows the client's (request/response order; both stream at once): the order
    // the HBONE path keeps every byte in (tests/support/known_loss.ts).
    const result = await runLoad({ count: CONNECTIONS, concurrency: CONCURRENCY, seed, maxPayload: MAX_PAYLOAD, pool, target: () => VIP, servers: apps, localAddress: CLIENT_ADDRESS, serverFin: "after-client-eof" });
    console.log(JSON.stringify({ figure: "nothing_lost", filter: "tunnel_port", seed, connections: CONNECTIONS, bytes_up: result.bytesUp, bytes_down: result.bytesDown, seconds: Number(result.seconds.toFixed(1)) }));
    assert.equal(result.failures.length, 0, describeFailures(result));
    assert.deepEqual(apps.map((app) => app.broken), [[], []], `seed ${seed}`);
    const perApp = apps.map((app) => result.outcomes.filter((outcome) => outcome.server === app.name).length);
    assert.equal(perApp[0]! + perApp[1]!, CONNECTIONS);
    assert.ok(perApp[0]! > 0 && perApp[1]! > 0, `both pods served: ${perApp}`);

    const clientStats = await client.waitForStats((s) => counter(s, "client.tunneled") >= CONNECTIONS);
    assert.equal(counter(clientStats, "client.tunneled"), CONNECTIONS);
    assert.equal(counter(clientStats, "client.unknown_passthrough"), 0);
    const p1 = await serverP1.waitForStats((s) => counter(s, "server.accepted") >= perApp[0]!);
    const p2 = await serverP2.waitForStats((s) => counter(s, "server.accepted") >= perApp[1]!);
    // Each server sidecar accepted exactly the tunnels whose bytes reached its app.
    assert.equal(counter(p1, "server.accepted"), perApp[0]);
    assert.equal(counter(p2, "server.accepted"), perApp[1]);
  });

  it("300 uploads up to 1 MiB against downloads of at most 64 bytes (the app half-closes first): at worst Envoy's known truncation", async () => {
    const result = await runLoad({ count: 300, concurrency: 20, seed: seed + CONNECTIONS, maxPayload: MAX_PAYLOAD, maxDownload: 64, pool, target: () => VIP, servers: apps, localAddress: CLIENT_ADDRESS, firstId: CONNECTIONS });
    const truncated = assertOnlyKnownHboneLoss(result);
    console.log(JSON.stringify({ figure: "nothing_lost", filter: "tunnel_port", path: "app_half_closes_first", seed: result.seed, connections: 300, known_envoy_truncations: truncated, seconds: Number(result.seconds.toFixed(1)) }));
  });
});

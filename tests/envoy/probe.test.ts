// The probe filter in the real Envoy: it picks tcp_proxy's cluster per connection through
// `set_envoy_filter_state("envoy.tcp_proxy.cluster", …)`, written in on_new_connection.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { EnvoyProcess, runUntilExit } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { freePort } from "../support/ports.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { stringify } from "yaml";

const ROUTES = JSON.stringify({ routes: { "127.0.0.2": "backend_a", "127.0.0.3": "backend_b" } });

async function probeBootstrap(configuration: string, ports: { admin: number; listener: number; a: number; b: number }) {
  return bootstrap({
    adminPort: ports.admin,
    listeners: [
      listener({
        name: "probe_listener",
        address: "127.0.0.2",
        additionalAddresses: ["127.0.0.3", "127.0.0.4"],
        port: ports.listener,
        filters: [
          wasmNetworkFilter({ name: "probe", wasm: "build/probe.wasm", configuration }),
          // tcp_proxy's own cluster: what an unrouted connection gets.
          tcpProxy("probe", "backend_default"),
        ],
      }),
    ],
    clusters: [
      staticCluster("backend_a", "127.0.0.1", ports.a),
      staticCluster("backend_b", "127.0.0.1", ports.b),
      staticCluster("backend_default", "127.0.0.1", ports.a),
    ],
  });
}

describe("probe filter in the real Envoy", () => {
  let envoy: EnvoyProcess;
  let backendA: Backend;
  let backendB: Backend;
  let listenerPort: number;

  before(async () => {
    const ports = { admin: await freePort(), listener: await freePort(), a: await freePort(), b: await freePort() };
    listenerPort = ports.listener;
    backendA = await startBackend("backend_a", "127.0.0.1", ports.a);
    backendB = await startBackend("backend_b", "127.0.0.1", ports.b);
    envoy = await EnvoyProcess.start({ name: "probe", adminPort: ports.admin, config: await probeBootstrap(ROUTES, ports) });
  });

  after(async () => {
    await envoy?.stop();
    await backendA?.close();
    await backendB?.close();
  });

  it("sends each destination to the cluster its route names, bytes unchanged both ways", async () => {
    const payloadA = randomBytes(256 * 1024);
    const payloadB = randomBytes(64 * 1024);
    const [viaA, viaB] = await Promise.all([
      exchange("127.0.0.2", listenerPort, payloadA),
      exchange("127.0.0.3", listenerPort, payloadB),
    ]);
    assert.equal(viaA.errored, false);
    assert.equal(viaB.errored, false);
    // Server-first backends: their banner proves which one answered, the echo proves the bytes.
    assert.deepEqual(viaA.received, Buffer.concat([Buffer.from("backend_a\n"), payloadA]));
    assert.deepEqual(viaB.received, Buffer.concat([Buffer.from("backend_b\n"), payloadB]));
  });

  it("leaves an unrouted destination on tcp_proxy's own cluster and counts it", async () => {
    const reply = await exchange("127.0.0.4", listenerPort, "x");
    assert.equal(reply.received.toString(), "backend_a\nx");
  });

  it("shows one counter per outcome in /stats", async () => {
    const stats = await envoy.waitForStats((s) => (statEnding(s, "probe.routed") ?? 0) >= 2);
    assert.equal(statEnding(stats, "probe.routed"), 2);
    assert.equal(statEnding(stats, "probe.unmatched"), 1);
    assert.equal(statEnding(stats, "probe.filter_state_refused"), 0);
    assert.equal(stats.get("cluster.backend_b.upstream_cx_total"), 1);
  });
});

describe("probe filter configuration in the real Envoy", () => {
  it("is refused with one log line naming the bad field", async () => {
    const ports = { admin: await freePort(), listener: await freePort(), a: await freePort(), b: await freePort() };
    const bad = JSON.stringify({ routes: { "127.0.0.2": 7 } });
    const result = runUntilExit(stringify(await probeBootstrap(bad, ports)), "probe-bad-config");
    assert.notEqual(result.code, 0, "Envoy must refuse the listener");
    const lines = result.log.split("\n").filter((line) => line.includes("invalid plugin configuration"));
    assert.equal(lines.length >= 1, true, `no configuration error in Envoy's log:\n${result.log.slice(-3000)}`);
    assert.match(lines[0], /wasm log probe probe: invalid plugin configuration: routes\["127\.0\.0\.2"\]: expected a string$/);
  });
});

function statEnding(stats: Map<string, number>, suffix: string): number | undefined {
  for (const [name, value] of stats) if (name.endsWith(suffix)) return value;
  return undefined;
}

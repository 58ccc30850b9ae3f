// The capture path every mesh test relies on, proven in the real Envoy: a client's connection to
// an arbitrary IP:port is REDIRECTed by iptables to Envoy, and the filter sees the ORIGINAL
// destination in on_new_connection (destination.address restored by original_dst).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS, captureOutbound, ORIGINAL_DST_LISTENER_FILTER, releaseCapture } from "../support/capture.js";
import { EnvoyProcess } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { freePort } from "../support/ports.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";

describe("mesh-style capture (iptables REDIRECT + original_dst) in the real Envoy", () => {
  let envoy: EnvoyProcess;
  let backends: Backend[] = [];
  const outboundPort = 15001;

  before(async () => {
    const admin = await freePort();
    const a = await freePort();
    const b = await freePort();
    backends = [await startBackend("backend_a", "127.0.0.1", a), await startBackend("backend_b", "127.0.0.1", b)];
    const routes = JSON.stringify({ routes: { "127.0.0.21": "backend_a", "127.0.0.22": "backend_b" } });
    envoy = await EnvoyProcess.start({
      name: "capture",
      adminPort: admin,
      config: bootstrap({
        adminPort: admin,
        listeners: [
          listener({
            name: "virtualOutbound",
            address: "127.0.0.1",
            port: outboundPort,
            listenerFilters: [ORIGINAL_DST_LISTENER_FILTER],
            filters: [wasmNetworkFilter({ name: "probe", wasm: "build/probe.wasm", configuration: routes }), tcpProxy("outbound", "backend_a")],
          }),
        ],
        clusters: [staticCluster("backend_a", "127.0.0.1", a), staticCluster("backend_b", "127.0.0.1", b)],
      }),
    });
    captureOutbound(outboundPort);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    for (const backend of backends) await backend.close();
  });

  it("hands the filter the address the client dialled, not Envoy's listener address", async () => {
    // Nothing listens on 127.0.0.22:9; only the capture makes this connection succeed.
    const reply = await exchange("127.0.0.22", 9, "hello", 10_000, CLIENT_ADDRESS);
    assert.equal(reply.received.toString(), "backend_b\nhello");
    const viaA = await exchange("127.0.0.21", 4321, "x", 10_000, CLIENT_ADDRESS);
    assert.equal(viaA.received.toString(), "backend_a\nx");
    const stats = await envoy.stats();
    assert.equal([...stats].find(([name]) => name.endsWith("probe.routed"))?.[1], 2);
  });
});

// The plugin failure policy in the real Envoy, with a filter that traps on purpose
// (tests/fixtures/trap_on_connection: the 2nd connection traps in on_new_connection). A trap marks
// the VM failed for good; what happens to later connections is the plugin's failure_policy:
// FAIL_CLOSED closes them, FAIL_OPEN lets them skip the filter and reach the upstream.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { freePort } from "../support/ports.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";

const WASM = "build/fixtures/trap_on_connection.wasm";

async function startTrappingEnvoy(policy: "FAIL_CLOSED" | "FAIL_OPEN", backend: Backend): Promise<{ envoy: EnvoyProcess; port: number }> {
  const port = await freePort();
  const adminPort = await freePort();
  const config = bootstrap({
    adminPort,
    listeners: [
      listener({
        name: "trap",
        address: "127.0.0.1",
        port,
        filters: [wasmNetworkFilter({ name: "trap_on_connection", wasm: WASM, configuration: "2", failurePolicy: policy }), tcpProxy("trap", "backend")],
      }),
    ],
    clusters: [staticCluster("backend", backend.host, backend.port)],
  });
  const envoy = await EnvoyProcess.start({ name: `failure-${policy.toLowerCase()}`, adminPort, config });
  return { envoy, port };
}

/** Proof in Envoy's own log that the VM trapped in on_new_connection (the log is flushed every 50 ms). */
async function assertVmTrapped(envoy: EnvoyProcess): Promise<void> {
  let log = envoy.log();
  for (let attempt = 0; attempt < 100 && !/proxy_on_new_connection failed/.test(log); attempt++) {
    await sleep(50);
    log = envoy.log();
  }
  assert.match(log, /wasm log trap_on_connection[^:]*: trapping on purpose/);
  assert.match(log, /proxy_on_new_connection failed: Uncaught RuntimeError: unreachable/);
}

for (const policy of ["FAIL_CLOSED", "FAIL_OPEN"] as const) {
  describe(`a trapping network filter with failure_policy ${policy}`, () => {
    let backend: Backend;
    let envoy: EnvoyProcess;
    let port: number;

    before(async () => {
      backend = await startBackend("upstream", "127.0.0.1", await freePort());
      ({ envoy, port } = await startTrappingEnvoy(policy, backend));
    });

    after(async () => {
      await envoy?.stop();
      await backend?.close();
    });

    it("passes the first connection through the healthy filter", async () => {
      const reply = await exchange("127.0.0.1", port, "first");
      assert.equal(reply.received.toString(), "upstream\nfirst");
      assert.equal((await envoy.stats()).get("wasmcustom.trap_on_connection.passed"), 1);
    });

    it("closes the connection whose callback trapped, and Envoy logs the trap", async () => {
      const reply = await exchange("127.0.0.1", port, "second");
      assert.equal(reply.received.length, 0, "the trapped connection must not reach the upstream");
      assert.equal(backend.accepted, 1);
      await assertVmTrapped(envoy);
    });

    if (policy === "FAIL_CLOSED") {
      it("closes every later connection too: the failed VM is not bypassed", async () => {
        for (const payload of ["third", "fourth"]) {
          const reply = await exchange("127.0.0.1", port, payload);
          assert.equal(reply.received.length, 0);
        }
        assert.equal(backend.accepted, 1, "nothing reached the upstream after the trap");
        const stats = await envoy.stats();
        assert.equal(stats.get("wasmcustom.trap_on_connection.passed"), 1, "the failed VM ran no more callbacks");
        assert.equal(stats.get("listener.127.0.0.1_" + port + ".downstream_cx_total"), 4);
      });
    } else {
      it("lets later connections skip the failed filter and reach the upstream", async () => {
        for (const payload of ["third", "fourth"]) {
          const reply = await exchange("127.0.0.1", port, payload);
          assert.equal(reply.received.toString(), `upstream\n${payload}`);
        }
        assert.equal(backend.accepted, 3);
        const stats = await envoy.stats();
        assert.equal(stats.get("wasmcustom.trap_on_connection.passed"), 1, "the bypassed filter ran no callbacks");
      });
    }
  });
}

// Envoy 1.40 keys a wasm plugin by its whole PluginConfig: identical plugin configurations on two
// listeners share one root context (one parsed mesh per VM), while 1.39 built one root context per
// filter instance. For the mesh filters this decides the memory a sidecar pays when one WasmPlugin
// lands on many listeners (Istio puts a NETWORK plugin on every per-service TCP chain), so the
// suite proves it in the pinned Envoy instead of trusting the changelog: each root context logs
// one `configured:` line when it parses its snapshot.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EnvoyProcess } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { freePort } from "../support/ports.js";

const SNAPSHOT = JSON.stringify({
  workloads: [{ uid: "p1", addresses: ["10.0.0.1"], identity: "spiffe://cluster.local/ns/a/sa/p1", tlsMode: "istio" }],
});

/** Starts an Envoy with two listeners, each with a passthrough_mtls filter, and counts configures. */
async function configuresWith(configurations: [string, string]): Promise<number> {
  const admin = await freePort();
  const ports = [await freePort(), await freePort()];
  const config = bootstrap({
    adminPort: admin,
    listeners: ports.map((port, i) =>
      listener({
        name: `listener_${i}`,
        address: "127.0.0.1",
        port,
        filters: [
          wasmNetworkFilter({ name: "passthrough_mtls", wasm: "build/passthrough_mtls.wasm", configuration: configurations[i]! }),
          tcpProxy(`l${i}`, "sink"),
        ],
      }),
    ),
    clusters: [staticCluster("sink", "127.0.0.1", await freePort())],
  });
  const envoy = await EnvoyProcess.start({ name: "plugin-identity", adminPort: admin, config });
  try {
    // Worker VMs may configure just after /ready: read until the count holds for 500 ms.
    const count = () => envoy.log().split("\n").filter((line) => line.includes("configured: 1 workloads")).length;
    let last = -1;
    for (let seen = count(); seen !== last; seen = count()) {
      last = seen;
      await new Promise((done) => setTimeout(done, 500));
    }
    return last;
  } finally {
    await envoy.stop();
  }
}

describe("Envoy 1.40 plugin identity: identical plugin configurations share one root context", () => {
  it("two listeners with the same configuration parse the snapshot half as often as two that differ", async () => {
    const shared = await configuresWith([SNAPSHOT, SNAPSHOT]);
    // The same snapshot with a different (ignored) spelling: a different PluginConfig.
    const distinct = await configuresWith([SNAPSHOT, SNAPSHOT + " "]);
    console.log(JSON.stringify({ figure: "plugin_identity", identical_configs_configures: shared, distinct_configs_configures: distinct }));
    assert.ok(shared > 0, "the filter logged no configure line");
    assert.equal(distinct, 2 * shared, `identical configs: ${shared} configures, distinct configs: ${distinct}`);
  });
});

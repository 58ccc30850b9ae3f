// What the real Envoy serves for the node metadata NETWORK when it is text and when it is a
// number whose double happens to be printable, and what the mesh filters make of each. The
// double below is the one whose 8 little-endian bytes spell "network1": Envoy serves
// `xds.node.metadata.NETWORK` as raw bytes for both (measured here with the host_probe fixture),
// so a filter that checked bytes took the number for the name "network1". The filters now read
// the Value's kind from the serialized Node (`xds.node`) when the value is 8 bytes: the number
// refuses the configuration, the 8-character name is taken.
// The bootstraps are JSON, parsed as protobuf JSON, as Istio's envoy-rev.json is: Envoy's YAML
// loader would turn this number (any non-integer, and large integers) into the string of its
// digits before the filter sees it (measured: 1.5 is served as "1.5", 7 as the double 7).
// Run: node --import tsx --test tests/envoy/node_metadata_kind.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { freePort } from "../support/ports.js";
import { exchange } from "../support/tcp.js";
import { ensureBuilt } from "../host/helpers.js";

const NAME = "network1";
const PRINTABLE_NUMBER = Buffer.from(NAME).readDoubleLE(0);
const NAME_HEX = Buffer.from(NAME).toString("hex");

async function envoyWith(name: string, network: string | number, filter: object): Promise<{ config: object; admin: number; port: number }> {
  const admin = await freePort();
  const port = await freePort();
  const config = {
    node: { id: `sidecar~127.0.0.1~${name}.default~default.svc.cluster.local`, cluster: "sleep.default", metadata: { NETWORK: network, CLUSTER_ID: "c1" } },
    ...bootstrap({
      adminPort: admin,
      listeners: [listener({ name: "app", address: "127.0.0.1", port, filters: [filter, tcpProxy("app", "sink")] })],
      clusters: [staticCluster("sink", "127.0.0.1", await freePort())],
    }),
  };
  return { config, admin, port };
}

/** The bytes Envoy serves for xds.node.metadata.NETWORK on a node whose NETWORK is `network`. */
async function servedBytes(network: string | number): Promise<string> {
  ensureBuilt("host_probe");
  const probe = wasmNetworkFilter({ name: "host_probe", wasm: "build/fixtures/host_probe.wasm", configuration: "read=xds/node/metadata/NETWORK" });
  const { config, admin, port } = await envoyWith("probe", network, probe);
  const envoy = await EnvoyProcess.start({ name: `node-kind-${typeof network}`, adminPort: admin, config, format: "json" });
  try {
    await exchange("127.0.0.1", port, "x", 5000);
    let line: string | undefined;
    for (let i = 0; i < 100 && line === undefined; i++) {
      line = envoy.log().split("\n").find((l) => l.includes("prop xds/node/metadata/NETWORK"));
      if (line === undefined) await sleep(50);
    }
    assert.ok(line, "the probe logged the property");
    const match = /status=(\d+) hex=([0-9a-f]*)/.exec(line);
    assert.ok(match, line);
    assert.equal(match[1], "0", "served (OK)");
    return match[2]!;
  } finally {
    await envoy.stop();
  }
}

const SNAPSHOT = JSON.stringify({
  workloads: [{ uid: "p1", addresses: ["10.0.0.1"], network: NAME, identity: "spiffe://cluster.local/ns/a/sa/p1", tlsMode: "istio" }],
});
const passthrough = () => wasmNetworkFilter({ name: "passthrough_mtls", wasm: "build/passthrough_mtls.wasm", configuration: SNAPSHOT });

describe("node metadata NETWORK in the real Envoy: text and a printable number", () => {
  it("Envoy serves the text and the number as the same 8 bytes", async () => {
    assert.equal(NAME_HEX, "6e6574776f726b31");
    assert.equal(await servedBytes(NAME), NAME_HEX);
    assert.equal(await servedBytes(PRINTABLE_NUMBER), NAME_HEX, "a number comes back as its double's bytes: the same");
  });

  it("passthrough_mtls refuses the number as NETWORK (its configuration, and so the listener)", async () => {
    ensureBuilt("passthrough_mtls");
    const { config, admin } = await envoyWith("number", PRINTABLE_NUMBER, passthrough());
    await assert.rejects(
      EnvoyProcess.start({ name: "node-kind-number-filter", adminPort: admin, config, format: "json", readyTimeoutMs: 15_000 }),
      /localNetwork: not set, and the node metadata NETWORK is a number, not a network name/,
    );
  });

  it("passthrough_mtls takes the 8-character name network1 from the node metadata", async () => {
    const { config, admin } = await envoyWith("text", NAME, passthrough());
    const envoy = await EnvoyProcess.start({ name: "node-kind-text-filter", adminPort: admin, config, format: "json" });
    try {
      let log = "";
      for (let i = 0; i < 100 && !log.includes("local network"); i++) {
        log = envoy.log();
        if (!log.includes("local network")) await sleep(50);
      }
      assert.match(log, /local network "network1" \(from node metadata NETWORK\)/);
      assert.doesNotMatch(log, /invalid plugin configuration/);
    } finally {
      await envoy.stop();
    }
  });
});

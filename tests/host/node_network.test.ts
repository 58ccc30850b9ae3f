// One fleet-wide configuration, proxies on two networks: every filter takes its local network
// from the proxy's node metadata NETWORK when the configuration does not pin `localNetwork`
// (docs/problems.md, "one configuration for the whole fleet"). First the host itself: it must
// serve `xds.node` sub-paths with the encodings the real Envoy 1.40.0 was measured to use (the
// expected bytes below are those measurements, see assembly/mesh/local_network.ts); then each
// compiled filter, two hosts with the same configuration and different node metadata.
// Run: node --import tsx --test tests/host/node_network.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encodeNode, ProxyWasmHost, type MetadataValue } from "../../host/index.js";
import { CLUSTER, ORIGINAL_DST, SAN, ensureBuilt, errorLines, linesStarting, probe, startFilter, writes } from "./helpers.js";

type Json = Record<string, unknown>;

/** What the probe read for each path at a connection: hex of the value, or `status N`. */
async function probeReads(paths: string[], metadata: Record<string, MetadataValue>): Promise<Map<string, string>> {
  const host = await probe({ pluginConfiguration: paths.map((p) => `read=${p}`).join(";"), nodeFields: { id: "probe-node", metadata } });
  host.connect({ destination: "10.0.0.1:80" });
  return new Map(
    linesStarting(host, "prop ").map((line) => {
      const [, path, status, value] = /^prop (\S+) status=(\d+) hex=(\S*)$/.exec(line) ?? [];
      return [path ?? line, status === "0" ? (value ?? "") : `status ${status}`];
    }),
  );
}

describe("host: xds.node sub-paths are served as the real Envoy 1.40.0 serves them", () => {
  it("descends into the Node message: NETWORK's string raw, the id raw, missing keys NOT_FOUND", async () => {
    const read = await probeReads(
      ["xds/node/metadata/NETWORK", "xds/node/id", "xds/node/metadata/MISSING", "node/metadata/NETWORK", "xds/node/metadata/NEST/a"],
      { NETWORK: "net-west", NEST: { a: "x", b: 2 } },
    );
    assert.deepEqual(Object.fromEntries(read), {
      "xds/node/metadata/NETWORK": Buffer.from("net-west").toString("hex"),
      "xds/node/id": Buffer.from("probe-node").toString("hex"),
      "xds/node/metadata/MISSING": "status 1",
      // The pre-1.33 top-level name is gone.
      "node/metadata/NETWORK": "status 1",
      "xds/node/metadata/NEST/a": "78",
    });
  });

  it("serves other value kinds as Envoy does: number as a double, bool one byte, \"\" empty, null SERIALIZATION_FAILURE", async () => {
    const read = await probeReads(
      ["xds/node/metadata/NUM", "xds/node/metadata/B", "xds/node/metadata/EMPTY", "xds/node/metadata/NUL", "xds/node/metadata/LIST"],
      { NUM: 7, B: true, EMPTY: "", NUL: null, LIST: ["a", "b"] },
    );
    assert.deepEqual(Object.fromEntries(read), {
      "xds/node/metadata/NUM": "0000000000001c40",
      "xds/node/metadata/B": "01",
      "xds/node/metadata/EMPTY": "",
      "xds/node/metadata/NUL": "status 3",
      "xds/node/metadata/LIST": "0200000001000000000000000100000000000000610000620000",
    });
  });

  it("serves the metadata Struct as proxy-wasm pairs, sorted by key", async () => {
    const read = await probeReads(["xds/node/metadata"], { NETWORK: "net-west", NUM: 7, LIST: ["a", "b"] });
    assert.equal(
      read.get("xds/node/metadata"),
      "03000000040000001a000000070000000800000003000000080000004c495354000200000001000000000000000100000000000000610000620000004e4554574f524b006e65742d77657374004e554d000000000000001c4000",
    );
  });

  it("answers NOT_FOUND for bytes that are not a Node message, and for a node without metadata", async () => {
    const garbage = await probe({ pluginConfiguration: "read=xds/node/metadata/NETWORK", node: Uint8Array.of(0x0a, 0xff, 0xff) });
    garbage.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(linesStarting(garbage, "prop "), ["prop xds/node/metadata/NETWORK status=1 hex=<null>"]);
    const bare = await probe({ pluginConfiguration: "read=xds/node/metadata/NETWORK", nodeFields: { id: "n" } });
    bare.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(linesStarting(bare, "prop "), ["prop xds/node/metadata/NETWORK status=1 hex=<null>"]);
  });
});

// ---------------------------------------------------------------- the fleet

const id = (sa: string) => `spiffe://cluster.local/ns/default/sa/${sa}`;
const pod = (uid: string, ip: string, network: string): Json => ({ uid, addresses: [ip], network, tlsMode: "istio", identity: id(uid) });

// Two clusters with overlapping pod CIDRs: the same IPs exist on "west" and on "east".
//   sleep-west / sleep-east  10.0.0.9   the client sidecar on each network
//   app-west   / app-east    10.0.0.1   service app (VIP 10.96.0.1 on both), 80 -> 8080; east's endpoint overrides 80 -> 9090
const MESH: Json = {
  workloads: [pod("sleep-west", "10.0.0.9", "west"), pod("sleep-east", "10.0.0.9", "east"), pod("app-west", "10.0.0.1", "west"), pod("app-east", "10.0.0.1", "east")],
  services: [
    {
      hostname: "app.default.svc.cluster.local",
      vips: [{ network: "west", address: "10.96.0.1" }, { network: "east", address: "10.96.0.1" }],
      ports: { "80": 8080 },
      endpoints: [{ workload: "app-west" }, { workload: "app-east", ports: { "80": 9090 } }],
    },
  ],
};

const onNetwork = (network: MetadataValue) => ({ nodeFields: { id: "sidecar~10.0.0.9~sleep", metadata: { NETWORK: network, CLUSTER_ID: "c" } } });

/** Asserts that `config` is refused by `filter` on a node with `network`, with the one line `message`. */
async function assertRefusedOn(filter: string, config: Json, network: MetadataValue, message: string): Promise<void> {
  const host = await ProxyWasmHost.fromFile(ensureBuilt(filter), { rootId: filter, pluginConfiguration: JSON.stringify(config), ...onNetwork(network) });
  assert.equal(host.start(), false);
  assert.equal(host.failed, false, host.trapMessage ?? "");
  assert.deepEqual(errorLines(host), [`invalid plugin configuration: ${message}`]);
}

describe("passthrough_mtls: the local network from the node metadata", () => {
  it("one configuration, two proxies: each pins its own network's pod identity for the same IP", async () => {
    for (const [network, identity] of [["west", id("app-west")], ["east", id("app-east")]] as const) {
      const host = await startFilter("passthrough_mtls", MESH, onNetwork(network));
      const conn = host.connect({ destination: "10.0.0.1:8080" });
      assert.deepEqual(writes(conn).find(([key]) => key === SAN), [SAN, identity], network);
      assert.equal(host.metrics().get("passthrough_mtls.mtls"), 1);
      assert.equal(host.metrics().get("passthrough_mtls.local_network_wins"), 1);
      assert.ok(host.logLines("info").some((line) => line.includes(`local network "${network}" (from node metadata NETWORK)`)));
    }
  });

  it("a pinned localNetwork wins over the node metadata", async () => {
    const host = await startFilter("passthrough_mtls", { ...MESH, localNetwork: "east" }, onNetwork("west"));
    const conn = host.connect({ destination: "10.0.0.1:8080" });
    assert.deepEqual(writes(conn).find(([key]) => key === SAN), [SAN, id("app-east")]);
  });

  it("a NETWORK the snapshot does not know behaves like a pinned unknown network: warned, everything passes through", async () => {
    const host = await startFilter("passthrough_mtls", MESH, onNetwork("north"));
    assert.deepEqual(host.logLines("warn"), [`localNetwork "north" (from node metadata NETWORK) has no workloads: every connection will pass through`]);
    const conn = host.connect({ destination: "10.0.0.1:8080" });
    assert.deepEqual(writes(conn), []);
    assert.equal(host.metrics().get("passthrough_mtls.passthrough"), 1);
  });

  it("without node metadata the default network is local, as before", async () => {
    const host = await startFilter("passthrough_mtls", MESH);
    assert.equal(host.logLines("warn").length, 1); // no workload on ""
  });
});

describe("tunnel_port: the local network from the node metadata", () => {
  it("client: the same VIP tunnels to its own network's endpoint and target port", async () => {
    for (const [network, identity, authority] of [["west", id("app-west"), "10.0.0.1:8080"], ["east", id("app-east"), "10.0.0.1:9090"]] as const) {
      const host = await startFilter("tunnel_port", { role: "client", ...MESH }, onNetwork(network));
      const conn = host.connect({ source: "10.0.0.9:40000", destination: "10.96.0.1:80" });
      const got = Object.fromEntries(writes(conn));
      assert.equal(got[SAN], identity, network);
      // podIP:targetPort: the :authority, and the address the HBONE cluster dials on 15008.
      assert.equal(got[ORIGINAL_DST], authority, network);
      assert.equal(got["wasm.authority"], undefined);
      assert.equal(host.metrics().get("tunnel_port.client.tunneled"), 1);
    }
  });

  it("client: a NETWORK without the VIP passes the connection through as unknown", async () => {
    const host = await startFilter("tunnel_port", { role: "client", ...MESH }, onNetwork("north"));
    host.connect({ source: "10.0.0.9:40000", destination: "10.96.0.1:80" });
    assert.equal(host.metrics().get("tunnel_port.client.unknown_passthrough"), 1);
  });

  it("server: the same localWorkload IP is each network's own pod, serving its own target port", async () => {
    const server = { role: "server", localWorkload: "10.0.0.1", ...MESH };
    const arriving = (port: number) => ({
      source: "127.0.0.6:40000",
      destination: `10.0.0.1:${port}`,
      // The termination shares the CONNECT's :authority text too (the destination, canonical).
      filterState: { "io.tunnel_port.service_port": "80", "io.tunnel_port.authority": `10.0.0.1:${port}`, "io.tunnel_port.peer_principal": id("sleep-west") },
    });
    const west = await startFilter("tunnel_port", server, onNetwork("west"));
    assert.equal(west.connect(arriving(8080)).closed, false);
    assert.equal(west.connect(arriving(9090)).closed, true);
    const east = await startFilter("tunnel_port", server, onNetwork("east"));
    assert.equal(east.connect(arriving(9090)).closed, false);
    assert.equal(east.connect(arriving(8080)).closed, true);
    assert.equal(west.metrics().get("tunnel_port.server.accepted"), 1);
    assert.equal(east.metrics().get("tunnel_port.server.accepted"), 1);
    // Refused because the other network's target port is not served here, not for a missing value.
    assert.equal(west.metrics().get("tunnel_port.server.refused_unserved_port"), 1);
    assert.equal(east.metrics().get("tunnel_port.server.refused_unserved_port"), 1);
    assert.equal(west.metrics().get("tunnel_port.server.refused_missing_port") ?? 0, 0);
    assert.equal(east.metrics().get("tunnel_port.server.refused_missing_port") ?? 0, 0);
  });

  it("server: a NETWORK without the local workload is refused, as a pinned one would be", async () => {
    await assertRefusedOn(
      "tunnel_port",
      { role: "server", localWorkload: "10.0.0.1", ...MESH },
      "north",
      `localWorkload: no workload has address 10.0.0.1 on this network (network "north", from node metadata NETWORK)`,
    );
  });
});

describe("waypoint_route: the local network from the node metadata", () => {
  it("the same localWorkload IP is each network's own sidecar: the VIP goes to its own network's endpoint", async () => {
    for (const [network, authority] of [["west", "10.0.0.1:8080"], ["east", "10.0.0.1:9090"]] as const) {
      const host = await startFilter("waypoint_route", { localWorkload: "10.0.0.9", ...MESH }, onNetwork(network));
      const conn = host.connect({ source: "10.0.0.9:40000", destination: "10.96.0.1:80" });
      const got = Object.fromEntries(writes(conn));
      assert.equal(got[ORIGINAL_DST], "10.0.0.1:15008", network);
      assert.equal(got["wasm.authority"], authority, network);
      assert.equal(got[CLUSTER], "waypoint_route_hbone");
      assert.equal(host.metrics().get("waypoint_route.hbone_endpoint"), 1);
    }
  });

  it("a NETWORK without the local workload is refused", async () => {
    await assertRefusedOn(
      "waypoint_route",
      { localWorkload: "10.0.0.9", ...MESH },
      "north",
      `localWorkload: no workload has address 10.0.0.9 on network "north" (from node metadata NETWORK)`,
    );
  });
});

describe("every filter: a NETWORK that is no network name", () => {
  const configs: [string, Json][] = [
    ["passthrough_mtls", MESH],
    ["tunnel_port", { role: "client", ...MESH }],
    ["waypoint_route", { localWorkload: "10.0.0.9", ...MESH }],
  ];
  for (const [filter, config] of configs) {
    it(`${filter}: refuses a number or a null NETWORK unless localNetwork is pinned`, async () => {
      await assertRefusedOn(filter, config, 7, "localNetwork: not set, and the node metadata NETWORK is not a network name (byte 0 is 0x0): set localNetwork or fix the proxy's NETWORK");
      await assertRefusedOn(filter, config, null, "localNetwork: not set, and the node metadata NETWORK is not a string: set localNetwork or fix the proxy's NETWORK");
      await startFilter(filter, { ...config, localNetwork: "west" }, onNetwork(7));
    });

    // A double whose 8 little-endian bytes spell "network1": Envoy serves it exactly as it serves
    // the text "network1" (tests/mesh/node_network.test.ts measures both), so only the Node's
    // Value kind tells them apart.
    it(`${filter}: refuses a number whose 8 bytes are printable text, and takes the 8-character name`, async () => {
      const printable = Buffer.from("network1").readDoubleLE(0);
      await assertRefusedOn(filter, config, printable, "localNetwork: not set, and the node metadata NETWORK is a number, not a network name: set localNetwork or fix the proxy's NETWORK");
      const renamed = JSON.parse(JSON.stringify(config).replaceAll('"west"', '"network1"')) as Json;
      const host = await startFilter(filter, renamed, onNetwork("network1"));
      assert.deepEqual(errorLines(host), []);
    });
  }

  it("no xds.node value traps a filter (random bytes, random NETWORK bytes)", async () => {
    let seed = 12345;
    const next = () => (seed = (seed * 1103515245 + 12345) >>> 0);
    const randomBytes = (n: number) => Uint8Array.from({ length: n }, () => next() & 0xff);
    for (const [filter, config] of configs) {
      for (let i = 0; i < 60; i++) {
        // Half: random bytes as the whole Node; half: a Node whose NETWORK is random text.
        const node = i % 2 === 0
          ? randomBytes(next() % 64)
          : encodeNode({ metadata: { NETWORK: Buffer.from(randomBytes(next() % 300)).toString("latin1") } });
        const host = await ProxyWasmHost.fromFile(ensureBuilt(filter), { rootId: filter, pluginConfiguration: JSON.stringify(config), node });
        host.start();
        assert.equal(host.failed, false, `${filter} trapped on node ${Buffer.from(node).toString("hex")}: ${host.trapMessage}`);
      }
    }
  });
});

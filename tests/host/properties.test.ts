// Properties: NUL-separated paths, Envoy's encodings, connection defaults, what is missing during
// on_new_connection, set_property and filter_state reads.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { durationNs, uint64 } from "../../host/index.js";
import { hex, int64Hex, linesStarting, probe } from "./helpers.js";

/** Starts the probe reading `paths` (segments separated by '/') on each new connection. */
async function reading(paths: string[], options: Parameters<typeof probe>[0] = {}) {
  const host = await probe({ pluginConfiguration: paths.map((p) => `read=${p}`).join(";"), ...options });
  const read = (): Map<string, string> =>
    new Map(
      linesStarting(host, "prop ").map((line) => {
        const [, path, status, value] = /^prop (\S+) status=(\d+) hex=(\S+)$/.exec(line)!;
        return [path!, status === "0" ? value! : `status ${status}`];
      }),
    );
  return { host, read };
}

describe("properties", () => {
  it("serves destination/source as NUL-separated paths with strings raw and ports as int64", async () => {
    const { host, read } = await reading(["destination/address", "destination/port", "source/address", "source/port"]);
    host.connect({ source: "10.0.0.9:5555", destination: "10.0.0.1:80" });
    assert.deepEqual(
      read(),
      new Map([
        ["destination/address", hex("10.0.0.1:80")],
        ["destination/port", int64Hex(80)],
        ["source/address", hex("10.0.0.9:5555")],
        ["source/port", int64Hex(5555)],
      ]),
    );
  });

  it("answers NOT_FOUND for the dotted form and for unknown paths", async () => {
    const host = await probe();
    host.connect({ destination: "10.0.0.1:80" });
    const line = linesStarting(host, "new_connection")[0]!;
    assert.match(line, / dotted=1 /);
    assert.match(line, / missing=1 /);
  });

  it("serves IPv6 endpoints with their bracketed address and port", async () => {
    const { host, read } = await reading(["destination/address", "destination/port"]);
    host.connect({ destination: "[fd00::1]:8443" });
    assert.equal(read().get("destination/address"), hex("[fd00::1]:8443"));
    assert.equal(read().get("destination/port"), int64Hex(8443));
  });

  it("serves connection.id (uint64), connection.mtls (1 byte) and requested_server_name", async () => {
    const { host, read } = await reading(["connection/id", "connection_id", "connection/mtls", "connection/requested_server_name"]);
    host.connect({ destination: "10.0.0.1:80", mtls: true, connectionId: 42, requestedServerName: "svc.local" });
    assert.deepEqual(
      read(),
      new Map([
        ["connection/id", int64Hex(42)],
        ["connection_id", int64Hex(42)],
        ["connection/mtls", "01"],
        ["connection/requested_server_name", hex("svc.local")],
      ]),
    );
    assert.match(linesStarting(host, "new_connection")[0]!, / id=42 mtls=true /);
  });

  it("serves plugin_name, plugin_root_id, plugin_vm_id and xds.node (absent unless given)", async () => {
    const { host, read } = await reading(["plugin_name", "plugin_root_id", "plugin_vm_id", "xds/node"], {
      name: "my-plugin",
      vmId: "vm-1",
    });
    host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(
      read(),
      new Map([
        ["plugin_name", hex("my-plugin")],
        ["plugin_root_id", hex("probe")],
        ["plugin_vm_id", hex("vm-1")],
        ["xds/node", "status 1"],
      ]),
    );
    const withNode = await reading(["xds/node"], { node: Uint8Array.of(0x0a, 0x03, 0x61, 0x62, 0x63) });
    withNode.host.connect({ destination: "10.0.0.1:80" });
    assert.equal(withNode.read().get("xds/node"), "0a03616263");
  });

  it("encodes extra properties: bool 1 byte, integers int64, durations int64 ns, bytes raw; sub-trees are not serializable", async () => {
    const { host, read } = await reading([
      "metadata/flag",
      "metadata/count",
      "metadata/raw",
      "metadata/timeout",
      "metadata/big",
      "metadata",
    ]);
    host.connect({
      destination: "10.0.0.1:80",
      properties: {
        metadata: {
          flag: false,
          count: -2,
          raw: Uint8Array.of(1, 2, 3),
          timeout: durationNs(1_500_000_000n),
          big: uint64(2n ** 64n - 1n),
        },
      },
    });
    assert.deepEqual(
      read(),
      new Map([
        ["metadata/flag", "00"],
        ["metadata/count", int64Hex(-2)],
        ["metadata/raw", "010203"],
        ["metadata/timeout", int64Hex(1_500_000_000)],
        ["metadata/big", "ffffffffffffffff"],
        ["metadata", "status 3"],
      ]),
    );
  });

  it("has no upstream.* or xds.cluster_name during on_new_connection, and has them once tcp_proxy connected", async () => {
    const { host, read } = await reading(["upstream/address", "xds/cluster_name"]);
    const conn = host.connect({ destination: "10.0.0.1:80", upstream: { address: "10.1.1.1:8080", cluster: "outbound|80||svc" } });
    assert.deepEqual(read(), new Map([["upstream/address", "status 1"], ["xds/cluster_name", "status 1"]]));
    assert.match(linesStarting(host, "new_connection")[0]!, / upstream=1 cluster=1 /);
    conn.downstreamData("x");
    assert.deepEqual(linesStarting(host, "downstream_data"), ["downstream_data size=1 got=1 eos=0 upstream=10.1.1.1:8080"]);
  });

  it("set_property stores filter state wasm.<path>, readable back by the same path and under filter_state", async () => {
    const { host, read } = await reading(["filter_state/wasm.probe_seen", "probe_seen"]);
    const conn = host.connect({ destination: "10.0.0.1:80" });
    assert.match(linesStarting(host, "new_connection")[0]!, / set_property=0 seen=seen:10\.0\.0\.1:80 /);
    assert.equal(read().get("filter_state/wasm.probe_seen"), hex("seen:10.0.0.1:80"));
    assert.equal(read().get("probe_seen"), hex("seen:10.0.0.1:80"));
    assert.deepEqual([...conn.propertyWrites.keys()], ["probe_seen"]);
    assert.equal(conn.filterState.get("wasm.probe_seen"), "seen:10.0.0.1:80");
  });

  it("set_property with a multi-segment path keys the state by the raw path (NULs kept): not readable back by path, as in Envoy", async () => {
    const host = await probe({ pluginConfiguration: "setprop=one|1;setprop=a/b|2" });
    const conn = host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(linesStarting(host, "setprop"), ["setprop one set=0 get=0", "setprop a/b set=0 get=1"]);
    assert.equal(conn.filterState.get("wasm.one"), "1");
    assert.equal(conn.filterState.get("wasm.a\0b"), "2");
    assert.equal(conn.filterState.get("wasm.a.b"), undefined);
  });

  it("reads filter state written with set_envoy_filter_state under filter_state/<key>", async () => {
    const { host, read } = await reading(["filter_state/envoy.tcp_proxy.cluster", "filter_state/envoy.string"]);
    host.connect({ destination: "10.0.0.1:80" });
    // The reads run after the probe's own writes in on_new_connection.
    assert.deepEqual(
      read(),
      new Map([
        ["filter_state/envoy.tcp_proxy.cluster", hex("cluster_80")],
        ["filter_state/envoy.string", "status 1"],
      ]),
    );
  });

  it("host-level properties are visible to every connection and overridden per connection", async () => {
    const { host, read } = await reading(["xds/listener_metadata", "destination/address"], {
      properties: { xds: { listener_metadata: "lm" }, destination: { address: "ignored" } },
    });
    host.connect({ destination: "10.0.0.1:80" });
    assert.equal(read().get("xds/listener_metadata"), hex("lm"));
    assert.equal(read().get("destination/address"), hex("10.0.0.1:80"));
  });
});

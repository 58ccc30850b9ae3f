// proxy_call_foreign_function("set_envoy_filter_state"): only Envoy's registered keys, their value
// checks, malformed arguments, unknown functions, and the per-connection record of writes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { linesStarting, probe } from "./helpers.js";

async function writing(entries: Array<[key: string, value: string, span?: number]>) {
  const config = entries.map(([k, v, s]) => `fs=${k}|${v}|${s ?? 0}`).join(";");
  const host = await probe({ pluginConfiguration: config });
  const conn = host.connect({ destination: "10.0.0.1:80" });
  const statuses = linesStarting(host, "fs ").map((line) => Number(/status=(\d+)$/.exec(line)![1]));
  return { host, conn, statuses };
}

describe("set_envoy_filter_state", () => {
  it("accepts a registered key, refuses an unknown key (NOT_FOUND) and a bad value (BAD_ARGUMENT)", async () => {
    const host = await probe();
    const conn = host.connect({ destination: "10.0.0.1:80" });
    // The probe writes: tcp_proxy cluster, an unregistered key, a bad address, a good address.
    assert.match(linesStarting(host, "new_connection")[0]!, / fs=0,1,2,0$/);
    assert.deepEqual(
      conn.filterStateWrites.filter((w) => w.source === "set_envoy_filter_state").map((w) => [w.key, w.value, w.span]),
      [
        ["envoy.tcp_proxy.cluster", "cluster_80", "FilterChain"],
        ["envoy.network.transport_socket.original_dst_address", "10.0.0.1:80", "FilterChain"],
      ],
    );
    assert.equal(conn.filterState.get("envoy.tcp_proxy.cluster"), "cluster_80");
  });

  it("records every accepted write per connection, in order, with its span", async () => {
    const { conn } = await writing([
      ["envoy.string", "one", 0],
      ["envoy.upstream.dynamic_host", "example.com", 1],
      ["envoy.string", "two", 2],
    ]);
    const fs = conn.filterStateWrites.filter((w) => w.source === "set_envoy_filter_state" && w.key !== "envoy.tcp_proxy.cluster" && !w.key.includes("original_dst"));
    assert.deepEqual(
      fs.map((w) => [w.key, w.value, w.span]),
      [
        ["envoy.string", "one", "FilterChain"],
        ["envoy.upstream.dynamic_host", "example.com", "DownstreamRequest"],
        ["envoy.string", "two", "DownstreamConnection"],
      ],
    );
    assert.equal(conn.filterState.get("envoy.string"), "two");
  });

  const cases: Array<[key: string, good: string[], bad: string[]]> = [
    ["envoy.tcp_proxy.cluster", ["outbound|80||svc".replace(/\|/g, "_"), ""], []],
    ["envoy.network.transport_socket.original_dst_address", ["10.0.0.1:80", "[fd00::1]:443"], ["10.0.0.1", "host:80", "10.0.0.1:99999", "fd00::1:80"]],
    ["envoy.filters.listener.original_dst.local_ip", ["127.0.0.1:15001"], ["127.0.0.1"]],
    ["envoy.filters.listener.original_dst.remote_ip", ["[::1]:1"], ["::1"]],
    ["envoy.network.upstream_subject_alt_names", ["spiffe://td/ns/a/sa/b,spiffe://td/ns/c/sa/d"], []],
    ["envoy.network.upstream_server_name", ["svc.example.com"], []],
    ["envoy.network.application_protocols", ["h2,http/1.1"], []],
    ["envoy.upstream.dynamic_host", ["example.com"], []],
    ["envoy.upstream.dynamic_port", ["443", "4294967295"], ["4294967296", "-1", "x"]],
    ["envoy.tcp_proxy.disable_tunneling", ["true", "false"], ["yes", "1"]],
    ["envoy.string", ["anything"], []],
  ];
  for (const [key, good, bad] of cases) {
    it(`validates ${key} like Envoy's factory`, async () => {
      const { statuses } = await writing([...good.map((v): [string, string] => [key, v]), ...bad.map((v): [string, string] => [key, v])]);
      assert.deepEqual(statuses, [...good.map(() => 0), ...bad.map(() => 2)]);
    });
  }

  it("refuses keys without a registered factory, even envoy-looking ones", async () => {
    const { statuses, conn } = await writing([["envoy.lb", "x"], ["my.custom.key", "x"], ["wasm.thing", "x"]]);
    assert.deepEqual(statuses, [1, 1, 1]);
    assert.ok(!conn.filterStateWrites.some((w) => w.key === "envoy.lb"));
  });

  it("answers BAD_ARGUMENT for a malformed argument and for invalid UTF-8", async () => {
    const host = await probe({
      pluginConfiguration: [
        "foreign=set_envoy_filter_state|0a05ab", // field 1 claims 5 bytes, 1 present
        "foreign=set_envoy_filter_state|0a01ff", // path is not UTF-8
        "foreign=set_envoy_filter_state|0a0c656e766f792e737472696e671203616263", // envoy.string = abc
      ].join(";"),
    });
    const conn = host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(linesStarting(host, "foreign "), [
      "foreign set_envoy_filter_state status=2",
      "foreign set_envoy_filter_state status=2",
      "foreign set_envoy_filter_state status=0",
    ]);
    assert.equal(conn.filterState.get("envoy.string"), "abc");
  });

  it("answers NOT_FOUND for an unknown foreign function, OK for clear_route_cache", async () => {
    const host = await probe({ pluginConfiguration: "foreign=no_such_function|;foreign=clear_route_cache|" });
    host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual(linesStarting(host, "foreign "), [
      "foreign no_such_function status=1",
      "foreign clear_route_cache status=0",
    ]);
  });
});

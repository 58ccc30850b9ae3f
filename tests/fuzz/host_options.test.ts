// The two host additions the fuzzer relies on: deleteRefusedRoots (refused configurations do
// not pile up as roots in one VM) and clearLogs.
// Run: node --import tsx --test tests/fuzz/host_options.test.ts
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { ProxyWasmHost } from "../../host/index.js";

const wasm = new Uint8Array(readFileSync(new URL("../../build/probe.wasm", import.meta.url)));
const VALID = '{"routes":{"10.0.0.1":"a"}}';

function refuseMany(deleteRefusedRoots: boolean): ProxyWasmHost {
  const host = ProxyWasmHost.fromBytes(wasm, { rootId: "probe", pluginConfiguration: VALID, canary: false, deleteRefusedRoots, recordCalls: true });
  assert.ok(host.start(), host.startFailure ?? "");
  for (let i = 0; i < 50; i++) assert.equal(host.reconfigure('{"routes": 5}'), false);
  return host;
}

describe("host options for long runs", () => {
  it("deleteRefusedRoots: each refused root gets on_done and on_delete; the serving root stays", () => {
    const host = refuseMany(true);
    assert.equal(host.liveContexts, 1);
    assert.equal(host.calls.filter((c) => c.fn === "proxy_on_delete").length, 50);
    const conn = host.connect({ destination: "10.0.0.1:80" });
    assert.equal(conn.filterState.get("envoy.tcp_proxy.cluster"), "a", "the previous configuration still serves");
  });

  it("without it, refused roots stay in the VM (the default, unchanged)", () => {
    const host = refuseMany(false);
    assert.equal(host.liveContexts, 51);
    assert.equal(host.calls.filter((c) => c.fn === "proxy_on_delete").length, 0);
  });

  it("clearLogs forgets the captured lines", () => {
    const host = refuseMany(true);
    assert.equal(host.logLines("error").length, 50);
    host.clearLogs();
    assert.deepEqual(host.logs(), []);
    host.reconfigure("{");
    assert.equal(host.logLines("error").length, 1);
  });
});

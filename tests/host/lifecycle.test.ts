// Lifecycle: VM start, root and connection callbacks in Envoy's order, context ids, defaults for
// missing callbacks, configuration refusal and reconfiguration.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ProxyWasmHost, type GuestCall } from "../../host/index.js";
import { linesStarting, probe } from "./helpers.js";
import { minimalFilter, op, sleb } from "./wasm_builder.js";

const names = (calls: readonly GuestCall[], vm: "main" | "canary" = "main") =>
  calls.filter((c) => c.vm === vm).map((c) => `${c.fn}(${c.args.join(",")})`);

describe("plugin start", () => {
  it("runs the canary VM, then _initialize, context_create(root, 0), vm_start and configure", async () => {
    const host = await probe({ pluginConfiguration: "a=1", vmConfiguration: "vm-config", recordCalls: true });
    const start = ["_initialize()", "proxy_on_context_create(1,0)", "proxy_on_vm_start(1,9)", "proxy_on_configure(1,3)"];
    assert.deepEqual(names(host.calls, "canary"), start);
    assert.deepEqual(names(host.calls, "main"), start);
    assert.equal(host.rootContextId, 1);
  });

  it("serves the VM configuration as buffer 6 and the plugin configuration as buffer 7", async () => {
    const host = await probe({ pluginConfiguration: "name=x", vmConfiguration: "vm-config" });
    assert.deepEqual(linesStarting(host, "vm_start"), ["vm_start config=vm-config"]);
    assert.deepEqual(linesStarting(host, "configure"), ["configure config=name=x"]);
  });

  it("reports a plugin that refuses its configuration (on_configure returned 0)", async () => {
    const host = await ProxyWasmHost.fromFile((await import("./helpers.js")).ensureBuilt("host_probe"), {
      rootId: "probe",
      pluginConfiguration: "refuse",
      recordCalls: true,
    });
    assert.equal(host.start(), false);
    assert.match(host.startFailure ?? "", /canary: proxy_on_configure returned false/);
    // The canary caught it: the real VM was never created.
    assert.deepEqual(names(host.calls, "main"), []);
    assert.throws(() => host.connect(), /not started/);
  });

  it("without the canary, the real VM refuses the configuration", async () => {
    const { ensureBuilt } = await import("./helpers.js");
    const host = await ProxyWasmHost.fromFile(ensureBuilt("host_probe"), {
      rootId: "probe",
      pluginConfiguration: "refuse=1",
      canary: false,
      recordCalls: true,
    });
    assert.equal(host.start(), false);
    assert.match(host.startFailure ?? "", /^main: proxy_on_configure returned false/);
    assert.deepEqual(names(host.calls, "canary"), []);
  });

  it("skips missing callbacks with Envoy's defaults (Continue, true)", () => {
    const host = ProxyWasmHost.fromBytes(minimalFilter(), { recordCalls: true });
    assert.equal(host.start(), true);
    const conn = host.connect({ destination: "10.0.0.1:80" });
    assert.equal(conn.status, "Continue");
    const result = conn.downstreamData("ping");
    assert.equal(result.status, "Continue");
    assert.equal(new TextDecoder().decode(result.forwarded), "ping");
    conn.end();
    assert.equal(conn.closed, true);
    assert.deepEqual(host.calls, []);
  });

  it("calls only proxy-wasm hosts functions allowed during _initialize (others trap the start)", () => {
    const bytes = minimalFilter((b) => {
      const getProperty = b.importFunction("env", "proxy_get_property", ["i32", "i32", "i32", "i32"], ["i32"]);
      b.addFunction("_initialize", [], [], [
        ...[0, 0, 0, 0].flatMap((v) => [op.i32Const, ...sleb(v)]),
        op.call,
        getProperty,
        op.drop,
      ]);
    });
    const host = ProxyWasmHost.fromBytes(bytes);
    assert.equal(host.start(), false);
    assert.match(host.startFailure ?? "", /restricted_callback: env\.proxy_get_property called during VM start/);
  });
});

describe("VM start environment", () => {
  it("lets _initialize write to stdout through WASI fd_write (a log line at info, context 0)", () => {
    const iov = [...new Uint8Array(new Uint32Array([64, 5]).buffer)];
    const bytes = minimalFilter((b) => {
      const fdWrite = b.importFunction("wasi_snapshot_preview1", "fd_write", ["i32", "i32", "i32", "i32"], ["i32"]);
      b.addFunction("_initialize", [], [], [
        ...[1, 16, 1, 32].flatMap((v) => [op.i32Const, ...sleb(v)]),
        op.call,
        fdWrite,
        op.drop,
      ]);
      b.addData(16, iov).addData(64, new TextEncoder().encode("hello"));
    });
    const host = ProxyWasmHost.fromBytes(bytes, { canary: false });
    assert.equal(host.start(), true);
    assert.deepEqual(
      host.logs().map((e) => [e.level, e.message, e.source, e.contextId]),
      [["info", "hello", "stdout", 0]],
    );
  });

  it("records the tick period the root asks for and runs proxy_on_tick on tick()", async () => {
    const host = await probe({ pluginConfiguration: "tick=250" });
    assert.equal(host.tickPeriodMs, 250);
    host.tick();
    assert.deepEqual(linesStarting(host, "tick"), ["tick"]);
  });
});

describe("connection lifecycle", () => {
  it("runs context_create, new_connection, data, close callbacks, done, log, delete in Envoy's order", async () => {
    const host = await probe({ recordCalls: true });
    const conn = host.connect({ source: "10.0.0.9:5555", destination: "10.0.0.1:80" });
    conn.downstreamData("hello");
    conn.upstreamData("world");
    conn.close("downstream");
    const c = conn.id;
    assert.deepEqual(names(host.calls).slice(4), [
      `proxy_on_context_create(${c},1)`,
      `proxy_on_new_connection(${c})`,
      `proxy_on_downstream_data(${c},5,0)`,
      `proxy_on_upstream_data(${c},5,0)`,
      `proxy_on_downstream_connection_close(${c},2)`,
      `proxy_on_done(${c})`,
      `proxy_on_log(${c})`,
      `proxy_on_delete(${c})`,
    ]);
  });

  it("synthesizes on_upstream_connection_close(c, 0) after upstream end-of-stream", async () => {
    const host = await probe({ recordCalls: true });
    const conn = host.connect({ destination: "10.0.0.1:80" });
    conn.upstreamData("bye", true);
    const c = conn.id;
    assert.deepEqual(names(host.calls).slice(-2), [
      `proxy_on_upstream_data(${c},3,1)`,
      `proxy_on_upstream_connection_close(${c},0)`,
    ]);
    assert.equal(conn.closed, false);
  });

  it("end() closes both sides in order: client eos, upstream eos + upstream close, downstream close, done, log, delete", async () => {
    const host = await probe({ recordCalls: true });
    const conn = host.connect({ destination: "10.0.0.1:80" });
    const c = conn.id;
    const before = host.calls.length;
    conn.end();
    assert.deepEqual(names(host.calls.slice(before)), [
      `proxy_on_downstream_data(${c},0,1)`,
      `proxy_on_upstream_data(${c},0,1)`,
      `proxy_on_upstream_connection_close(${c},0)`,
      `proxy_on_downstream_connection_close(${c},1)`,
      `proxy_on_done(${c})`,
      `proxy_on_log(${c})`,
      `proxy_on_delete(${c})`,
    ]);
    assert.equal(conn.closeReason, "end");
  });

  it("an upstream reset closes the client: on_downstream_connection_close(c, Local) and no upstream close", async () => {
    const host = await probe({ recordCalls: true });
    const conn = host.connect({ destination: "10.0.0.1:80" });
    conn.close("upstream");
    assert.ok(host.logLines().includes("downstream_close peer=1"));
    assert.ok(!host.logLines().some((l) => l.startsWith("upstream_close")));
    assert.equal(conn.closeReason, "upstream");
  });

  it("gives increasing context ids and never reuses one", async () => {
    const host = await probe();
    const a = host.connect({ destination: "10.0.0.1:80" });
    a.end();
    const b = host.connect({ destination: "10.0.0.1:80" });
    const c = host.connect({ destination: "10.0.0.1:80" });
    assert.deepEqual([a.id, b.id, c.id], [2, 3, 4]);
  });

  it("delivers nothing after the connection closed", async () => {
    const host = await probe({ recordCalls: true });
    const conn = host.connect({ destination: "10.0.0.1:80" });
    conn.close();
    const before = host.calls.length;
    assert.equal(conn.downstreamData("late").status, "Closed");
    assert.equal(conn.upstreamData("late").status, "Closed");
    assert.equal(host.calls.length, before);
  });
});

describe("reconfiguration", () => {
  it("creates a new root context (context_create, vm_start, configure) and retires the old one after its last connection", async () => {
    const host = await probe({ pluginConfiguration: "v=1", recordCalls: true, canary: false });
    const old = host.connect({ destination: "10.0.0.1:80" });
    assert.equal(host.reconfigure("v=2"), true);
    const root = host.rootContextId!;
    assert.equal(root, 3);
    const fresh = host.connect({ destination: "10.0.0.1:80" });
    const calls = names(host.calls);
    const afterReconfigure = calls.slice(calls.indexOf(`proxy_on_context_create(${root},0)`));
    assert.deepEqual(afterReconfigure.slice(0, 4), [
      `proxy_on_context_create(${root},0)`,
      `proxy_on_vm_start(${root},0)`,
      `proxy_on_configure(${root},3)`,
      `proxy_on_context_create(${fresh.id},${root})`,
    ]);
    assert.deepEqual(linesStarting(host, "configure"), ["configure config=v=1", "configure config=v=2"]);
    // The old root is shut down once its last connection has ended.
    assert.ok(!calls.includes("proxy_on_done(1)"));
    old.end();
    assert.deepEqual(names(host.calls).slice(-2), ["proxy_on_done(1)", "proxy_on_delete(1)"]);
  });

  it("keeps the old configuration when the new one is refused", async () => {
    const host = await probe({ pluginConfiguration: "v=1" });
    assert.equal(host.reconfigure("refuse"), false);
    assert.match(host.startFailure ?? "", /proxy_on_configure returned false/);
    assert.equal(host.rootContextId, 1);
    assert.equal(host.connect({ destination: "10.0.0.1:80" }).status, "Continue");
  });
});

describe("guest memory", () => {
  it("allocates each returned value once through malloc with exactly its size; empty values allocate nothing", async () => {
    const host = await probe();
    const conn = host.connect({ destination: "10.0.0.1:80", upstream: { address: "10.1.1.1:8080" } });
    let before = host.guestAllocations;
    conn.downstreamData("hello");
    // The probe reads the 5 data bytes and upstream.address ("10.1.1.1:8080", 13 bytes).
    assert.deepEqual(host.guestAllocations, { count: before.count + 2, bytes: before.bytes + 5 + 13 });
    before = host.guestAllocations;
    conn.downstreamData("");
    assert.deepEqual(host.guestAllocations, { count: before.count + 1, bytes: before.bytes + 13 });
  });
});

// The fuzz oracles can fail: each is shown a contract breach and must report it. The filter
// stand-in that breaks the contract is the host test fixture (build/fixtures/host_probe.wasm,
// root_id "probe"): it counts no outcome of probe's (counters of its own instead), logs free text, refuses without the required line and
// traps on demand.
// Run: node --import tsx --test tests/fuzz/oracles.test.ts
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { checkAccepted, checkConnection, checkRefusal, parsePath } from "./oracles.js";
import { loadRegressions, replay, runCases } from "./run.js";
import { FuzzSession } from "./session.js";
import { targetByName } from "./targets.js";

const utf8 = (s: string) => new TextEncoder().encode(s);
const DOC = utf8(JSON.stringify({ workloads: [{ uid: "a", addresses: ["10.0.0.300"] }], routes: { "10.0.0.1": 5 } }));
const refusal = (what: string) => [`invalid plugin configuration: ${what}`];

describe("fuzz oracles", () => {
  it("reads ConfigReader paths", () => {
    assert.deepEqual(parsePath("workloads[3].addresses[0]: not an IP address")?.steps, [{ key: "workloads" }, { index: 3 }, { key: "addresses" }, { index: 0 }]);
    assert.deepEqual(parsePath('routes["10.0.0.1"]: expected a string')?.steps, [{ key: "routes" }, { key: "10.0.0.1", prefix: false }]);
    assert.deepEqual(parsePath("(root): expected an object")?.steps, []);
    assert.equal(parsePath("no path here"), undefined);
  });

  it("accepts a refusal that names a field of the document or a byte in it", () => {
    assert.equal(checkRefusal(refusal('workloads[0].addresses[0]: not an IP address: "10.0.0.300"'), DOC), undefined);
    assert.equal(checkRefusal(refusal("workloads[0].identity: required when tlsMode is \"istio\""), DOC), undefined);
    assert.equal(checkRefusal(refusal('routes["10.0.0.1"]: expected a string'), DOC), undefined);
    assert.equal(checkRefusal(refusal("byte 3: unexpected character"), DOC), undefined);
  });

  it("reports a refusal that breaks the contract", () => {
    assert.match(checkRefusal([], DOC)!, /0 lines/);
    assert.match(checkRefusal([...refusal("byte 1: x"), "again"], DOC)!, /2 lines/);
    assert.match(checkRefusal(["configuration refused"], DOC)!, /does not start/);
    assert.match(checkRefusal(refusal("something went wrong"), DOC)!, /names no field/);
    assert.match(checkRefusal(refusal("services[0].hostname: required"), DOC)!, /not in the document/);
    assert.match(checkRefusal(refusal("workloads[1].uid: required"), DOC)!, /not in the document/);
    assert.match(checkRefusal(refusal(`byte ${DOC.length + 1}: unexpected end`), DOC)!, /byte/);
    assert.match(checkRefusal(refusal("workloads: expected an array"), utf8("{\"workloads\": [}"))!, /not valid JSON/);
  });

  it("reports an accepted document that is not strict JSON", () => {
    assert.equal(checkAccepted(utf8("{}")), undefined);
    assert.match(checkAccepted(Uint8Array.of(0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d))!, /not valid UTF-8 JSON/);
    assert.match(checkAccepted(utf8("{\"a\":1")) ?? "", /not valid/);
    assert.match(checkAccepted(utf8("[]"))!, /root is not an object/);
  });

  it("reports a connection with no, or two, outcomes, the wrong fate or stray log lines", () => {
    const target = targetByName("waypoint_route");
    const seen = (deltas: [string, number][], closed: boolean, lines: string[] = []) => ({
      deltas: new Map(deltas),
      status: closed ? "StopIteration" : "Continue",
      closed,
      closeReason: closed ? "filter" : undefined,
      lines,
      debug: false,
    });
    assert.deepEqual(checkConnection(target, seen([["hbone_pod", 1]], false)), [undefined, "hbone_pod"]);
    assert.deepEqual(checkConnection(target, seen([["error_no_endpoint", 1]], true, ["closing"])), [undefined, "error_no_endpoint"]);
    assert.match(checkConnection(target, seen([], false))[0]!, /0 outcome counters/);
    assert.match(checkConnection(target, seen([["hbone_pod", 1], ["unknown", 1]], false))[0]!, /2 outcome counters/);
    assert.match(checkConnection(target, seen([["hbone_pod", 2]], false))[0]!, /unexpected counter/);
    assert.match(checkConnection(target, seen([["hbone_pod", 1], ["made_up", 1]], false))[0]!, /unexpected counter/);
    assert.match(checkConnection(target, seen([["error_no_endpoint", 1]], false))[0]!, /must close/);
    assert.match(checkConnection(target, seen([["hbone_pod", 1]], true, ["x"]))[0]!, /must continue/);
    assert.match(checkConnection(target, seen([["hbone_pod", 1]], false, ["chatty"]))[0]!, /logged at info level/);
    assert.match(checkConnection(target, seen([["error_no_endpoint", 1]], true, []))[0]!, /logged 0 lines/);
  });
});

describe("fuzz session against a filter that breaks the contract", () => {
  const fixture = new URL("../../build/fixtures/host_probe.wasm", import.meta.url);
  const target = targetByName("probe");
  const load = () => {
    assert.ok(existsSync(fixture), "build/fixtures/host_probe.wasm is missing: run npm run build");
    return new Uint8Array(readFileSync(fixture));
  };

  it("reports a trap in configure, then carries on in a fresh VM", () => {
    const session = new FuzzSession(target, load());
    const trapped = session.run({ kind: "config", config: utf8("trap=configure"), note: "", connections: [] });
    assert.equal(trapped.trapped, true);
    assert.match(trapped.problem!, /configure trapped: Function: proxy_on_configure failed: RuntimeError: unreachable/);
    assert.equal(session.traps, 1);
    const refused = session.run({ kind: "config", config: utf8("refuse"), note: "", connections: [] });
    assert.equal(refused.trapped, undefined);
    assert.match(refused.problem!, /refused configuration logged/);
  });

  it("saves failing cases, and a saved case replays the same problem", () => {
    const dir = mkdtempSync(join(tmpdir(), "fuzz-regressions-"));
    try {
      const report = runCases({ target, wasm: load(), seed: 1, start: 0, count: 40, warmup: 0, regressionsDir: dir });
      assert.ok(report.failures.length > 0, "the fixture counts no outcome: connection cases must fail");
      // it bumps counters of its own (probe.connections, probe.active) and none of probe's outcomes
      assert.match(report.failures[0]!.problem, /unexpected counter changes \[\["connections",1\],\["active",1\]\]/);
      const saved = loadRegressions(dir);
      assert.ok(saved.length > 0 && saved.length <= report.failures.length);
      const connection = saved.find((s) => s.regression.case.kind === "connection")!;
      assert.equal(connection.regression.target, "probe");
      assert.match(replay(connection.regression, load())!, /unexpected counter changes/);
      // the real probe filter passes the same saved case
      assert.equal(replay(connection.regression, new Uint8Array(readFileSync(new URL("../../build/probe.wasm", import.meta.url)))), undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// The snapshot path's filter check in a worker thread (feed/src/check_worker.ts): the same
// verdicts as the compiled filter configured on the event loop, the event loop free while a
// large configuration is checked, a dead worker's checks refused (nothing published from them)
// and the next check served by a new worker, and no worker left after the idle time.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { WorkerValidator } from "../../feed/src/check_worker.js";
import { FilterValidator } from "../../feed/src/validate.js";
import { REPO_ROOT } from "../support/paths.js";

const wasmFor = (filter: string) => join(REPO_ROOT, "build", `${filter}.wasm`);

/** `n` workloads with one address each, the shape the feed renders. */
function meshOf(n: number): string {
  const workloads = Array.from({ length: n }, (_, i) => ({
    uid: `Kubernetes//Pod/ns${i % 50}/pod-${i}`,
    addresses: [`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`],
    identity: `spiffe://cluster.local/ns/ns${i % 50}/sa/sa${i % 7}`,
    tlsMode: "istio",
  }));
  return JSON.stringify({ workloads, services: [] });
}

describe("the filter check worker", () => {
  it("gives the verdicts the filter gives on the event loop, refusals with the filter's own line", async () => {
    readFileSync(wasmFor("passthrough_mtls"));
    const here = new FilterValidator(wasmFor);
    const there = new WorkerValidator(wasmFor);
    try {
      const cases = [meshOf(3), '{"workloads":[{"ip":"10.0.0.1"}],"services":[]}', '{"workloads":[],"services":[],"bogusField":1}'];
      for (const text of cases) {
        const a = here.check("passthrough_mtls", text);
        const b = await there.check("passthrough_mtls", text);
        assert.equal(b.ok, a.ok, text);
        assert.equal(b.error, a.error, text);
      }
      assert.equal((await there.check("passthrough_mtls", cases[0])).ok, true);
      assert.match((await there.check("passthrough_mtls", cases[2])).error ?? "", /bogusField: unknown field/);
    } finally {
      await there.stop();
    }
  });

  it("leaves the event loop turning while a large configuration is checked (on the loop it does not)", async () => {
    const text = meshOf(60_000);
    const here = new FilterValidator(wasmFor);
    const there = new WorkerValidator(wasmFor);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    try {
      await there.check("passthrough_mtls", meshOf(1)); // the worker started and its module compiled
      ticks = 0;
      assert.equal(here.check("passthrough_mtls", text).ok, true);
      assert.equal(ticks, 0, "a check on the event loop holds every timer");
      const verdict = await there.check("passthrough_mtls", text);
      assert.equal(verdict.ok, true, verdict.error);
      assert.ok(ticks > 0, `timers ran during the worker's check of ${text.length} bytes (${verdict.ms.toFixed(0)} ms)`);
    } finally {
      clearInterval(timer);
      await there.stop();
    }
  });

  it("refuses the checks a dead worker held and starts a new one for the next", async () => {
    const there = new WorkerValidator(wasmFor);
    try {
      assert.equal((await there.check("passthrough_mtls", meshOf(1))).ok, true);
      const held = there.check("passthrough_mtls", meshOf(30_000));
      await there.stop();
      const verdict = await held;
      assert.equal(verdict.ok, false);
      assert.match(verdict.error ?? "", /stopping|exited/);
      assert.equal(there.running, false);
      assert.equal((await there.check("passthrough_mtls", meshOf(2))).ok, true, "a new worker answers");
      assert.equal(there.running, true);
    } finally {
      await there.stop();
    }
  });

  it("ends its worker after the idle time", async () => {
    const there = new WorkerValidator(wasmFor, 50);
    try {
      assert.equal((await there.check("passthrough_mtls", meshOf(1))).ok, true);
      assert.equal(there.running, true);
      const deadline = Date.now() + 10_000;
      while (there.running && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.equal(there.running, false, "no worker thread after 50 ms without a check");
    } finally {
      await there.stop();
    }
  });
});

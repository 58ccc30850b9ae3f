// The scale benchmark's inputs are what it claims: a generated snapshot has exactly `pods`
// workload entries and the services it describes, every filter accepts it, and each route's
// connections really take that route in the compiled filter (its counter moves once per
// connection). A wrong snapshot would otherwise time a different decision than the one named.
// Run: node --import tsx --test bench/scale/subjects.test.ts   (after npm run build)
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { buildSnapshot, ROUTES } from "../lib/mesh_snapshot.js";
import { PASSTHROUGH_MTLS, SUBJECTS, drawConnections } from "./subjects.js";
import { checkRoutes, configureVm } from "./vm.js";

describe("mesh snapshot", () => {
  it("has exactly `pods` workload entries, its own fields first, and the services it counts", () => {
    const snapshot = buildSnapshot(5_000, { role: "client", tunnelCluster: "tunnel_port_hbone" });
    const config = JSON.parse(Buffer.from(snapshot.config).toString("utf8"));
    assert.deepEqual(Object.keys(config), ["role", "tunnelCluster", "workloads", "services"]);
    assert.equal(config.workloads.length, 5_000);
    assert.equal(config.services.length, snapshot.services + snapshot.waypoints + snapshot.headlessServices);
    const headless = config.services.filter((s: { headless?: boolean }) => s.headless === true);
    const members = headless.reduce((n: number, s: { endpoints: unknown[] }) => n + s.endpoints.length, 0);
    assert.equal(members, snapshot.headlessMembers.length);
    assert.ok(members > 0);
  });

  it("is the same bytes for the same size (runs can be compared)", () => {
    assert.deepEqual(buildSnapshot(2_000).config, buildSnapshot(2_000).config);
  });
});

describe("scale subjects", () => {
  for (const subject of SUBJECTS) {
    it(`${subject.name}: the filter accepts the snapshot and every route is taken`, () => {
      const snapshot = buildSnapshot(1_000, subject.own);
      const { vm, error } = configureVm(new Uint8Array(readFileSync(subject.wasm)), subject, snapshot);
      assert.ok(vm, `configure failed: ${error}`);
      assert.equal(checkRoutes(vm, snapshot, 100), undefined);
      assert.equal(vm.host.failed, false);
    });
  }

  it("snapshot.destinations (dialled by the real-Envoy bench) take their passthrough_mtls routes", () => {
    const snapshot = buildSnapshot(1_000, PASSTHROUGH_MTLS.own);
    const { vm } = configureVm(new Uint8Array(readFileSync(PASSTHROUGH_MTLS.wasm)), PASSTHROUGH_MTLS, snapshot);
    assert.ok(vm);
    const host = vm.host;
    const counter = { mtls: "mtls", headless: "headless", plaintext_pod: "plaintext_pod", not_a_pod: "passthrough" } as const;
    for (const route of ROUTES) {
      const name = `passthrough_mtls.${counter[route]}`;
      const before: number = host.metrics().get(name) ?? 0;
      for (const destination of snapshot.destinations[route].slice(0, 100)) host.connect({ destination }).end();
      assert.equal((host.metrics().get(name) ?? 0) - before, 100, route);
    }
  });

  it("draws the mixed stream in the routes' proportions", () => {
    const subject = SUBJECTS[0]!;
    const snapshot = buildSnapshot(1_000, subject.own);
    const mixed = drawConnections(subject, snapshot, 10_000);
    const outside = mixed.filter((c) => c.destination?.startsWith("192.168.")).length;
    // not_a_pod is 15% of the stream and half of it is outside the mesh: ~7.5%.
    assert.ok(outside > 500 && outside < 1_000, `${outside} of 10000 outside the mesh`);
  });
});

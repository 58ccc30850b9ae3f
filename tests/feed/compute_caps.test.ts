// The caps in the compute (feed/src/compute_caps.ts): an object over a cap is left out of the
// model and listed in `capped`, on the incremental path exactly as from scratch, and it comes
// back once under the cap; the rest of the mesh is untouched.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { MeshComputer, type MeshOptions } from "../../feed/src/compute.js";
import { DEFAULT_CAPS, type FeedCaps } from "../../feed/src/compute_caps.js";
import type { ComputedMesh } from "../../feed/src/mesh_model.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { viewFor } from "../../feed/src/view.js";
import { namespace, pod, service, slice } from "./fixtures.js";

function options(caps: Partial<FeedCaps> = {}): MeshOptions {
  return { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver(), caps: { ...DEFAULT_CAPS, ...caps } };
}

/** What a view publishes plus what was left out: the incremental and the from-scratch must agree on both. */
function summary(mesh: ComputedMesh): string {
  const { snapshot } = viewFor(mesh, "");
  return JSON.stringify({ snapshot, capped: [...mesh.capped].sort(([a], [b]) => a.localeCompare(b)) });
}

describe("feed: caps in the compute", () => {
  it("memberships: a pod over the cap is held out, comes back under it; update() agrees with compute() at each step", () => {
    const caps = { maxMembershipsPerWorkload: 2 };
    const c = new ClusterObjects("c1");
    c.upsert("pods", pod("ns", "p", { ip: "10.0.0.1" }));
    c.upsert("pods", pod("ns", "q", { ip: "10.0.0.2" }));
    const incremental = new MeshComputer(options(caps));
    const step = (what: string) => {
      const { mesh } = incremental.update([c]);
      assert.equal(summary(mesh), summary(new MeshComputer(options(caps)).compute([c])), what);
      return mesh;
    };
    step("start");
    for (let i = 0; i < 3; i++) {
      c.upsert("services", service("ns", `s${i}`, [{ name: "http", port: 80 }], { clusterIP: `10.96.0.${i + 1}` }));
      c.upsert("endpointSlices", slice("ns", `s${i}`, `s${i}-1`, [{ name: "http", port: 80 }], [{ ip: "10.0.0.1", pod: "p" }, ...(i === 0 ? [{ ip: "10.0.0.2", pod: "q" }] : [])]));
      step(`service s${i}`);
    }
    let mesh = step("three services");
    assert.equal(mesh.workloads.has("c1//Pod/ns/p"), false, "p is in 3 services, over the cap of 2");
    assert.deepEqual(mesh.capped.get("c1//Pod/ns/p"), { kind: "workload", reason: "memberships", detail: "endpoint of 3 services (cap 2)" });
    assert.equal(mesh.workloads.has("c1//Pod/ns/q"), true, "q is untouched");
    // A change to the held pod itself (its readiness) keeps it held.
    c.upsert("pods", pod("ns", "p", { ip: "10.0.0.1", ready: false }));
    mesh = step("the held pod changed");
    assert.equal(mesh.workloads.has("c1//Pod/ns/p"), false);
    // One membership fewer: back, with its two memberships.
    c.remove("endpointSlices", slice("ns", "s2", "s2-1", [], []));
    mesh = step("one slice removed");
    assert.equal(mesh.workloads.get("c1//Pod/ns/p")?.workload.healthy, false);
    assert.equal(mesh.memberships.count("c1//Pod/ns/p"), 2);
    assert.equal(mesh.capped.size, 0);
    // Deleted while held: nothing left behind.
    c.upsert("endpointSlices", slice("ns", "s2", "s2-1", [{ name: "http", port: 80 }], [{ ip: "10.0.0.1", pod: "p" }]));
    step("held again");
    c.remove("pods", pod("ns", "p"));
    mesh = step("the held pod deleted");
    assert.equal(mesh.capped.size, 0);
  });

  it("ports and texts: the service or pod is left out alone, and back when it fits", () => {
    const c = new ClusterObjects("c1");
    c.upsert("namespaces", namespace("ns"));
    c.upsert("pods", pod("ns", "p", { ip: "10.0.0.1" }));
    c.upsert("pods", pod("ns", "long", { ip: "10.0.0.2", sa: "x".repeat(300) }));
    c.upsert("services", service("ns", "wide", Array.from({ length: 5 }, (_, i) => ({ name: `p${i}`, port: 1000 + i })), { clusterIP: "10.96.0.1" }));
    c.upsert("endpointSlices", slice("ns", "wide", "wide-1", [{ name: "p0", port: 1000 }], [{ ip: "10.0.0.1", pod: "p" }]));
    c.upsert("services", service("ns", "ok", [{ name: "http", port: 80 }], { clusterIP: "10.96.0.2" }));
    const caps = { maxPortsPerService: 4, maxTextBytes: 256 };
    const incremental = new MeshComputer(options(caps));
    let { mesh } = incremental.update([c]);
    assert.equal(summary(mesh), summary(new MeshComputer(options(caps)).compute([c])));
    assert.equal(mesh.services.has("wide.ns.svc.cluster.local"), false);
    assert.deepEqual(mesh.capped.get("wide.ns.svc.cluster.local"), { kind: "service", reason: "ports", detail: "5 TCP ports (cap 4)" });
    assert.equal(mesh.memberships.count("c1//Pod/ns/p"), 0, "no membership in a service left out");
    assert.equal(mesh.capped.get("c1//Pod/ns/long")?.reason, "text");
    assert.match(mesh.capped.get("c1//Pod/ns/long")?.detail ?? "", new RegExp(`^identity is ${"spiffe://cluster.local/ns/ns/sa/".length + 300} bytes \\(cap 256\\)$`));
    assert.ok(mesh.services.has("ok.ns.svc.cluster.local") && mesh.workloads.has("c1//Pod/ns/p"));
    c.upsert("services", service("ns", "wide", Array.from({ length: 4 }, (_, i) => ({ name: `p${i}`, port: 1000 + i })), { clusterIP: "10.96.0.1" }));
    c.upsert("pods", pod("ns", "long", { ip: "10.0.0.2", sa: "short" }));
    ({ mesh } = incremental.update([c]));
    assert.equal(summary(mesh), summary(new MeshComputer(options(caps)).compute([c])));
    assert.equal(mesh.capped.size, 0);
    assert.equal(mesh.memberships.has("c1//Pod/ns/p", "wide.ns.svc.cluster.local"), true);
    assert.equal(mesh.workloads.get("c1//Pod/ns/long")?.workload.identity, "spiffe://cluster.local/ns/ns/sa/short");
  });

  it("a hostname past 253 bytes is left out whatever the text cap (the filters refuse such a hostname)", () => {
    const c = new ClusterObjects("c1");
    c.upsert("services", service("n".repeat(200), "s".repeat(60), [{ name: "http", port: 80 }]));
    const mesh = new MeshComputer(options()).compute([c]);
    assert.equal(mesh.services.size, 0);
    assert.match(mesh.capped.values().next().value?.detail ?? "", new RegExp(`^hostname is ${60 + 1 + 200 + ".svc.cluster.local".length} bytes \\(cap 253\\)$`));
  });
});

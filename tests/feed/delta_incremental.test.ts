// The delta path computes the mesh incrementally (compute.ts `update`, delta/network_view.ts)
// and publishes only what changed (delta/channel.ts). Under random churn of pods (IPs reused,
// readiness, service accounts, nodes), services, EndpointSlices, node labels, a namespace label
// and a gateway, after every step:
//   - a client applying every published delta holds exactly what a from-scratch compute and
//     view (compute.ts `compute`, view.ts viewFor: the JSON snapshot's path) give;
//   - the full message decodes to the same state;
// and a coalesced delta from any earlier version brings a client to the current state. Every
// version is first taken by the compiled passthrough_mtls in the feed's shadow VM, as the feed
// publishes them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { MeshComputer, type MeshOptions } from "../../feed/src/compute.js";
import { DEFAULT_DELTA } from "../../feed/src/config.js";
import { DeltaChannel } from "../../feed/src/delta/channel.js";
import { FilterShadow } from "../../feed/src/delta/filter_shadow.js";
import { NetworkView } from "../../feed/src/delta/network_view.js";
import { membershipOf, wireService, wireWorkload } from "../../feed/src/delta/records.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { viewFor } from "../../feed/src/view.js";
import { DecodedModel, decodeMessage } from "./delta_wire_decode.js";
import { eastWestGateway, namespace, node, pod, service, slice } from "./fixtures.js";
import { readFileSync } from "node:fs";
import { ensureBuilt } from "../host/helpers.js";
import { seededRandom } from "../support/checksum_load.js";

const OPTIONS: MeshOptions = { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() };


/** The expected client state from a from-scratch compute: records as JSON, memberships by hostname. */
function expected(c: ClusterObjects[], network: string): { workloads: string[]; services: string[] } {
  const mesh = new MeshComputer(OPTIONS).compute(c);
  const { snapshot } = viewFor(mesh, network);
  const members = new Map<string, Array<{ service: string; overrides: Array<[number, number]> }>>();
  for (const s of snapshot.services) {
    for (const e of s.endpoints ?? []) {
      const m = members.get(e.workload) ?? [];
      m.push({ service: s.hostname, overrides: membershipOf(0, e).overrides });
      members.set(e.workload, m);
    }
  }
  const workloads = snapshot.workloads.map((w) => {
    const { id: _id, memberships: _m, ...rest } = wireWorkload(0, w, []);
    return JSON.stringify({ type: "workload", ...rest, memberships: (members.get(w.uid) ?? []).sort((a, b) => a.service.localeCompare(b.service)) });
  });
  const services = snapshot.services.map((s) => {
    const { id: _id, ...rest } = wireService(0, s);
    return JSON.stringify({ type: "service", ...rest });
  });
  return { workloads: workloads.sort(), services: services.sort() };
}

const wasm = new Uint8Array(readFileSync(ensureBuilt("passthrough_mtls")));
/** The compiled filter a target on `network` runs, held by the channel at its current version. */
const compiled = (network: string) => [new FilterShadow({ name: `mesh-${network}`, filter: "passthrough_mtls", network, config: {} }, () => wasm)];

function actual(model: DecodedModel): { workloads: string[]; services: string[] } {
  return model.contents();
}

describe("feed delta: incremental compute and publish equal a from-scratch render", () => {
  for (const seed of [1, 2, 3]) {
    it(`random churn, seed ${seed}`, () => {
      const rnd = seededRandom(seed);
      const pick = <T>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)];
      const c1 = new ClusterObjects("c1");
      c1.upsert("namespaces", namespace("istio-system", { "topology.istio.io/network": "net1" }));
      c1.upsert("namespaces", namespace("default"));
      for (const n of ["n1", "n2"]) c1.upsert("nodes", node(n, "r1", n === "n1" ? "z1" : "z2"));
      const services = ["a", "b", "c", "d"];
      for (const [i, s] of services.entries()) c1.upsert("services", service("default", s, [{ name: "http", port: 80, targetPort: i % 2 ? "web" : 8080 }], { clusterIP: `10.96.0.${i + 1}` }));
      // A second cluster on net2 with the same Service "a" (merged by hostname) and pods of its own.
      const c2 = new ClusterObjects("c2");
      c2.upsert("namespaces", namespace("istio-system", { "topology.istio.io/network": "net2" }));
      c2.upsert("services", service("default", "a", [{ name: "http", port: 80, targetPort: 8080 }], { clusterIP: "10.97.0.1" }));
      const clusters = [c1, c2];
      const computer = new MeshComputer(OPTIONS);
      const views = new Map([["net1", new NetworkView("net1")], ["net2", new NetworkView("net2")]]);
      const channels = new Map([...views.keys()].map((n) => [n, new DeltaChannel(1000 + seed, { ...DEFAULT_DELTA, journal: { ...DEFAULT_DELTA.journal, maxRecords: 200 } }, compiled(n))]));
      const clients = new Map([...views.keys()].map((n) => [n, new DecodedModel()]));
      const versions = new Map<string, number[]>([...views.keys()].map((n) => [n, []]));
      const step = (label: string) => {
        const { mesh, changes } = computer.update(clusters);
        for (const [network, view] of views) {
          const channel = channels.get(network)!;
          const client = clients.get(network)!;
          const outcome = channel.publish(view, mesh, view.update(mesh, changes));
          assert.ok(!("error" in outcome && outcome.error), `${label}: ${JSON.stringify(outcome)}`);
          const answer = channel.answer(client.epoch, client.version);
          client.apply(decodeMessage(answer.body));
          if (outcome.published) versions.get(network)!.push(outcome.version);
          const want = expected(clusters, network);
          const got = actual(client);
          const diff = (a: string[], b: string[]) => a.filter((x) => !b.includes(x));
          if (process.env.DEBUG_DELTA && JSON.stringify(got) !== JSON.stringify(want)) {
            const scratch = viewFor(new MeshComputer(OPTIONS).compute(clusters), network).snapshot.workloads.map((w) => w.uid).sort();
            const inc = [...view.workloads.keys()].sort();
            console.log("view only incremental", inc.filter((u) => !scratch.includes(u)), "only scratch", scratch.filter((u) => !inc.includes(u)));
            const recs = [...(channel as unknown as { workloadRecords: Map<string, Buffer> }).workloadRecords.keys()];
            console.log("records not in view", recs.filter((u) => !view.workloads.has(u)), "view not in records", inc.filter((u) => !recs.includes(u)), "client", client.workloads.size, "records", recs.length);
            console.log("mesh only incremental", [...mesh.workloads.keys()].filter((u) => !new MeshComputer(OPTIONS).compute(clusters).workloads.has(u)));
          }
          assert.deepEqual(got, want, `${label} (${network}): the client's model differs from a from-scratch render: only in the client ${JSON.stringify([...diff(got.workloads, want.workloads), ...diff(got.services, want.services)])}, only in the render ${JSON.stringify([...diff(want.workloads, got.workloads), ...diff(want.services, got.services)])}`);
          const fresh = new DecodedModel();
          fresh.apply(decodeMessage(channel.full()));
          assert.deepEqual(actual(fresh), want, `${label} (${network}): the full message differs`);
        }
      };
      const ips = Array.from({ length: 24 }, (_, i) => `10.0.0.${i + 1}`);
      const pods = new Map<string, { ip: string; sa: string; svc: string; ready: boolean; node: string; net?: string }>();
      const writeSlices = () => {
        for (const s of services) {
          const eps = [...pods.entries()].filter(([, p]) => p.svc === s).map(([name, p]) => ({ ip: p.ip, pod: name, ready: p.ready }));
          c1.upsert("endpointSlices", slice("default", s, `${s}-1`, [{ name: s === "b" || s === "d" ? "web" : "http", port: s === "d" ? 9090 : 8080 }], eps));
        }
        // Endpoints with no Pod behind them (selector-less), sometimes reusing a pod's IP.
        const ext = Array.from({ length: Math.floor(rnd() * 3) }, () => ({ ip: pick(ips) }));
        if (ext.length > 0) c1.upsert("endpointSlices", slice("default", "d", "d-ext", [{ name: "web", port: 7070 }], ext));
        else c1.remove("endpointSlices", slice("default", "d", "d-ext", [], []));
      };
      step("initial");
      for (let i = 0; i < 140; i++) {
        const r = rnd();
        if (r < 0.45) {
          const name = `p-${Math.floor(rnd() * 30)}`;
          const p = { ip: pick(ips), sa: pick(["sa1", "sa2", "sa3"]), svc: pick(services), ready: rnd() < 0.8, node: pick(["n1", "n2", "n3"]), ...(rnd() < 0.2 && { net: "net2" }) };
          pods.set(name, p);
          c1.upsert("pods", pod("default", name, { ip: p.ip, sa: p.sa, ready: p.ready, node: p.node, created: `2026-01-01T00:00:${String(i % 60).padStart(2, "0")}Z`, labels: { app: p.svc, "security.istio.io/tlsMode": "istio", ...(p.net && { "topology.istio.io/network": p.net }) } }));
          if (rnd() < 0.5) writeSlices();
        } else if (r < 0.7 && pods.size > 0) {
          const name = pick([...pods.keys()]);
          pods.delete(name);
          c1.remove("pods", pod("default", name));
          if (rnd() < 0.5) writeSlices();
        } else if (r < 0.8) {
          writeSlices();
        } else if (r < 0.86) {
          const s = pick(services);
          c1.upsert("services", service("default", s, [{ name: "http", port: 80, targetPort: rnd() < 0.5 ? 8080 : "web" }, ...(rnd() < 0.5 ? [{ name: "x", port: 81 }] : [])], { clusterIP: pick(["10.96.0.1", "10.96.0.2", "10.96.0.9", `10.96.1.${i}`]) }));
        } else if (r < 0.9) {
          c1.upsert("nodes", node(pick(["n1", "n2", "n3"]), pick(["r1", "r2"]), pick(["z1", "z2"])));
        } else if (r < 0.92) {
          c1.upsert("gateways", eastWestGateway("istio-system", "eastwest", "net2", pick(["192.168.0.2", "192.168.0.3"])));
        } else if (r < 0.93) {
          c1.upsert("namespaces", namespace("default", { "istio.io/rev": String(i) }));
        } else if (r < 0.95) {
          const s = pick(services);
          c1.remove("services", service("default", s, []));
        } else {
          // The other cluster: a pod of "a" comes or goes, and its slice follows.
          const name = `q-${Math.floor(rnd() * 4)}`;
          if (rnd() < 0.6) c2.upsert("pods", pod("default", name, { ip: pick(["10.1.0.1", "10.1.0.2", "10.0.0.3"]), sa: "remote", labels: { app: "a", "security.istio.io/tlsMode": "istio" } }));
          else c2.remove("pods", pod("default", name));
          c2.upsert("endpointSlices", slice("default", "a", "a-c2", [{ name: "http", port: 8080 }], [...c2.pods.values()].map((p) => ({ ip: p.status!.podIP!, pod: p.metadata!.name! }))));
        }
        // Several changes per render sometimes (a debounce window).
        if (rnd() < 0.7) step(`step ${i}`);
      }
      step("final");
      assert.ok(versions.get("net1")!.length > 20, "the churn published versions");
      for (const channel of channels.values()) channel.close();
    });
  }

  it("a coalesced delta from any kept version brings a client to the current state", () => {
    const c1 = new ClusterObjects("c1");
    c1.upsert("services", service("default", "a", [{ port: 80, targetPort: 8080 }], { clusterIP: "10.96.0.1" }));
    const computer = new MeshComputer(OPTIONS);
    const view = new NetworkView("");
    const channel = new DeltaChannel(7, DEFAULT_DELTA, compiled(""));
    const snapshots: DecodedModel[] = [];
    const follow = new DecodedModel();
    const publish = () => {
      const { mesh, changes } = computer.update([c1]);
      const outcome = channel.publish(view, mesh, view.update(mesh, changes));
      assert.ok(!("error" in outcome && outcome.error), JSON.stringify(outcome));
      follow.apply(decodeMessage(channel.answer(follow.epoch, follow.version).body));
      const copy = new DecodedModel();
      copy.apply(decodeMessage(channel.full()));
      snapshots.push(copy);
    };
    publish();
    for (let i = 0; i < 30; i++) {
      const name = `p-${i % 7}`;
      if (i % 3 === 2) c1.remove("pods", pod("default", name));
      else c1.upsert("pods", pod("default", name, { ip: `10.0.0.${(i * 5) % 9}`, sa: `sa${i % 2}` }));
      c1.upsert("endpointSlices", slice("default", "a", "a-1", [{ port: 8080 }], [...c1.pods.values()].map((p) => ({ ip: p.status!.podIP!, pod: p.metadata!.name! }))));
      publish();
    }
    for (const start of snapshots) {
      const client = new DecodedModel();
      client.apply(decodeMessage(channel.answer(0, 0).body)); // a full at the current version...
      // ...and one from each earlier version: rebuild the client at that version from its full copy.
      const at = new DecodedModel();
      at.epoch = start.epoch;
      at.version = start.version;
      for (const [k, v] of start.workloads) at.workloads.set(k, structuredClone(v));
      for (const [k, v] of start.services) at.services.set(k, structuredClone(v));
      const answer = channel.answer(at.epoch, at.version);
      at.apply(decodeMessage(answer.body));
      assert.deepEqual(actual(at), actual(client), `from version ${start.version}`);
      assert.equal(at.version, channel.version);
    }
    assert.deepEqual(actual(follow), actual(snapshots[snapshots.length - 1]));
    channel.close();
  });
});

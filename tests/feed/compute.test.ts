// The mesh model the feed computes from Kubernetes objects (fixtures), rule by rule, against
// what istiod computes for the same objects (the function each rule follows is named in
// feed/src/istio_rules.ts and feed/README.md).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { MeshComputer, type MeshOptions } from "../../feed/src/compute.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { viewFor } from "../../feed/src/view.js";
import { eastWestGateway, namespace, node, pod, service, slice, waypointGateway } from "./fixtures.js";

function options(networks = new NetworkResolver()): MeshOptions {
  return { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks };
}

function cluster(id: string, objects: Array<[Parameters<ClusterObjects["upsert"]>[0], object]>): ClusterObjects {
  const c = new ClusterObjects(id);
  for (const [kind, o] of objects) c.upsert(kind, o);
  return c;
}

function compute(clusters: ClusterObjects[], o = options()) {
  return new MeshComputer(o).compute(clusters);
}

describe("feed: workloads from pods", () => {
  it("a sidecar pod: uid, SPIFFE identity from its service account, tlsMode, locality from its node", () => {
    const c = cluster("c1", [
      ["nodes", node("n1", "us-east1", "us-east1-b", "rack7")],
      ["pods", pod("default", "httpbin-0", { ip: "10.0.0.11", sa: "httpbin", node: "n1" })],
    ]);
    const w = compute([c]).workloads.get("c1//Pod/default/httpbin-0")?.workload;
    assert.deepEqual(w, {
      uid: "c1//Pod/default/httpbin-0",
      addresses: ["10.0.0.11"],
      identity: "spiffe://cluster.local/ns/default/sa/httpbin",
      tlsMode: "istio",
      locality: "us-east1/us-east1-b/rack7",
    });
  });

  it("tlsMode is istio only for the label value istio; an empty service account is 'default'", () => {
    const c = cluster("c1", [
      ["pods", pod("ns", "plain", { ip: "10.0.0.1", labels: {} })],
      ["pods", pod("ns", "other", { ip: "10.0.0.2", labels: { "security.istio.io/tlsMode": "disabled" }, sa: "" })],
    ]);
    const m = compute([c]);
    assert.equal(m.workloads.get("c1//Pod/ns/plain")?.workload.tlsMode, undefined);
    assert.equal(m.workloads.get("c1//Pod/ns/other")?.workload.tlsMode, undefined);
    assert.equal(m.workloads.get("c1//Pod/ns/other")?.workload.identity, "spiffe://cluster.local/ns/ns/sa/default");
  });

  it("no IP yet, terminal phase or host network: not a workload", () => {
    const c = cluster("c1", [
      ["pods", pod("ns", "pending")],
      ["pods", pod("ns", "done", { ip: "10.0.0.3", phase: "Succeeded" })],
      ["pods", pod("ns", "host", { ip: "192.168.1.5", hostNetwork: true })],
    ]);
    const m = compute([c]);
    assert.equal(m.workloads.size, 0);
    assert.equal(m.gaps.get("host_network_pod"), 1);
  });

  it("health: not Ready, being deleted, or not ready in an EndpointSlice is unhealthy", () => {
    const c = cluster("c1", [
      ["pods", pod("ns", "a", { ip: "10.0.0.1", ready: false })],
      ["pods", pod("ns", "b", { ip: "10.0.0.2", deleting: true })],
      ["pods", pod("ns", "c", { ip: "10.0.0.3" })],
      ["pods", pod("ns", "d", { ip: "10.0.0.4" })],
      ["services", service("ns", "s", [{ port: 80, targetPort: 8080 }])],
      ["endpointSlices", slice("ns", "s", "s-1", [{ port: 8080 }], [{ ip: "10.0.0.3", pod: "c", ready: false }, { ip: "10.0.0.4", pod: "d" }])],
    ]);
    const m = compute([c]);
    assert.equal(m.workloads.get("c1//Pod/ns/a")?.workload.healthy, false);
    assert.equal(m.workloads.get("c1//Pod/ns/b")?.workload.healthy, false);
    assert.equal(m.workloads.get("c1//Pod/ns/c")?.workload.healthy, false);
    assert.equal(m.workloads.get("c1//Pod/ns/d")?.workload.healthy, undefined);
  });

  it("istio-locality label wins over the node; a locality is cut at its first empty part", () => {
    const c = cluster("c1", [
      ["nodes", node("n1", "r1", "z1")],
      ["nodes", { metadata: { name: "n2", labels: { "topology.kubernetes.io/zone": "z9" } } }],
      ["pods", pod("ns", "a", { ip: "10.0.0.1", node: "n1", labels: { "istio-locality": "r2.z2.s2" } })],
      ["pods", pod("ns", "b", { ip: "10.0.0.2", node: "n2" })],
    ]);
    const m = compute([c]);
    assert.equal(m.workloads.get("c1//Pod/ns/a")?.workload.locality, "r2/z2/s2");
    assert.equal(m.workloads.get("c1//Pod/ns/b")?.workload.locality, undefined);
  });

  it("network: the system namespace's label, then meshNetworks fromRegistry, then fromCidr; a pod's own label is not read", () => {
    const nets = new NetworkResolver({ networks: { "cidr-net": { endpoints: [{ fromCidr: "10.9.0.0/16" }] }, "reg-net": { endpoints: [{ fromRegistry: "c2" }] } } });
    const c1 = cluster("c1", [
      ["namespaces", namespace("istio-system", { "topology.istio.io/network": "ns-net" })],
      ["pods", pod("ns", "labelled", { ip: "10.0.0.1", labels: { "topology.istio.io/network": "pod-net" } })],
      ["pods", pod("ns", "plain", { ip: "10.9.0.2" })],
    ]);
    const c2 = cluster("c2", [["pods", pod("ns", "reg", { ip: "10.9.0.3" })]]);
    const c3 = cluster("c3", [["pods", pod("ns", "cidr", { ip: "10.9.0.4" })], ["namespaces", namespace("default", { "topology.istio.io/network": "ignored" })]]);
    const m = compute([c1, c2, c3], options(nets));
    assert.equal(m.workloads.get("c1//Pod/ns/labelled")?.workload.network, "ns-net");
    assert.equal(m.gaps.get("foreign_network_label"), 1);
    assert.equal(m.workloads.get("c1//Pod/ns/plain")?.workload.network, "ns-net");
    assert.equal(m.workloads.get("c2//Pod/ns/reg")?.workload.network, "reg-net");
    assert.equal(m.workloads.get("c3//Pod/ns/cidr")?.workload.network, "cidr-net");
  });
});

describe("feed: services and endpoints", () => {
  it("VIPs, ports with numeric targets, endpoints by EndpointSlice targetRef, SANs from the endpoints", () => {
    const c = cluster("c1", [
      ["pods", pod("default", "r-0", { ip: "10.0.0.21", sa: "reviews" })],
      ["pods", pod("default", "r-1", { ip: "10.0.0.22", sa: "reviews" })],
      ["services", service("default", "reviews", [{ name: "http", port: 80, targetPort: 9080 }, { name: "udp", port: 53 }], { clusterIP: "10.96.1.1" })],
      ["endpointSlices", slice("default", "reviews", "reviews-abc", [{ name: "http", port: 9080 }], [{ ip: "10.0.0.21", pod: "r-0" }, { ip: "10.0.0.22", pod: "r-1" }])],
    ]);
    c.services.get("default/reviews")!.spec!.ports![1].protocol = "UDP";
    const s = compute([c]).services.get("reviews.default.svc.cluster.local");
    assert.deepEqual(s, {
      hostname: "reviews.default.svc.cluster.local",
      vips: [{ address: "10.96.1.1" }],
      ports: { "80": 9080 },
      endpoints: [{ workload: "c1//Pod/default/r-0" }, { workload: "c1//Pod/default/r-1" }],
      subjectAltNames: ["spiffe://cluster.local/ns/default/sa/reviews"],
    });
  });

  it("one Service in two clusters of one network with the same ClusterIP (each cluster's kubernetes Service): one VIP, from scratch and incrementally", () => {
    const a = cluster("a", [["services", service("default", "kubernetes", [{ name: "https", port: 443, targetPort: 6443 }], { clusterIP: "10.96.0.1" })]]);
    const b = cluster("b", [["services", service("default", "kubernetes", [{ name: "https", port: 443, targetPort: 6443 }], { clusterIP: "10.96.0.1" })], ["services", service("default", "other", [{ port: 80 }], { clusterIP: "10.96.0.2" })]]);
    const mesh = compute([a, b]);
    assert.deepEqual(mesh.services.get("kubernetes.default.svc.cluster.local")?.vips, [{ address: "10.96.0.1" }]);
    // The incremental path merges the same way (a's Service changed, b's unchanged).
    const computer = new MeshComputer(options());
    computer.update([a, b]);
    a.upsert("services", service("default", "kubernetes", [{ name: "https", port: 443, targetPort: 6444 }], { clusterIP: "10.96.0.1" }));
    assert.deepEqual(computer.update([a, b]).mesh.services.get("kubernetes.default.svc.cluster.local")?.vips, [{ address: "10.96.0.1" }]);
  });

  it("a named targetPort is resolved per endpoint from its EndpointSlice: the most common target is the default, others override", () => {
    const c = cluster("c1", [
      ["pods", pod("default", "a", { ip: "10.0.0.1" })],
      ["pods", pod("default", "b", { ip: "10.0.0.2" })],
      ["pods", pod("default", "c", { ip: "10.0.0.3" })],
      ["services", service("default", "web", [{ name: "http", port: 80, targetPort: "web" }])],
      ["endpointSlices", slice("default", "web", "web-1", [{ name: "http", port: 8080 }], [{ ip: "10.0.0.1", pod: "a" }, { ip: "10.0.0.2", pod: "b" }])],
      ["endpointSlices", slice("default", "web", "web-2", [{ name: "http", port: 9090 }], [{ ip: "10.0.0.3", pod: "c" }])],
    ]);
    const s = compute([c]).services.get("web.default.svc.cluster.local")!;
    assert.deepEqual(s.ports, { "80": 8080 });
    assert.deepEqual(s.endpoints, [
      { workload: "c1//Pod/default/a" },
      { workload: "c1//Pod/default/b" },
      { workload: "c1//Pod/default/c", ports: { "80": 9090 } },
    ]);
  });

  it("headless service: no VIPs, headless flag; an endpoint without a Pod becomes its own workload (endpointSlicesBuilder uid)", () => {
    const c = cluster("c1", [
      ["services", service("db", "pg", [{ port: 5432 }], { clusterIP: "None" })],
      ["endpointSlices", slice("db", "pg", "pg-x", [{ port: 5432 }], [{ ip: "10.0.5.5" }])],
    ]);
    const m = compute([c]);
    const s = m.services.get("pg.db.svc.cluster.local")!;
    assert.equal(s.headless, true);
    assert.equal(s.vips, undefined);
    assert.deepEqual(s.endpoints, [{ workload: "c1/discovery.k8s.io/EndpointSlice/db/pg-x/10.0.5.5" }]);
    assert.deepEqual(m.workloads.get("c1/discovery.k8s.io/EndpointSlice/db/pg-x/10.0.5.5")?.workload, { uid: "c1/discovery.k8s.io/EndpointSlice/db/pg-x/10.0.5.5", addresses: ["10.0.5.5"] });
  });

  it("an endpoint whose Pod the feed does not know (yet) is left out, as istiod does", () => {
    const c = cluster("c1", [
      ["services", service("ns", "s", [{ port: 80 }])],
      ["endpointSlices", slice("ns", "s", "s-1", [{ port: 80 }], [{ ip: "10.0.0.9", pod: "gone" }])],
    ]);
    assert.equal(compute([c]).services.get("s.ns.svc.cluster.local")?.endpoints, undefined);
  });

  it("trafficDistribution PreferClose → network/region/zone failover", () => {
    const svc = service("ns", "s", [{ port: 80 }]);
    svc.spec!.trafficDistribution = "PreferClose";
    const s = compute([cluster("c1", [["services", svc]])]).services.get("s.ns.svc.cluster.local")!;
    assert.deepEqual(s.loadBalancing, { routingPreference: ["network", "region", "zone"], mode: "failover" });
  });
});

  it("service-account annotations add SANs: alpha.istio.io/kubernetes-serviceaccounts as SPIFFE ids, canonical-serviceaccounts as written", () => {
    // Spelled as istio.io/api's annotation.AlphaKubernetesServiceAccounts (tests/istio/feed_vs_istiod.test.ts
    // found the feed reading a misspelling that istiod never sets).
    const svc = service("ns", "s", [{ port: 80 }], {
      annotations: { "alpha.istio.io/kubernetes-serviceaccounts": "a, b", "alpha.istio.io/canonical-serviceaccounts": "spiffe://other.td/ns/x/sa/y" },
    });
    const s = compute([cluster("c1", [["services", svc]])]).services.get("s.ns.svc.cluster.local")!;
    assert.deepEqual(s.subjectAltNames, ["spiffe://cluster.local/ns/ns/sa/a", "spiffe://cluster.local/ns/ns/sa/b", "spiffe://other.td/ns/x/sa/y"]);
  });

describe("feed: waypoints (istio.io/use-waypoint)", () => {
  const wp = waypointGateway("default", "waypoint");
  it("a namespace label binds every service to the waypoint, by hostname, port 15008; 'none' on a service opts out", () => {
    const c = cluster("c1", [
      ["namespaces", namespace("default", { "istio.io/use-waypoint": "waypoint" })],
      ["gateways", wp],
      ["services", service("default", "a", [{ port: 80 }])],
      ["services", service("default", "b", [{ port: 80 }], { labels: { "istio.io/use-waypoint": "none" } })],
      ["pods", pod("default", "p", { ip: "10.0.0.1" })],
    ]);
    const m = compute([c]);
    assert.deepEqual(m.services.get("a.default.svc.cluster.local")?.waypoint, { hostname: "waypoint.default.svc.cluster.local", port: 15008 });
    assert.equal(m.services.get("b.default.svc.cluster.local")?.waypoint, undefined);
    // A waypoint for service traffic (the default) does not capture a pod's own traffic.
    assert.equal(m.workloads.get("c1//Pod/default/p")?.workload.waypoint, undefined);
  });

  it("waypoint-for workload binds labelled pods, not services; a waypoint's own pods never get one", () => {
    const c = cluster("c1", [
      ["gateways", waypointGateway("default", "wl", { trafficType: "workload", ip: "10.96.9.9" })],
      ["services", service("default", "a", [{ port: 80 }], { labels: { "istio.io/use-waypoint": "wl" } })],
      ["pods", pod("default", "p", { ip: "10.0.0.1", labels: { "istio.io/use-waypoint": "wl" } })],
      ["pods", pod("default", "wl-0", { ip: "10.0.0.2", labels: { "istio.io/use-waypoint": "wl", "gateway.networking.k8s.io/gateway-name": "wl" } })],
    ]);
    const m = compute([c]);
    assert.equal(m.services.get("a.default.svc.cluster.local")?.waypoint, undefined);
    assert.deepEqual(m.workloads.get("c1//Pod/default/p")?.workload.waypoint, { address: "10.96.9.9", port: 15008 });
    assert.equal(m.workloads.get("c1//Pod/default/wl-0")?.workload.waypoint, undefined);
  });

  it("a label naming a Gateway without status addresses (not ready) or in another namespace without permission binds nothing", () => {
    const notReady = waypointGateway("default", "later");
    notReady.status = { addresses: [] };
    const c = cluster("c1", [
      ["gateways", notReady],
      ["gateways", waypointGateway("other", "foreign")],
      ["services", service("default", "a", [{ port: 80 }], { labels: { "istio.io/use-waypoint": "later" } })],
      ["services", service("default", "b", [{ port: 80 }], { labels: { "istio.io/use-waypoint": "foreign", "istio.io/use-waypoint-namespace": "other" } })],
    ]);
    const m = compute([c]);
    assert.equal(m.services.get("a.default.svc.cluster.local")?.waypoint, undefined);
    assert.equal(m.services.get("b.default.svc.cluster.local")?.waypoint, undefined);
  });
});

describe("feed: split horizon across networks", () => {
  function twoNetworks() {
    const c1 = cluster("c1", [
      ["namespaces", namespace("istio-system", { "topology.istio.io/network": "net1" })],
      ["pods", pod("default", "local-0", { ip: "10.0.0.1", sa: "svc" })],
      ["services", service("default", "svc", [{ port: 80, targetPort: 8080 }], { clusterIP: "10.96.0.1" })],
      ["endpointSlices", slice("default", "svc", "svc-1", [{ port: 8080 }], [{ ip: "10.0.0.1", pod: "local-0" }])],
    ]);
    const c2 = cluster("c2", [
      ["namespaces", namespace("istio-system", { "topology.istio.io/network": "net2" })],
      ["gateways", eastWestGateway("istio-system", "eastwest", "net2", "172.16.0.1")],
      ["pods", pod("default", "remote-0", { ip: "10.0.0.1", sa: "svc" })],
      ["services", service("default", "svc", [{ port: 80, targetPort: 8080 }], { clusterIP: "10.96.0.1" })],
      ["endpointSlices", slice("default", "svc", "svc-1", [{ port: 8080 }], [{ ip: "10.0.0.1", pod: "remote-0" }])],
    ]);
    return [c1, c2];
  }

  it("net1's view: the net2 pod is address-less with net2's gateway; the gateway is a workload with its address and identity", () => {
    const { snapshot, stats } = viewFor(compute(twoNetworks()), "net1");
    const byUid = new Map(snapshot.workloads.map((w) => [w.uid, w]));
    assert.deepEqual(byUid.get("c2//Pod/default/remote-0"), {
      uid: "c2//Pod/default/remote-0",
      addresses: [],
      network: "net2",
      identity: "spiffe://cluster.local/ns/default/sa/svc",
      tlsMode: "istio",
      networkGateway: { address: "172.16.0.1", hboneMtlsPort: 15008 },
    });
    assert.deepEqual(byUid.get("NetworkGateway/net2/172.16.0.1/15008"), {
      uid: "NetworkGateway/net2/172.16.0.1/15008",
      addresses: ["172.16.0.1"],
      network: "net2",
      identity: "spiffe://cluster.local/ns/istio-system/sa/eastwest",
      tlsMode: "istio",
    });
    assert.deepEqual(byUid.get("c1//Pod/default/local-0")?.addresses, ["10.0.0.1"]);
    // One service across both clusters: both endpoints, a VIP per network.
    const svc = snapshot.services.find((s) => s.hostname === "svc.default.svc.cluster.local")!;
    assert.deepEqual(svc.endpoints?.map((e) => e.workload), ["c1//Pod/default/local-0", "c2//Pod/default/remote-0"]);
    assert.deepEqual(svc.vips, [{ network: "net1", address: "10.96.0.1" }, { network: "net2", address: "10.96.0.1" }]);
    assert.equal(stats.remoteWorkloads, 1);
  });

  it("net2's view: net1 has no gateway, so its pod is left out (unreachable) and counted", () => {
    const { snapshot, stats } = viewFor(compute(twoNetworks()), "net2");
    assert.equal(snapshot.workloads.some((w) => w.uid === "c1//Pod/default/local-0"), false);
    assert.equal(stats.droppedNoGateway, 1);
    const svc = snapshot.services.find((s) => s.hostname === "svc.default.svc.cluster.local")!;
    assert.deepEqual(svc.endpoints?.map((e) => e.workload), ["c2//Pod/default/remote-0"]);
  });
});

describe("feed: one address per network", () => {
  it("two live pods with one IP: the older keeps it; a deleting pod loses to a live one (an IP reused)", () => {
    const c = cluster("c1", [
      ["pods", pod("ns", "old", { ip: "10.0.0.7", sa: "a", created: "2026-01-01T00:00:00Z" })],
      ["pods", pod("ns", "new", { ip: "10.0.0.7", sa: "b", created: "2026-01-01T00:05:00Z" })],
      ["pods", pod("ns", "leaving", { ip: "10.0.0.8", created: "2026-01-01T00:09:00Z", deleting: true })],
      ["pods", pod("ns", "staying", { ip: "10.0.0.8", created: "2026-01-01T00:00:00Z" })],
    ]);
    const { snapshot, stats } = viewFor(compute([c]), "");
    assert.deepEqual(snapshot.workloads.map((w) => w.uid).sort(), ["c1//Pod/ns/old", "c1//Pod/ns/staying"]);
    assert.equal(stats.addressConflicts, 2);
  });

  it("IPv6 spellings are one address (as the filter's parser compares them)", () => {
    const c = cluster("c1", [
      ["pods", pod("ns", "a", { ip: "FD00:0::1", created: "2026-01-01T00:00:00Z" })],
      ["pods", pod("ns", "b", { ip: "fd00::1", created: "2026-01-01T00:01:00Z" })],
      ["pods", pod("ns", "c", { ip: "::ffff:10.1.1.1" })],
    ]);
    const { snapshot } = viewFor(compute([c]), "");
    assert.deepEqual(snapshot.workloads.map((w) => [w.uid, w.addresses]), [["c1//Pod/ns/a", ["fd00::1"]], ["c1//Pod/ns/c", ["10.1.1.1"]]]);
  });
});

describe("feed: what the watch keeps of an object", () => {
  it("stripping a listed pod (managedFields, containers, annotations, most of status dropped) leaves the model unchanged", async () => {
    const { stripObject } = await import("../../feed/src/strip.js");
    const full = () => {
      const p = pod("default", "a", { ip: "10.0.0.1", node: "n1", labels: { "security.istio.io/tlsMode": "istio", "istio-locality": "r.z" } }) as Record<string, any>;
      p.metadata.managedFields = [{ manager: "kubelet", fieldsV1: { "f:status": {} } }];
      p.metadata.annotations = { "kubectl.kubernetes.io/last-applied-configuration": "{}" };
      p.spec.containers = [{ name: "app", image: "x", ports: [{ containerPort: 80 }] }];
      p.status.containerStatuses = [{ name: "app", ready: true }];
      p.status.conditions.push({ type: "PodScheduled", status: "True" });
      return p;
    };
    const slimmed = stripObject("pods", full()) as Record<string, any>;
    assert.equal(slimmed.metadata.managedFields, undefined);
    assert.equal(slimmed.metadata.annotations, undefined);
    assert.equal(slimmed.spec.containers, undefined);
    assert.equal(slimmed.status.containerStatuses, undefined);
    assert.deepEqual(slimmed.status.conditions.map((c: { type: string }) => c.type), ["Ready"]);
    const model = (p: object) => compute([cluster("c1", [["pods", p], ["nodes", node("n1", "r1", "z1")]])]).workloads;
    assert.deepEqual(model(slimmed), model(full()));
  });
});

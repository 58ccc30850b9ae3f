// The feed keeps only a stripped copy of every object (feed/src/strip.ts). Under random churn of
// every kind the model reads (pods with network, waypoint, gateway and locality labels; services
// with service-account and traffic-distribution annotations, internal traffic policy, headless,
// ExternalName; EndpointSlices with conditions and selector-less endpoints; namespaces; nodes;
// waypoint and east-west Gateways and their classes), each object carrying what real API
// servers add (managedFields, containers, volumes, statuses, unrelated annotations and labels,
// node images, slice hints), two clusters receive the same objects: one as sent, one stripped.
// After every step the incremental model, a from-scratch model and each network's view are
// exactly equal, as are the stripped objects' own models when the noise changes alone.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClusterObjects, type Kind } from "../../feed/src/cluster_objects.js";
import { MeshComputer, type MeshOptions } from "../../feed/src/compute.js";
import type { KubeObject } from "../../feed/src/kube_objects.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { stripObject } from "../../feed/src/strip.js";
import { viewFor } from "../../feed/src/view.js";
import { eastWestGateway, namespace, node, pod, service, slice, waypointGateway } from "./fixtures.js";
import { seededRandom } from "../support/checksum_load.js";

const OPTIONS: MeshOptions = { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() };


type Loose = Record<string, any>;

/** What an API server adds to an object that the model never reads (varying with `r`). */
function noisy(kind: Kind, object: KubeObject, r: () => number): Loose {
  const o = structuredClone(object) as Loose;
  o.metadata ??= {};
  const m = o.metadata;
  m.uid = `uid-${Math.floor(r() * 1e9)}`;
  m.resourceVersion = String(Math.floor(r() * 1e9));
  m.generation = Math.floor(r() * 9);
  m.managedFields = [{ manager: "kube-controller-manager", operation: "Update", apiVersion: "v1", time: "2026-01-01T00:00:00Z", fieldsType: "FieldsV1", fieldsV1: { "f:metadata": { "f:labels": {} } } }];
  m.ownerReferences = [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs", uid: "u", controller: true }];
  m.finalizers = r() < 0.3 ? ["example.com/x"] : undefined;
  m.annotations = { ...(m.annotations ?? {}), "kubectl.kubernetes.io/last-applied-configuration": `{"n":${Math.floor(r() * 100)}}`, ...(r() < 0.5 && { "sidecar.istio.io/status": "{}" }) };
  if (kind !== "nodes" || r() < 0.5) m.labels = { ...(m.labels ?? {}), "pod-template-hash": String(Math.floor(r() * 100)) };
  if (kind === "pods") {
    o.spec = { ...o.spec, containers: [{ name: "app", image: `img:${Math.floor(r() * 5)}`, ports: [{ name: "web", containerPort: 8080 }] }], volumes: [{ name: "v", emptyDir: {} }], restartPolicy: "Always", dnsPolicy: "ClusterFirst" };
    o.status = { ...o.status, hostIP: "192.168.1.1", startTime: "2026-01-01T00:00:00Z", qosClass: "BestEffort", containerStatuses: [{ name: "app", ready: r() < 0.5, restartCount: Math.floor(r() * 3) }] };
    o.status.conditions = [{ type: "PodScheduled", status: "True" }, ...(o.status.conditions ?? []).map((c: Loose) => ({ ...c, lastTransitionTime: "2026-01-01T00:00:00Z" })), { type: "ContainersReady", status: r() < 0.5 ? "True" : "False" }];
  } else if (kind === "services") {
    o.spec = { ...o.spec, sessionAffinity: "None", ipFamilies: ["IPv4"], ipFamilyPolicy: "SingleStack", ports: (o.spec?.ports ?? []).map((p: Loose) => ({ ...p, nodePort: r() < 0.2 ? 30000 + Math.floor(r() * 100) : undefined })) };
    o.status = { loadBalancer: {} };
  } else if (kind === "endpointSlices") {
    o.endpoints = (o.endpoints ?? []).map((e: Loose) => ({ ...e, hints: { forZones: [{ name: "z1" }] }, deprecatedTopology: { x: "y" }, hostname: r() < 0.3 ? "h" : undefined, targetRef: e.targetRef && { ...e.targetRef, uid: `u-${Math.floor(r() * 1e6)}`, resourceVersion: "7" }, conditions: { ...e.conditions, serving: r() < 0.5, terminating: r() < 0.1 } }));
  } else if (kind === "nodes") {
    o.spec = { podCIDR: "10.0.0.0/24", providerID: "x" };
    o.status = { images: Array.from({ length: 3 }, (_, i) => ({ names: [`image-${i}`], sizeBytes: 1e6 })), nodeInfo: { kubeletVersion: "v1.33" }, addresses: [{ type: "InternalIP", address: "192.168.1.1" }] };
  } else if (kind === "gateways") {
    o.status = { ...o.status, conditions: [{ type: "Programmed", status: "True" }], listeners: [{ name: "mesh", attachedRoutes: 0 }] };
  } else if (kind === "gatewayClasses") {
    o.spec = { controllerName: "istio.io/gateway-controller", description: "x" };
  }
  return o;
}

/** Two clusters fed the same noisy objects: `raw` keeps them as sent, `stripped` as the feed does. */
class Twin {
  readonly raw: ClusterObjects;
  readonly stripped: ClusterObjects;
  constructor(id: string, private readonly r: () => number) {
    this.raw = new ClusterObjects(id);
    this.stripped = new ClusterObjects(id);
  }
  put(kind: Kind, object: KubeObject): void {
    const sent = noisy(kind, object, this.r);
    this.raw.upsert(kind, sent);
    this.stripped.upsert(kind, stripObject(kind, structuredClone(sent)));
  }
  remove(kind: Kind, object: KubeObject): void {
    this.raw.remove(kind, object);
    this.stripped.remove(kind, stripObject(kind, object));
  }
}

describe("feed: stripped objects give the model the full objects give", () => {
  for (const seed of [11, 12, 13]) {
    it(`random churn of every kind, seed ${seed}`, () => {
      const rnd = seededRandom(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
      const c1 = new Twin("c1", rnd);
      const c2 = new Twin("c2", rnd);
      const twins = [c1, c2];
      c1.put("namespaces", namespace("istio-system", { "topology.istio.io/network": "net1" }));
      c2.put("namespaces", namespace("istio-system", { "topology.istio.io/network": "net2" }));
      c1.put("namespaces", namespace("default"));
      c1.put("namespaces", namespace("wp", { team: "a" }));
      c1.put("gatewayClasses", { apiVersion: "gateway.networking.k8s.io/v1", kind: "GatewayClass", metadata: { name: "istio-waypoint", labels: { "istio.io/waypoint-for": "all" } } });
      c1.put("gatewayClasses", { apiVersion: "gateway.networking.k8s.io/v1", kind: "GatewayClass", metadata: { name: "istio-east-west" } });
      const services = ["a", "b", "c", "d", "e"];
      const ips = Array.from({ length: 20 }, (_, i) => `10.0.0.${i + 1}`);
      const podState = new Map<string, { ip: string; svc: string; ready: boolean; twin: Twin }>();
      const computers = { raw: new MeshComputer(OPTIONS), stripped: new MeshComputer(OPTIONS) };
      const networks = ["net1", "net2", ""];
      let steps = 0;
      const check = (label: string) => {
        steps++;
        const raw = computers.raw.update(twins.map((t) => t.raw)).mesh;
        const stripped = computers.stripped.update(twins.map((t) => t.stripped)).mesh;
        assert.deepEqual(stripped, raw, `${label}: the incremental models differ`);
        const scratch = new MeshComputer(OPTIONS).compute(twins.map((t) => t.stripped));
        assert.deepEqual(scratch, new MeshComputer(OPTIONS).compute(twins.map((t) => t.raw)), `${label}: the from-scratch models differ`);
        for (const n of networks) assert.deepEqual(viewFor(stripped, n), viewFor(raw, n), `${label}: the views of ${n || "(no network)"} differ`);
      };
      const writeSlice = (s: string) => {
        const eps = [...podState.entries()].filter(([, p]) => p.svc === s && p.twin === c1).map(([name, p]) => ({ ip: p.ip, pod: name, ready: p.ready }));
        c1.put("endpointSlices", slice("default", s, `${s}-1`, [{ name: "http", port: 8080 }], eps));
      };
      check("initial");
      for (let i = 0; i < 160; i++) {
        const r = rnd();
        if (r < 0.35) {
          const name = `p-${Math.floor(rnd() * 25)}`;
          const twin = rnd() < 0.85 ? c1 : c2;
          const p = { ip: pick(ips), svc: pick(services), ready: rnd() < 0.8, twin };
          podState.set(name, p);
          const labels: Record<string, string> = { app: p.svc, ...(rnd() < 0.8 && { "security.istio.io/tlsMode": "istio" }) };
          if (rnd() < 0.15) labels["topology.istio.io/network"] = pick(["net1", "net2"]);
          if (rnd() < 0.15) labels["istio.io/use-waypoint"] = pick(["wp", "none"]);
          if (rnd() < 0.1) labels["istio-locality"] = "r9.z9";
          if (rnd() < 0.05) labels["gateway.networking.k8s.io/gateway-name"] = "wp";
          twin.put("pods", pod(twin === c1 ? pick(["default", "wp"]) : "default", name, { ip: p.ip, sa: pick(["sa1", "sa2"]), ready: p.ready, node: pick(["n1", "n2", "n3"]), phase: pick(["Running", "Running", "Running", "Pending", "Succeeded"]), deleting: rnd() < 0.05, hostNetwork: rnd() < 0.05, created: `2026-01-01T00:00:${String(i % 60).padStart(2, "0")}Z`, labels }));
          if (rnd() < 0.5) writeSlice(p.svc);
        } else if (r < 0.5 && podState.size > 0) {
          const name = pick([...podState.keys()]);
          const p = podState.get(name)!;
          podState.delete(name);
          for (const ns of ["default", "wp"]) p.twin.remove("pods", pod(ns, name));
          writeSlice(p.svc);
        } else if (r < 0.6) {
          writeSlice(pick(services));
          // Selector-less endpoints (no Pod behind them).
          if (rnd() < 0.4) c1.put("endpointSlices", slice("default", "e", "e-ext", [{ name: "web", port: 7070 }], [{ ip: pick(ips), ready: rnd() < 0.7 }]));
        } else if (r < 0.72) {
          const s = pick(services);
          const annotations: Record<string, string> = {};
          if (rnd() < 0.3) annotations["alpha.istio.io/kubernetes-serviceaccounts"] = "x, y";
          if (rnd() < 0.2) annotations["alpha.istio.io/canonical-serviceaccounts"] = "spiffe://other/ns/a/sa/b";
          if (rnd() < 0.2) annotations["networking.istio.io/traffic-distribution"] = "PreferClose";
          const labels: Record<string, string> = rnd() < 0.2 ? { "istio.io/use-waypoint": "wp" } : {};
          const svc = service("default", s, [{ name: "http", port: 80, targetPort: pick([8080, "web"]) }, ...(rnd() < 0.3 ? [{ name: "udp", port: 53 }] : [])], { clusterIP: pick(["10.96.0.1", "None", `10.96.1.${i}`]), labels, annotations }) as Loose;
          if (rnd() < 0.2) svc.spec.trafficDistribution = "PreferClose";
          if (rnd() < 0.1) svc.spec.internalTrafficPolicy = "Local";
          if (rnd() < 0.1) svc.spec.publishNotReadyAddresses = true;
          if (rnd() < 0.1) svc.spec.ports[1] && (svc.spec.ports[1].protocol = "UDP");
          if (rnd() < 0.05) Object.assign(svc.spec, { type: "ExternalName", externalName: "example.com" });
          (s === "e" && rnd() < 0.5 ? c2 : c1).put("services", svc);
        } else if (r < 0.78) {
          c1.put("nodes", node(pick(["n1", "n2", "n3"]), pick(["r1", "r2"]), pick(["z1", "z2"]), rnd() < 0.3 ? "s1" : undefined));
        } else if (r < 0.84) {
          const gw = waypointGateway("wp", "wp", { trafficType: pick([undefined, "service", "workload", "all"]), ip: rnd() < 0.5 ? "10.96.9.9" : undefined }) as Loose;
          if (rnd() < 0.5) gw.spec.listeners[0].allowedRoutes = { namespaces: rnd() < 0.5 ? { from: "All" } : { from: "Selector", selector: { matchLabels: { team: "a" }, matchExpressions: [{ key: "team", operator: "In", values: ["a", "b"] }] } } };
          if (rnd() < 0.3) gw.metadata.annotations = { "gateway.istio.io/service-account": "wp-sa" };
          c1.put("gateways", gw);
        } else if (r < 0.88) {
          c1.put("gateways", eastWestGateway("istio-system", "eastwest", pick(["net1", "net2"]), pick(["192.168.0.2", "192.168.0.3"])));
        } else if (r < 0.93) {
          c1.put("namespaces", namespace(pick(["default", "wp"]), { ...(rnd() < 0.5 && { "istio.io/use-waypoint": "wp" }), ...(rnd() < 0.5 && { team: pick(["a", "b"]) }) }));
          if (rnd() < 0.5) c1.put("namespaces", { ...namespace("default"), metadata: { name: "default", annotations: { "networking.istio.io/traffic-distribution": "PreferClose" } } });
        } else if (r < 0.96) {
          c1.remove("services", service("default", pick(services), []));
        } else {
          // Only what the model never reads changes: a new resourceVersion and new noise.
          const name = pick([...podState.keys(), "none"]);
          const p = podState.get(name);
          if (p) p.twin.put("pods", pod("default", name, { ip: p.ip, ready: p.ready, labels: { app: p.svc, "security.istio.io/tlsMode": "istio" } }));
        }
        if (rnd() < 0.6) check(`step ${i}`);
      }
      check("final");
      assert.ok(steps > 60, "the churn was checked often");
      const model = computers.stripped.update(twins.map((t) => t.stripped)).mesh;
      assert.ok(model.workloads.size > 5 && model.services.size > 2, "the churn built a mesh with workloads and services");
    });
  }

  it("keeps only what the model reads of each kind", () => {
    const r = seededRandom(1);
    const p = stripObject("pods", noisy("pods", pod("default", "a", { ip: "10.0.0.1", node: "n1" }), r)) as Loose;
    assert.deepEqual(Object.keys(p).sort(), ["metadata", "spec", "status"]);
    assert.deepEqual(Object.keys(p.metadata).sort(), ["creationTimestamp", "labels", "name", "namespace", "resourceVersion"]);
    assert.deepEqual(Object.keys(p.spec).sort(), ["nodeName", "serviceAccountName"]);
    // podIPs of exactly podIP says nothing more (the rules read podIP without it); a dual-stack
    // pod's list stays whole.
    assert.deepEqual(Object.keys(p.status).sort(), ["conditions", "phase", "podIP"]);
    assert.deepEqual(p.status.conditions, [{ type: "Ready", status: "True" }]);
    const dual = stripObject("pods", pod("default", "b", { ip: ["10.0.0.2", "fd00::2"] })) as Loose;
    assert.deepEqual(dual.status.podIPs, [{ ip: "10.0.0.2" }, { ip: "fd00::2" }]);
    // Pods with the same labels share one labels object; different labels never do.
    const first = stripObject("pods", pod("default", "c", { ip: "10.0.0.3", labels: { app: "web", "security.istio.io/tlsMode": "istio" } })) as Loose;
    const twin = stripObject("pods", pod("default", "e", { ip: "10.0.0.4", labels: { app: "web", "security.istio.io/tlsMode": "istio" } })) as Loose;
    assert.equal(twin.metadata.labels, first.metadata.labels);
    const other = stripObject("pods", pod("default", "d", { labels: { app: "x" } })) as Loose;
    assert.deepEqual(other.metadata.labels, { app: "x" });
    // Maps whose texts only join the same way stay apart; an oversized set is kept, not shared.
    const joinA = stripObject("pods", pod("default", "f", { labels: { "a\u0000b": "c" } })) as Loose;
    const joinB = stripObject("pods", pod("default", "g", { labels: { a: "b\u0000c" } })) as Loose;
    assert.deepEqual([joinA.metadata.labels, joinB.metadata.labels], [{ "a\u0000b": "c" }, { a: "b\u0000c" }]);
    const big = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`key-${i}`, "v".repeat(60)]));
    const big1 = stripObject("pods", pod("default", "h", { labels: big })) as Loose;
    const big2 = stripObject("pods", pod("default", "i", { labels: big })) as Loose;
    assert.deepEqual(big1.metadata.labels, big);
    assert.notEqual(big1.metadata.labels, big2.metadata.labels);
    const n = stripObject("nodes", noisy("nodes", node("n1", "r", "z"), r)) as Loose;
    assert.deepEqual(n, { metadata: { name: "n1", resourceVersion: n.metadata.resourceVersion, labels: { "topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z" } } });
    const s = stripObject("services", noisy("services", service("default", "a", [{ port: 80 }], { annotations: { "alpha.istio.io/kubernetes-serviceaccounts": "x" } }), r)) as Loose;
    assert.deepEqual(s.metadata.annotations, { "alpha.istio.io/kubernetes-serviceaccounts": "x" });
    assert.equal(s.status, undefined);
    assert.equal(s.spec.sessionAffinity, undefined);
    const e = stripObject("endpointSlices", noisy("endpointSlices", slice("default", "a", "a-1", [{ port: 80 }], [{ ip: "10.0.0.1", pod: "a" }]), r)) as Loose;
    assert.deepEqual(Object.keys(e.endpoints[0]).sort(), ["addresses", "conditions", "targetRef"]);
    assert.deepEqual(e.endpoints[0].targetRef, { kind: "Pod", namespace: "default", name: "a" });
    // Never throws on odd shapes (a file or a broken object): the odd parts come out missing.
    for (const kind of ["pods", "services", "endpointSlices", "gateways", "nodes"] as const) {
      for (const odd of [{}, { metadata: null }, { spec: "x", status: 7 }, { spec: { ports: "x", listeners: [null] }, endpoints: [null, 3], ports: null }]) assert.doesNotThrow(() => stripObject(kind, odd));
    }
  });
});

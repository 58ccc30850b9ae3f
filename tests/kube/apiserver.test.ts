// Smoke test of the real-Kubernetes harness (tests/support/kube.ts): two API servers at once,
// a pod made Running+Ready through the status subresource and seen by a @kubernetes/client-node
// informer, the upstream CRD schemas in force, RBAC enforced for a ServiceAccount token, and
// everything stopped afterwards. Fails (never skips) when `npm run setup:kube` has not run.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, it } from "node:test";
import { makeInformer, type KubernetesObject, type V1Pod, CoreV1Api } from "@kubernetes/client-node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { requireKubeBinaries, SERVICE_CIDR, startKubeClusters, type KubeCluster } from "../support/kube.js";

const NS = "smoke";

function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/** Resolves with the first event object the predicate accepts; rejects after `ms`. */
function nextEvent<T extends KubernetesObject>(
  informer: { on(verb: "add" | "update" | "delete", cb: (obj: T) => void): void; off(verb: "add" | "update" | "delete", cb: (obj: T) => void): void },
  verb: "add" | "update" | "delete",
  accept: (obj: T) => boolean,
  ms = 20_000,
): Promise<T> {
  return new Promise((done, fail) => {
    const timer = setTimeout(() => {
      informer.off(verb, handler);
      fail(new Error(`no matching '${verb}' event within ${ms} ms`));
    }, ms);
    function handler(obj: T) {
      if (!accept(obj)) return;
      clearTimeout(timer);
      informer.off(verb, handler);
      done(obj);
    }
    informer.on(verb, handler);
  });
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      done(true);
    });
    socket.once("error", () => done(false));
  });
}

function inServiceCidr(ip: string): boolean {
  const [a, b] = ip.split(".").map(Number);
  const [ca, cb] = SERVICE_CIDR.split("/")[0].split(".").map(Number);
  return a === ca && b === cb;
}

it("missing binaries are an error naming the setup step, never a skip", () => {
  const empty = mkdtempSync(join(tmpdir(), "kube-bin-"));
  try {
    assert.throws(() => requireKubeBinaries({ binDir: empty }), /kube-apiserver.*npm run setup:kube/s);
    assert.throws(() => requireKubeBinaries({ binDir: empty, controllerManager: true }), /kube-controller-manager/);
  } finally {
    rmSync(empty, { recursive: true });
  }
});

describe("real kube-apiserver harness", () => {
  let east: KubeCluster;
  let west: KubeCluster;

  before(async () => {
    // Both at once: the multi-cluster tests need two independent control planes.
    // east also runs the real endpointslice and namespace controllers (kube-controller-manager).
    [east, west] = await startKubeClusters([{ name: "east", controllers: ["endpointslice-controller", "namespace-controller"] }, { name: "west" }]);
  });
  after(async () => {
    await Promise.all([east?.stop(), west?.stop()]);
  });

  it("runs two independent API servers", async () => {
    assert.notEqual(east.server, west.server);
    await east.createNamespace({ name: NS, labels: { "topology.istio.io/network": "net-east" } });
    const eastNs = await east.core.readNamespace({ name: NS });
    assert.equal(eastNs.metadata?.labels?.["topology.istio.io/network"], "net-east");
    await assert.rejects(west.core.readNamespace({ name: NS }), (error: { code?: number }) => error.code === 404);
  });

  it("a pod made Running and Ready through the status subresource reaches an informer", async () => {
    await east.createNode({ name: "node-a", region: "eu", zone: "eu-1", subzone: "rack-1", internalIP: "192.168.0.10" });
    const core = east.kubeConfig.makeApiClient(CoreV1Api);
    const informer = makeInformer<V1Pod>(east.kubeConfig, `/api/v1/namespaces/${NS}/pods`, () => core.listNamespacedPod({ namespace: NS }));
    const errors: unknown[] = [];
    informer.on("error", (error) => errors.push(error));
    await informer.start();
    try {
      const added = nextEvent(informer, "add", (pod) => pod.metadata?.name === "web-1");
      await east.createPod({
        namespace: NS,
        name: "web-1",
        labels: { app: "web", "security.istio.io/tlsMode": "istio" },
        serviceAccountName: "web",
        nodeName: "node-a",
        ports: [{ name: "http", containerPort: 8080 }],
      });
      const pending = await added;
      assert.equal(pending.status?.phase, "Pending");
      assert.equal(isReady(pending), false);
      assert.equal(pending.spec?.serviceAccountName, "web");

      const readied = nextEvent(informer, "update", (pod) => pod.metadata?.name === "web-1" && isReady(pod));
      await east.setPodStatus(NS, "web-1", { podIP: "10.1.0.5", hostIP: "192.168.0.10" });
      const running = await readied;
      assert.equal(running.status?.phase, "Running");
      assert.equal(running.status?.podIP, "10.1.0.5");
      assert.deepEqual(running.status?.podIPs?.map((entry: { ip: string }) => entry.ip), ["10.1.0.5"]);
      assert.equal(running.spec?.nodeName, "node-a");

      const unready = nextEvent(informer, "update", (pod) => pod.metadata?.name === "web-1" && !isReady(pod));
      await east.setPodStatus(NS, "web-1", { podIP: "10.1.0.5", ready: false });
      assert.equal((await unready).status?.podIP, "10.1.0.5");

      // Graceful delete: without a kubelet the pod stays Terminating until the harness finishes it.
      const terminating = nextEvent(informer, "update", (pod) => pod.metadata?.name === "web-1" && pod.metadata?.deletionTimestamp !== undefined);
      await east.deletePod(NS, "web-1", { graceful: true });
      await terminating;
      const deleted = nextEvent(informer, "delete", (pod) => pod.metadata?.name === "web-1");
      await east.finishPodDeletion(NS, "web-1");
      await deleted;
      assert.deepEqual(informer.list(NS), []);
      assert.deepEqual(errors, []);
    } finally {
      await informer.stop();
    }
    const node = await east.core.readNode({ name: "node-a" });
    assert.equal(node.metadata?.labels?.["topology.kubernetes.io/zone"], "eu-1");
    assert.equal(node.metadata?.labels?.["topology.istio.io/subzone"], "rack-1");
    assert.deepEqual(node.status?.addresses?.map((a) => ({ ...a })), [{ type: "InternalIP", address: "192.168.0.10" }]);
  });

  it("services get a ClusterIP; EndpointSlices are written as given", async () => {
    await west.createNamespace(NS);
    const service = await west.createService({ namespace: NS, name: "web", selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: "http" }] });
    assert.ok(service.spec?.clusterIP && inServiceCidr(service.spec.clusterIP), `clusterIP ${service.spec?.clusterIP} not in ${SERVICE_CIDR}`);
    assert.equal(service.spec?.ports?.[0].targetPort, "http");
    const headless = await west.createService({ namespace: NS, name: "db", headless: true, selector: { app: "db" }, ports: [{ port: 5432 }] });
    assert.equal(headless.spec?.clusterIP, "None");
    await west.createEndpointSlice({
      namespace: NS,
      name: "web-abc",
      service: "web",
      ports: [{ name: "http", port: 8080 }],
      endpoints: [{ addresses: ["10.2.0.7"], nodeName: "node-w", zone: "us-1", pod: { name: "web-x" } }, { addresses: ["10.2.0.8"], ready: false, terminating: true }],
    });
    const slices = await west.discovery.listNamespacedEndpointSlice({ namespace: NS, labelSelector: "kubernetes.io/service-name=web" });
    assert.equal(slices.items.length, 1);
    const [ready, leaving] = slices.items[0].endpoints;
    assert.deepEqual({ ...ready.conditions }, { ready: true, serving: true, terminating: false });
    assert.equal(ready.targetRef?.name, "web-x");
    assert.deepEqual({ ...leaving.conditions }, { ready: false, serving: false, terminating: true });
  });

  it("with kube-controller-manager, the real endpointslice controller follows pod readiness", async () => {
    const ns = "slices";
    await east.createNamespace(ns);
    await east.createService({ namespace: ns, name: "api", selector: { app: "api" }, ports: [{ name: "grpc", port: 90, targetPort: "grpc" }] });
    await east.createPod({ namespace: ns, name: "api-1", labels: { app: "api" }, nodeName: "node-a", ports: [{ name: "grpc", containerPort: 9090 }] });
    await east.setPodStatus(ns, "api-1", { podIP: "10.1.0.9" });
    const endpointOf = async () => {
      const slices = await east.discovery.listNamespacedEndpointSlice({ namespace: ns, labelSelector: "kubernetes.io/service-name=api" });
      const slice = slices.items.find((item) => (item.endpoints ?? []).length > 0);
      return slice ? { port: slice.ports?.[0]?.port, endpoint: slice.endpoints[0] } : undefined;
    };
    const until = async (what: string, accept: (found: Awaited<ReturnType<typeof endpointOf>>) => boolean) => {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const found = await endpointOf();
        if (accept(found)) return found;
        if (Date.now() > deadline) throw new Error(`${what}: last seen ${JSON.stringify(found)}`);
        await new Promise((done) => setTimeout(done, 100));
      }
    };
    const ready = await until("ready endpoint", (found) => found?.endpoint.conditions?.ready === true);
    // The named target port resolved from the pod's container port, as istiod reads it.
    assert.equal(ready?.port, 9090);
    assert.deepEqual(ready?.endpoint.addresses, ["10.1.0.9"]);
    assert.equal(ready?.endpoint.targetRef?.name, "api-1");
    assert.equal(ready?.endpoint.nodeName, "node-a");
    await east.setPodStatus(ns, "api-1", { podIP: "10.1.0.9", ready: false });
    await until("unready endpoint", (found) => found?.endpoint.conditions?.ready === false);
    // The namespace controller finishes a namespace deletion (without it, it stays Terminating).
    // A bound pod would block it: its graceful delete waits for a kubelet, so remove it first.
    await east.deletePod(ns, "api-1");
    await east.delete({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await east.core.readNamespace({ name: ns });
      } catch (error) {
        if ((error as { code?: number }).code === 404) break;
        throw error;
      }
      if (Date.now() > deadline) throw new Error(`namespace ${ns} still there after 30 s`);
      await new Promise((done) => setTimeout(done, 200));
    }
  });

  it("installs the upstream Gateway API and Istio CRDs, schemas enforced", async () => {
    const gateway = await west.apply({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "Gateway",
      metadata: { namespace: NS, name: "waypoint", labels: { "istio.io/waypoint-for": "service" } },
      spec: { gatewayClassName: "istio-waypoint", listeners: [{ name: "mesh", port: 15008, protocol: "HBONE" }] },
    });
    assert.equal(gateway.metadata?.name, "waypoint");
    const plugin = await west.apply({
      apiVersion: "extensions.istio.io/v1alpha1",
      kind: "WasmPlugin",
      metadata: { namespace: NS, name: "passthrough-mtls" },
      spec: { url: "file:///etc/wasm/passthrough_mtls.wasm", type: "NETWORK", pluginConfig: { version: 1 } },
    });
    assert.equal(plugin.metadata?.name, "passthrough-mtls");
    // The Gateway CRD's own schema refuses a listener without a port.
    await assert.rejects(
      west.apply({
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "Gateway",
        metadata: { namespace: NS, name: "broken" },
        spec: { gatewayClassName: "istio-waypoint", listeners: [{ name: "mesh", protocol: "HBONE" }] },
      }),
      (error: { code?: number; body?: unknown }) => error.code === 422 && String(error.body).includes("port"),
    );
  });

  it("enforces RBAC for a ServiceAccount token", async () => {
    const reader = await east.serviceAccountKubeconfig("feed-system", "feed");
    const asReader = reader.kubeConfig.makeApiClient(CoreV1Api);
    await assert.rejects(asReader.listPodForAllNamespaces(), (error: { code?: number }) => error.code === 403);
    await east.apply({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "pod-reader" },
      rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["list", "watch"] }],
    });
    await east.apply({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "feed-pod-reader" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "pod-reader" },
      subjects: [{ kind: "ServiceAccount", namespace: "feed-system", name: "feed" }],
    });
    // RBAC reads its informer cache: the binding takes effect within moments.
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await asReader.listPodForAllNamespaces();
        break;
      } catch (error) {
        if ((error as { code?: number }).code !== 403 || Date.now() > deadline) throw error;
        await new Promise((done) => setTimeout(done, 100));
      }
    }
    await assert.rejects(asReader.listServiceForAllNamespaces(), (error: { code?: number }) => error.code === 403);
    // The informer's watch authenticates with the same bearer token.
    const informer = makeInformer<V1Pod>(reader.kubeConfig, "/api/v1/pods", () => asReader.listPodForAllNamespaces());
    await informer.start();
    try {
      const seen = nextEvent(informer, "add", (pod) => pod.metadata?.name === "watched");
      await east.createPod({ namespace: "feed-system", name: "watched" });
      assert.equal((await seen).metadata?.namespace, "feed-system");
    } finally {
      await informer.stop();
    }
  });

  it("stop() ends both control planes", async () => {
    const ports = [east, west].map((cluster) => Number(new URL(cluster.server).port));
    await Promise.all([east.stop(), west.stop()]);
    for (const port of ports) assert.equal(await portOpen(port), false, `port ${port} still open after stop()`);
  });
});

// The file source computes what the API-server watch computes: one set of objects (one YAML
// text: namespaces with network and waypoint labels, a node's locality, pods with and without
// sidecar labels, ready and not, a waypoint Gateway and its class, services with a named target
// port, a headless one, traffic distribution, EndpointSlices with a not-ready endpoint) given to
// a real kube-apiserver and written to a file, read by two feeds with the same cluster id: the
// published snapshots are equal. Then the same changes both ways (a pod turns ready, a pod is
// removed, a label moves a pod to the waypoint): equal again.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from "@kubernetes/client-node";
import { startKubeCluster, HARNESS_FIELD_MANAGER, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT } from "../support/paths.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";

const CONTAINERS = `  containers:
    - name: app
      image: registry.invalid/app:test`;

const pod = (ns: string, name: string, o: { ip: string; sa: string; labels: string; ready?: boolean; node?: string }) => `apiVersion: v1
kind: Pod
metadata:
  namespace: ${ns}
  name: ${name}
  labels: ${o.labels}
spec:
  serviceAccountName: ${o.sa}
${o.node ? `  nodeName: ${o.node}\n` : ""}${CONTAINERS}
status:
  phase: Running
  podIP: ${o.ip}
  podIPs: [{ ip: ${o.ip} }]
  conditions:
    - { type: Ready, status: "${o.ready === false ? "False" : "True"}" }
`;

const SIDECAR = `{ app: httpbin, security.istio.io/tlsMode: istio }`;

/** The mesh, as `kubectl get -o yaml` would show it (status included). `changed` is the second state. */
function meshYaml(changed: boolean): string {
  return [
    `apiVersion: v1
kind: Namespace
metadata: { name: istio-system, labels: { topology.istio.io/network: net1 } }
`,
    `apiVersion: v1
kind: Namespace
metadata: { name: apps, labels: { istio.io/use-waypoint: waypoint } }
`,
    `apiVersion: v1
kind: Node
metadata: { name: node-a, labels: { topology.kubernetes.io/region: us-east1, topology.kubernetes.io/zone: us-east1-b } }
`,
    `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: istio-waypoint }
spec: { controllerName: istio.io/mesh-controller }
`,
    `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { namespace: apps, name: waypoint, labels: { istio.io/waypoint-for: all } }
spec:
  gatewayClassName: istio-waypoint
  listeners: [{ name: mesh, port: 15008, protocol: HBONE, allowedRoutes: { namespaces: { from: All } } }]
status:
  addresses: [{ type: Hostname, value: waypoint.apps.svc.cluster.local }]
`,
    pod("default", "httpbin-0", { ip: "10.1.0.11", sa: "httpbin", labels: SIDECAR, node: "node-a" }),
    pod("default", "httpbin-1", { ip: "10.1.0.12", sa: "httpbin", labels: SIDECAR, node: "node-a", ready: changed }),
    ...(changed ? [] : [pod("default", "legacy-0", { ip: "10.1.0.13", sa: "default", labels: "{ app: legacy }" })]),
    pod("default", "outside-0", { ip: "10.1.0.14", sa: "outside", labels: `{ app: outside, security.istio.io/tlsMode: istio${changed ? ", istio.io/use-waypoint: waypoint, istio.io/use-waypoint-namespace: apps" : ""} }` }),
    pod("apps", "reviews-0", { ip: "10.1.0.21", sa: "reviews", labels: "{ app: reviews, security.istio.io/tlsMode: istio, istio-locality: us-west1.us-west1-a }" }),
    pod("apps", "waypoint-0", { ip: "10.1.0.30", sa: "waypoint", labels: "{ gateway.networking.k8s.io/gateway-name: waypoint, security.istio.io/tlsMode: istio }" }),
    `apiVersion: v1
kind: Service
metadata: { namespace: default, name: httpbin, annotations: { alpha.istio.io/kubernetes-serviceaccounts: extra } }
spec:
  clusterIP: 10.96.1.10
  selector: { app: httpbin }
  ports: [{ name: http, port: 80, targetPort: http }]
`,
    `apiVersion: v1
kind: Service
metadata: { namespace: default, name: db }
spec:
  clusterIP: None
  ports: [{ name: pg, port: 5432 }]
`,
    `apiVersion: v1
kind: Service
metadata: { namespace: apps, name: reviews }
spec:
  clusterIP: 10.96.1.20
  trafficDistribution: PreferClose
  selector: { app: reviews }
  ports: [{ name: http, port: 9080 }, { name: dns, port: 53, protocol: UDP }]
`,
    `apiVersion: v1
kind: Service
metadata: { namespace: apps, name: waypoint, labels: { gateway.istio.io/managed: istio.io-mesh-controller } }
spec:
  clusterIP: 10.96.1.30
  selector: { gateway.networking.k8s.io/gateway-name: waypoint }
  ports: [{ name: mesh, port: 15008 }]
`,
    `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: default, name: httpbin-a, labels: { kubernetes.io/service-name: httpbin } }
addressType: IPv4
ports: [{ name: http, port: 8080, protocol: TCP }]
endpoints:
  - { addresses: [10.1.0.11], conditions: { ready: true }, targetRef: { kind: Pod, namespace: default, name: httpbin-0 } }
  - { addresses: [10.1.0.12], conditions: { ready: ${changed} }, targetRef: { kind: Pod, namespace: default, name: httpbin-1 } }
`,
    `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: apps, name: reviews-a, labels: { kubernetes.io/service-name: reviews } }
addressType: IPv4
ports: [{ name: http, port: 9080, protocol: TCP }]
endpoints:
  - { addresses: [10.1.0.21], conditions: { ready: true }, targetRef: { kind: Pod, namespace: apps, name: reviews-0 } }
`,
    `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { namespace: apps, name: waypoint-a, labels: { kubernetes.io/service-name: waypoint } }
addressType: IPv4
ports: [{ name: mesh, port: 15008, protocol: TCP }]
endpoints:
  - { addresses: [10.1.0.30], conditions: { ready: true }, targetRef: { kind: Pod, namespace: apps, name: waypoint-0 } }
`,
  ].join("---\n");
}

const objectsOf = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as KubernetesObject & { status?: unknown });

/** Writes the objects as the API server's clients would: the object, then its status through the status subresource. */
async function applyToApiServer(cluster: KubeCluster, text: string): Promise<void> {
  for (const o of objectsOf(text)) {
    const { status, ...rest } = o;
    await cluster.apply(rest);
    if (!status) continue;
    const { namespace = "", name = "" } = o.metadata ?? {};
    const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
    if (o.kind === "Pod") await cluster.core.patchNamespacedPodStatus({ namespace, name, body: { status }, fieldManager: HARNESS_FIELD_MANAGER }, merge);
    else if (o.kind === "Gateway") await cluster.custom.patchNamespacedCustomObjectStatus({ group: "gateway.networking.k8s.io", version: "v1", namespace, plural: "gateways", name, body: { status } }, merge);
    else throw new Error(`test: no status writer for ${o.kind}`);
  }
}

interface Snapshot {
  workloads: Array<{ uid: string; waypoint?: unknown; healthy?: boolean }>;
  services: Array<{ hostname: string }>;
}

/**
 * The API server's own `kubernetes` Service (and its EndpointSlice's endpoint, a workload of its
 * own) exists in every cluster and in no file: left out of the comparison, after checking it is there.
 */
function withoutApiServerService(s: Snapshot): Snapshot {
  assert.ok(s.services.some((v) => v.hostname === "kubernetes.default.svc.cluster.local"), "the API server's kubernetes Service is in the API-server feed's snapshot");
  return {
    ...s,
    services: s.services.filter((v) => v.hostname !== "kubernetes.default.svc.cluster.local"),
    workloads: s.workloads.filter((w) => !w.uid.startsWith("cluster1/discovery.k8s.io/EndpointSlice/default/kubernetes/")),
  };
}

describe("feed: the file source and the API-server watch publish the same model for the same objects", () => {
  let cluster: KubeCluster;
  let dir: string;
  let fromApi: FeedRun;
  let fromFiles: FeedRun;
  const snapshot = async (run: FeedRun) => JSON.parse(await (await fetch(`${run.base}/snapshot/mesh`)).text()) as Snapshot;

  before(async () => {
    cluster = await startKubeCluster({ name: "feed-files" });
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "feed-vs-"));
    await applyToApiServer(cluster, meshYaml(false));
    writeFileSync(join(dir, "mesh.yaml"), meshYaml(false));
    // The cluster is on net1 (istio-system's label): net1's view has every workload.
    const targets = [{ name: "mesh", filter: "passthrough_mtls" as const, network: "net1" }];
    fromApi = await runFeed([{ id: "cluster1", cluster }], targets);
    fromFiles = await runFeed([{ id: "cluster1", files: dir }], targets);
  });

  after(async () => {
    await fromApi?.feed.stop();
    await fromFiles?.feed.stop();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Waits until both feeds publish the same model (each feed debounces on its own), then compares them field by field. */
  async function assertSameModel(): Promise<Snapshot> {
    await eventually("the same model from both sources", 20_000, async () =>
      JSON.stringify(withoutApiServerService(await snapshot(fromApi))) === JSON.stringify(await snapshot(fromFiles)) ? true : undefined,
    ).catch(() => undefined); // the assertion below shows the difference
    const files = await snapshot(fromFiles);
    assert.deepEqual(withoutApiServerService(await snapshot(fromApi)), files);
    return files;
  }

  it("the initial objects: equal snapshots, and the model has what the objects say (so equal is not empty)", async () => {
    const model = await assertSameModel();
    assert.deepEqual(model.workloads.map((w) => w.uid).sort(), [
      "cluster1//Pod/apps/reviews-0",
      "cluster1//Pod/apps/waypoint-0",
      "cluster1//Pod/default/httpbin-0",
      "cluster1//Pod/default/httpbin-1",
      "cluster1//Pod/default/legacy-0",
      "cluster1//Pod/default/outside-0",
    ]);
    assert.deepEqual(model.services.map((s) => s.hostname).sort(), ["db.default.svc.cluster.local", "httpbin.default.svc.cluster.local", "reviews.apps.svc.cluster.local", "waypoint.apps.svc.cluster.local"]);
    const reviews = model.workloads.find((w) => w.uid === "cluster1//Pod/apps/reviews-0");
    assert.ok(reviews?.waypoint, "reviews-0 uses the apps waypoint");
    assert.equal(model.workloads.find((w) => w.uid === "cluster1//Pod/default/httpbin-1")?.healthy, false);
  });

  it("the same changes both ways (a pod ready, a pod removed, a pod sent to the waypoint): equal again", async () => {
    await applyToApiServer(cluster, meshYaml(true));
    await cluster.deletePod("default", "legacy-0");
    writeFileSync(join(dir, ".mesh.yaml.tmp"), meshYaml(true));
    renameSync(join(dir, ".mesh.yaml.tmp"), join(dir, "mesh.yaml"));
    await eventually("the file's change read", 10_000, async () => ((await snapshot(fromFiles)).workloads.some((w) => w.uid.endsWith("/legacy-0")) ? undefined : true));
    const model = await assertSameModel();
    assert.equal(model.workloads.find((w) => w.uid === "cluster1//Pod/default/httpbin-1")?.healthy, undefined, "httpbin-1 ready now (healthy is the default)");
    assert.ok(model.workloads.find((w) => w.uid === "cluster1//Pod/default/outside-0")?.waypoint, "outside-0 uses the apps waypoint now");
  });
});

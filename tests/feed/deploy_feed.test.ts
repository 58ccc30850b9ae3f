// The deployment manifests (feed/deploy/) against a real kube-apiserver: every object passes
// the server's own validation (server-side dry run; the WasmPlugin with Istio's CRD schema; the
// NetworkPolicy), the ClusterRole lets the feed list and watch exactly what it reads and
// nothing else, the Role lets it write only the WasmPlugins its configuration names, and the
// WasmPlugin delivery applies the snapshot as spec.pluginConfig without taking over a field an
// operator set (a sha256 pin, another url), and refuses, loudly and before sending, an object
// past etcd's request limit, which the real etcd indeed refuses. The NetworkPolicy is checked
// by the API server's validation and against the Deployment it guards; no network plugin runs
// here to enforce it.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { AuthorizationV1Api, KubernetesObjectApi, PatchStrategy, type KubernetesObject } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { parseFeedConfig } from "../../feed/src/config.js";
import { ETCD_MAX_REQUEST_BYTES, MAX_OBJECT_BYTES, TooLargeError, WasmPluginDelivery, wasmPluginObject } from "../../feed/src/deliver/wasmplugin.js";
import { loadKubeConfig } from "../../feed/src/watch.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT } from "../support/paths.js";
import { feedKubeconfig } from "./harness.js";

const DEPLOY = join(REPO_ROOT, "feed/deploy");

function manifests(): KubernetesObject[] {
  return readdirSync(DEPLOY)
    .filter((f) => f.endsWith(".yaml"))
    .sort((a, b) => (a === "namespace.yaml" ? -1 : b === "namespace.yaml" ? 1 : a.localeCompare(b)))
    .flatMap((f) => parseAllDocuments(readFileSync(join(DEPLOY, f), "utf8")).map((d) => d.toJS() as KubernetesObject));
}

describe("feed: deployment manifests, RBAC and WasmPlugin delivery on a real API server", () => {
  let cluster: KubeCluster;
  let feedConfig: string;

  before(async () => {
    cluster = await startKubeCluster({ name: "feed-deploy" });
    feedConfig = await feedKubeconfig(cluster);
  });

  after(async () => {
    await cluster?.stop();
  });

  it("every manifest passes the API server's validation (server-side dry run)", async () => {
    const api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
    const objects = manifests();
    assert.deepEqual(objects.map((o) => o.kind).sort(), ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Namespace", "NetworkPolicy", "PodDisruptionBudget", "Role", "Role", "Role", "RoleBinding", "RoleBinding", "RoleBinding", "Service", "ServiceAccount"]);
    for (const o of objects) {
      const stored = await api.patch(o, undefined, "All", "feed-test", true, PatchStrategy.ServerSideApply);
      assert.equal(stored.kind, o.kind);
    }
  });

  it("the shipped ConfigMap's feed.yaml is a valid feed configuration", () => {
    const cm = manifests().find((o) => o.kind === "ConfigMap") as KubernetesObject & { data: Record<string, string> };
    const config = parseFeedConfig(cm.data["feed.yaml"], "/etc/mesh-feed/feed.yaml");
    assert.equal(config.clusters[0].kubeconfig, "in-cluster");
    assert.equal(config.targets[0].wasmPlugin?.namespace, "istio-system");
  });

  it("the channel is the only port the pod and the Service expose, its files come from the mounted Secret, and the probes ask the loopback operator port", () => {
    const objects = manifests() as any[];
    const config = parseFeedConfig(objects.find((o) => o.kind === "ConfigMap").data["feed.yaml"], "/etc/mesh-feed/feed.yaml");
    assert.ok(config.channel && config.operator);
    assert.equal(config.operator.address, "127.0.0.1", "the operator port (every snapshot) stays inside the pod");
    assert.ok(config.targets.every((t) => t.readers.length > 0), "every target names its readers");
    const pod = objects.find((o) => o.kind === "Deployment").spec.template.spec;
    const container = pod.containers[0];
    assert.deepEqual(container.ports, [{ name: "https-channel", containerPort: config.channel.port }]);
    const service = objects.find((o) => o.kind === "Service");
    assert.deepEqual(service.spec.ports.map((p: any) => p.targetPort), ["https-channel"]);
    const tlsMount = container.volumeMounts.find((m: any) => m.name === "tls");
    const tlsVolume = pod.volumes.find((v: any) => v.name === "tls");
    assert.ok(tlsVolume.secret.secretName);
    for (const f of [config.channel.certFile, config.channel.keyFile, config.channel.caFile]) assert.ok(f.startsWith(`${tlsMount.mountPath}/`), f);
    for (const probe of [container.readinessProbe, container.livenessProbe]) {
      assert.ok(probe.exec.command.join(" ").includes(`http://127.0.0.1:${config.health?.port}/`), "the probe asks the health worker on the loopback");
    }
  });

  it("least privilege: the feed's ServiceAccount may list and watch what it reads, and nothing more", async () => {
    const authz = cluster.kubeConfig.makeApiClient(AuthorizationV1Api);
    const can = async (verb: string, group: string, resource: string, namespace?: string, name?: string) =>
      (await authz.createSubjectAccessReview({ body: { spec: { user: "system:serviceaccount:mesh-feed:mesh-feed", groups: ["system:serviceaccounts", "system:serviceaccounts:mesh-feed", "system:authenticated"], resourceAttributes: { verb, group, resource, namespace, name } } } })).status?.allowed ?? false;
    const read = [["", "pods"], ["", "services"], ["", "namespaces"], ["", "nodes"], ["discovery.k8s.io", "endpointslices"], ["gateway.networking.k8s.io", "gateways"], ["gateway.networking.k8s.io", "gatewayclasses"]];
    for (const [group, resource] of read) {
      for (const verb of ["list", "watch"]) assert.equal(await can(verb, group, resource), true, `${verb} ${resource}`);
      for (const verb of ["get", "create", "update", "patch", "delete"]) assert.equal(await can(verb, group, resource), false, `${verb} ${resource} must be refused`);
    }
    for (const [group, resource] of [["", "secrets"], ["", "configmaps"], ["networking.istio.io", "envoyfilters"]]) assert.equal(await can("list", group, resource), false, `list ${resource}`);
    // Istio's remote secrets: list and watch in the feed's own namespace only; no get, nothing elsewhere.
    for (const verb of ["list", "watch"]) assert.equal(await can(verb, "", "secrets", "mesh-feed"), true, `${verb} secrets in mesh-feed`);
    for (const verb of ["get", "create", "update", "patch", "delete"]) assert.equal(await can(verb, "", "secrets", "mesh-feed"), false, `${verb} secrets in mesh-feed must be refused`);
    for (const ns of ["istio-system", "default"]) assert.equal(await can("list", "", "secrets", ns), false, `list secrets in ${ns} must be refused`);
    // WasmPlugins: get, patch and create (server-side apply's create names the object) of the
    // configured names only; no plain create, no update, no delete, nothing elsewhere.
    const cm = manifests().find((o) => o.kind === "ConfigMap") as KubernetesObject & { data: Record<string, string> };
    const names = parseFeedConfig(cm.data["feed.yaml"], "/etc/mesh-feed/feed.yaml").targets.flatMap((t) => (t.wasmPlugin ? [t.wasmPlugin.name] : []));
    const role = manifests().find((o) => o.kind === "Role" && o.metadata?.name === "mesh-feed-wasmplugins") as KubernetesObject & { rules: Array<{ resourceNames?: string[] }> };
    assert.deepEqual(role.rules.flatMap((r) => r.resourceNames ?? []).sort(), names.sort(), "resourceNames are the configured WasmPlugins");
    for (const name of names) {
      for (const verb of ["get", "patch", "create"]) assert.equal(await can(verb, "extensions.istio.io", "wasmplugins", "istio-system", name), true, `${verb} ${name}`);
      for (const verb of ["update", "delete"]) assert.equal(await can(verb, "extensions.istio.io", "wasmplugins", "istio-system", name), false, `${verb} ${name} must be refused`);
      assert.equal(await can("patch", "extensions.istio.io", "wasmplugins", "default", name), false);
    }
    for (const verb of ["patch", "create"]) assert.equal(await can(verb, "extensions.istio.io", "wasmplugins", "istio-system", "someone-elses"), false, `${verb} another WasmPlugin`);
    assert.equal(await can("create", "extensions.istio.io", "wasmplugins", "istio-system"), false, "a create without a name (POST)");
    // The writers' Lease: its own by name (read, renew), a create in its namespace only, nothing else.
    for (const verb of ["get", "update"]) assert.equal(await can(verb, "coordination.k8s.io", "leases", "mesh-feed", "mesh-feed"), true, `${verb} its Lease`);
    assert.equal(await can("create", "coordination.k8s.io", "leases", "mesh-feed"), true, "create its Lease");
    for (const verb of ["get", "update"]) assert.equal(await can(verb, "coordination.k8s.io", "leases", "mesh-feed", "someone-elses"), false, `${verb} another Lease`);
    for (const verb of ["delete", "patch", "list"]) assert.equal(await can(verb, "coordination.k8s.io", "leases", "mesh-feed", "mesh-feed"), false, `${verb} its Lease must be refused`);
    for (const verb of ["create", "update"]) assert.equal(await can(verb, "coordination.k8s.io", "leases", "kube-system", "mesh-feed"), false, `${verb} a Lease elsewhere`);
  });

  it("the NetworkPolicy guards the feed's pods: ingress to its port from sidecars and Prometheus only", () => {
    const all = manifests();
    const np = all.find((o) => o.kind === "NetworkPolicy") as KubernetesObject & { spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: Array<{ from: Array<Record<string, { matchLabels?: Record<string, string> }>>; ports: Array<{ port: string | number }> }> } };
    const deployment = all.find((o) => o.kind === "Deployment") as KubernetesObject & { spec: { template: { metadata: { labels: Record<string, string> }; spec: { containers: Array<{ ports: Array<{ name: string; containerPort: number }> }> } } } };
    const podLabels = deployment.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(np.spec.podSelector.matchLabels)) assert.equal(podLabels[k], v, `the policy selects the feed's pods (${k})`);
    assert.deepEqual(np.spec.policyTypes, ["Ingress"]);
    const portNames = deployment.spec.template.spec.containers.flatMap((c) => c.ports.map((p) => p.name));
    for (const rule of np.spec.ingress) {
      assert.ok(rule.ports.length > 0 && rule.ports.every((p) => portNames.includes(String(p.port))), "only the feed's own port");
      assert.ok(rule.from.length > 0 && rule.from.every((peer) => Object.keys(peer.podSelector?.matchLabels ?? {}).length > 0), "every peer is selected by pod labels (never all pods)");
    }
    const peers = np.spec.ingress.flatMap((r) => r.from.map((peer) => peer.podSelector?.matchLabels));
    // Prometheus is admitted only where the operator port is exposed for scraping (the chart's metrics.scrape).
    const scraped = portNames.includes("http-operator");
    assert.deepEqual(peers, [{ "security.istio.io/tlsMode": "istio" }, ...(scraped ? [{ "app.kubernetes.io/name": "prometheus" }] : [])]);
  });

  it("applies a target's snapshot as a WasmPlugin (Istio's schema) with the feed's own RBAC", async () => {
    const config = parseFeedConfig(
      JSON.stringify({
        clusters: [{ id: "c1", kubeconfig: feedConfig }],
        targets: [{ name: "pm", filter: "passthrough_mtls", wasmPlugin: { cluster: "c1", namespace: "istio-system", name: "passthrough-mtls", spec: { url: "oci://registry.example/pm:1", type: "NETWORK", phase: "AUTHN", failStrategy: "FAIL_CLOSE" } } }],
      }),
      "/tmp/feed.json",
    );
    const delivery = new WasmPluginDelivery(new Map([["c1", loadKubeConfig(feedConfig)]]));
    const snapshot = { workloads: [{ uid: "u", addresses: ["10.0.0.1"], tlsMode: "istio", identity: "spiffe://cluster.local/ns/a/sa/b" }], services: [] };
    await delivery.apply(config.targets[0], "1-1", snapshot);
    const stored = (await cluster.objects.read({ apiVersion: "extensions.istio.io/v1alpha1", kind: "WasmPlugin", metadata: { namespace: "istio-system", name: "passthrough-mtls" } })) as KubernetesObject & { spec: Record<string, unknown> };
    assert.deepEqual(stored.spec.pluginConfig, snapshot);
    assert.equal(stored.spec.type, "NETWORK");
    assert.equal(stored.metadata?.annotations?.["mesh-feed/version"], "1-1");
    // An update replaces the configuration (server-side apply by the same field manager).
    await delivery.apply(config.targets[0], "1-2", { workloads: [], services: [] });
    const updated = (await cluster.objects.read({ apiVersion: "extensions.istio.io/v1alpha1", kind: "WasmPlugin", metadata: { namespace: "istio-system", name: "passthrough-mtls" } })) as KubernetesObject & { spec: Record<string, unknown> };
    assert.deepEqual(updated.spec.pluginConfig, { workloads: [], services: [] });
  });

  it("an operator's sha256 pin and url survive the feed's apply; the feed's own fields move; another WasmPlugin cannot be created with the feed's RBAC", async () => {
    const wp = { apiVersion: "extensions.istio.io/v1alpha1", kind: "WasmPlugin", metadata: { namespace: "istio-system", name: "passthrough-mtls" } };
    const sha = "a".repeat(64);
    // The operator pins the module (kubectl apply --server-side, their own field manager).
    await cluster.objects.patch({ ...wp, spec: { sha256: sha, url: "oci://registry.example/pm:2" } } as KubernetesObject, undefined, undefined, "operator", true, PatchStrategy.ServerSideApply);
    const config = parseFeedConfig(
      JSON.stringify({
        clusters: [{ id: "c1", kubeconfig: feedConfig }],
        targets: [{ name: "pm", filter: "passthrough_mtls", wasmPlugin: { cluster: "c1", namespace: "istio-system", name: "passthrough-mtls", spec: { url: "oci://registry.example/pm:1", type: "NETWORK", phase: "AUTHN" } } }],
      }),
      "/tmp/feed.json",
    );
    // A new feed process (its configured spec is applied once per process), with the feed's RBAC.
    const said: string[] = [];
    const delivery = new WasmPluginDelivery(new Map([["c1", loadKubeConfig(feedConfig)]]), undefined, (m) => said.push(m));
    const snapshot = { workloads: [{ uid: "v", addresses: ["10.0.0.2"] }], services: [] };
    await delivery.apply(config.targets[0], "2-1", snapshot);
    const stored = (await cluster.objects.read(wp as KubernetesObject)) as KubernetesObject & { spec: Record<string, unknown> };
    assert.equal(stored.spec.sha256, sha, "the operator's pin stays");
    assert.equal(stored.spec.url, "oci://registry.example/pm:2", "the operator's url stays");
    assert.deepEqual(stored.spec.pluginConfig, snapshot);
    assert.equal(stored.metadata?.annotations?.["mesh-feed/version"], "2-1");
    assert.equal(said.length, 1, said.join("\n"));
    assert.match(said[0], /target pm: WasmPlugin istio-system\/passthrough-mtls: a field of the configured spec was set to another value by someone else; theirs is kept \(.*url/);
    const owners = (stored.metadata?.managedFields ?? []).filter((f) => JSON.stringify(f.fieldsV1 ?? {}).includes("f:sha256")).map((f) => f.manager);
    assert.deepEqual(owners, ["operator"], "the feed owns no sha256");
    // Later versions move only the feed's fields, with no further line.
    await delivery.apply(config.targets[0], "2-2", { workloads: [], services: [] });
    const again = (await cluster.objects.read(wp as KubernetesObject)) as KubernetesObject & { spec: Record<string, unknown> };
    assert.equal(again.spec.sha256, sha);
    assert.deepEqual(again.spec.pluginConfig, { workloads: [], services: [] });
    assert.equal(said.length, 1);
    // A WasmPlugin the configuration does not name: refused by the API server (RBAC).
    const other = { ...config.targets[0], wasmPlugin: { ...config.targets[0].wasmPlugin!, name: "someone-elses" } };
    await assert.rejects(new WasmPluginDelivery(new Map([["c1", loadKubeConfig(feedConfig)]])).apply(other, "2-1", snapshot), (e: unknown) => (e as { code?: number }).code === 403);
  });

  it(`refuses, before sending, a WasmPlugin over ${MAX_OBJECT_BYTES} bytes; etcd itself refuses one over ${ETCD_MAX_REQUEST_BYTES}`, async () => {
    const config = parseFeedConfig(
      JSON.stringify({ clusters: [{ id: "c1", kubeconfig: feedConfig }], targets: [{ name: "pm", filter: "passthrough_mtls", wasmPlugin: { cluster: "c1", namespace: "istio-system", name: "passthrough-mtls", spec: { url: "oci://registry.example/pm:1", type: "NETWORK" } } }] }),
      "/tmp/feed.json",
    );
    const workloads = Array.from({ length: 11000 }, (_, i) => ({ uid: `cluster1//Pod/default/pod-${i}`, addresses: [`10.1.${i >> 8}.${i & 255}`], identity: `spiffe://cluster.local/ns/default/sa/sa-${i}`, tlsMode: "istio" }));
    const big = { workloads, services: [] };
    const bytes = Buffer.byteLength(JSON.stringify(wasmPluginObject(config.targets[0], "1-1", big)));
    assert.ok(bytes > ETCD_MAX_REQUEST_BYTES, `the test object is ${bytes} bytes`);
    const delivery = new WasmPluginDelivery(new Map([["c1", loadKubeConfig(feedConfig)]]));
    await assert.rejects(delivery.apply(config.targets[0], "1-1", big), (e: unknown) => e instanceof TooLargeError && /over 1507328 \(etcd's request limit 1572864 less 64 KiB\)/.test((e as Error).message));
    // The same object sent anyway (admin credentials, bypassing the feed's check): etcd refuses it.
    await assert.rejects(cluster.apply(wasmPluginObject(config.targets[0], "1-1", big)), (e: unknown) => /request is too large|too large/i.test(String((e as { body?: unknown }).body ?? (e as Error).message)));
    // And one just under the feed's limit goes through: the limit is not needlessly low.
    const fits = { workloads: workloads.slice(0, Math.floor((workloads.length * MAX_OBJECT_BYTES) / bytes) - 50), services: [] };
    await delivery.apply(config.targets[0], "1-2", fits);
  });
});

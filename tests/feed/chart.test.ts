// The feed's Helm chart (charts/mesh-feed) with the real Helm (v4, built by scripts/helm-setup.sh)
// and a real kube-apiserver: `helm lint`; feed/deploy/ is exactly what scripts/render-feed-deploy.sh
// renders from it (never a second copy); the chart's version is the package's; the feed's
// WasmPlugin target is placed as istio/passthrough_mtls/wasmplugin.yaml places it; and the
// objects `helm template` renders for the defaults and for an operator's values (replicas,
// PDB, metrics scraping, a digest) pass the API server's validation (server-side dry run), with
// the feed's own parser taking the rendered configuration.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { KubernetesObjectApi, PatchStrategy, type KubernetesObject } from "@kubernetes/client-node";
import { parse, parseAllDocuments, stringify } from "yaml";
import { DEFAULT_OPERATOR_LIMITS, parseFeedConfig } from "../../feed/src/config.js";
import { DEFAULT_CRDS, startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT, scratchDir } from "../support/paths.js";

const CHART = join(REPO_ROOT, "charts/mesh-feed");
const DIGEST = `sha256:${"ab".repeat(32)}`;

function helm(...args: string[]): string {
  const path = execFileSync("bash", ["scripts/helm-setup.sh"], { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], timeout: 1_800_000 }).trim();
  return execFileSync(path, args, { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function template(values: object): KubernetesObject[] {
  const file = join(scratchDir("chart-values-"), "values.yaml");
  writeFileSync(file, stringify(values));
  return parseAllDocuments(helm("template", "mesh-feed", CHART, "--namespace", "mesh-feed", "--values", file)).map((d) => d.toJS()).filter(Boolean);
}

const find = (objects: KubernetesObject[], kind: string) => objects.find((o) => o.kind === kind) as any;
const feedConfigOf = (objects: KubernetesObject[]) => parseFeedConfig(find(objects, "ConfigMap").data["feed.yaml"], "/etc/mesh-feed/feed.yaml");

describe("the feed's Helm chart", { concurrency: false }, () => {
  let cluster: KubeCluster;

  before(async () => {
    helm("version");
    cluster = await startKubeCluster({ name: "feed-chart", crds: [...DEFAULT_CRDS] });
    await cluster.createNamespace("istio-system");
  });

  after(async () => {
    await cluster?.stop();
  });

  it("passes helm lint, and its version is the package's", () => {
    assert.match(helm("lint", CHART, "--strict"), /1 chart\(s\) linted, 0 chart\(s\) failed/);
    const chart = parse(readFileSync(join(CHART, "Chart.yaml"), "utf8"));
    const version = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version;
    assert.equal(chart.version, version);
    assert.equal(chart.appVersion, version);
  });

  it("feed/deploy/ is what scripts/render-feed-deploy.sh renders from the chart, file for file", () => {
    const out = scratchDir("feed-deploy-");
    execFileSync("bash", ["scripts/render-feed-deploy.sh", out], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"] });
    const committed = readdirSync(join(REPO_ROOT, "feed/deploy")).filter((f) => f.endsWith(".yaml")).sort();
    assert.deepEqual(readdirSync(out).sort(), committed);
    for (const f of committed) assert.equal(readFileSync(join(REPO_ROOT, "feed/deploy", f), "utf8"), readFileSync(join(out, f), "utf8"), `feed/deploy/${f} differs from the chart: run scripts/render-feed-deploy.sh`);
  });

  it("the feed's WasmPlugin target is placed as istio/passthrough_mtls/wasmplugin.yaml places it", () => {
    const shipped = parseAllDocuments(readFileSync(join(REPO_ROOT, "istio/passthrough_mtls/wasmplugin.yaml"), "utf8")).map((d) => d.toJS()).find((o) => o?.kind === "WasmPlugin");
    const { pluginConfig: _, ...placement } = shipped.spec;
    const target = parse(readFileSync(join(CHART, "values-plain-manifests.yaml"), "utf8")).config.targets.find((t: any) => t.wasmPlugin);
    assert.deepEqual(target.wasmPlugin.spec, placement);
    assert.deepEqual([target.wasmPlugin.namespace, target.wasmPlugin.name], [shipped.metadata.namespace, shipped.metadata.name]);
  });

  it("the defaults: two replicas rolled one at a time, spread over nodes, a PDB, the writers' Lease, the channel only, the operator port on the loopback, a NetworkPolicy", () => {
    const objects = template({});
    const deployment = find(objects, "Deployment");
    assert.equal(deployment.spec.replicas, 2);
    assert.deepEqual(deployment.spec.strategy, { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    const spread = deployment.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm;
    assert.equal(spread.topologyKey, "kubernetes.io/hostname");
    assert.deepEqual(spread.labelSelector.matchLabels, deployment.spec.selector.matchLabels);
    assert.deepEqual(find(objects, "PodDisruptionBudget").spec, { minAvailable: 1, selector: { matchLabels: deployment.spec.selector.matchLabels } });
    // Each replica names itself in the Lease by its pod name; the Lease is the release's, in its namespace.
    // Node runs with the heap cap, young generation and jemalloc settings the memory figures were measured with (values `node`).
    assert.deepEqual(deployment.spec.template.spec.containers[0].env, [
      { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
      { name: "NODE_OPTIONS", value: "--max-old-space-size=768 --max-semi-space-size=2" },
      { name: "MALLOC_CONF", value: "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0" },
    ]);
    assert.deepEqual(deployment.spec.template.spec.containers[0].resources, { requests: { cpu: "200m", memory: "512Mi" }, limits: { memory: "1280Mi" } });
    const le = feedConfigOf(objects).leaderElection;
    assert.deepEqual(
      { ...le, identity: undefined },
      { cluster: "cluster1", namespace: "mesh-feed", name: "mesh-feed", identity: undefined, leaseDurationMs: 30_000, renewDeadlineMs: 15_000, retryPeriodMs: 7_500 },
    );
    const leaseRole = objects.find((o) => o.kind === "Role" && o.metadata?.name === "mesh-feed-lease") as any;
    assert.deepEqual(leaseRole.rules, [
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "update"], resourceNames: ["mesh-feed"] },
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
    ]);
    assert.equal(deployment.spec.template.spec.containers[0].image, "mesh-feed:0.1.0");
    assert.deepEqual(deployment.spec.template.spec.containers[0].ports.map((p: any) => p.name), ["https-channel"]);
    assert.ok(find(objects, "NetworkPolicy"));
    const config = feedConfigOf(objects);
    assert.deepEqual(config.operator, { address: "127.0.0.1", port: 9090, limits: DEFAULT_OPERATOR_LIMITS });
    assert.equal(config.channel?.port, 9443);
    // No target writes a WasmPlugin by default: no Role for it. One Role reads the remote
    // secrets of the release namespace (list/watch Secrets there, nothing else); the other is the Lease's.
    const roles = objects.filter((o) => o.kind === "Role");
    assert.deepEqual(roles.map((o: any) => o.metadata.name).sort(), ["mesh-feed-lease", "mesh-feed-remote-secrets"]);
    const secrets = roles.find((o: any) => o.metadata.name === "mesh-feed-remote-secrets") as any;
    assert.deepEqual([secrets.metadata.namespace, secrets.rules], ["mesh-feed", [{ apiGroups: [""], resources: ["secrets"], verbs: ["list", "watch"] }]]);
    assert.deepEqual(config.remoteSecrets, { cluster: "cluster1", namespace: "mesh-feed" });
  });

  it("one replica without the Lease: Recreate, no PDB, no Lease; several without it are refused", () => {
    const objects = template({ replicas: 1, leaderElection: { enabled: false } });
    const deployment = find(objects, "Deployment");
    assert.deepEqual(deployment.spec.strategy, { type: "Recreate" });
    assert.equal(deployment.spec.template.spec.affinity, undefined);
    assert.equal(find(objects, "PodDisruptionBudget"), undefined);
    assert.equal(feedConfigOf(objects).leaderElection, undefined);
    assert.deepEqual(objects.filter((o) => o.kind === "Role").map((o) => o.metadata?.name), ["mesh-feed-remote-secrets"]);
    // One replica with the Lease: still RollingUpdate (the Lease keeps one writer), no PDB (it would block drains).
    const one = template({ replicas: 1 });
    assert.equal(find(one, "Deployment").spec.strategy.type, "RollingUpdate");
    assert.equal(find(one, "PodDisruptionBudget"), undefined);
    assert.throws(() => template({ replicas: 2, leaderElection: { enabled: false } }), (e: unknown) => /replicas > 1 needs leaderElection.enabled/.test(String((e as { stderr?: string }).stderr)));
  });

  it("an operator's values: replicas, PDB, scraping, a digest, a WasmPlugin target; every object passes the API server's validation", async () => {
    const values = {
      image: { repository: "registry.internal:5000/mesh/mesh-feed", digest: DIGEST },
      replicas: 3,
      podDisruptionBudget: { enabled: true, minAvailable: 2 },
      metrics: { scrape: true },
      createNamespace: true,
      config: parse(readFileSync(join(CHART, "values-plain-manifests.yaml"), "utf8")).config,
    };
    const objects = template(values);
    const deployment = find(objects, "Deployment");
    assert.equal(deployment.spec.replicas, 3);
    assert.equal(deployment.spec.strategy.type, "RollingUpdate");
    assert.ok(deployment.spec.template.spec.affinity.podAntiAffinity);
    assert.equal(deployment.spec.template.spec.containers[0].image, `registry.internal:5000/mesh/mesh-feed@${DIGEST}`);
    assert.equal(deployment.spec.template.metadata.annotations["prometheus.io/scrape"], "true");
    assert.equal(find(objects, "PodDisruptionBudget").spec.minAvailable, 2);
    assert.equal(feedConfigOf(objects).operator?.address, "0.0.0.0");
    const role = objects.find((o) => o.kind === "Role" && o.metadata?.name === "mesh-feed-wasmplugins") as any;
    assert.deepEqual(role.rules, [{ apiGroups: ["extensions.istio.io"], resources: ["wasmplugins"], verbs: ["get", "patch", "create"], resourceNames: ["passthrough-mtls"] }]);
    const np = find(objects, "NetworkPolicy");
    assert.deepEqual(np.spec.ingress.map((r: any) => r.ports[0].port), ["https-channel", "http-operator"]);
    const api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
    // The namespace first (a dry run of it creates nothing, so it is created for real).
    await cluster.createNamespace("mesh-feed");
    for (const o of objects) {
      const stored = await api.patch(o, undefined, "All", "chart-test", true, PatchStrategy.ServerSideApply);
      assert.equal(stored.kind, o.kind);
    }
  });

  it("a value the chart cannot take is refused by helm (values.schema.json), naming it", () => {
    const refused = (values: object, field: RegExp) => assert.throws(() => template(values), (e: unknown) => field.test(String((e as { stderr?: string }).stderr)));
    refused({ replicas: "three" }, /replicas/);
    refused({ leaderElection: { leaseDurationMs: 1500 } }, /leaseDurationMs/);
    refused({ config: { clusters: [{ id: "c", kubeconfig: "in-cluster" }], targets: [], leaderElection: { namespace: "x" } } }, /config/);
    refused({ image: { repository: "r", digest: "sha256:nothex" } }, /digest/);
    refused({ replica: 2 }, /replica/);
    // The allocator's settings go into the container's environment as one MALLOC_CONF string.
    refused({ node: { mallocConf: "background_thread:true; rm -rf /" } }, /mallocConf/);
    refused({ node: { mallocArenas: 2 } }, /mallocArenas/);
    // The chart sets these from its own values; setting them in config would be overwritten.
    refused({ config: { clusters: [{ id: "c", kubeconfig: "in-cluster" }], targets: [], channel: { port: 1 } } }, /config/);
  });
});

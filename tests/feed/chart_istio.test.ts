// The feed's chart with istio.enabled (the feed behind its own sidecar), rendered by the real Helm
// and applied with server-side dry run to a real kube-apiserver holding Istio's CRDs: the pod
// is injected, the channel port is named for HTTP, the feed's own parser takes the rendered
// configuration (identityFrom istio-sidecar, no certificate), the PeerAuthentication is STRICT,
// the AuthorizationPolicy admits exactly the targets' readers on the channel port, and no TLS
// Secret is mounted. What istiod makes of these objects: tests/istio/feed_channel_generation.test.ts.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { KubernetesObjectApi, PatchStrategy, type KubernetesObject } from "@kubernetes/client-node";
import { parseAllDocuments, stringify } from "yaml";
import { parseFeedConfig } from "../../feed/src/config.js";
import { DEFAULT_CRDS, startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT, scratchDir } from "../support/paths.js";

const CHART = join(REPO_ROOT, "charts/mesh-feed");

function template(values: object): any[] {
  const helm = execFileSync("bash", ["scripts/helm-setup.sh"], { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], timeout: 1_800_000 }).trim();
  const file = join(scratchDir("chart-istio-values-"), "values.yaml");
  writeFileSync(file, stringify(values));
  const text = execFileSync(helm, ["template", "mesh-feed", CHART, "--namespace", "mesh-feed", "--values", file], { cwd: REPO_ROOT, encoding: "utf8" });
  return parseAllDocuments(text).map((d) => d.toJS()).filter(Boolean);
}

const find = (objects: any[], kind: string) => objects.find((o) => o.kind === kind);

describe("the feed's chart in an Istio mesh (istio.enabled)", { concurrency: false }, () => {
  let cluster: KubeCluster;
  const targets = [
    { name: "passthrough-mtls", filter: "passthrough_mtls", network: "", readers: ["cluster.local/ns/default/*", "cluster.local/ns/data/sa/postgres"] },
    { name: "waypoint-route", filter: "waypoint_route", network: "", readers: ["cluster.local/ns/default/*"] },
  ];
  let objects: any[];

  before(async () => {
    objects = template({ istio: { enabled: true }, metrics: { scrape: true }, config: { targets } });
    cluster = await startKubeCluster({ name: "feed-chart-istio", crds: [...DEFAULT_CRDS, "peerauthentications.security.istio.io", "authorizationpolicies.security.istio.io"] });
  });

  after(async () => {
    await cluster?.stop();
  });

  it("the pod is injected and starts after its sidecar; the channel port is http-channel; no TLS Secret", () => {
    const deployment = find(objects, "Deployment");
    const pod = deployment.spec.template;
    assert.equal(pod.metadata.labels["sidecar.istio.io/inject"], "true");
    assert.deepEqual(JSON.parse(pod.metadata.annotations["proxy.istio.io/config"]), { holdApplicationUntilProxyStarts: true });
    assert.deepEqual(pod.spec.containers[0].ports[0], { name: "http-channel", containerPort: 9443 });
    assert.deepEqual(pod.spec.volumes.map((v: any) => v.name), ["config"]);
    assert.deepEqual(find(objects, "Service").spec.ports, [{ name: "http-channel", port: 9443, targetPort: "http-channel" }]);
    assert.equal(find(objects, "NetworkPolicy").spec.ingress[0].ports[0].port, "http-channel");
  });

  it("the feed's parser takes the rendered configuration: the channel behind the sidecar, no certificate", () => {
    const config = parseFeedConfig(find(objects, "ConfigMap").data["feed.yaml"], "/etc/mesh-feed/feed.yaml");
    assert.equal(config.channel?.identityFrom, "istio-sidecar");
    assert.deepEqual(config.channel?.sidecarAddresses, ["127.0.0.6", "::6"]);
    assert.equal(config.channel?.certFile, "");
  });

  it("STRICT on every port of the feed's pod; only the readers, only on the channel port", () => {
    const selector = { matchLabels: { "app.kubernetes.io/name": "mesh-feed", "app.kubernetes.io/instance": "mesh-feed" } };
    const pa = find(objects, "PeerAuthentication");
    assert.deepEqual(pa.spec, { selector, mtls: { mode: "STRICT" } });
    const ap = find(objects, "AuthorizationPolicy");
    assert.deepEqual(ap.spec, {
      selector,
      action: "ALLOW",
      rules: [{ from: [{ source: { principals: ["cluster.local/ns/data/sa/postgres", "cluster.local/ns/default/*"] } }], to: [{ operation: { ports: ["9443"] } }] }],
    });
    assert.equal(find(template({}), "PeerAuthentication"), undefined, "no Istio objects without istio.enabled");
  });

  it("scraped in the mesh: the operator port stays on the loopback, Prometheus is admitted to Istio's merged metrics port", () => {
    const config = parseFeedConfig(find(objects, "ConfigMap").data["feed.yaml"], "/etc/mesh-feed/feed.yaml");
    assert.equal(config.operator?.address, "127.0.0.1");
    const pod = find(objects, "Deployment").spec.template;
    assert.deepEqual(pod.spec.containers[0].ports.map((p: any) => p.name), ["http-channel"]);
    assert.equal(pod.metadata.annotations["prometheus.io/port"], "9090", "the injector moves it to 15020 and tells pilot-agent");
    assert.deepEqual(find(objects, "NetworkPolicy").spec.ingress.map((r: any) => r.ports[0].port), ["http-channel", 15020]);
  });

  it("every object passes the API server's validation (Istio's CRDs installed)", async () => {
    const api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
    await cluster.createNamespace("mesh-feed");
    for (const o of objects as KubernetesObject[]) {
      const stored = await api.patch(o, undefined, "All", "chart-test", true, PatchStrategy.ServerSideApply);
      assert.equal(stored.kind, o.kind);
    }
  });
});

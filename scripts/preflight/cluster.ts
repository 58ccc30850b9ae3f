// What the preflight reads from a cluster, all with list/get (nothing is written): the API
// server's version, the CRDs the install routes need, the istiod Deployments by revision, and
// the sidecars' proxy versions by revision.
import { ApiextensionsV1Api, ApisApi, AppsV1Api, CoreV1Api, KubeConfig, VersionApi } from "@kubernetes/client-node";
import { imageVersion, parseVersion, type Version } from "./versions.js";

export interface Istiod {
  readonly revision: string;
  readonly name: string;
  readonly version: Version | undefined;
  readonly image: string;
  /** Set when the preflight was asked about an upgrade (--upgrade-to): what this istiod would become. */
  readonly planned?: "in-place" | "new-revision";
}

export interface ProxyGroup {
  readonly revision: string;
  /** undefined: the istio-proxy container's image has no version tag (e.g. a digest). */
  readonly version: Version | undefined;
  readonly image: string;
  readonly pods: string[];
}

export interface ClusterFacts {
  readonly kubernetes: Version | undefined;
  readonly kubernetesText: string;
  readonly endpointSlicesServed: boolean;
  /** CRD name → served versions. */
  readonly crds: Map<string, string[]>;
  readonly istiods: Istiod[];
  readonly proxies: ProxyGroup[];
}

/** A pod's revision as the injector records it: its istio.io/rev label, else "default". */
function revisionOf(labels: Record<string, string> | undefined): string {
  return labels?.["istio.io/rev"] || "default";
}

export async function readCluster(kc: KubeConfig, istioNamespace: string): Promise<ClusterFacts> {
  const version = await kc.makeApiClient(VersionApi).getCode();
  const kubernetesText = version.gitVersion;
  const crds = new Map<string, string[]>();
  for (const crd of (await kc.makeApiClient(ApiextensionsV1Api).listCustomResourceDefinition()).items) {
    crds.set(crd.metadata?.name ?? "", crd.spec.versions.filter((v) => v.served).map((v) => v.name));
  }
  const core = kc.makeApiClient(CoreV1Api);
  const apiGroups = (await kc.makeApiClient(ApisApi).getAPIVersions()).groups;
  const endpointSlicesServed = apiGroups.some((g) => g.name === "discovery.k8s.io" && g.versions.some((v) => v.version === "v1"));
  const istiods: Istiod[] = [];
  for (const d of (await kc.makeApiClient(AppsV1Api).listNamespacedDeployment({ namespace: istioNamespace, labelSelector: "app=istiod" })).items) {
    const container = d.spec?.template.spec?.containers.find((c) => c.name === "discovery") ?? d.spec?.template.spec?.containers[0];
    const image = container?.image ?? "";
    istiods.push({ revision: revisionOf(d.metadata?.labels), name: d.metadata?.name ?? "", version: imageVersion(image), image });
  }
  const groups = new Map<string, ProxyGroup>();
  for (const pod of (await core.listPodForAllNamespaces()).items) {
    if (!pod.metadata?.annotations?.["sidecar.istio.io/status"]) continue;
    const proxy = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((c) => c.name === "istio-proxy");
    if (!proxy) continue;
    const revision = revisionOf(pod.metadata.labels);
    const image = proxy.image ?? "";
    const key = `${revision}\n${image}`;
    const group = groups.get(key) ?? { revision, version: imageVersion(image), image, pods: [] };
    group.pods.push(`${pod.metadata.namespace}/${pod.metadata.name}`);
    groups.set(key, group);
  }
  return { kubernetes: parseVersion(kubernetesText), kubernetesText, endpointSlicesServed, crds, istiods, proxies: [...groups.values()] };
}

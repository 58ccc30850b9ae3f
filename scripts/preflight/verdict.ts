// The preflight's judgement: from the cluster's facts and the shipped hook-ups, what will happen
// when the manifests are applied, as findings of three levels. A "refuse" finding is one where
// applying (or upgrading) would leave sidecars without the filter or with listeners warming
// forever; the command then exits non-zero.
import type { ClusterFacts, Istiod, ProxyGroup } from "./cluster.js";
import type { Hookup } from "./hookups.js";
import { KUBERNETES_MIN, KUBERNETES_TESTED, pluginOfEcdsName, servedEcdsName } from "./versions.js";

export type Level = "ok" | "warn" | "refuse";
export interface Finding {
  readonly level: Level;
  readonly text: string;
}

const REQUIRED_CRDS = [
  ["wasmplugins.extensions.istio.io", "v1alpha1", "route B's WasmPlugins"],
  ["envoyfilters.networking.istio.io", "v1alpha3", "both routes' EnvoyFilters"],
] as const;

/** How a finding names an istiod: as it runs, or as the planned upgrade would leave it. */
function istiodText(d: Istiod): string {
  const version = d.version?.text ?? d.image;
  if (d.planned === "in-place") return `istiod ${d.name} once upgraded in place to ${version}`;
  if (d.planned === "new-revision") return `the new istiod revision ${d.revision} at ${version}`;
  return `istiod ${d.name} ${version}`;
}

/** What to do when a hook-up names what the sidecars' istiod does not serve. */
function remedy(d: Istiod): string {
  return d.planned === "in-place"
    ? `Do not upgrade revision ${d.revision} in place: install ${d.version?.text} as a new revision (istioctl install --set revision=<name>) and move workloads to it by restarting them (docs/upgrades.md)`
    : `Upgrade with a new revision, or restart these pods onto ${d.version?.text} first`;
}

function podList(group: ProxyGroup): string {
  const shown = group.pods.slice(0, 3).join(", ");
  return group.pods.length > 3 ? `${shown} and ${group.pods.length - 3} more` : shown;
}

export function judge(facts: ClusterFacts, hookups: readonly Hookup[]): Finding[] {
  const out: Finding[] = [];
  const k = facts.kubernetes;
  if (!k) out.push({ level: "warn", text: `Kubernetes ${facts.kubernetesText}: not a version this preflight can read` });
  else if (k.major === KUBERNETES_MIN.major && k.minor < KUBERNETES_MIN.minor) out.push({ level: "refuse", text: `Kubernetes ${facts.kubernetesText}: the feed needs discovery.k8s.io/v1 EndpointSlices (1.${KUBERNETES_MIN.minor} and later)` });
  else out.push({ level: "ok", text: `Kubernetes ${facts.kubernetesText} (the suite is tested on ${KUBERNETES_TESTED}; Istio's own support range for its release applies)` });
  if (!facts.endpointSlicesServed) out.push({ level: "refuse", text: "discovery.k8s.io/v1 is not served: the feed reads EndpointSlices" });

  for (const [crd, version, what] of REQUIRED_CRDS) {
    const served = facts.crds.get(crd);
    if (!served) out.push({ level: "refuse", text: `CRD ${crd} is missing: ${what} cannot be applied (is Istio installed?)` });
    else if (!served.includes(version)) out.push({ level: "refuse", text: `CRD ${crd} does not serve ${version} (serves ${served.join(", ")}): ${what} use ${version}` });
    else out.push({ level: "ok", text: `CRD ${crd} serves ${version}` });
  }

  const byRevision = new Map(facts.istiods.map((d) => [d.revision, d]));
  if (facts.istiods.length === 0) out.push({ level: "refuse", text: "no istiod Deployment (label app=istiod) in the Istio namespace: nothing would serve the WasmPlugins" });
  for (const d of facts.istiods) {
    out.push(d.version
      ? { level: "ok", text: `${d.planned ? istiodText(d) : `istiod ${d.name} (revision ${d.revision}) ${d.version.text}`}: ${d.planned ? "would serve" : "serves"} WasmPlugins over ECDS as ${servedEcdsName(d.version, "<ns>", "<name>")}` }
      : { level: "warn", text: `istiod ${d.name} (revision ${d.revision}): its image ${d.image} carries no version tag; the ECDS name it serves cannot be checked` });
  }

  for (const group of facts.proxies) {
    // A group without pods stands for the sidecars a planned new revision will have.
    const who = group.pods.length === 0
      ? `sidecars restarted onto revision ${group.revision} at ${group.version?.text ?? group.image}`
      : `${group.pods.length} sidecar(s) of revision ${group.revision} at ${group.version?.text ?? group.image} (${podList(group)})`;
    if (!group.version) {
      out.push({ level: "warn", text: `${who}: no version tag on the proxy image; which hook-up applies cannot be told` });
      continue;
    }
    const matching = hookups.filter((h) => h.proxyVersion.test(group.version!.text));
    if (matching.length === 0) {
      out.push({ level: "refuse", text: `${who}: no hook-up's proxyVersion matches ${group.version.text}: these sidecars would silently get no filter from route B` });
      continue;
    }
    const istiod = byRevision.get(group.revision);
    if (!istiod?.version) {
      out.push({ level: "warn", text: `${who}: no istiod of revision ${group.revision} with a version tag; the ECDS name cannot be checked` });
      continue;
    }
    const wrong = matching.filter((h) => {
      const plugin = pluginOfEcdsName(h.ecdsName);
      return !plugin || servedEcdsName(istiod.version!, plugin.namespace, plugin.name) !== h.ecdsName;
    });
    if (wrong.length > 0) {
      const h = wrong[0]!;
      out.push({
        level: "refuse",
        text: `${who}: their hook-up (${h.file}, proxyVersion ${h.proxyVersionText}) asks for ${h.ecdsName}, which ${istiodText(istiod)} does not serve: their listeners would keep warming until each pod restarts. ${remedy(istiod)}`,
      });
    } else {
      out.push({ level: "ok", text: `${who}: route B's hook-ups (${matching.length} patches) name what ${istiodText(istiod)} ${istiod.planned ? "would serve" : "serves"}` });
    }
  }
  if (facts.proxies.length === 0) out.push({ level: "warn", text: "no injected sidecars found (annotation sidecar.istio.io/status): nothing to check the hook-ups against yet" });
  return out;
}

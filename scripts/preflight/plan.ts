// `--upgrade-to <version> [--revision <name>]`: the preflight judges the cluster as the planned
// Istio upgrade would leave it, before anything is changed. An istiod of that revision is an
// in-place upgrade (its sidecars keep their proxy version until restarted, so 1.29 sidecars on a
// 1.30+ istiod are refused before the upgrade starts); no istiod of that revision is a new
// revision, whose sidecars will run the new version once restarted onto it.
import type { ClusterFacts, Istiod } from "./cluster.js";
import { parseVersion, type Version } from "./versions.js";

export interface UpgradePlan {
  readonly version: Version;
  readonly revision: string;
}

/** The plan from the flags, or a one-line error naming the flag. */
export function parsePlan(upgradeTo: string | undefined, revision: string | undefined): UpgradePlan | undefined {
  if (upgradeTo === undefined) {
    if (revision !== undefined) throw new Error("--revision: only with --upgrade-to <version>");
    return undefined;
  }
  const version = parseVersion(upgradeTo);
  if (!version) throw new Error(`--upgrade-to: "${upgradeTo}" is not an Istio version such as 1.31.2`);
  return { version, revision: revision ?? "default" };
}

/** The facts as the planned upgrade would leave them (the cluster itself is not touched). */
export function applyPlan(facts: ClusterFacts, plan: UpgradePlan): ClusterFacts {
  const existing = facts.istiods.filter((d) => d.revision === plan.revision);
  if (existing.length > 0) {
    const upgraded: Istiod[] = facts.istiods.map((d) => (d.revision === plan.revision ? { ...d, version: plan.version, planned: "in-place" } : d));
    return { ...facts, istiods: upgraded };
  }
  const name = plan.revision === "default" ? "istiod" : `istiod-${plan.revision}`;
  return {
    ...facts,
    istiods: [...facts.istiods, { revision: plan.revision, name, version: plan.version, image: "", planned: "new-revision" }],
    proxies: [...facts.proxies, { revision: plan.revision, version: plan.version, image: "", pods: [] }],
  };
}

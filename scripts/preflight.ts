// `npm run preflight -- --kubeconfig <file> [--context <name>] [--istio-namespace istio-system] [--upgrade-to <version> [--revision <name>]]`
// Reads a cluster (list and get only) and says what applying the Istio manifests under istio/
// will do there: the Kubernetes version, the CRDs both install routes need, each istiod revision
// and the ECDS name it serves WasmPlugins under, and for each group of sidecars (revision, proxy
// version) which of route B's hook-ups applies and whether it names what their istiod serves.
// With --upgrade-to, it judges the cluster as that Istio upgrade would leave it (scripts/preflight/plan.ts),
// so an in-place upgrade across istiod's ECDS rename is refused before it starts.
// Exit 0: nothing refused; 1: at least one refusal (each printed with what to do); 2: the
// command could not run (usage, unreachable cluster).
import { parseArgs } from "node:util";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { readCluster } from "./preflight/cluster.js";
import { readHookups } from "./preflight/hookups.js";
import { applyPlan, parsePlan, type UpgradePlan } from "./preflight/plan.js";
import { judge } from "./preflight/verdict.js";

const ROOT = join(import.meta.dirname, "..");

async function main(): Promise<number> {
  let values;
  let plan: UpgradePlan | undefined;
  try {
    ({ values } = parseArgs({ options: { kubeconfig: { type: "string" }, context: { type: "string" }, "istio-namespace": { type: "string", default: "istio-system" }, "upgrade-to": { type: "string" }, revision: { type: "string" } }, strict: true }));
    plan = parsePlan(values["upgrade-to"], values.revision);
  } catch (error) {
    console.error(`preflight: ${(error as Error).message}\nusage: npm run preflight -- --kubeconfig <file> [--context <name>] [--istio-namespace istio-system] [--upgrade-to <version> [--revision <name>]]`);
    return 2;
  }
  const kc = new KubeConfig();
  try {
    if (values.kubeconfig) kc.loadFromFile(values.kubeconfig);
    else kc.loadFromDefault();
    if (values.context) kc.setCurrentContext(values.context);
  } catch (error) {
    console.error(`preflight: cannot load the kubeconfig: ${(error as Error).message}`);
    return 2;
  }
  let facts;
  try {
    facts = await readCluster(kc, values["istio-namespace"]!);
  } catch (error) {
    console.error(`preflight: cannot read the cluster at ${kc.getCurrentCluster()?.server ?? "?"}: ${(error as Error).message}`);
    return 2;
  }
  if (plan) {
    const inPlace = facts.istiods.some((d) => d.revision === plan.revision);
    console.log(`plan   Istio ${plan.version.text} ${inPlace ? `in place of revision ${plan.revision}` : `as a new revision ${plan.revision}`}: judged as the cluster would be after it (nothing is changed)`);
    facts = applyPlan(facts, plan);
  }
  const findings = judge(facts, readHookups(join(ROOT, "istio")));
  for (const f of findings) console.log(`${f.level.padEnd(6)} ${f.text}`);
  const refused = findings.filter((f) => f.level === "refuse").length;
  console.log(refused === 0 ? "preflight: nothing refused; the manifests under istio/ will apply as their READMEs say" : `preflight: ${refused} refusal(s): fix them before applying or upgrading`);
  return refused === 0 ? 0 : 1;
}

process.exitCode = await main();

// `npm run preflight -- --kubeconfig <file> [--context <name>] [--istio-namespace istio-system]`
// Reads a cluster (list and get only) and says what applying the Istio manifests under istio/
// will do there: the Kubernetes version, the CRDs both install routes need, each istiod revision
// and the ECDS name it serves WasmPlugins under, and for each group of sidecars (revision, proxy
// version) which of route B's hook-ups applies and whether it names what their istiod serves.
// Exit 0: nothing refused; 1: at least one refusal (each printed with what to do); 2: the
// command could not run (usage, unreachable cluster).
import { parseArgs } from "node:util";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { readCluster } from "./preflight/cluster.js";
import { readHookups } from "./preflight/hookups.js";
import { judge } from "./preflight/verdict.js";

const ROOT = join(import.meta.dirname, "..");

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ options: { kubeconfig: { type: "string" }, context: { type: "string" }, "istio-namespace": { type: "string", default: "istio-system" } }, strict: true }));
  } catch (error) {
    console.error(`preflight: ${(error as Error).message}\nusage: npm run preflight -- --kubeconfig <file> [--context <name>] [--istio-namespace istio-system]`);
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
  const findings = judge(facts, readHookups(join(ROOT, "istio")));
  for (const f of findings) console.log(`${f.level.padEnd(6)} ${f.text}`);
  const refused = findings.filter((f) => f.level === "refuse").length;
  console.log(refused === 0 ? "preflight: nothing refused; the manifests under istio/ will apply as their READMEs say" : `preflight: ${refused} refusal(s): fix them before applying or upgrading`);
  return refused === 0 ? 0 : 1;
}

process.exitCode = await main();

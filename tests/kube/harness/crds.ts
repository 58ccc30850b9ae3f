// The CustomResourceDefinitions the feed reads or writes, taken from the projects' own published
// CRD YAML (cached by scripts/kube-setup.sh from the Go modules sigs.k8s.io/gateway-api and
// istio.io/api), never hand-written, so the API server validates our objects with the real schemas.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { KubernetesObject } from "@kubernetes/client-node";

/** Installed by default: what the feed watches (waypoints and east-west gateways) and writes. */
export const DEFAULT_CRDS = [
  "gatewayclasses.gateway.networking.k8s.io",
  "gateways.gateway.networking.k8s.io",
  "wasmplugins.extensions.istio.io",
  "trafficextensions.extensions.istio.io",
] as const;

const CRD_FILES = ["gateway-api.yaml", "istio.yaml"];

export interface CrdObject extends KubernetesObject {
  metadata: { name: string; [key: string]: unknown };
  spec: { group: string; names: { plural: string; kind: string }; versions: Array<{ name: string; served: boolean }> };
}

let catalog: Map<string, CrdObject> | undefined;

/** Every cached CRD by name (`<plural>.<group>`). */
export function crdCatalog(crdDir: string): Map<string, CrdObject> {
  if (catalog) return catalog;
  const found = new Map<string, CrdObject>();
  for (const file of CRD_FILES) {
    const path = join(crdDir, file);
    if (!existsSync(path)) throw new Error(`kube harness: ${path} is missing: run \`npm run setup:kube\` (npm test does it)`);
    for (const document of parseAllDocuments(readFileSync(path, "utf8"))) {
      const object = document.toJS() as CrdObject | null;
      if (object?.kind === "CustomResourceDefinition") found.set(object.metadata.name, object);
    }
  }
  catalog = found;
  return found;
}

/** The CRD objects for these names; an unknown name is an error that lists the known ones. */
export function selectCrds(crdDir: string, names: readonly string[]): CrdObject[] {
  const all = crdCatalog(crdDir);
  return names.map((name) => {
    const crd = all.get(name);
    if (!crd) throw new Error(`kube harness: no CRD named ${name}; known: ${[...all.keys()].sort().join(", ")}`);
    // Strip what a server would set; the object goes to the API server as is otherwise.
    const { status: _status, ...rest } = crd as CrdObject & { status?: unknown };
    return structuredClone(rest) as CrdObject;
  });
}

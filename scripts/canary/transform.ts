// The canary set of one filter: from the manifests of its route B install (the WasmPlugin(s) and
// the EnvoyFilters that go with them), the twin of every object that selects the filter's opt-in
// label, selecting the canary value of that label instead and pulling the new image.
//
// Why twins on another label value, and not a second WasmPlugin on an extra label: Istio's
// selectors (WasmPlugin `selector`, EnvoyFilter `workloadSelector`) only match labels, they cannot
// exclude. A pod carrying both the main value and a canary label would get both WasmPlugins on
// every chain Istio builds, two instances of the filter deciding on one connection. With the
// value changed (`enabled` → `enabled-canary`), a pod matches the main set or the canary set,
// never both (tests/istio/generation_upgrade.test.ts runs istiod on both).
import { parseAllDocuments, stringify } from "yaml";

/** The files of each filter's route B install, in the order they are applied (istio/<filter>/README.md). */
export const ROUTE_B_FILES: Record<string, readonly string[]> = {
  passthrough_mtls: ["cluster.yaml", "wasmplugin.yaml", "catchall.yaml"],
  tunnel_port: ["wasmplugin.yaml", "wasmplugin-hookup.yaml"],
  waypoint_route: ["wasmplugin.yaml"],
};

export const CANARY_SUFFIX = "-canary";

/** The opt-in label of a filter: `mesh.example.com/<filter with dashes>`. */
export const optInLabel = (filter: string): string => `mesh.example.com/${filter.replaceAll("_", "-")}`;

type Obj = { apiVersion?: string; kind?: string; metadata?: { name?: string; namespace?: string }; spec?: Record<string, any> };

/** The object's label selector (WasmPlugin `selector.matchLabels`, EnvoyFilter `workloadSelector.labels`). */
function selectorOf(o: Obj): Record<string, string> | undefined {
  if (o.kind === "WasmPlugin") return o.spec?.selector?.matchLabels;
  if (o.kind === "EnvoyFilter") return o.spec?.workloadSelector?.labels;
  return undefined;
}

/** Both names istiod has served WasmPlugin <ns>/<name> under over ECDS (istio/README.md, by version). */
function ecdsNames(namespace: string, name: string): string[] {
  return [`extensions.istio.io/trafficextension/${namespace}.${name}~istio-translated-wasmplugin`, `extensions.istio.io/wasmplugin/${namespace}.${name}`];
}

/** Replaces every string equal to a key of `renames` anywhere in `node`. */
function renameStrings(node: unknown, renames: Map<string, string>): unknown {
  if (typeof node === "string") return renames.get(node) ?? node;
  if (Array.isArray(node)) return node.map((n) => renameStrings(n, renames));
  if (node && typeof node === "object") return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, renameStrings(v, renames)]));
  return node;
}

export interface CanaryInput {
  filter: string;
  /** The route B files' texts, rendered (images pinned), in ROUTE_B_FILES order. */
  files: { name: string; text: string }[];
  /** The new image: `oci://<registry>/<repository>@sha256:<64 hex>`. */
  url: string;
}

/** The new image's url and the `sha256` pilot-agent checks, or a one-line error naming the field. */
export function parseImage(url: string): { url: string; sha256: string } {
  const m = /^oci:\/\/[^\s@]+@sha256:([0-9a-f]{64})$/.exec(url);
  if (!m) throw new Error(`--url: "${url}" is not oci://<registry>/<repository>@sha256:<64 hex> (pin the canary by digest, as npm run package renders the main one)`);
  return { url, sha256: m[1]! };
}

/** The canary objects as one YAML stream, or a one-line error naming what is missing. */
export function canaryManifests(input: CanaryInput): string {
  const image = parseImage(input.url);
  const label = optInLabel(input.filter);
  const objects: Obj[] = [];
  for (const file of input.files) {
    for (const doc of parseAllDocuments(file.text)) {
      if (doc.errors.length > 0) throw new Error(`${input.filter}/${file.name}: ${doc.errors[0]!.message}`);
      const o = doc.toJS() as Obj | null;
      if (o) objects.push(o);
    }
  }
  const selecting = objects.filter((o) => selectorOf(o)?.[label] !== undefined);
  const plugins = selecting.filter((o) => o.kind === "WasmPlugin");
  if (plugins.length === 0) throw new Error(`${input.filter}: no WasmPlugin selecting ${label} in ${input.files.map((f) => f.name).join(", ")}`);
  const renames = new Map<string, string>();
  for (const p of plugins) {
    const [ns, name] = [p.metadata?.namespace ?? "", p.metadata?.name ?? ""];
    const canary = ecdsNames(ns, name + CANARY_SUFFIX);
    ecdsNames(ns, name).forEach((old, i) => renames.set(old, canary[i]!));
  }
  const twins = selecting.map((o) => {
    const twin = renameStrings(structuredClone(o), renames) as Obj;
    twin.metadata = { ...twin.metadata, name: (o.metadata?.name ?? "") + CANARY_SUFFIX };
    const selector = selectorOf(twin)!;
    selector[label] = selector[label] + CANARY_SUFFIX;
    if (twin.kind === "WasmPlugin") {
      twin.spec!.url = image.url;
      twin.spec!.sha256 = image.sha256;
      // Pinned by digest: nothing to re-pull.
      twin.spec!.imagePullPolicy = "IfNotPresent";
    }
    return twin;
  });
  const header = `# The canary of ${input.filter} (npm run canary): pods labelled ${label}=<value>${CANARY_SUFFIX} get ${image.url}.\n# See docs/upgrades.md for promotion and rollback.\n`;
  return header + twins.map((t) => stringify(t, { lineWidth: 0 })).join("---\n");
}

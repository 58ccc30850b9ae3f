// The route-B hook-ups shipped under istio/: every EnvoyFilter patch that takes a WasmPlugin over
// ECDS (a `config_discovery` filter) keyed on the proxy's version. The preflight reads them from
// the manifests themselves, so what it checks is what an operator applies.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";

export interface Hookup {
  /** `istio/<filter>/<file>`. */
  readonly file: string;
  readonly envoyFilter: string;
  /** The patch's `match.proxy.proxyVersion`, as Istio applies it (a full-string regex). */
  readonly proxyVersion: RegExp;
  readonly proxyVersionText: string;
  /** The ECDS resource the patch asks Envoy to wait for. */
  readonly ecdsName: string;
}

/** Every hook-up patch in `istioDir`/<filter>/*.yaml. */
export function readHookups(istioDir: string): Hookup[] {
  const found: Hookup[] = [];
  for (const filter of readdirSync(istioDir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort()) {
    for (const file of readdirSync(join(istioDir, filter)).filter((f) => f.endsWith(".yaml")).sort()) {
      for (const doc of parseAllDocuments(readFileSync(join(istioDir, filter, file), "utf8"))) {
        const o = doc.toJS() as { kind?: string; metadata?: { namespace?: string; name?: string }; spec?: { configPatches?: unknown[] } } | null;
        if (o?.kind !== "EnvoyFilter") continue;
        for (const p of (o.spec?.configPatches ?? []) as { match?: { proxy?: { proxyVersion?: string } }; patch?: { value?: { name?: string; config_discovery?: unknown } } }[]) {
          const value = p.patch?.value;
          const regex = p.match?.proxy?.proxyVersion;
          if (!value?.config_discovery || !value.name || regex === undefined) continue;
          found.push({ file: `istio/${filter}/${file}`, envoyFilter: `${o.metadata?.namespace}/${o.metadata?.name}`, proxyVersion: new RegExp(regex), proxyVersionText: regex, ecdsName: value.name });
        }
      }
    }
  }
  return found;
}

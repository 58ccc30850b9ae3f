// Reads what istiod's own generation wrote (tests/istio/common/generate_test.go, run by
// scripts/istio-gen.sh) under build/istio/<era>/<mode>/<filter>/<route>/<proxy>/, and small
// helpers over Envoy's JSON (camelCase, as istiod marshals it).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../support/paths.js";

export type Json = any; // xDS JSON; each test asserts the shape it relies on

/** The Istio eras the Go module proxy serves (release tags are not served: see istio/README.md). */
export const ERAS = [
  { era: "1.30", module: "v0.0.0-20260423205519-b01690e6db7d", label: "1.30 (master 2026-04-23)" },
  { era: "1.31", module: "v0.0.0-20260827124520-eed52ebb66ad", label: "1.31 (release-1.31 branch 2026-08-27, istio.io/api 1.31.0-rc.0)" },
] as const;

export const WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm";
export const RBAC_TYPE = "type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC";
export const TCP_PROXY = "envoy.filters.network.tcp_proxy";
export const CATCH_ALL = "virtualOutbound-catchall-tcp";

/** The ECDS name istiod 1.30+ serves a WasmPlugin under. */
export const trafficExtensionName = (ns: string, name: string): string =>
  `extensions.istio.io/trafficextension/${ns}.${name}~istio-translated-wasmplugin`;
/** The name istiod 1.29 and earlier served it under. */
export const wasmPluginName = (ns: string, name: string): string => `extensions.istio.io/wasmplugin/${ns}.${name}`;

export interface Dump {
  where: string;
  listeners: Json[];
  clusters: Json[];
  routes: Json[];
  endpoints: Json[];
  ecds: Json[];
  ecdsAgent: Json[];
  ecdsAgentFetchFailed: Json[];
  simulation: { name: string; address: string; port: number; mode: string; listener: string; filterChain: string; cluster: string; error?: string }[];
  meta: { proxyVersion: string; ecdsRequested: string[]; hbone: boolean; ambient: boolean };
}

export function dumpDir(era: string, mode: string, filter: string, route: string, proxy: string): string {
  return join(REPO_ROOT, "build", "istio", era, mode, filter, route, proxy);
}

export function loadDump(era: string, filter: string, route: string, proxy = "client", mode = "sidecar"): Dump {
  const dir = dumpDir(era, mode, filter, route, proxy);
  const file = (name: string): Json => {
    const path = join(dir, name);
    if (!existsSync(path)) throw new Error(`${path} is missing: run bash scripts/istio-gen.sh (npm run test:istio does)`);
    return JSON.parse(readFileSync(path, "utf8"));
  };
  return {
    where: `${era}/${mode}/${filter}/${route}/${proxy}`,
    listeners: file("listeners.json"),
    clusters: file("clusters.json"),
    routes: file("routes.json"),
    endpoints: file("endpoints.json"),
    ecds: file("ecds.json"),
    ecdsAgent: file("ecds_agent.json"),
    ecdsAgentFetchFailed: file("ecds_agent_fetch_failed.json"),
    simulation: file("simulation.json"),
    meta: file("meta.json"),
  };
}

export function listener(d: Dump, name: string): Json {
  const l = d.listeners.find((x) => x.name === name);
  if (!l) throw new Error(`${d.where}: no listener ${name} (have ${d.listeners.map((x) => x.name).join(", ")})`);
  return l;
}

export function chain(l: Json, name: string): Json {
  const c = [...(l.filterChains ?? []), ...(l.defaultFilterChain ? [l.defaultFilterChain] : [])].find((x) => x.name === name);
  if (!c) throw new Error(`listener ${l.name}: no filter chain ${name}`);
  return c;
}

export const filterNames = (c: Json): string[] => (c.filters ?? []).map((f: Json) => f.name);

export function cluster(d: Dump, name: string): Json {
  const c = d.clusters.find((x) => x.name === name);
  if (!c) throw new Error(`${d.where}: no cluster ${name}`);
  return c;
}

export function served(resources: Json[], name: string): Json | undefined {
  return resources.find((r) => r.name === name);
}

export function simulated(d: Dump, name: string) {
  const r = d.simulation.find((x) => x.name === name);
  if (!r) throw new Error(`${d.where}: no simulated call ${name}`);
  return r;
}

/** Every (listener, chain, filter index) where a filter named `name` sits. */
export function placements(d: Dump, name: string): { listener: string; chain: string; index: number; filters: string[] }[] {
  const out: { listener: string; chain: string; index: number; filters: string[] }[] = [];
  for (const l of d.listeners) {
    for (const c of [...(l.filterChains ?? []), ...(l.defaultFilterChain ? [l.defaultFilterChain] : [])]) {
      const names = filterNames(c);
      names.forEach((n, index) => {
        if (n === name) out.push({ listener: l.name, chain: c.name ?? "", index, filters: names });
      });
    }
  }
  return out;
}

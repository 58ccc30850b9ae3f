// Every shipped Envoy config and Istio manifest states the wasm plugin's failure policy
// explicitly (a default is easy to miss in review and changed meaning across Envoy versions), and
// every filter README says what happens on a bad configuration, an unknown destination and a VM
// trap.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../support/paths.js";

const WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm";
const POLICIES = ["FAIL_CLOSED", "FAIL_OPEN", "FAIL_RELOAD"];

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(name) ? [path] : [];
  });
}

/** Every wasm network filter plugin config (the `config` of a Wasm typed config) in a document. */
function wasmPlugins(node: unknown, found: any[] = []): any[] {
  if (Array.isArray(node)) for (const item of node) wasmPlugins(item, found);
  else if (node && typeof node === "object") {
    const record = node as Record<string, any>;
    if (record["@type"] === WASM_TYPE) found.push(record.config ?? {});
    for (const value of Object.values(record)) wasmPlugins(value, found);
  }
  return found;
}

function documents(path: string): any[] {
  return parseAllDocuments(readFileSync(path, "utf8")).map((document) => document.toJS());
}

describe("every shipped config declares the wasm failure policy", () => {
  const configs = yamlFiles(join(REPO_ROOT, "envoy-configs"));
  it("finds the shipped Envoy configs, ECDS plugin files included", () => assert.ok(configs.some((path) => path.includes("_plugin/"))));

  for (const path of configs) {
    const plugins = documents(path).flatMap((document) => wasmPlugins(document));
    if (plugins.length === 0) continue;
    it(`${relative(REPO_ROOT, path)}: failure_policy on each of its ${plugins.length} wasm plugin(s)`, () => {
      for (const plugin of plugins) assert.ok(POLICIES.includes(plugin.failure_policy), `${plugin.name}: failure_policy is ${plugin.failure_policy}`);
    });
  }

  for (const path of yamlFiles(join(REPO_ROOT, "istio"))) {
    const resources = documents(path).filter((document) => document && typeof document === "object");
    const plugins = resources.flatMap((resource) => wasmPlugins(resource));
    const wasmPluginResources = resources.filter((resource) => resource.kind === "WasmPlugin");
    if (plugins.length === 0 && wasmPluginResources.length === 0) continue;
    it(`${relative(REPO_ROOT, path)}: failure_policy / failStrategy stated`, () => {
      for (const plugin of plugins) assert.ok(POLICIES.includes(plugin.failure_policy), `${plugin.name}: failure_policy is ${plugin.failure_policy}`);
      // Istio's WasmPlugin spells it FAIL_CLOSE / FAIL_OPEN (its CRD refuses FAIL_CLOSED).
      for (const resource of wasmPluginResources) assert.ok(["FAIL_CLOSE", "FAIL_OPEN"].includes(resource.spec?.failStrategy), `${resource.metadata?.name}: failStrategy is ${resource.spec?.failStrategy}`);
    });
  }
});

describe("every filter README states its failure policy", () => {
  const filters = readdirSync(join(REPO_ROOT, "filters")).filter((name) => statSync(join(REPO_ROOT, "filters", name, "index.ts"), { throwIfNoEntry: false }) && statSync(join(REPO_ROOT, "filters", name, "README.md"), { throwIfNoEntry: false }));
  it("finds the filters", () => assert.ok(filters.includes("passthrough_mtls") && filters.includes("tunnel_port") && filters.includes("waypoint_route")));

  for (const name of filters) {
    it(`filters/${name}/README.md: bad configuration, unknown destination, VM trap`, () => {
      const text = readFileSync(join(REPO_ROOT, "filters", name, "README.md"), "utf8");
      const section = /^## Failure policy\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(text)?.[1] ?? "";
      assert.ok(section.length > 0, "no '## Failure policy' section");
      assert.match(section, /(invalid|bad) configuration/i);
      assert.match(section, /unknown destination|destination unknown|no route/i);
      assert.match(section, /VM trap/);
      assert.match(section, /FAIL_CLOSED|FAIL_OPEN/);
    });
  }
});

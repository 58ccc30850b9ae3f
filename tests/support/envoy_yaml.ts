// Reads a shipped Envoy config so that end-to-end tests run exactly what operators get, and
// pulls a wasm plugin's configuration out of it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { REPO_ROOT } from "./paths.js";

export function shippedConfig(name: string): string {
  return readFileSync(join(REPO_ROOT, "envoy-configs", name), "utf8");
}

/** The JSON plugin configuration of the wasm filter named `plugin` in a shipped config. */
export function pluginConfiguration(name: string, plugin: string): any {
  const found: string[] = [];
  const visit = (node: any): void => {
    if (node && typeof node === "object") {
      if (node.name === plugin && node.configuration?.value !== undefined) found.push(node.configuration.value);
      for (const value of Object.values(node)) visit(value);
    }
  };
  visit(parse(shippedConfig(name)));
  if (found.length === 0) throw new Error(`${name}: no wasm plugin named ${plugin}`);
  return JSON.parse(found[0]);
}

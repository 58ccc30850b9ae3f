// The image tests (tests/images/) hand istio-agent's fetcher the ECDS resource istiod serves for
// each rendered WasmPlugin, built by tests/images/support.ts's istiodResource. Here that builder
// is held to istiod itself: for every WasmPlugin template and both Istio eras, it must give exactly
// the resource istiod's own generation served (scripts/istio-gen.sh's dump), except the resource
// version, which istiod takes from the object's store.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { ecdsName, istiodResource, type WasmPluginDoc } from "../images/support.js";
import { REPO_ROOT } from "../support/paths.js";
import { ERAS, type Json, WASM_TYPE } from "./dump.js";

const TEMPLATES = ["passthrough_mtls/wasmplugin.yaml", "tunnel_port/wasmplugin.yaml", "waypoint_route/wasmplugin.yaml"];

function templates(): WasmPluginDoc[] {
  return TEMPLATES.flatMap((file) =>
    parseAllDocuments(readFileSync(join(REPO_ROOT, "istio", file), "utf8")).map((d) => d.toJS()).filter((d) => d?.kind === "WasmPlugin"),
  );
}

/**
 * Every Wasm resource istiod served to a sidecar of an era's route-B dumps (`<filter>/B/<proxy>`;
 * the other scenarios edit the plugin configuration on purpose), by ECDS name.
 */
function servedWasm(era: string): Map<string, Json[]> {
  const root = join(REPO_ROOT, "build", "istio", era, "sidecar");
  if (!existsSync(root)) throw new Error(`${root} is missing: run bash scripts/istio-gen.sh (npm run test:istio does)`);
  const byName = new Map<string, Json[]>();
  for (const file of readdirSync(root, { recursive: true, encoding: "utf8" }).filter((f) => /^[a-z_]+\/B\/[^/]+\/ecds\.json$/.test(f))) {
    for (const resource of JSON.parse(readFileSync(join(root, file), "utf8")) as Json[]) {
      if (resource.typedConfig?.["@type"] !== WASM_TYPE) continue;
      byName.set(resource.name, [...(byName.get(resource.name) ?? []), resource]);
    }
  }
  return byName;
}

/** A resource with the resource version blanked and the plugin configuration parsed. */
function comparable(resource: Json): Json {
  const copy = JSON.parse(JSON.stringify(resource));
  delete copy["@type"];
  const config = copy.typedConfig.config;
  config.configuration.value = JSON.parse(config.configuration.value);
  const env = config.vmConfig.environmentVariables?.keyValues;
  if (env?.ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION !== undefined) env.ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION = "<resource version>";
  return copy;
}

describe("the ECDS resource the image tests give istio-agent is the one istiod serves", () => {
  for (const { era, label } of ERAS) {
    it(`istiod ${label}: every WasmPlugin template, field for field`, () => {
      const served = servedWasm(era);
      const plugins = templates();
      assert.equal(plugins.length, 4);
      for (const wp of plugins) {
        const resources = served.get(ecdsName(wp));
        assert.ok(resources?.length, `istiod ${era} served no ${ecdsName(wp)} (served: ${[...served.keys()].join(", ")})`);
        for (const resource of resources) assert.deepEqual(comparable(istiodResource(wp)), comparable(resource), ecdsName(wp));
      }
    });
  }
});

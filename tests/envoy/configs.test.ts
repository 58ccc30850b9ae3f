// Every shipped Envoy config must be accepted by the pinned Envoy, with the built .wasm files,
// and docker-compose must run that same Envoy version.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { validateConfig } from "../support/envoy.js";
import { REPO_ROOT } from "../support/paths.js";

const CONFIG_DIR = join(REPO_ROOT, "envoy-configs");
const configs = readdirSync(CONFIG_DIR).filter((name) => name.endsWith(".yaml"));

describe("shipped Envoy configs", () => {
  it("exist", () => assert.ok(configs.length > 0));

  for (const name of configs) {
    it(`${name} passes envoy --mode validate`, () => {
      const result = validateConfig(join(CONFIG_DIR, name));
      assert.equal(result.ok, true, result.output);
    });
  }

  it("docker-compose uses the Envoy version pinned in package.json", () => {
    const version = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).config.envoyVersion;
    const compose = parse(readFileSync(join(REPO_ROOT, "docker-compose.yml"), "utf8"));
    const images = Object.values<{ image?: string }>(compose.services)
      .map((service) => service.image ?? "")
      .filter((image) => image.startsWith("envoyproxy/envoy"));
    assert.ok(images.length > 0);
    for (const image of images) assert.equal(image, `envoyproxy/envoy:v${version}`);
  });
});

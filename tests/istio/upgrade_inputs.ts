// Inputs of istiod's upgrade scenarios (TestGenerateUpgrades in tests/istio/common/upgrade_test.go),
// written before the generation runs (scripts/istio-gen.sh) to build/istio-upgrade/:
//   modules/old.wasm   build/passthrough_mtls.wasm as built: the release running now;
//   modules/new.wasm   the same module with one more custom section: other bytes, another digest
//                      (a stand-in for the next release; Envoy runs it as the same filter);
//   passthrough_mtls/old/*.yaml   route B's files rendered as npm run package renders them, pinned to the old image;
//   passthrough_mtls/new/*.yaml   the same pinned to the new image (the main set after promotion);
//   passthrough_mtls/canary.yaml  what `npm run canary` makes from new/ (the next release's
//                      rendered files, as docs/upgrades.md runs it) for the new image;
//   passthrough_mtls/second-plugin-extra-label.yaml  the canary WasmPlugin on a label the main
//                      pods carry too (what the procedure avoids, run to show why);
//   route-a-canary-mount/passthrough_mtls.wasm  the new module where a route A canary pod mounts it;
//   modules.json       url → module file: pilot-agent's cache after a pull, for the Go stand-in.
// The "image digest" of each module is the module's own sha256 here: the stand-in cache is keyed by
// url, so only that old and new differ matters.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ImageIndex } from "../../images/images.js";
import { renderText } from "../../images/render.js";
import { canaryManifests, ROUTE_B_FILES } from "../../scripts/canary/transform.js";
import { parseAllDocuments, stringify } from "yaml";
import { REPO_ROOT } from "../support/paths.js";

export const UPGRADE_DIR = join(REPO_ROOT, "build", "istio-upgrade");
export const TEST_REGISTRY = "registry.upgrade.test/mesh";
const FILTER = "passthrough_mtls";
const REPOSITORY = "passthrough-mtls";

/** A wasm custom section (id 0): name and payload, sizes as unsigned LEB128. */
function customSection(name: string, payload: string): Buffer {
  const leb = (n: number): number[] => {
    const out: number[] = [];
    do {
      let byte = n & 0x7f;
      n >>>= 7;
      if (n !== 0) byte |= 0x80;
      out.push(byte);
    } while (n !== 0);
    return out;
  };
  const body = Buffer.concat([Buffer.from(leb(Buffer.byteLength(name))), Buffer.from(name), Buffer.from(payload)]);
  return Buffer.concat([Buffer.from([0]), Buffer.from(leb(body.length)), body]);
}

const sha256 = (bytes: Buffer): string => createHash("sha256").update(bytes).digest("hex");
export const imageUrl = (hex: string): string => `oci://${TEST_REGISTRY}/${REPOSITORY}@sha256:${hex}`;

export interface UpgradeModules {
  old: { file: string; sha256: string; url: string };
  new: { file: string; sha256: string; url: string };
}

export function readUpgradeModules(): UpgradeModules {
  return JSON.parse(readFileSync(join(UPGRADE_DIR, "modules-by-release.json"), "utf8"));
}

function indexFor(hex: string): ImageIndex {
  const record = { name: FILTER, version: "test", digest: `sha256:${hex}`, layerDigest: "", moduleSha256: hex, moduleBytes: 0, repository: REPOSITORY, tag: "test", layout: "" };
  return { version: "test", images: { [FILTER]: record } };
}

export function writeUpgradeInputs(): UpgradeModules {
  rmSync(UPGRADE_DIR, { recursive: true, force: true });
  mkdirSync(join(UPGRADE_DIR, "modules"), { recursive: true });
  const oldBytes = readFileSync(join(REPO_ROOT, "build", `${FILTER}.wasm`));
  const newBytes = Buffer.concat([oldBytes, customSection("mesh-upgrade-test", "next release")]);
  const modules: UpgradeModules = {
    old: { file: join(UPGRADE_DIR, "modules", "old.wasm"), sha256: sha256(oldBytes), url: imageUrl(sha256(oldBytes)) },
    new: { file: join(UPGRADE_DIR, "modules", "new.wasm"), sha256: sha256(newBytes), url: imageUrl(sha256(newBytes)) },
  };
  writeFileSync(modules.old.file, oldBytes);
  writeFileSync(modules.new.file, newBytes);
  // Route A's canary: the pod mounts the new module under the file name the EnvoyFilter names.
  mkdirSync(join(UPGRADE_DIR, "route-a-canary-mount"), { recursive: true });
  writeFileSync(join(UPGRADE_DIR, "route-a-canary-mount", `${FILTER}.wasm`), newBytes);
  for (const release of ["old", "new"] as const) {
    const dir = join(UPGRADE_DIR, FILTER, release);
    mkdirSync(dir, { recursive: true });
    for (const name of ROUTE_B_FILES[FILTER]!) {
      const source = `istio/${FILTER}/${name}`;
      writeFileSync(join(dir, name), renderText(readFileSync(join(REPO_ROOT, source), "utf8"), source, TEST_REGISTRY, indexFor(modules[release].sha256)));
    }
  }
  const newFiles = ROUTE_B_FILES[FILTER]!.map((name) => ({ name, text: readFileSync(join(UPGRADE_DIR, FILTER, "new", name), "utf8") }));
  writeFileSync(join(UPGRADE_DIR, FILTER, "canary.yaml"), canaryManifests({ filter: FILTER, files: newFiles, url: modules.new.url }));
  // The alternative docs/upgrades.md rejects: a second WasmPlugin on a label the main pods also
  // carry (app: sleep), the main selector unchanged.
  const extraLabel = parseAllDocuments(readFileSync(join(UPGRADE_DIR, FILTER, "canary.yaml"), "utf8")).map((d) => d.toJS()).find((o) => o?.kind === "WasmPlugin");
  extraLabel.spec.selector = { matchLabels: { app: "sleep" } };
  writeFileSync(join(UPGRADE_DIR, FILTER, "second-plugin-extra-label.yaml"), stringify(extraLabel));
  writeFileSync(join(UPGRADE_DIR, "modules.json"), JSON.stringify({ [modules.old.url]: modules.old.file, [modules.new.url]: modules.new.file }, null, 1));
  writeFileSync(join(UPGRADE_DIR, "modules-by-release.json"), JSON.stringify(modules, null, 1));
  return modules;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop()!)) {
  const m = writeUpgradeInputs();
  console.error(`upgrade inputs: old ${m.old.sha256.slice(0, 12)}, new ${m.new.sha256.slice(0, 12)} in ${UPGRADE_DIR}`);
}

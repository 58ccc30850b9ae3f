// Every manifest a user applies pins the plugin images by digest. The committed istio/ and
// feed/deploy/ files are templates (image references are placeholders, the files are marked);
// `npm run package -- --registry <registry>` renders what is applied into build/manifests/. Here the
// renderer runs on the real templates with build/images' digests, and the output is read for any
// placeholder, example registry or tag left, and for a WasmPlugin whose url and sha256 disagree.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { parseFeedConfig } from "../../feed/src/config.js";
import { digestHex, readImageIndex, type ImageIndex } from "../../images/images.js";
import { checkRegistry, renderManifests, TEMPLATE_MARKER, TEMPLATE_TREES } from "../../images/render.js";
import { REPO_ROOT, scratchDir } from "../support/paths.js";
import { validateSchema } from "./istio_support.js";

const REGISTRY = "registry.test.internal:5000/mesh";
/** Registry names that only ever stood for "put yours here". */
const PLACEHOLDERS = [/\bREGISTRY\b/, /:VERSION\b/, /ghcr\.io\/example\//, /registry\.example\//];

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".yaml")).map((f) => join(dir, f)).sort();
}

function docs(file: string): any[] {
  return parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
}

describe("manifests a user applies pin the plugin images by digest", () => {
  let index: ImageIndex;
  let out: string;
  let rendered: string[];

  before(() => {
    index = readImageIndex();
    out = scratchDir("rendered-");
    rendered = renderManifests(REGISTRY, index, out);
  });

  it("every template tree is rendered, file for file", () => {
    const expected = TEMPLATE_TREES.flatMap((t) => yamlFiles(join(REPO_ROOT, t.from)).map((f) => join(t.to, relative(join(REPO_ROOT, t.from), f))));
    assert.deepEqual(rendered.map((f) => relative(out, f)).sort(), expected.sort());
  });

  it("no rendered plugin reference keeps a placeholder, an example registry or a tag", () => {
    for (const file of rendered) {
      const text = readFileSync(file, "utf8");
      const where = relative(out, file);
      assert.ok(!text.includes(TEMPLATE_MARKER), `${where}: still marked as a template`);
      for (const [n, line] of text.split("\n").entries()) {
        for (const placeholder of PLACEHOLDERS) assert.doesNotMatch(line, placeholder, `${where}:${n + 1}: ${line.trim()}`);
        for (const reference of line.matchAll(/oci:\/\/[^\s`'"]+/g)) {
          const match = /^oci:\/\/(.+)\/([a-z0-9-]+)@(sha256:[0-9a-f]{64})$/.exec(reference[0]);
          assert.ok(match, `${where}:${n + 1}: ${reference[0]} is not <registry>/<repository>@sha256:<digest>`);
          const image = Object.values(index.images).find((i) => i.repository === match[2]);
          assert.ok(image, `${where}:${n + 1}: no image is built for ${match[2]}`);
          assert.deepEqual([match[1], match[3]], [REGISTRY, image.digest], `${where}:${n + 1}`);
        }
      }
    }
  });

  it("every rendered WasmPlugin pins url and sha256 to the digest build/images recorded", () => {
    const plugins = rendered.flatMap((file) => docs(file).filter((d) => d.kind === "WasmPlugin").map((d) => ({ file, d })));
    assert.equal(plugins.length, 4, "passthrough_mtls, tunnel_port client and server, waypoint_route");
    for (const { file, d } of plugins) {
      const image = index.images[d.spec.pluginName];
      assert.ok(image, `${relative(out, file)}: no image for pluginName ${d.spec.pluginName}`);
      assert.equal(d.spec.url, `oci://${REGISTRY}/${image.repository}@${image.digest}`);
      assert.equal(d.spec.sha256, digestHex(image.digest));
      assert.equal(d.spec.imagePullPolicy, "IfNotPresent", "a digest never changes: pull once");
      // Istio's CRD schema (sha256: 64 lower-case hex digits).
      validateSchema(d);
    }
  });

  it("the feed's rendered configuration is valid and delivers a WasmPlugin pinned the same way", () => {
    const configMap = docs(join(out, "feed", "config.yaml")).find((d) => d.kind === "ConfigMap");
    const config = parseFeedConfig(configMap.data["feed.yaml"], "/etc/mesh-feed/feed.yaml");
    const spec = config.targets[0].wasmPlugin?.spec as { url?: string; sha256?: string };
    const image = index.images.passthrough_mtls;
    assert.equal(spec.url, `oci://${REGISTRY}/${image.repository}@${image.digest}`);
    assert.equal(spec.sha256, digestHex(image.digest));
  });

  it("each committed file with a placeholder is marked as a template, and names no other registry", () => {
    const tracked = execFileSync("git", ["ls-files", ...TEMPLATE_TREES.map((t) => t.from)], { cwd: REPO_ROOT, encoding: "utf8" })
      .split("\n")
      .filter((f) => f.endsWith(".yaml"));
    let templates = 0;
    for (const file of tracked) {
      const text = readFileSync(join(REPO_ROOT, file), "utf8");
      const references = [...text.matchAll(/oci:\/\/[^\s`'"]+/g)].map((m) => m[0]);
      for (const reference of references) {
        assert.match(reference, /^oci:\/\/REGISTRY\/[a-z0-9-]+:VERSION$/, `${file}: ${reference}`);
      }
      if (references.some((r) => r.startsWith("oci://REGISTRY/"))) {
        templates++;
        assert.equal(text.split("\n")[0], TEMPLATE_MARKER, `${file}: a template must say so on its first line`);
      }
    }
    assert.equal(templates, 4, "istio/{passthrough_mtls,tunnel_port,waypoint_route}/wasmplugin.yaml and feed/deploy/config.yaml");
  });

  it("the docs tell operators to apply the rendered copies, never a template", () => {
    const markdown = execFileSync("git", ["ls-files", "*.md"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
    const templates = ["istio/passthrough_mtls/wasmplugin.yaml", "istio/tunnel_port/wasmplugin.yaml", "istio/waypoint_route/wasmplugin.yaml", "feed/deploy/config.yaml", "feed/deploy/"];
    for (const file of markdown) {
      for (const [n, line] of readFileSync(join(REPO_ROOT, file), "utf8").split("\n").entries()) {
        if (!/kubectl apply/.test(line)) continue;
        for (const template of templates) {
          assert.ok(!new RegExp(`-f\\s+\`?${template.replaceAll(".", "\\.")}`).test(line), `${file}:${n + 1} applies the template ${template}: ${line.trim()}`);
        }
      }
    }
  });

  it("a registry that is not host[:port][/path] is refused with one line naming --registry", () => {
    for (const bad of ["http://ghcr.io/acme", "ghcr.io/acme:1.0", "ghcr.io/Acme", "ghcr.io/acme@sha256:00", ""]) {
      assert.throws(() => checkRegistry(bad), /^Error: --registry: .* is not host\[:port\]\[\/path\]/);
    }
    assert.equal(checkRegistry("ghcr.io/acme/mesh-filters"), "ghcr.io/acme/mesh-filters");
    const run = spawnSync(process.execPath, ["--import", "tsx", "images/package.ts", "--registry", "http://x"], { cwd: REPO_ROOT, encoding: "utf8" });
    assert.equal(run.status, 2);
    assert.match(run.stderr.split("\n")[0], /^package: --registry: "http:\/\/x" is not/);
  });

  it("the feed's Deployment names the image the build makes (mesh-feed:<version>); the chart pins another registry or a digest", () => {
    const version = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version;
    const text = readFileSync(join(out, "feed", "deployment.yaml"), "utf8");
    assert.match(text, new RegExp(`^\\s*image: mesh-feed:${version.replaceAll(".", "\\.")}$`, "m"));
  });
});

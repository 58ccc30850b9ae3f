// The file source alone (no controller, no Envoy): objects read from a directory of YAML files
// into ClusterObjects, changes followed through fs.watch (write, change, remove, atomic rename),
// and bad input refused with one line naming the file and document, counted, the file's
// previous objects kept. tests/feed/file_source_feed.test.ts runs it in the whole feed.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { FileSource } from "../../feed/src/file_source.js";
import type { Pod } from "../../feed/src/kube_objects.js";
import { REPO_ROOT } from "../support/paths.js";
import { eventually } from "./harness.js";
import { namespace, pod, service } from "./fixtures.js";

const yaml = (...objects: object[]) => objects.map((o) => stringify(o)).join("---\n");

function newSource(path: string, maxBytes?: number) {
  const objects = new ClusterObjects("files1");
  const logs: string[] = [];
  const refused: string[] = [];
  let changes = 0;
  let synced = 0;
  const source = new FileSource(
    objects,
    path,
    { changed: () => changes++, synced: () => synced++, refused: (_id, reason) => refused.push(reason), log: (_level, line) => logs.push(line) },
    { maxBytes, rescanMs: 60_000 }, // a long backstop: these tests see what fs.watch alone does
  );
  return { objects, source, logs, refused, changes: () => changes, synced: () => synced };
}

const podIp = (objects: ClusterObjects, key: string) => (objects.pods.get(key) as Pod | undefined)?.status?.podIP;

describe("feed: file source", () => {
  let root: string;
  before(() => {
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    root = mkdtempSync(join(REPO_ROOT, ".tmp", "file-source-"));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it("reads every document of every YAML file once, before reporting synced; a namespaced object without a namespace is in default", async () => {
    const dir = join(root, "initial");
    mkdirSync(dir);
    const noNamespace = pod("x", "web-0", { ip: "10.0.0.5" });
    delete noNamespace.metadata!.namespace;
    writeFileSync(join(dir, "mesh.yaml"), yaml(namespace("default"), noNamespace, service("default", "web", [{ port: 80, targetPort: 8080 }])));
    writeFileSync(join(dir, "list.json"), JSON.stringify({ apiVersion: "v1", kind: "List", items: [pod("other", "db-0", { ip: "10.0.0.6" })] }));
    writeFileSync(join(dir, "notes.txt"), "not read");
    writeFileSync(join(dir, ".hidden.yaml"), "{{{ not read either");
    const s = newSource(dir);
    await s.source.start();
    try {
      assert.equal(s.synced(), 1);
      assert.deepEqual(s.objects.count(), { pods: 2, services: 1, endpointSlices: 0, namespaces: 1, nodes: 0, gateways: 0, gatewayClasses: 0 });
      assert.equal(podIp(s.objects, "default/web-0"), "10.0.0.5");
      assert.equal(podIp(s.objects, "other/db-0"), "10.0.0.6");
      assert.deepEqual(s.refused, []);
    } finally {
      await s.source.stop();
    }
  });

  it("follows a file written, changed (also by an atomic rename) and removed", async () => {
    const dir = join(root, "live");
    mkdirSync(dir);
    const s = newSource(dir);
    await s.source.start();
    try {
      assert.equal(s.objects.pods.size, 0);
      writeFileSync(join(dir, "a.yaml"), yaml(pod("default", "a", { ip: "10.0.0.1" })));
      await eventually("pod a read", 5000, async () => (podIp(s.objects, "default/a") === "10.0.0.1" ? true : undefined));
      writeFileSync(join(dir, "a.yaml"), yaml(pod("default", "a", { ip: "10.0.0.2" })));
      await eventually("pod a changed in place", 5000, async () => (podIp(s.objects, "default/a") === "10.0.0.2" ? true : undefined));
      writeFileSync(join(dir, ".a.yaml.tmp"), yaml(pod("default", "a", { ip: "10.0.0.3" })));
      renameSync(join(dir, ".a.yaml.tmp"), join(dir, "a.yaml"));
      await eventually("pod a replaced by a rename", 5000, async () => (podIp(s.objects, "default/a") === "10.0.0.3" ? true : undefined));
      const before = s.changes();
      rmSync(join(dir, "a.yaml"));
      await eventually("pod a removed", 5000, async () => (s.objects.pods.size === 0 ? true : undefined));
      assert.ok(s.changes() > before);
    } finally {
      await s.source.stop();
    }
  });

  it("a single file (not a directory) is followed through an atomic replace too", async () => {
    const dir = join(root, "single");
    mkdirSync(dir);
    const file = join(dir, "mesh.yaml");
    writeFileSync(file, yaml(pod("default", "a", { ip: "10.0.1.1" })));
    writeFileSync(join(dir, "other.yaml"), yaml(pod("default", "b", { ip: "10.0.1.2" })));
    const s = newSource(file);
    await s.source.start();
    try {
      assert.deepEqual([...s.objects.pods.keys()], ["default/a"]);
      writeFileSync(`${file}.new`, yaml(pod("default", "a", { ip: "10.0.1.9" })));
      renameSync(`${file}.new`, file);
      await eventually("pod a replaced", 5000, async () => (podIp(s.objects, "default/a") === "10.0.1.9" ? true : undefined));
      assert.deepEqual([...s.objects.pods.keys()], ["default/a"]);
    } finally {
      await s.source.stop();
    }
  });

  for (const [what, text, reason, line] of [
    ["unparsable YAML", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n", "yaml", /bad\.yaml: document 1: .+; refused, its 1 objects read before stay$/],
    ["an object without kind", yaml(namespace("n1"), { apiVersion: "v1", metadata: { name: "x" } }), "object", /bad\.yaml: document 2: kind: missing; refused/],
    ["an object without a name", yaml({ apiVersion: "v1", kind: "Pod", metadata: { namespace: "default" } }), "object", /bad\.yaml: document 1 \(Pod\): metadata\.name: missing; refused/],
    ["a known kind with the wrong apiVersion", yaml({ apiVersion: "apps/v1", kind: "Service", metadata: { name: "s" } }), "object", /bad\.yaml: document 1 \(Service\): apiVersion: expected v1, not "apps\/v1"; refused/],
    ["a pod IP that is not one", yaml(pod("default", "p", { ip: "10.0.0.300" })), "object", /bad\.yaml: document 1 \(Pod default\/p\): status\.podIP: expected an IP address, not "10\.0\.0\.300"; refused/],
    ["a label that is not a string", yaml({ apiVersion: "v1", kind: "Namespace", metadata: { name: "n", labels: { version: 2 } } }), "object", /bad\.yaml: document 1 \(Namespace n\): metadata\.labels\.version: expected a string/],
    ["a file that is not UTF-8", Buffer.from("kind: Pod\nmetadata: {name: \xff}\n", "latin1"), "unreadable", /bad\.yaml: not valid UTF-8; refused, its 1 objects read before stay$/],
  ] as const) {
    it(`refuses ${what} with one line naming the file, counts it, and keeps the file's previous objects`, async () => {
      const dir = mkdtempSync(join(root, "bad-"));
      const file = join(dir, "bad.yaml");
      writeFileSync(file, yaml(pod("default", "kept", { ip: "10.0.2.1" })));
      const s = newSource(dir);
      await s.source.start();
      try {
        writeFileSync(file, text);
        await eventually("refusal", 5000, async () => (s.refused.length > 0 ? true : undefined));
        assert.deepEqual(s.refused, [reason]);
        const refusal = s.logs.filter((l) => l.includes("refused"));
        assert.equal(refusal.length, 1);
        assert.match(refusal[0], line);
        assert.ok(!refusal[0].includes("\n"));
        assert.equal(podIp(s.objects, "default/kept"), "10.0.2.1", "the file's previous objects stay");
        // Fixed: read again.
        writeFileSync(file, yaml(pod("default", "kept", { ip: "10.0.2.2" })));
        await eventually("fixed file read", 5000, async () => (podIp(s.objects, "default/kept") === "10.0.2.2" ? true : undefined));
        assert.equal(s.refused.length, 1);
      } finally {
        await s.source.stop();
      }
    });
  }

  it("refuses a file over the size cap unread, naming the cap", async () => {
    const dir = mkdtempSync(join(root, "big-"));
    writeFileSync(join(dir, "big.yaml"), yaml(pod("default", "big", { ip: "10.0.3.1" })) + `# ${"x".repeat(2000)}\n`);
    const s = newSource(dir, 1024);
    await s.source.start();
    try {
      assert.deepEqual(s.refused, ["too_large"]);
      assert.match(s.logs.find((l) => l.includes("refused")) ?? "", /big\.yaml: \d+ bytes, over the 1024-byte cap \(not read\); refused, nothing from it is in force$/);
      assert.equal(s.objects.pods.size, 0);
    } finally {
      await s.source.stop();
    }
  });

  it("an object in two files is taken from the first by name, the other copy counted; kinds the feed does not read are skipped and counted", async () => {
    const dir = mkdtempSync(join(root, "dup-"));
    writeFileSync(join(dir, "a.yaml"), yaml(pod("default", "p", { ip: "10.0.4.1" })));
    writeFileSync(join(dir, "b.yaml"), yaml(pod("default", "p", { ip: "10.0.4.2" }), { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d" } }));
    const s = newSource(dir);
    await s.source.start();
    try {
      assert.equal(podIp(s.objects, "default/p"), "10.0.4.1");
      assert.deepEqual(s.refused.sort(), ["duplicate", "unknown_kind"]);
      assert.ok(s.logs.some((l) => /b\.yaml: pods default\/p is also in .*a\.yaml; this copy is ignored/.test(l)));
      assert.ok(s.logs.some((l) => /b\.yaml: document 2: kind Deployment is not one the feed reads/.test(l)));
    } finally {
      await s.source.stop();
    }
  });

  it("a rescan decides only the objects of the files that changed: the second copy takes over when the first file goes, other files are not re-counted", async () => {
    const dir = mkdtempSync(join(root, "dup-moves-"));
    writeFileSync(join(dir, "a.yaml"), yaml(pod("default", "p", { ip: "10.0.5.1" })));
    writeFileSync(join(dir, "b.yaml"), yaml(pod("default", "p", { ip: "10.0.5.2" }), pod("default", "q", { ip: "10.0.5.3" })));
    const s = newSource(dir);
    await s.source.start();
    try {
      assert.equal(podIp(s.objects, "default/p"), "10.0.5.1");
      assert.deepEqual(s.refused, ["duplicate"]);
      // Another file changes: p and q are not decided again (no second duplicate counted).
      writeFileSync(join(dir, "c.yaml"), yaml(pod("default", "r", { ip: "10.0.5.4" })));
      await eventually("r read", 5000, async () => (podIp(s.objects, "default/r") === "10.0.5.4" ? true : undefined));
      assert.deepEqual(s.refused, ["duplicate"]);
      assert.equal(podIp(s.objects, "default/p"), "10.0.5.1");
      // The first file goes: b's copy of p is in force, q is untouched.
      rmSync(join(dir, "a.yaml"));
      await eventually("b's p in force", 5000, async () => (podIp(s.objects, "default/p") === "10.0.5.2" ? true : undefined));
      assert.equal(podIp(s.objects, "default/q"), "10.0.5.3");
      // b goes too: p and q are removed, r stays.
      rmSync(join(dir, "b.yaml"));
      await eventually("p removed", 5000, async () => (s.objects.pods.has("default/p") ? undefined : true));
      assert.equal(s.objects.pods.has("default/q"), false);
      assert.equal(podIp(s.objects, "default/r"), "10.0.5.4");
    } finally {
      await s.source.stop();
    }
  });

  it("a path that does not exist stops the start with one line", async () => {
    const s = newSource(join(root, "missing"));
    await assert.rejects(s.source.start(), /^Error: cluster files1: files: cannot read .*missing \(ENOENT\)$/);
  });
});

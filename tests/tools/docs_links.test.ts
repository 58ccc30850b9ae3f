// The project's docs stand alone: every relative link in a Markdown file of the repository
// points at a file or directory inside the repository that exists (a clone has nothing else).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../support/paths.js";

const markdown = execFileSync("git", ["ls-files", "*.md"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\n").filter(Boolean);

/** Relative link targets in `text`: `[x](target)` outside code spans, without a scheme or anchor-only. */
function relativeLinks(text: string): string[] {
  const links: string[] = [];
  for (const match of text.replace(/`[^`\n]*`/g, "").matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = match[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("#")) continue;
    links.push(target.split("#")[0]!);
  }
  return links;
}

describe("documentation links", () => {
  it("finds the Markdown files", () => assert.ok(markdown.includes("docs/problems.md") && markdown.includes("README.md")));

  for (const file of markdown) {
    it(`${file}: every relative link stays inside the repository and exists`, () => {
      for (const target of relativeLinks(readFileSync(resolve(REPO_ROOT, file), "utf8"))) {
        const path = resolve(REPO_ROOT, dirname(file), target);
        assert.ok(!relative(REPO_ROOT, path).startsWith(".."), `${file} links outside the repository: ${target}`);
        assert.ok(existsSync(path), `${file} links to a missing file: ${target}`);
      }
    });
  }

  it("no document links to a web address: a clone has no network to follow it", () => {
    for (const file of markdown) {
      const text = readFileSync(resolve(REPO_ROOT, file), "utf8").replace(/`[^`\n]*`/g, "");
      const web = [...text.matchAll(/\]\(\s*([a-z][a-z0-9+.-]*:[^)\s]*)/gi), ...text.matchAll(/<([a-z][a-z0-9+.-]*:\/\/[^>\s]+)>/gi)].map((m) => m[1]);
      assert.deepEqual(web, [], `${file} links outside the repository`);
    }
  });

  it("no document points readers at the team's shared docs", () => {
    for (const file of markdown) assert.doesNotMatch(readFileSync(resolve(REPO_ROOT, file), "utf8"), /shared\/docs/, file);
  });
});

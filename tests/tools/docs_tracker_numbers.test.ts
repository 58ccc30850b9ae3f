// User docs say what the software does, not which tracker entry asked for it: a reader of a
// clone cannot open "issue 15". Upstream references (envoyproxy/envoy#47378) name a public
// repository and stay allowed.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../support/paths.js";

const TRACKER_NUMBER = /\b(issue|ticket|task)s?\s+#?\d+/gi;

function trackerNumbers(text: string): string[] {
  return text.split("\n").flatMap((line, i) => [...line.matchAll(TRACKER_NUMBER)].map((m) => `${i + 1}: ${m[0]}`));
}

describe("no tracker numbers in user docs", () => {
  it("the check sees the pattern it is for, and lets upstream references through", () => {
    assert.deepEqual(trackerNumbers("the baseline for issue 15\n(issues 6, 7)\nTask 3 done\nenvoyproxy/envoy#47378 (not in 1.40)"), ["1: issue 15", "2: issues 6", "3: Task 3"]);
  });

  it("no Markdown file of the repository names an issue by number", () => {
    const markdown = execFileSync("git", ["ls-files", "*.md"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
    assert.ok(markdown.includes("README.md") && markdown.includes("CHANGELOG.md"));
    const found = markdown.flatMap((file) => trackerNumbers(readFileSync(join(REPO_ROOT, file), "utf8")).map((hit) => `${file}:${hit}`));
    assert.deepEqual(found, [], `say what the change did instead:\n${found.join("\n")}`);
  });
});

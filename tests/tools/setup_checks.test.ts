// The setup steps give the same answer every time. A newcomer's first `npm ci && npm run demo` once
// failed by chance: `etcd --version | grep -q …` under `set -o pipefail`, where grep exits at its
// first match and etcd dies of SIGPIPE while still writing. Two guards:
// - every shell script the project runs is read for an early-exit reader after a pipe;
// - the real setup scripts, on this machine's real binaries, run their "already installed?" checks
//   RUNS times in a row and must say yes every time (and no for a version that is not installed).
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../support/paths.js";

const RUNS = 50;

/** Tracked files that bash runs: `*.sh`, and any file whose first line names bash or sh. */
function shellScripts(): string[] {
  const tracked = execFileSync("git", ["ls-files"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
  return tracked.filter((file) => {
    if (file.endsWith(".sh")) return true;
    if (/\.(ts|mjs|js|json|md|yaml|yml|go|py|wasm|svg|pem|txt)$/.test(file)) return false;
    const first = readFileSync(join(REPO_ROOT, file), "utf8").split("\n", 1)[0] ?? "";
    return /^#!.*\b(bash|sh)\b/.test(first);
  });
}

/**
 * Readers that may stop before their writer has finished: `grep -q`/`-m`/`-l`, `head`, an awk
 * program with `exit`, a sed script that quits. After a `|` each can kill the writer with SIGPIPE.
 */
const EARLY_EXIT_AFTER_PIPE = [
  /\|\s*grep\s+(-[A-Za-z]*[qml][A-Za-z]*\b|--quiet|--silent|--max-count|--files-with-matches)/,
  /\|\s*head\b/,
  /\|\s*awk\b[^|]*\bexit\b/,
  /\|\s*sed\b[^|]*[0-9/]q\b/,
];

function earlyExitLines(text: string): string[] {
  return text
    .split("\n")
    .map((line, i) => ({ line, n: i + 1 }))
    .filter(({ line }) => !line.trimStart().startsWith("#") && EARLY_EXIT_AFTER_PIPE.some((re) => re.test(line)))
    .map(({ line, n }) => `${n}: ${line.trim()}`);
}

/** Runs `script` in bash RUNS times; returns how many runs failed, and the first failure's output. */
function repeat(script: string, env: NodeJS.ProcessEnv = {}): { failed: number; first: string } {
  const loop = `set -euo pipefail; failed=0; for i in $(seq ${RUNS}); do if ! ( ${script} ) >/tmp/setup-check.$$ 2>&1; then failed=$((failed + 1)); [[ -f /tmp/setup-check.first.$$ ]] || cp /tmp/setup-check.$$ /tmp/setup-check.first.$$; fi; done; echo "$failed"; cat /tmp/setup-check.first.$$ 2>/dev/null || true; rm -f /tmp/setup-check.$$ /tmp/setup-check.first.$$`;
  const run = spawnSync("bash", ["-c", loop], { cwd: REPO_ROOT, encoding: "utf8", env: { ...process.env, ...env } });
  assert.equal(run.status, 0, run.stderr);
  const [count, ...rest] = run.stdout.split("\n");
  return { failed: Number(count), first: rest.join("\n") };
}

const pinnedEtcd = /ETCD_DEBIAN_VERSION="([^"-]+)/.exec(readFileSync(join(REPO_ROOT, "scripts/kube-setup.sh"), "utf8"))?.[1];
const pinnedEnvoy = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).config.envoyVersion as string;

describe("setup checks", () => {
  it("finds the project's shell scripts, and the early-exit lint sees the pattern it is for", () => {
    const scripts = shellScripts();
    assert.ok(scripts.includes("scripts/kube-setup.sh") && scripts.includes(".ci/run"), scripts.join(" "));
    assert.deepEqual(earlyExitLines('x --version | grep -q "v1"\nx | head -1\nx | awk \'{ print; exit }\'\n# x | head\ny | grep v1'), [
      '1: x --version | grep -q "v1"',
      "2: x | head -1",
      "3: x | awk '{ print; exit }'",
    ]);
  });

  it("no shell script pipes a writer into a reader that may exit early", () => {
    const found = shellScripts().flatMap((file) => earlyExitLines(readFileSync(join(REPO_ROOT, file), "utf8")).map((l) => `${file}:${l}`));
    assert.deepEqual(found, [], `early-exit readers after a pipe (read the output into a variable first, scripts/lib/reports.sh):\n${found.join("\n")}`);
  });

  it(`scripts/setup.sh finds the installed Envoy ${pinnedEnvoy} ${RUNS} times in a row`, () => {
    const { failed, first } = repeat("bash scripts/setup.sh");
    assert.equal(failed, 0, `${failed}/${RUNS} runs failed; first:\n${first}`);
  });

  it(`scripts/kube-setup.sh finds its build complete (etcd ${pinnedEtcd} asked each time) ${RUNS} times in a row`, () => {
    assert.ok(pinnedEtcd, "no ETCD_DEBIAN_VERSION in scripts/kube-setup.sh");
    // Without a finished build the script would start the ~15-minute build instead of checking.
    assert.ok(existsSync(join(REPO_ROOT, ".cache/kube/bin/versions")), "no finished build in .cache/kube: run `npm run setup:kube` first");
    const { failed, first } = repeat("bash scripts/kube-setup.sh");
    assert.equal(failed, 0, `${failed}/${RUNS} runs failed; first:\n${first}`);
  });

  it(`the version checks say yes ${RUNS} times for the real binaries, and no for another version`, () => {
    const etcd = join(REPO_ROOT, ".cache/kube/bin/etcd");
    const envoy = join(REPO_ROOT, ".venv/envoy");
    const yes = repeat(`source scripts/lib/reports.sh; reports_line "etcd Version: ${pinnedEtcd}" ${etcd} --version && reports_text "/${pinnedEnvoy}/" ${envoy} --version`);
    assert.equal(yes.failed, 0, `${yes.failed}/${RUNS} runs failed; first:\n${yes.first}`);
    for (const wrong of [`reports_line "etcd Version: ${pinnedEtcd}.9" ${etcd} --version`, `reports_line "etcd Version: 3.4" ${etcd} --version`, `reports_text "/0.0.1/" ${envoy} --version`, `reports_line "etcd Version: ${pinnedEtcd}" false`]) {
      const run = spawnSync("bash", ["-c", `set -euo pipefail; source scripts/lib/reports.sh; ${wrong}`], { cwd: REPO_ROOT });
      assert.notEqual(run.status, 0, `said yes to: ${wrong}`);
    }
  });
});

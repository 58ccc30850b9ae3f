// `npm run explain` as an operator uses it: one described connection in, one JSON object out.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../support/paths.js";

function explain(args: string[]): { code: number | null; json: any; stderr: string } {
  const result = spawnSync(process.execPath, ["--import", "tsx", "scripts/explain.ts", ...args], {
    cwd: REPO_ROOT,
    encoding: "utf8",
  });
  let json: unknown;
  try {
    json = JSON.parse(result.stdout);
  } catch {
    json = undefined;
  }
  return { code: result.status, json, stderr: result.stderr };
}

const ROUTES = JSON.stringify({ routes: { "10.0.0.1": "backend_a" } });

describe("npm run explain", () => {
  it("prints the status, the filter-state writes, the counters and the decision log", () => {
    const { code, json } = explain(["--filter", "probe", "--config", ROUTES, "--destination", "10.0.0.1:80"]);
    assert.equal(code, 0);
    assert.equal(json.configured, true);
    assert.equal(json.status, "Continue");
    assert.deepEqual(json.filterState, [{ key: "envoy.tcp_proxy.cluster", value: "backend_a", span: "FilterChain" }]);
    assert.equal(json.counters["probe.routed"], 1);
    assert.ok(json.logs.some((line: { message: string }) => line.message.includes("-> cluster backend_a")));
  });

  it("reads the same fields from an input file", () => {
    const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "explain-"));
    const input = join(dir, "input.json");
    writeFileSync(input, JSON.stringify({ filter: "probe", configuration: { routes: {} }, destination: "10.0.0.9:80" }));
    const { code, json } = explain(["--input", input]);
    assert.equal(code, 0);
    assert.deepEqual(json.filterState, []);
    assert.equal(json.counters["probe.unmatched"], 1);
  });

  it("shows why a configuration was refused", () => {
    const { code, json } = explain(["--filter", "probe", "--config", '{"routes":{"10.0.0.1":3}}', "--destination", "10.0.0.1:80"]);
    assert.equal(code, 0);
    assert.equal(json.configured, false);
    assert.match(json.logs[0].message, /routes\["10\.0\.0\.1"\]: expected a string/);
  });

  it("refuses a call without a destination, with usage", () => {
    const { code, stderr } = explain(["--filter", "probe"]);
    assert.equal(code, 2);
    assert.match(stderr, /--destination is required/);
  });
});

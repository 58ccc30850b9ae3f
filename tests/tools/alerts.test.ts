// The shipped monitoring (monitoring/): the alert rules pass `promtool check rules` and their unit
// tests (`promtool test rules monitoring/alerts_test.yaml`: each alert fires on the series it is
// for and not on the ones it is not), with promtool from Debian's pinned prometheus package
// (scripts/promtool-setup.sh). And every metric the rules and the Grafana dashboard name exists:
// a filter metric in docs/metrics.md (itself checked against the real Envoy), a feed metric
// named in feed/src or in feed/docs/metrics.md's tables (with a histogram's series), or Prometheus'
// own `up`; a `__name__` regex must match at least one.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { REPO_ROOT } from "../support/paths.js";

const MONITORING = join(REPO_ROOT, "monitoring");

function promtool(...args: string[]): string {
  const path = execFileSync("bash", ["scripts/promtool-setup.sh"], { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], timeout: 300_000 }).trim();
  return execFileSync(path, args, { cwd: MONITORING, encoding: "utf8" });
}

/** Every metric name the project defines, as Prometheus sees it. */
function knownMetrics(): Set<string> {
  const known = new Set(["up"]);
  for (const m of readFileSync(join(REPO_ROOT, "docs/metrics.md"), "utf8").matchAll(/^\| `wasmcustom\.[^`]+` \| `([^`]+)` \|/gm)) known.add(m[1]!);
  const feedSources = readdirSync(join(REPO_ROOT, "feed/src"), { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
  for (const file of feedSources) {
    // Every feed metric is a "feed_..." literal, declared in place or through a named constant.
    for (const m of readFileSync(join(REPO_ROOT, "feed/src", file), "utf8").matchAll(/"(feed_[a-z_]+)"/g)) known.add(m[1]!);
  }
  // The feed's table (feed/docs/metrics.md, checked against the running feed by metrics_feed.test.ts),
  // with its process metrics; a histogram is read as its _bucket, _sum and _count series.
  for (const m of readFileSync(join(REPO_ROOT, "feed/docs/metrics.md"), "utf8").matchAll(/^\| `([a-z0-9_]+)` \| (gauge|counter|histogram) \|/gm)) {
    known.add(m[1]!);
    if (m[2] === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) known.add(m[1]! + suffix);
  }
  return known;
}

const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless"]);

/** The metric names an expression reads: bare names and `__name__` regexes. */
function metricsIn(expr: string): { names: string[]; regexes: string[] } {
  const regexes = [...expr.matchAll(/__name__\s*=~\s*"([^"]+)"/g)].map((m) => m[1]!);
  const bare = expr
    .replace(/"[^"]*"/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  // Whole identifiers; one followed by "(" is a function.
  const names = [...bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)].filter((m) => !m[2]).map((m) => m[1]!).filter((t) => !KEYWORDS.has(t));
  return { names, regexes };
}

function checkNames(where: string, expr: string, known: Set<string>): void {
  const { names, regexes } = metricsIn(expr);
  for (const n of names) assert.ok(known.has(n), `${where}: ${n} is no metric this project defines (${expr})`);
  for (const r of regexes) {
    const re = new RegExp(`^(?:${r})$`);
    assert.ok([...known].some((k) => re.test(k)), `${where}: __name__=~"${r}" matches no metric this project defines`);
  }
  assert.ok(names.length + regexes.length > 0, `${where}: reads no metric (${expr})`);
}

describe("monitoring: alert rules and dashboard", () => {
  it("promtool check rules", () => {
    assert.match(promtool("check", "rules", "alerts.yaml"), /SUCCESS: \d+ rules found/);
  });

  it("promtool test rules: every alert has a test that fires it", () => {
    assert.match(promtool("test", "rules", "alerts_test.yaml"), /SUCCESS/);
    const alerts = parse(readFileSync(join(MONITORING, "alerts.yaml"), "utf8")).groups.flatMap((g: { rules: { alert: string }[] }) => g.rules.map((r) => r.alert));
    const tests = parse(readFileSync(join(MONITORING, "alerts_test.yaml"), "utf8")).tests as { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
    const fired = new Set(tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
    assert.deepEqual(alerts.filter((a: string) => !fired.has(a)), []);
  });

  it("every metric the rules read exists", () => {
    const known = knownMetrics();
    for (const group of parse(readFileSync(join(MONITORING, "alerts.yaml"), "utf8")).groups) {
      for (const rule of group.rules) checkNames(rule.alert, rule.expr, known);
    }
  });

  it("every metric the dashboard reads exists, and each alert links a runbook section that exists", () => {
    const known = knownMetrics();
    const dashboard = JSON.parse(readFileSync(join(MONITORING, "dashboard.json"), "utf8"));
    for (const panel of dashboard.panels) for (const t of panel.targets) checkNames(`dashboard "${panel.title}"`, t.expr, known);
    const runbook = readFileSync(join(REPO_ROOT, "docs/runbook.md"), "utf8");
    const anchors = new Set([...runbook.matchAll(/^#+ (.+)$/gm)].map((m) => m[1]!.toLowerCase().replace(/[^a-z0-9 -]/g, "").replace(/ /g, "-")));
    for (const group of parse(readFileSync(join(MONITORING, "alerts.yaml"), "utf8")).groups) {
      for (const rule of group.rules) {
        const anchor = /docs\/runbook\.md#([a-z0-9-]+)/.exec(rule.annotations.description)?.[1];
        assert.ok(anchor && anchors.has(anchor), `${rule.alert}: its runbook link #${anchor} names no section of docs/runbook.md`);
      }
    }
  });

  it("a name the project does not define is caught (the check can fail)", () => {
    assert.throws(() => checkNames("x", "rate(feed_no_such_metric_total[5m]) > 0", knownMetrics()), /feed_no_such_metric_total is no metric/);
    assert.throws(() => checkNames("x", 'sum({__name__=~"nope_.+"})', knownMetrics()), /matches no metric/);
  });
});

// The metrics reference (docs/metrics.md) against the real Envoy: each filter is loaded with its
// shipped configuration plus a meshFeed (so the feed client's metrics are defined too), and every
// `wasmcustom.*` stat Envoy shows in /stats must have a row in the reference, with the
// Prometheus name and type Envoy's own /stats/prometheus gives it; every row must name a stat
// that exists. (Envoy registers `wasmcustom` as a custom stat namespace: its Prometheus names
// drop that prefix and get no `envoy_` prefix.)
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { EnvoyProcess } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { pluginConfiguration } from "../support/envoy_yaml.js";
import { REPO_ROOT } from "../support/paths.js";
import { freePort } from "../support/ports.js";

/** Each filter and the shipped file its configuration comes from. */
const FILTERS = [
  { filter: "probe", file: "probe.yaml", feed: false },
  { filter: "passthrough_mtls", file: "passthrough_mtls.yaml", feed: true },
  { filter: "tunnel_port", file: "tunnel_port_client.yaml", feed: true },
  { filter: "waypoint_route", file: "waypoint_route_plugin/waypoint_route.yaml", feed: true },
] as const;

interface Row {
  prometheus: string;
  type: string;
}

/** `| \`wasmcustom.x.y\` | \`x_y\` | counter | ... |` rows of docs/metrics.md, by Envoy stat name. */
function reference(): Map<string, Row> {
  const rows = new Map<string, Row>();
  for (const line of readFileSync(join(REPO_ROOT, "docs/metrics.md"), "utf8").split("\n")) {
    const m = /^\| `(wasmcustom\.[^`]+)` \| `([^`]+)` \| (counter|gauge) \|/.exec(line);
    if (!m) continue;
    assert.ok(!rows.has(m[1]!), `docs/metrics.md lists ${m[1]} twice`);
    rows.set(m[1]!, { prometheus: m[2]!, type: m[3]! });
  }
  return rows;
}

/** What the real Envoy defines for `filter`: stat name → Prometheus name and type. */
async function definedBy(filter: string, file: string, feed: boolean): Promise<Map<string, Row>> {
  const configuration = pluginConfiguration(file, filter);
  if (feed) configuration.meshFeed = { cluster: "mesh_feed", target: "metrics" };
  const [admin, port, nowhere] = [await freePort(), await freePort(), await freePort()];
  const envoy = await EnvoyProcess.start({
    name: `metrics-${filter}`,
    adminPort: admin,
    config: bootstrap({
      adminPort: admin,
      listeners: [listener({ name: "l", address: "127.0.0.1", port, filters: [wasmNetworkFilter({ name: filter, wasm: `build/${filter}.wasm`, configuration: JSON.stringify(configuration) }), tcpProxy("metrics", "mesh_feed")] })],
      clusters: [staticCluster("mesh_feed", "127.0.0.1", nowhere)],
    }),
  });
  try {
    const types = new Map<string, string>();
    for (const m of (await envoy.admin("/stats/prometheus")).matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1]!, m[2]!);
    const out = new Map<string, Row>();
    for (const m of (await envoy.admin("/stats")).matchAll(/^(wasmcustom\.[^:]+):/gm)) {
      const prometheus = m[1]!.slice("wasmcustom.".length).replace(/[^a-zA-Z0-9_]/g, "_");
      const type = types.get(prometheus);
      assert.ok(type, `${m[1]}: no ${prometheus} in /stats/prometheus`);
      out.set(m[1]!, { prometheus, type });
    }
    return out;
  } finally {
    await envoy.stop();
  }
}

describe("docs/metrics.md names every filter metric as the real Envoy exports it", () => {
  const rows = reference();
  const seen = new Set<string>();
  for (const { filter, file, feed } of FILTERS) {
    it(filter, async () => {
      const defined = await definedBy(filter, file, feed);
      assert.ok(defined.size > 0, `${filter} defined no metric`);
      for (const [stat, row] of defined) {
        seen.add(stat);
        assert.deepEqual(rows.get(stat), row, `${stat}: docs/metrics.md should say | \`${stat}\` | \`${row.prometheus}\` | ${row.type} |`);
      }
      const documented = [...rows.keys()].filter((s) => s.startsWith(`wasmcustom.${filter}.`));
      assert.deepEqual(documented.filter((s) => !defined.has(s)), [], `rows for metrics ${filter} does not define`);
    });
  }
  it("no row names a filter this test does not load", () => {
    assert.deepEqual([...rows.keys()].filter((s) => !FILTERS.some((f) => s.startsWith(`wasmcustom.${f.filter}.`))), []);
  });
});

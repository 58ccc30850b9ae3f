// One schema: the field names the feed writes (feed/src/schema.ts) are the ones the filters'
// parser knows (assembly/mesh/parse.ts), list by list and in the same order. A field added or
// renamed on either side fails here until the other side follows.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import * as schema from "../../feed/src/schema.js";

const parser = readFileSync(new URL("../../assembly/mesh/parse.ts", import.meta.url), "utf8");

/** The string array literal assigned to `name` in parse.ts. */
function parserList(name: string): string[] {
  const m = new RegExp(`const ${name}(?::\\s*string\\[\\])?\\s*=\\s*\\[([^\\]]*)\\]`).exec(parser);
  assert.ok(m, `assembly/mesh/parse.ts has no list ${name}`);
  return [...m[1].matchAll(/"([^"]+)"/g)].map((x) => x[1]);
}

describe("feed: the snapshot schema is the filters' own", () => {
  for (const [feedName, parserName] of [
    ["MESH_KEYS", "MESH_FIELDS"],
    ["WORKLOAD_KEYS", "WORKLOAD_FIELDS"],
    ["SERVICE_KEYS", "SERVICE_FIELDS"],
    ["VIP_KEYS", "VIP_FIELDS"],
    ["ENDPOINT_KEYS", "ENDPOINT_FIELDS"],
    ["WAYPOINT_KEYS", "WAYPOINT_FIELDS"],
    ["GATEWAY_KEYS", "GATEWAY_FIELDS"],
    ["LB_KEYS", "LB_FIELDS"],
  ] as const) {
    it(`${feedName} = parse.ts ${parserName}`, () => {
      assert.deepEqual([...schema[feedName]], parserList(parserName));
    });
  }

  it("the enumerations agree (tlsMode, load-balancing mode and scopes)", () => {
    const names = (re: RegExp) => [...(re.exec(parser)?.[1] ?? "").matchAll(/"([^"]+)"/g)].map((x) => x[1]);
    assert.deepEqual(names(/TLS_MODES = new JsonNames\(\[([^\]]*)\]/), ["istio", "disabled"] satisfies Array<NonNullable<schema.Workload["tlsMode"]>>);
    assert.deepEqual(names(/LB_MODES = new JsonNames\(\[([^\]]*)\]/), ["failover", "standard"] satisfies Array<NonNullable<schema.LoadBalancing["mode"]>>);
    assert.deepEqual(names(/SCOPES = new JsonNames\(\[([^\]]*)\]/), ["network", "region", "zone", "subzone"] satisfies NonNullable<schema.LoadBalancing["routingPreference"]>);
  });

  it("the default HBONE port is the parser's", () => {
    assert.match(parser, new RegExp(`DEFAULT_HBONE_PORT: i32 = ${schema.HBONE_PORT};`));
  });

  it("every key the feed emits is a known key (walks a rendered snapshot)", async () => {
    const { MeshComputer } = await import("../../feed/src/compute.js");
    const { ClusterObjects } = await import("../../feed/src/cluster_objects.js");
    const { NetworkResolver } = await import("../../feed/src/mesh_networks.js");
    const { viewFor } = await import("../../feed/src/view.js");
    const f = await import("./fixtures.js");
    const c1 = new ClusterObjects("c1");
    c1.upsert("namespaces", f.namespace("istio-system", { "topology.istio.io/network": "n1" }));
    c1.upsert("namespaces", f.namespace("default", { "istio.io/use-waypoint": "waypoint" }));
    c1.upsert("gateways", f.waypointGateway("default", "waypoint", { trafficType: "all" }));
    c1.upsert("nodes", f.node("n", "r", "z", "s"));
    c1.upsert("pods", f.pod("default", "a", { ip: "10.0.0.1", node: "n", ready: false }));
    const svc = f.service("default", "s", [{ name: "h", port: 80, targetPort: "web" }]);
    svc.spec!.trafficDistribution = "PreferClose";
    c1.upsert("services", svc);
    c1.upsert("services", f.service("default", "h", [{ port: 5432 }], { clusterIP: "None" }));
    c1.upsert("endpointSlices", f.slice("default", "s", "s1", [{ name: "h", port: 8080 }], [{ ip: "10.0.0.1", pod: "a" }]));
    const c2 = new ClusterObjects("c2");
    c2.upsert("namespaces", f.namespace("istio-system", { "topology.istio.io/network": "n2" }));
    c2.upsert("gateways", f.eastWestGateway("istio-system", "ew", "n2", "172.16.0.9"));
    c2.upsert("pods", f.pod("default", "b", { ip: "10.0.0.2" }));
    const mesh = new MeshComputer({ trustDomain: "td", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() }).compute([c1, c2]);
    const { snapshot } = viewFor(mesh, "n1");
    const seen = new Set<string>();
    const check = (o: object, keys: readonly string[], where: string) => {
      for (const k of Object.keys(o)) {
        assert.ok(keys.includes(k), `${where}.${k} is not a key the parser knows`);
        seen.add(`${where}.${k}`);
      }
    };
    check(snapshot, schema.MESH_KEYS, "mesh");
    for (const w of snapshot.workloads) {
      check(w, schema.WORKLOAD_KEYS, "workload");
      if (w.waypoint) check(w.waypoint, schema.WAYPOINT_KEYS, "workload.waypoint");
      if (w.networkGateway) check(w.networkGateway, schema.GATEWAY_KEYS, "workload.networkGateway");
    }
    for (const s of snapshot.services) {
      check(s, schema.SERVICE_KEYS, "service");
      for (const v of s.vips ?? []) check(v, schema.VIP_KEYS, "service.vip");
      for (const e of s.endpoints ?? []) check(e, schema.ENDPOINT_KEYS, "service.endpoint");
      if (s.waypoint) check(s.waypoint, schema.WAYPOINT_KEYS, "service.waypoint");
      if (s.loadBalancing) check(s.loadBalancing, schema.LB_KEYS, "service.loadBalancing");
    }
    // The fixture reaches the fields the feed can fill (cluster is never written: istiod's
    // cluster names are the model's default).
    for (const k of ["workload.network", "workload.healthy", "workload.locality", "workload.waypoint", "workload.networkGateway", "service.vips", "service.ports", "service.endpoints", "service.waypoint", "service.subjectAltNames", "service.headless", "service.loadBalancing"]) {
      assert.ok(seen.has(k), `the fixture never emitted ${k}`);
    }
  });
});

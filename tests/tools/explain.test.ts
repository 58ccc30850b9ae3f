// `npm run explain` as an operator uses it: one described connection in, one JSON object out
// (and nothing else on stdout), with a `decision` that says what Envoy will do. The expected
// decisions come from the filter READMEs' rules, not from a run.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT, scratchDir } from "../support/paths.js";

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
    const dir = scratchDir("explain-");
    const input = join(dir, "input.json");
    writeFileSync(input, JSON.stringify({ filter: "probe", configuration: { routes: {} }, destination: "10.0.0.9:80" }));
    const { code, json } = explain(["--input", input]);
    assert.equal(code, 0);
    assert.deepEqual(json.filterState, []);
    assert.equal(json.counters["probe.unmatched"], 1);
  });

  it("exits 1 on a refused configuration, with the filter's reason in the top-level field `refused`", () => {
    const { code, json } = explain(["--filter", "probe", "--config", '{"routes":{"10.0.0.1":3}}', "--destination", "10.0.0.1:80"]);
    assert.equal(code, 1);
    assert.equal(json.configured, false);
    assert.match(json.refused, /routes\["10\.0\.0\.1"\]: expected a string/);
    assert.equal(json.decision, undefined);
    assert.match(json.logs[0].message, /routes\["10\.0\.0\.1"\]: expected a string/);
  });

  it("refuses a call without a destination, with usage", () => {
    const { code, stderr } = explain(["--filter", "probe"]);
    assert.equal(code, 2);
    assert.match(stderr, /--destination is required/);
  });
});

// ---------------------------------------------------------------- the operator's commands

const PROBE_ARGS = ["--filter", "probe", "--config", ROUTES, "--destination", "10.0.0.1:80"];

describe("explain prints only JSON on stdout", () => {
  for (const [name, command, args] of [
    ["npx tsx scripts/explain.ts", "npx", ["tsx", "scripts/explain.ts", ...PROBE_ARGS]],
    ["npm run --silent explain --", "npm", ["run", "--silent", "explain", "--", ...PROBE_ARGS]],
  ] as const) {
    it(`${name}: the whole of stdout parses as one JSON object`, () => {
      const result = spawnSync(command, [...args], { cwd: REPO_ROOT, encoding: "utf8" });
      assert.equal(result.status, 0, result.stderr);
      const parsed = JSON.parse(result.stdout); // throws on a banner or any stray line
      assert.equal(parsed.decision.rule, "routed");
    });
  }
});

// ---------------------------------------------------------------- decision

const id = (sa: string, ns = "default") => `spiffe://cluster.local/ns/${ns}/sa/${sa}`;

/** Writes `input` to a file and explains it. */
function explainInput(input: object, extra: string[] = []) {
  const dir = scratchDir("explain-");
  const file = join(dir, "input.json");
  writeFileSync(file, JSON.stringify(input));
  return explain(["--input", file, ...extra]);
}

// One mesh for every filter: app-0 (10.1.0.1, istio) and legacy-0 (10.1.0.3, plain) on the
// default network; app-west/app-east share 10.0.0.1 on two networks; service app
// (VIP 10.96.0.10, 80 -> 8080) has app-0 as its endpoint.
const MESH = {
  workloads: [
    { uid: "app-0", addresses: ["10.1.0.1"], tlsMode: "istio", identity: id("app-0") },
    { uid: "legacy-0", addresses: ["10.1.0.3"] },
    { uid: "app-west", addresses: ["10.0.0.1"], network: "west", tlsMode: "istio", identity: id("app-west") },
    { uid: "app-east", addresses: ["10.0.0.1"], network: "east", tlsMode: "istio", identity: id("app-east") },
  ],
  services: [{ hostname: "app.default.svc.cluster.local", vips: [{ address: "10.96.0.10" }], ports: { "80": 8080 }, endpoints: [{ workload: "app-0" }] }],
};

describe("explain decision: passthrough_mtls", () => {
  it("a mesh pod: mTLS to exactly that pod, verifying its identity, rule mtls", () => {
    const { code, json } = explainInput({ filter: "passthrough_mtls", configuration: MESH, destination: "10.1.0.1:8080" });
    assert.equal(code, 0);
    const d = json.decision;
    assert.equal(d.protocol, "mTLS");
    assert.equal(d.nextHop, "10.1.0.1:8080");
    assert.equal(d.cluster, "outbound_mtls_passthrough");
    assert.deepEqual(d.identitiesChecked, [{ hop: "TLS to 10.1.0.1:8080", identities: [id("app-0")] }]);
    assert.equal(d.rule, "mtls");
    assert.equal(d.counter, "passthrough_mtls.mtls");
    assert.equal(d.outerAuthority, null);
    assert.match(d.summary, /^mTLS to 10\.1\.0\.1:8080 .*verifying spiffe:\/\/cluster\.local\/ns\/default\/sa\/app-0/);
  });

  it("a pod with tlsMode disabled: plain to the original destination, the detail counter listed apart", () => {
    const { json } = explainInput({ filter: "passthrough_mtls", configuration: MESH, destination: "10.1.0.3:80" });
    const d = json.decision;
    assert.equal(d.protocol, "plain");
    assert.equal(d.nextHop, "10.1.0.3:80");
    assert.deepEqual(d.identitiesChecked, []);
    assert.equal(d.counter, "passthrough_mtls.passthrough");
    assert.deepEqual(d.alsoCounted, ["passthrough_mtls.plaintext_pod"]);
  });

  it("--node-network: the same configuration verifies each network's own pod for the same IP", () => {
    for (const network of ["west", "east"]) {
      const { json } = explainInput({ filter: "passthrough_mtls", configuration: MESH, destination: "10.0.0.1:8080" }, ["--node-network", network]);
      assert.deepEqual(json.decision.identitiesChecked[0].identities, [id(`app-${network}`)], network);
      assert.deepEqual(json.decision.alsoCounted, ["passthrough_mtls.local_network_wins"]);
    }
  });
});

describe("explain decision: tunnel_port", () => {
  it("client: HBONE to the endpoint's tunnel port, :authority podIP:targetPort, the service port carried", () => {
    const { json } = explainInput({ filter: "tunnel_port", configuration: { role: "client", ...MESH }, destination: "10.96.0.10:80" });
    const d = json.decision;
    assert.equal(d.protocol, "HBONE");
    assert.equal(d.nextHop, "10.1.0.1:15008");
    assert.equal(d.outerAuthority, "10.1.0.1:8080");
    assert.equal(d.innerAuthority, null);
    assert.deepEqual(d.identitiesChecked, [{ hop: "TLS to 10.1.0.1:15008", identities: [id("app-0")] }]);
    assert.deepEqual(d.carried, { "x-tunnel-service-port (CONNECT header)": "80" });
    assert.equal(d.counter, "tunnel_port.client.tunneled");
  });

  it("client: an unknown destination goes out plain (tunneling disabled)", () => {
    const { json } = explainInput({ filter: "tunnel_port", configuration: { role: "client", ...MESH }, destination: "192.0.2.1:443" });
    assert.equal(json.decision.protocol, "plain");
    assert.equal(json.decision.nextHop, "192.0.2.1:443");
    assert.equal(json.decision.rule, "client.unknown_passthrough");
  });

  it("server: no peer → closed, with the refusal rule; a checked peer → plain to the app with both ports", () => {
    const server = { role: "server", localWorkload: "10.1.0.1", ...MESH };
    const refused = explainInput({ filter: "tunnel_port", configuration: server, destination: "10.1.0.1:8080", filterState: { "io.tunnel_port.service_port": "80" } });
    assert.equal(refused.code, 0);
    assert.equal(refused.json.decision.protocol, "closed");
    assert.equal(refused.json.decision.nextHop, null);
    assert.equal(refused.json.decision.counter, "tunnel_port.server.refused_no_peer");
    const accepted = explainInput({
      filter: "tunnel_port",
      configuration: server,
      destination: "10.1.0.1:8080",
      filterState: { "io.tunnel_port.service_port": "80", "io.tunnel_port.authority": "10.1.0.1:8080", "io.tunnel_port.peer_principal": id("client") },
    });
    const d = accepted.json.decision;
    assert.equal(d.protocol, "plain");
    assert.equal(d.nextHop, "10.1.0.1:8080");
    assert.equal(d.cluster, "tunnel_port_inbound");
    assert.deepEqual(d.identitiesChecked, [{ hop: "downstream peer (checked by the filter)", identities: [id("client")] }]);
    assert.equal(d.carried["service port (filter state wasm.service_port)"], "80");
    assert.equal(d.carried["target port (filter state wasm.target_port)"], "8080");
    assert.equal(d.rule, "server.accepted");
  });
});

describe("explain decision: waypoint_route", () => {
  // The only waypoint instance of reviews is on net2, behind gateway ew2 (172.16.2.1:15008).
  const WP_SANS = [id("waypoint")];
  const world = {
    localWorkload: "10.1.0.100",
    workloads: [
      { uid: "sleep", addresses: ["10.1.0.100"], network: "net1", tlsMode: "istio", identity: id("sleep") },
      { uid: "wp-net2", addresses: [], network: "net2", tlsMode: "istio", identity: id("wp-net2"), networkGateway: { address: "172.16.2.1", hboneMtlsPort: 15008 } },
      { uid: "ew2", addresses: ["172.16.2.1"], network: "net2", tlsMode: "istio", identity: id("ew2", "istio-system") },
      { uid: "backend", addresses: ["10.1.1.1"], network: "net1", tlsMode: "istio", identity: id("backend") },
    ],
    services: [
      { hostname: "reviews.default.svc.cluster.local", vips: [{ network: "net1", address: "10.2.0.10" }], ports: { "9080": 8080 }, waypoint: { hostname: "waypoint.default.svc.cluster.local" }, endpoints: [{ workload: "backend" }] },
      { hostname: "waypoint.default.svc.cluster.local", ports: { "15008": 15008 }, subjectAltNames: WP_SANS, endpoints: [{ workload: "wp-net2" }] },
    ],
  };

  it("a remote waypoint: double HBONE to the gateway, both authorities hostname:P, gateway then waypoint identities", () => {
    const { code, json } = explainInput({ filter: "waypoint_route", configuration: world, destination: "10.2.0.10:9080" });
    assert.equal(code, 0);
    const d = json.decision;
    assert.equal(d.protocol, "double HBONE");
    assert.equal(d.nextHop, "172.16.2.1:15008");
    assert.equal(d.outerAuthority, "reviews.default.svc.cluster.local:9080");
    assert.equal(d.innerAuthority, "reviews.default.svc.cluster.local:9080");
    assert.equal(d.identitiesChecked.length, 2);
    assert.deepEqual(d.identitiesChecked[0], { hop: "outer TLS (gateway 172.16.2.1:15008)", identities: [id("ew2", "istio-system")] });
    assert.equal(d.identitiesChecked[1].hop, "inner TLS (inside the outer CONNECT)");
    assert.ok(d.identitiesChecked[1].identities.includes(WP_SANS[0]), JSON.stringify(d.identitiesChecked[1]));
    assert.equal(d.counter, "waypoint_route.double_hbone_waypoint");
    assert.match(d.summary, /^Double HBONE/);
  });

  it("a gateway address no workload has: closed, the rule named in words", () => {
    const lost = structuredClone(world);
    lost.workloads[1]!.networkGateway = { address: "172.16.9.9", hboneMtlsPort: 15008 };
    const { code, json } = explainInput({ filter: "waypoint_route", configuration: lost, destination: "10.2.0.10:9080" });
    assert.equal(code, 0);
    assert.equal(json.decision.protocol, "closed");
    assert.equal(json.decision.nextHop, null);
    assert.deepEqual(json.decision.identitiesChecked, []);
    assert.equal(json.decision.counter, "waypoint_route.error_unknown_gateway");
    assert.match(json.decision.ruleMeaning, /gateway cannot be resolved/);
  });
});

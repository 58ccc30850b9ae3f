// The compose topologies end to end, run by tests/compose/compose.test.ts inside a private
// network + mount namespace (scripts/docker-netns.sh): starts the private engine, builds the
// stand-in images, runs every `docker compose up` command of docker-compose.yml's header exactly
// as written, and checks what scripts/compose/README.md says each shows: where each connection
// went, the filter's counters, the live update; then Ctrl-C, reruns and `down`.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { REPO_ROOT } from "../support/paths.js";
import { appLines, counters, decisions, docker, engineEnv, run, Session } from "./docker.js";
import { headerCommands, type HeaderCommand } from "./header.js";

const PEER = "peer=URI:spiffe://cluster.local/ns/default/sa/sleep";
const PLUGIN = join(REPO_ROOT, "envoy-configs/waypoint_route_plugin/waypoint_route.yaml");
const commands = new Map<string, HeaderCommand>(headerCommands().map((command) => [command.topology, command]));

function script(...args: string[]): void {
  execFileSync("bash", args, { cwd: REPO_ROOT, stdio: ["ignore", "inherit", "inherit"], timeout: 600_000 });
}

/** Runs the header's command for `topology` to its end; returns what the application printed. */
async function up(topology: string): Promise<string[]> {
  const command = commands.get(topology);
  assert.ok(command, `no "docker compose up ... ${topology}" in docker-compose.yml's header`);
  const started = Date.now();
  const output = await run(command.argv, command.env, 240_000);
  console.log(`# ${command.text}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return appLines(output, topology);
}

function projectContainers(): string[] {
  return docker(["compose", "ps", "--all", "--format", "{{.Service}} {{.State}}"]).split("\n").filter(Boolean);
}

describe("docker-compose.yml topologies on a real engine", { concurrency: false }, () => {
  before(() => {
    // Fails (never skips) when the engine cannot start: its log is on stderr.
    script("scripts/docker-engine.sh", "start");
    // What `eval "$(scripts/docker-engine.sh env)"` gives a shell.
    Object.assign(process.env, engineEnv());
    script("scripts/docker-images.sh", "build");
    // A run that was killed may have left containers in the engine's data root.
    docker(["compose", "down", "--remove-orphans", "--timeout", "2"]);
  });

  after(() => {
    try {
      docker(["compose", "down", "--remove-orphans", "--timeout", "2"]);
    } finally {
      script("scripts/docker-engine.sh", "stop");
    }
  });

  it("the header names every topology", () => {
    assert.deepEqual([...commands.keys()].sort(), ["passthrough-mtls", "passthrough-mtls-subset", "probe", "tunnel-port", "waypoint-route"]);
  });

  it("the stand-ins behave like the official images where it matters", () => {
    assert.equal(docker(["run", "--rm", "envoyproxy/envoy:v1.40.0", "id", "-u"]).trim(), "101");
    for (const image of ["envoyproxy/envoy:v1.40.0", "node:20-bookworm-slim", "node:20-alpine"]) {
      assert.equal(docker(["run", "--rm", "--entrypoint", "sh", image, "-c", "command -v curl || echo none"]).trim(), "none", image);
    }
  });

  it("probe: each destination reaches the backend its route names, counted", async () => {
    const lines = await up("probe");
    const seen = decisions(lines);
    assert.equal(seen.get("127.0.0.2:10000"), "backend_a", lines.join("\n"));
    assert.equal(seen.get("127.0.0.3:10000"), "backend_b");
    assert.equal(seen.get("127.0.0.4:10000"), "backend_default");
    const counted = counters(lines);
    assert.equal(counted.get("127.0.0.1:9901 wasmcustom.probe.routed"), 2, lines.join("\n"));
    // 127.0.0.4 has no route and the config no default_cluster: tcp_proxy's own cluster.
    assert.equal(counted.get("127.0.0.1:9901 wasmcustom.probe.unmatched"), 1);
  });

  const passthroughDecisions = (lines: string[]) => {
    const seen = decisions(lines);
    assert.equal(seen.get("127.0.0.11:8443"), `httpbin-0 ${PEER}`, lines.join("\n"));
    assert.equal(seen.get("127.0.0.13:8443"), "refused, nothing received");
    assert.equal(seen.get("127.0.0.12:8080"), "legacy-0");
    assert.equal(seen.get("127.0.0.14:5432"), `db-0 ${PEER}`);
    assert.equal(seen.get("127.0.0.30:9000"), "outside");
  };
  const sidecar = "127.0.0.1:15000 wasmcustom.passthrough_mtls";

  it("passthrough-mtls: mTLS to mesh pods, refusal of a wrong identity, plain otherwise; twice in a row", async () => {
    const first = await up("passthrough-mtls");
    passthroughDecisions(first);
    const counted = counters(first);
    // 127.0.0.11 and .13 (whose handshake then fails) are upgraded to mTLS; .14 goes through its
    // headless service's cluster; .12 (tlsMode disabled) and .30 (not a pod) pass through plain.
    assert.equal(counted.get(`${sidecar}.mtls`), 2, first.join("\n"));
    assert.equal(counted.get(`${sidecar}.headless`), 1);
    assert.equal(counted.get(`${sidecar}.passthrough`), 2);
    assert.equal(counted.get(`${sidecar}.plaintext_pod`), 1);
    // Right after: the sidecar is still up, the finished application starts afresh.
    const again = await up("passthrough-mtls");
    passthroughDecisions(again);
    assert.equal(counters(again).get(`${sidecar}.mtls`), 4, again.join("\n"));
  });

  it("passthrough-mtls-subset: the same decisions, while the direct-mode sidecar still runs", async () => {
    assert.ok(projectContainers().includes("passthrough-mtls-sidecar running"), projectContainers().join("\n"));
    const lines = await up("passthrough-mtls-subset");
    passthroughDecisions(lines);
    assert.equal(counters(lines).get(`${sidecar}.mtls`), 2, lines.join("\n"));
    assert.equal(counters(lines).get(`${sidecar}.headless`), 1);
  });

  it("counters on demand: the command the header gives prints them", () => {
    const printed = docker(["compose", "run", "--rm", "passthrough-mtls", "node", "scripts/compose/admin.mjs"]);
    assert.match(printed, /counter wasmcustom\.passthrough_mtls\.mtls = 4$/m);
  });

  it("tunnel-port: port 80 tunnelled to p1 and accepted, port 81 refused by the server", async () => {
    const lines = await up("tunnel-port");
    const seen = decisions(lines);
    assert.equal(seen.get("127.10.0.2:80"), "app-p1-9376", lines.join("\n"));
    assert.equal(seen.get("127.10.0.2:81"), "refused, nothing received");
    assert.equal(seen.get("127.0.0.30:9000"), "outside");
    const counted = counters(lines);
    assert.equal(counted.get("127.0.0.1:15000 wasmcustom.tunnel_port.client.tunneled"), 2, lines.join("\n"));
    assert.equal(counted.get("127.0.0.21:15000 wasmcustom.tunnel_port.server.accepted"), 1);
  });

  it("waypoint-route: local waypoint, then failover through the east-west gateway after a live update; Ctrl-C stops it", async () => {
    const command = commands.get("waypoint-route");
    assert.ok(command);
    const original = readFileSync(PLUGIN, "utf8");
    const session = new Session(command.argv, command.env);
    try {
      await session.waitFor(/watching for live updates/, 240_000);
      let lines = appLines(session.output, "waypoint-route");
      let seen = decisions(lines);
      assert.equal(seen.get("127.10.1.1:80"), "backend-net1", lines.join("\n"));
      assert.equal(seen.get("127.10.1.3:80"), "refused, nothing received");
      assert.equal(counters(lines).get("127.0.0.1:15000 wasmcustom.waypoint_route.hbone_waypoint"), 1);
      assert.equal(counters(lines).get("127.0.0.1:15000 wasmcustom.waypoint_route.error_no_valid_destination"), 1);

      // The README's live update: the local waypoint marked unhealthy, written + renamed.
      const unhealthy = original
        .replace(/version_info: "\d+"/, 'version_info: "compose-test"')
        .replace(/("uid": "default\/waypoint-0"[\s\S]*?"healthy": )true/, "$1false");
      assert.notEqual(unhealthy, original);
      writeFileSync(`${PLUGIN}.next`, unhealthy);
      renameSync(`${PLUGIN}.next`, PLUGIN);
      // The counters are printed after the dial lines: wait for them too, not just the decision.
      await session.waitFor(/applied a new plugin config[\s\S]*127\.10\.1\.1:80 [^\n]*-> backend-net2[\s\S]*wasmcustom\.waypoint_route\.double_hbone_waypoint = /, 30_000);
      lines = appLines(session.output, "waypoint-route");
      assert.equal(counters(lines).get("127.0.0.1:15000 wasmcustom.waypoint_route.double_hbone_waypoint"), 1, lines.join("\n"));
    } finally {
      writeFileSync(`${PLUGIN}.next`, original);
      renameSync(`${PLUGIN}.next`, PLUGIN);
    }
    await session.waitFor(/applied a new plugin config[\s\S]*applied a new plugin config[\s\S]*127\.10\.1\.1:80 [^\n]*-> backend-net1/, 30_000);
    // Ctrl-C: compose stops the application it attached to and returns.
    session.interrupt();
    await session.finish(60_000);
    assert.ok(projectContainers().includes("waypoint-route exited"), projectContainers().join("\n"));
  });

  it("down removes every container", () => {
    const started = Date.now();
    docker(["compose", "down"]);
    console.log(`# docker compose down: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    assert.deepEqual(projectContainers(), []);
  });
});

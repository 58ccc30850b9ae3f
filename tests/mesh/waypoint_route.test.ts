// waypoint_route in the real Envoy: a client sidecar, a local waypoint, the remote network's
// east-west gateway and a remote waypoint (four Envoys, the shipped configs), real mTLS at both
// layers with test-made SPIFFE certificates, sidecar-style capture in a private netns, and
// configuration updates pushed to the running client by ECDS.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { connect } from "node:net";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS } from "../support/capture.js";
import { sleep } from "../support/envoy.js";
import { exchange, startBackend } from "../support/tcp.js";
import { gatewayWithCert, WaypointTopology } from "../../scripts/demo/waypoint_route_topology.js";

const VIP = "127.10.1.1"; // my-svc.default: waypoint local (net1) and remote (net2, behind the gateway)
const ISOLATED_VIP = "127.10.1.3"; // its only waypoint instance is on net3, which has no gateway
const APP_POD = "127.0.0.43"; // default/app-0: its workload's own waypoint is the waypoint service; nothing listens on it
const LEGACY_VIP = "127.10.1.4"; // legacy.default: 80 -> 9081, its only endpoint default/legacy-0 (127.0.0.44) has no sidecar
const HOSTNAME_AUTHORITY = "my-svc.default.svc.cluster.local:80";
const SLEEP = "spiffe://cluster.local/ns/default/sa/sleep";

function dial(host: string, payload: Buffer | string) {
  return exchange(host, 80, payload, 10_000, CLIENT_ADDRESS);
}

function counter(stats: Map<string, number>, name: string): number {
  return stats.get(`wasmcustom.waypoint_route.${name}`) ?? 0;
}

/** Retries until the reply comes from `backend` (an ECDS update takes a few milliseconds). */
async function dialUntil(backend: string, payload: Buffer): Promise<Buffer> {
  let received = Buffer.alloc(0);
  for (let attempt = 0; attempt < 50; attempt++) {
    received = (await dial(VIP, payload)).received;
    if (received.subarray(0, backend.length).toString() === backend) return received;
    await sleep(100);
  }
  return received;
}

describe("waypoint_route: single and double HBONE in the real Envoy", () => {
  const mesh = new WaypointTopology();

  before(async () => mesh.start());
  after(async () => mesh.stop());

  it("sends a service connection to the healthy local waypoint with :authority VIP:80", async () => {
    const payload = randomBytes(128 * 1024);
    const reply = await dial(VIP, payload);
    assert.deepEqual(reply.received, Buffer.concat([Buffer.from("backend-net1\n"), payload]));
    const line = new RegExp(`waypoint authority=${VIP.replaceAll(".", "\\.")}:80 peer=${SLEEP.replaceAll("/", "\\/")} `);
    assert.match(await mesh.localWaypoint.waitForAccessLog(line), line);
    assert.equal(counter(await mesh.client.stats(), "hbone_waypoint"), 1);
  });

  it("sends a pod IP whose workload has its own waypoint through that waypoint with :authority podIP:port (rule 5)", async () => {
    // Nothing listens on the pod's address: the reply can only come through the waypoint.
    const payload = randomBytes(64 * 1024);
    const reply = await exchange(APP_POD, 80, payload, 10_000, CLIENT_ADDRESS);
    assert.deepEqual(reply.received, Buffer.concat([Buffer.from("backend-net1\n"), payload]));
    const line = new RegExp(`waypoint authority=${APP_POD.replaceAll(".", "\\.")}:80 peer=${SLEEP.replaceAll("/", "\\/")} `);
    assert.match(await mesh.localWaypoint.waitForAccessLog(line), line);
    assert.equal(counter(await mesh.client.stats(), "hbone_pod_waypoint"), 1);
  });

  it("reaches a service endpoint without a sidecar by plain TCP to podIP:targetPort over the plain cluster (rule 7)", async () => {
    const legacy = await startBackend("legacy-plain", "127.0.0.44", 9081);
    try {
      const payload = randomBytes(64 * 1024);
      const reply = await exchange(LEGACY_VIP, 80, payload, 10_000, CLIENT_ADDRESS);
      assert.deepEqual(reply.received, Buffer.concat([Buffer.from("legacy-plain\n"), payload]));
      assert.equal(legacy.accepted, 1);
      const line = /client dst=127\.10\.1\.4:80 cluster=waypoint_route_plain upstream=127\.0\.0\.44:9081 authority=- upstream_peer=- /;
      assert.match(await mesh.client.waitForAccessLog(line), line);
      const stats = await mesh.client.stats();
      assert.equal(counter(stats, "plaintext_endpoint"), 1);
      assert.equal(stats.get("cluster.waypoint_route_plain.upstream_cx_total"), 1);
    } finally {
      await legacy.close();
    }
  });

  it("accepts at the waypoint hop the waypoint service's SANs or the instance's own identity, and nothing else", async () => {
    const original = mesh.snapshot();
    const variant = (sans: string[], identity: string) => {
      const next = structuredClone(original);
      for (const service of next.services) if (service.hostname === "waypoint.default.svc.cluster.local") service.subjectAltNames = sans;
      for (const workload of next.workloads) if (workload.uid === "default/waypoint-0") workload.identity = identity;
      return JSON.stringify(next, null, 2);
    };
    const WAYPOINT = "spiffe://cluster.local/ns/default/sa/waypoint";
    const OTHER = "spiffe://cluster.local/ns/default/sa/waypoint-canary";
    const NOT_IT = "spiffe://cluster.local/ns/default/sa/not-the-waypoint";
    const sanFailures = async () => (await mesh.client.stats()).get("cluster.waypoint_route_hbone.ssl.fail_verify_san") ?? 0;
    /** Pushes a snapshot in which nothing matches what the waypoint presents, and waits until TLS refuses it. */
    const refusedState = async () => {
      const before = await sanFailures();
      mesh.push(variant([OTHER], NOT_IT));
      let failed = before;
      for (let attempt = 0; attempt < 50 && failed === before; attempt++) {
        await dial(VIP, "probe"); // the update takes a few milliseconds to arrive
        failed = await sanFailures();
      }
      assert.ok(failed > before, "the waypoint's certificate must fail SAN verification");
      assert.equal((await dial(VIP, "must not pass")).received.length, 0);
    };
    try {
      // Each acceptance below follows a refused state, so it can only come from the new snapshot.
      await refusedState();
      // The service lists another identity only: the instance's own (what it presents) passes.
      mesh.push(variant([OTHER], WAYPOINT));
      assert.equal((await dialUntil("backend-net1", Buffer.from("instance identity"))).toString(), "backend-net1\ninstance identity");
      await refusedState();
      // The instance's identity is another one: the waypoint service's SANs pass.
      mesh.push(variant([WAYPOINT], NOT_IT));
      assert.equal((await dialUntil("backend-net1", Buffer.from("service SANs"))).toString(), "backend-net1\nservice SANs");
    } finally {
      mesh.push(JSON.stringify(original, null, 2));
    }
    assert.equal((await dialUntil("backend-net1", Buffer.from("restored"))).toString(), "backend-net1\nrestored");
  });

  it("fails over through the gateway to the remote waypoint when the local one is marked unhealthy, without a restart", async () => {
    // A connection opened before the update keeps working after it.
    const open = connect({ host: VIP, port: 80, localAddress: CLIENT_ADDRESS });
    const banner = await new Promise<string>((done) => open.once("data", (chunk) => done(chunk.toString())));
    assert.equal(banner, "backend-net1\n");

    mesh.setLocalWaypointHealthy(false);
    const payload = randomBytes(256 * 1024);
    const received = await dialUntil("backend-net2", payload);
    assert.deepEqual(received, Buffer.concat([Buffer.from("backend-net2\n"), payload]), "bytes unchanged end to end");

    const echoed = await new Promise<string>((done) => {
      open.once("data", (chunk) => done(chunk.toString()));
      open.write("still here");
    });
    assert.equal(echoed, "still here");
    open.destroy();
  });

  it("shows the gateway only the outer CONNECT and the remote waypoint the inner one, both with <hostname>:80", async () => {
    const gateway = await mesh.gateway.waitForAccessLog(/gateway authority=/);
    const waypoint = await mesh.remoteWaypoint.waitForAccessLog(/waypoint authority=/);
    assert.match(gateway, new RegExp(`gateway authority=${HOSTNAME_AUTHORITY.replaceAll(".", "\\.")} peer=${SLEEP.replaceAll("/", "\\/")} `));
    // The remote waypoint's TLS peer is the client sidecar, its TCP peer the gateway: the inner
    // mTLS runs end to end through a gateway that cannot read it.
    assert.match(waypoint, new RegExp(`waypoint authority=${HOSTNAME_AUTHORITY.replaceAll(".", "\\.")} peer=${SLEEP.replaceAll("/", "\\/")} from=127\\.0\\.0\\.51:`));
    // Every CONNECT either of them saw names the original service port: never 8080, never 15008.
    const authorities = [...`${gateway}${waypoint}`.matchAll(/authority=(\S+)/g)].map((match) => match[1]);
    assert.ok(authorities.length >= 2);
    assert.deepEqual([...new Set(authorities)], [HOSTNAME_AUTHORITY]);
    assert.ok(counter(await mesh.client.stats(), "double_hbone_waypoint") >= 1);
  });

  it("keeps the previous configuration when an invalid update arrives", async () => {
    mesh.push('{"localWorkload": "not-an-ip"}');
    await sleep(500);
    const stats = await mesh.client.stats();
    assert.ok((stats.get("extension_config_discovery.network_filter.waypoint_route.update_rejected") ?? 0) >= 1);
    const reply = await dial(VIP, "after a bad update");
    assert.equal(reply.received.toString(), "backend-net2\nafter a bad update");
  });

  it("sends a VIP dialled on port 0 to its waypoint (an unlisted port, rule 6), never plain as 'no destination'", async () => {
    // Node refuses to dial port 0; the kernel does not: Python's socket sends the SYN, which the
    // capture redirects to the sidecar with VIP:0 as the original destination.
    const before = await mesh.client.stats();
    const dialled = spawnSync("python3", ["-c", [
      "import socket, sys",
      "s = socket.socket(); s.settimeout(5); s.bind((sys.argv[1], 0))",
      "s.connect((sys.argv[2], 0)); s.sendall(b'port zero'); s.shutdown(socket.SHUT_WR)",
      "try:\n  while s.recv(65536): pass\nexcept Exception: pass",
    ].join("\n"), CLIENT_ADDRESS, VIP], { encoding: "utf8", timeout: 15_000 });
    assert.equal(dialled.status, 0, dialled.stderr);
    const after = await mesh.client.stats();
    assert.equal(counter(after, "unknown") - counter(before, "unknown"), 0, "not passed through plain");
    // Rule 6: through the service's waypoint, local (HBONE, :authority VIP:0) or, once an earlier
    // test marked the local one unhealthy, remote (double HBONE, :authority <hostname>:0).
    const waypointed = (stats: Map<string, number>) => counter(stats, "hbone_waypoint") + counter(stats, "double_hbone_waypoint");
    assert.equal(waypointed(after) - waypointed(before), 1, "decided by rule 6: through the service's waypoint");
    const vip = VIP.replaceAll(".", "\\.");
    const line = new RegExp(`client dst=${vip}:0 cluster=waypoint_route_(hbone|double_hbone) \\S+ authority=(${vip}|my-svc\\.default\\.svc\\.cluster\\.local):0 `);
    assert.match(await mesh.client.waitForAccessLog(line, 15_000), line);
  });

  it("closes a connection whose only waypoint is on a network without a gateway, and counts the rule", async () => {
    const reply = await dial(ISOLATED_VIP, "nothing may leave");
    assert.equal(reply.received.length, 0);
    assert.equal(counter(await mesh.client.stats(), "error_no_valid_destination"), 1);
  });

  it("refuses a gateway presenting the wrong identity", async () => {
    await mesh.replaceGateway(gatewayWithCert("eastwest-rogue"));
    const before = mesh.backends[1]!.accepted;
    const reply = await dial(VIP, "must not pass");
    assert.equal(reply.received.length, 0);
    assert.equal(mesh.backends[1]!.accepted, before);
    const stats = await mesh.client.stats();
    assert.ok((stats.get("cluster.waypoint_route_outer.ssl.fail_verify_san") ?? 0) >= 1);
  });
});

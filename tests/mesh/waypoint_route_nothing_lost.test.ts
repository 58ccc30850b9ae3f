// Nothing lost through waypoint_route in the real Envoy (shipped configs, four Envoys): 500
// connections over single HBONE to the local waypoint, then - after the local waypoint is marked
// unhealthy by an ECDS update - 500 over double HBONE through the east-west gateway to the remote
// waypoint. 200 at a time, random sizes up to 1 MiB each way, half-closed on both sides: every
// byte must arrive with the same SHA-256 both ways, nothing reset, and the counters agree.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS } from "../support/capture.js";
import { chooseSeed, describeFailures, runLoad, type LoadResult } from "../support/checksum_load.js";
import { PayloadPool, startChecksumServer, type ChecksumServer } from "../support/checksum_server.js";
import { sleep } from "../support/envoy.js";
import { assertOnlyKnownHboneLoss } from "../support/known_loss.js";
import { LOCAL_BACKEND, REMOTE_BACKEND, WAYPOINT_VIP, WaypointMesh } from "../support/waypoint_mesh.js";

const HALF = 500;
const CONCURRENCY = 200;
const MAX_PAYLOAD = 1024 * 1024;

function counter(stats: Map<string, number>, name: string): number {
  return stats.get(`wasmcustom.waypoint_route.${name}`) ?? 0;
}

describe("waypoint_route loses nothing under load (single HBONE, then double HBONE through the gateway)", () => {
  const mesh = new WaypointMesh();
  let backends: ChecksumServer[] = [];
  const seed = chooseSeed();
  const pool = new PayloadPool(MAX_PAYLOAD, seed);
  let nextId = 0;

  function load(count: number, maxPayload = MAX_PAYLOAD): Promise<LoadResult> {
    const firstId = nextId;
    nextId += count;
    // The backend's FIN follows the client's (request/response order; both stream at once): the
    // order the HBONE path keeps every byte in (tests/support/known_loss.ts).
    return runLoad({ count, concurrency: CONCURRENCY, seed: seed + firstId, maxPayload, pool, target: () => WAYPOINT_VIP, servers: backends, localAddress: CLIENT_ADDRESS, firstId, serverFin: "after-client-eof" });
  }

  function report(result: LoadResult, path: string): void {
    console.log(JSON.stringify({ figure: "nothing_lost", filter: "waypoint_route", path, seed: result.seed, connections: result.outcomes.length, bytes_up: result.bytesUp, bytes_down: result.bytesDown, seconds: Number(result.seconds.toFixed(1)) }));
  }

  before(async () => {
    backends = [
      await startChecksumServer("backend-net1", LOCAL_BACKEND.host, LOCAL_BACKEND.port, pool),
      await startChecksumServer("backend-net2", REMOTE_BACKEND.host, REMOTE_BACKEND.port, pool),
    ];
    await mesh.start();
  });

  after(async () => {
    await mesh.stop();
    for (const backend of backends) await backend.close();
  });

  it("500 connections over single HBONE to the local waypoint: every byte arrives, checksums equal, no reset", async () => {
    const result = await load(HALF);
    report(result, "local_waypoint");
    assert.equal(result.failures.length, 0, describeFailures(result));
    assert.ok(result.outcomes.every((outcome) => outcome.server === "backend-net1"), `seed ${result.seed}: all via the local waypoint`);
    const stats = await mesh.client.waitForStats((s) => counter(s, "hbone_waypoint") >= HALF);
    assert.equal(counter(stats, "hbone_waypoint"), HALF);
    assert.equal(counter(stats, "double_hbone_waypoint"), 0);
  });

  it("500 connections over double HBONE through the east-west gateway after an ECDS update", async () => {
    mesh.setLocalWaypointHealthy(false);
    // Small probes until the update is in force (ECDS applies it within milliseconds).
    let probes = 0;
    for (; probes < 50; probes++) {
      const probe = await load(1, 16);
      assert.equal(probe.failures.length, 0, describeFailures(probe));
      if (probe.outcomes[0]!.server === "backend-net2") break;
      await sleep(100);
    }
    const before = await mesh.client.stats();
    const result = await load(HALF);
    report(result, "double_hbone_gateway");
    assert.equal(result.failures.length, 0, describeFailures(result));
    assert.ok(result.outcomes.every((outcome) => outcome.server === "backend-net2"), `seed ${result.seed}: all via the remote waypoint`);
    const stats = await mesh.client.waitForStats((s) => counter(s, "double_hbone_waypoint") >= counter(before, "double_hbone_waypoint") + HALF);
    assert.equal(counter(stats, "double_hbone_waypoint") - counter(before, "double_hbone_waypoint"), HALF);
    assert.equal(counter(stats, "hbone_waypoint"), counter(before, "hbone_waypoint"), "no connection went to the unhealthy local waypoint");
    assert.equal(backends[0]!.records.size + backends[1]!.records.size, 0, "every server-side record was matched by a client");
  });

  it("300 uploads up to 1 MiB against downloads of at most 64 bytes (the backend half-closes first), double HBONE: at worst Envoy's known truncation", async () => {
    const firstId = nextId;
    nextId += 300;
    const result = await runLoad({ count: 300, concurrency: 20, seed: seed + firstId, maxPayload: MAX_PAYLOAD, maxDownload: 64, pool, target: () => WAYPOINT_VIP, servers: backends, localAddress: CLIENT_ADDRESS, firstId });
    const truncated = assertOnlyKnownHboneLoss(result);
    report(result, "backend_half_closes_first");
    console.log(JSON.stringify({ figure: "nothing_lost_known_envoy_truncations", filter: "waypoint_route", seed: result.seed, connections: 300, truncated }));
  });
});

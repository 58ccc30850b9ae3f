// waypoint_route in the real Envoy, fed exactly what istiod generated from istio/waypoint_route
// (tests/istio/xds_files.ts), for every supported era and both install routes. The client sidecar
// of sleep-0 (capture, pod IPs and service VIPs of the manifests' example snapshot on loopback in
// the private network namespace) talks to test-run HBONE terminators that record each CONNECT
// (tests/support/hbone.ts), all with test-made SPIFFE certificates of one mesh CA:
//   net1 (this network): the waypoint instance default/waypoint-0 on 10.244.1.41:15008;
//   net2: the east-west gateway 172.20.0.10:15008, which terminates the OUTER CONNECT and passes
//   its bytes (the client's inner TLS, unreadable to it) on by :authority to net2's waypoint or
//   to ratings-0, each an HBONE terminator on an address only the gateway knows.
// The snapshot maps each service port 9080 to target port 8080, so a CONNECT naming the target
// port (or 15008) instead of the service port shows. Runs inside the test network namespace
// (npm run test:istio).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { spiffe } from "../support/certs.js";
import { sleep } from "../support/envoy.js";
import { startHboneTerminator, type HboneTerminator } from "../support/hbone.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { ERAS, loadDump, trafficExtensionName } from "./dump.js";
import { CLIENT_IP, closeWithin, meshCerts, meshNetwork, translateFor, type IstioSidecar, type MeshCerts, type SidecarOptions, startSidecar } from "./envoy_sidecar.js";
import { pushFile } from "./xds_files.js";

// Addresses of the manifests' example snapshot (istio/waypoint_route/*.yaml).
const REVIEWS_VIP = "10.96.20.1"; // waypoint: default/waypoint-0 on net1, net2/default/waypoint-0 behind the gateway
const RATINGS_VIP = "10.96.20.2"; // no waypoint; its only endpoint net2/default/ratings-0 is behind the gateway
const ISOLATED_VIP = "10.96.20.3"; // its only waypoint instance is on net3, which has no gateway
const SERVICE_PORT = 9080; // target port 8080 in the snapshot
const LOCAL_WAYPOINT = "10.244.1.41";
const GATEWAY = "172.20.0.10";
// net2's pods as its gateway reaches them; the snapshot gives them no address on net1's view.
const REMOTE_WAYPOINT = "10.20.1.41";
const REMOTE_RATINGS = "10.20.1.22";
const OUTSIDE = "10.250.0.1"; // not in the snapshot: plain fallback

const REVIEWS_HOST = `reviews.default.svc.cluster.local:${SERVICE_PORT}`;
const RATINGS_HOST = `ratings.default.svc.cluster.local:${SERVICE_PORT}`;
const SLEEP = `URI:${spiffe("default", "sleep")}`;
const WAYPOINT_ID = spiffe("default", "waypoint");
const GATEWAY_ID = spiffe("istio-system", "istio-eastwestgateway");
const RATINGS_ID = spiffe("default", "ratings");

const dial = (host: string, port: number, payload: Buffer | string) => exchange(host, port, payload, 10_000, CLIENT_IP);

interface Far {
  localWaypoint: HboneTerminator;
  gateway: HboneTerminator;
  remoteWaypoint: HboneTerminator;
  remoteRatings: HboneTerminator;
  outside: Backend;
}

async function startFarEnds(certs: MeshCerts): Promise<Far> {
  const terminator = (name: string, host: string, certName: string) =>
    startHboneTerminator({ name, host, port: 15008, certDir: certs.dir, certName });
  const remoteWaypoint = await terminator("waypoint-net2", REMOTE_WAYPOINT, "waypoint");
  const remoteRatings = await terminator("ratings-net2", REMOTE_RATINGS, "ratings");
  // net2's east-west gateway routes an outer CONNECT by <service hostname>:<service port>.
  const routes = new Map([[REVIEWS_HOST, remoteWaypoint], [RATINGS_HOST, remoteRatings]]);
  return {
    localWaypoint: await terminator("waypoint-net1", LOCAL_WAYPOINT, "waypoint"),
    gateway: await startHboneTerminator({
      name: "eastwest-net2", host: GATEWAY, port: 15008, certDir: certs.dir, certName: "istio-eastwestgateway",
      forward: (authority) => routes.get(authority),
    }),
    remoteWaypoint,
    remoteRatings,
    outside: await startBackend("outside", OUTSIDE, 9000),
  };
}

/**
 * The filter's connection counters that moved, by name. The manifests poll the mesh feed
 * (`meshFeed`), which these tests do not run: each VM's failed poll is counted under `feed.*`
 * and the manifest's snapshot decides (the feed's channel is tests/istio/envoy_feed_channel.test.ts).
 */
async function counters(s: IstioSidecar): Promise<Record<string, number>> {
  const prefix = "wasmcustom.waypoint_route.";
  return Object.fromEntries([...(await s.envoy.stats())].filter(([n, v]) => n.startsWith(prefix) && !n.startsWith(`${prefix}feed.`) && v > 0).map(([n, v]) => [n.slice(prefix.length), v]));
}

const stat = async (s: IstioSidecar, name: string) => (await s.envoy.stats()).get(name) ?? 0;
const authorities = (t: HboneTerminator) => t.seen.map((c) => c.authority);

for (const { era, label } of ERAS) {
  for (const route of ["A", "B"] as const) {
    describe(`waypoint_route route ${route}, istiod ${label}, real Envoy`, () => {
      let certs: MeshCerts;
      let net: { release(): void };
      let far: Far;
      let sidecar: IstioSidecar;
      // pilot-agent's bootstrap carries the pod's network (topology.istio.io/network): the filter's local network.
      const options: SidecarOptions = { ecds: "ecdsAgent", name: `wr-${era}-${route}`, nodeMetadata: { NETWORK: "net1" } };

      before(async () => {
        certs = await meshCerts();
        await certs.ca.issue("waypoint", [WAYPOINT_ID]);
        await certs.ca.issue("istio-eastwestgateway", [GATEWAY_ID]);
        await certs.ca.issue("ratings", [RATINGS_ID]);
        net = meshNetwork([REVIEWS_VIP, RATINGS_VIP, ISOLATED_VIP, LOCAL_WAYPOINT, GATEWAY, REMOTE_WAYPOINT, REMOTE_RATINGS]);
        far = await startFarEnds(certs);
        sidecar = await startSidecar(loadDump(era, "waypoint_route", route), certs, "sleep", options);
      });

      after(async () => {
        net?.release();
        await sidecar?.envoy.stop();
        if (far) await closeWithin(Object.values(far));
      });

      it("takes istiod's listeners, clusters and (route B) the plugin over ECDS; only istio.* extensions removed", async () => {
        assert.ok(sidecar.translation.stripped.every((s) => s.name.startsWith("istio.")));
        assert.deepEqual(sidecar.translation.unserved, []);
        if (route === "B") assert.deepEqual([...sidecar.translation.files.ecds.keys()], [trafficExtensionName("istio-system", "waypoint-route")]);
        const dump = await sidecar.envoy.admin("/config_dump");
        assert.match(dump, /"name": "waypoint_route_outer"/);
      });

      it("reviews: single HBONE to the healthy local waypoint (the remote one is healthy too), :authority VIP:service port, mTLS both ways", async () => {
        const payload = randomBytes(64 * 1024);
        const reply = await dial(REVIEWS_VIP, SERVICE_PORT, payload);
        assert.deepEqual(reply.received, Buffer.concat([Buffer.from(`waypoint-net1 authority=${REVIEWS_VIP}:${SERVICE_PORT}\n`), payload]));
        // The waypoint saw the sidecar's own identity; the sidecar accepted the waypoint's (a
        // wrong one is refused below).
        assert.deepEqual(far.localWaypoint.seen.map((c) => [c.authority, c.peer]), [[`${REVIEWS_VIP}:${SERVICE_PORT}`, SLEEP]]);
        assert.deepEqual([far.gateway.seen.length, far.remoteWaypoint.seen.length], [0, 0]);
        assert.deepEqual(await counters(sidecar), { hbone_waypoint: 1 });
      });

      it("ratings: double HBONE through net2's east-west gateway; outer and inner CONNECT <hostname>:service port; the inner mTLS runs end to end", async () => {
        const payload = randomBytes(64 * 1024);
        const reply = await dial(RATINGS_VIP, SERVICE_PORT, payload);
        assert.deepEqual(reply.received, Buffer.concat([Buffer.from(`ratings-net2 authority=${RATINGS_HOST}\n`), payload]));
        // Outer: the gateway terminates a CONNECT from the client sidecar (its identity) ...
        assert.deepEqual(far.gateway.seen.map((c) => [c.authority, c.peer]), [[RATINGS_HOST, SLEEP]]);
        // ... inner: ratings-0 sees the sidecar's identity over a TCP connection from the gateway.
        assert.deepEqual(far.remoteRatings.seen.map((c) => [c.authority, c.peer]), [[RATINGS_HOST, SLEEP]]);
        assert.match(far.remoteRatings.seen[0]!.from, new RegExp(`^${GATEWAY.replaceAll(".", "\\.")}:`));
        assert.deepEqual(await counters(sidecar), { hbone_waypoint: 1, double_hbone_endpoint: 1 });
      });

      it("isolated (only waypoint on a network without gateway): closed before anything is sent", async () => {
        const seen = () => [far.localWaypoint, far.gateway, far.remoteWaypoint, far.remoteRatings].map((t) => t.seen.length);
        const before = seen();
        const reply = await dial(ISOLATED_VIP, 80, "nothing may leave");
        assert.equal(reply.received.length, 0);
        assert.deepEqual(seen(), before);
        assert.equal((await counters(sidecar)).error_no_valid_destination, 1);
      });

      it("a destination outside the snapshot: plain TCP as dialled (the catch-all's PassthroughCluster), no tunnel", async () => {
        const reply = await dial(OUTSIDE, 9000, "plain");
        assert.equal(reply.received.toString(), "outside\nplain");
        assert.equal(far.outside.accepted, 1);
        assert.equal((await counters(sidecar)).unknown, 1);
        // Istio names the cluster's stats by its alt_stat_name ("PassthroughCluster;").
        const opened = [...(await sidecar.envoy.stats())].filter(([n]) => n.startsWith("cluster.PassthroughCluster") && n.endsWith(".upstream_cx_total"));
        assert.deepEqual(opened.map(([, v]) => v), [1]);
      });

      it("refuses each hop presenting another identity: the local waypoint, the gateway (outer), ratings-0 (inner)", async () => {
        const hops = [
          { terminator: far.localWaypoint, own: "waypoint", vip: REVIEWS_VIP, cluster: "waypoint_route_hbone" },
          { terminator: far.gateway, own: "istio-eastwestgateway", vip: RATINGS_VIP, cluster: "waypoint_route_outer" },
          { terminator: far.remoteRatings, own: "ratings", vip: RATINGS_VIP, cluster: "waypoint_route_double_hbone" },
        ];
        for (const hop of hops) {
          const failures = `cluster.${hop.cluster}.ssl.fail_verify_san`;
          const before = await stat(sidecar, failures);
          const ratingsSeen = far.remoteRatings.seen.length;
          // Also closes the open sessions: pooled tunnels to it handshake again.
          hop.terminator.presentCertificate("imposter");
          await sleep(300); // lets the sidecar see its pooled tunnels close
          try {
            const reply = await dial(hop.vip, SERVICE_PORT, "must not pass");
            assert.equal(reply.received.length, 0, `${hop.own}: bytes came back`);
            assert.ok((await stat(sidecar, failures)) > before, `${failures} did not move`);
            assert.equal(far.remoteRatings.seen.length, ratingsSeen, `${hop.own}: a CONNECT reached ratings-0`);
          } finally {
            hop.terminator.presentCertificate(hop.own);
            await sleep(300);
          }
          // Its own identity is accepted again.
          const reply = await dial(hop.vip, SERVICE_PORT, "again");
          assert.match(reply.received.toString(), /authority=.*\nagain$/, `${hop.own}: not accepted again`);
        }
      });

      it(`istiod's config for the local waypoint marked unhealthy (${route === "B" ? "an ECDS update, no listener update" : "a listener update"}): reviews fails over through the gateway to net2's waypoint`, async () => {
        const next = translateFor(loadDump(era, "waypoint_route", `${route}-local-waypoint-unhealthy`), certs, "sleep", { ...options, name: `${options.name}-unhealthy` });
        const ldsUpdates = await stat(sidecar, "listener_manager.lds.update_success");
        if (route === "B") {
          const name = trafficExtensionName("istio-system", "waypoint-route");
          pushFile(next.files.ecds.get(name)!, sidecar.translation.files.ecds.get(name)!, "2");
        } else {
          pushFile(next.files.lds, sidecar.translation.files.lds, "2");
        }
        const payload = randomBytes(64 * 1024);
        const expected = Buffer.concat([Buffer.from(`waypoint-net2 authority=${REVIEWS_HOST}\n`), payload]);
        let received: Buffer = Buffer.alloc(0);
        for (let attempt = 0; attempt < 50 && !received.equals(expected); attempt++) {
          if (attempt > 0) await sleep(200); // the update takes a moment to apply
          received = (await dial(REVIEWS_VIP, SERVICE_PORT, payload)).received;
        }
        assert.deepEqual(received, expected);
        assert.deepEqual(authorities(far.remoteWaypoint), [REVIEWS_HOST]);
        assert.equal(far.remoteWaypoint.seen[0]!.peer, SLEEP);
        assert.deepEqual(far.gateway.seen.at(-1)!.authority, REVIEWS_HOST);
        // Every CONNECT the far ends saw carried the service port: never 8080, never 15008.
        const all = [far.localWaypoint, far.gateway, far.remoteWaypoint, far.remoteRatings].flatMap(authorities);
        assert.ok(all.every((a) => a.endsWith(`:${SERVICE_PORT}`)), all.join(", "));
        assert.equal((await counters(sidecar)).double_hbone_waypoint, 1);
        const lds = await stat(sidecar, "listener_manager.lds.update_success");
        if (route === "B") assert.equal(lds, ldsUpdates, "route B changes the snapshot without a listener update");
        else assert.ok(lds > ldsUpdates, "route A's snapshot is in the listener");
      });
    });
  }
}

// tunnel_port in the real Envoy, fed what istiod generated from istio/tunnel_port, for every
// supported era and both routes, one sidecar at a time (both would take 15001/15006/15000 of one
// network namespace):
// - the SERVER sidecar of my-service-0 (10.244.1.21) terminates an HBONE CONNECT on 15008 (made
//   by hand, over mTLS with the client's certificate), authorizes the service port and lets the
//   filter check it before the application (10.244.1.21:9376) is connected;
// - the CLIENT sidecar tunnels a pod-IP connection to that pod's 15008 over Istio mTLS, where a
//   stand-in HBONE terminator records what arrived (authority, service port, peer identity).
// Runs inside the test network namespace (npm run test:istio).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { spiffe } from "../support/certs.js";
import { hboneConnect, startHboneTerminator, type HboneTerminator } from "../support/hbone.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { ERAS, loadDump } from "./dump.js";
import { CLIENT_IP, closeWithin, meshCerts, meshNetwork, type IstioSidecar, type MeshCerts, startSidecar } from "./envoy_sidecar.js";

const SERVER_IP = "10.244.1.21";
const counter = async (s: IstioSidecar, name: string) => (await s.envoy.stats()).get(`wasmcustom.tunnel_port.${name}`) ?? 0;

for (const { era, label } of ERAS) {
  for (const route of ["A", "B"]) {
    describe(`tunnel_port route ${route}, istiod ${label}, real Envoy: server sidecar`, () => {
      let certs: MeshCerts;
      let net: { release(): void };
      let app: Backend;
      let sidecar: IstioSidecar;

      before(async () => {
        certs = await meshCerts();
        net = meshNetwork();
        app = await startBackend("app", SERVER_IP, 9376);
        sidecar = await startSidecar(loadDump(era, "tunnel_port", route, "server"), certs, "my-service",
          { ecds: "ecdsAgent", name: `tp-server-${era}-${route}`, nodeIp: SERVER_IP, pod: "my-service-0" });
      });

      after(async () => {
        net?.release();
        await sidecar?.envoy.stop();
        if (app) await closeWithin([app]);
      });

      it("ready; only istio.* extensions removed; every ECDS name served", () => {
        assert.ok(sidecar.translation.stripped.every((s) => s.name.startsWith("istio.")));
        assert.deepEqual(sidecar.translation.unserved, []);
      });

      it("a tunnel for service port 80 to this pod's target port reaches the application", async () => {
        const r = await hboneConnect(`${SERVER_IP}:15008`, `${SERVER_IP}:9376`, { "x-tunnel-service-port": "80" }, certs.dir, "sleep", "hello");
        assert.equal(r.status, 200);
        assert.equal(r.received.toString(), "app\nhello");
        assert.equal(await counter(sidecar, "server.accepted"), 1);
      });

      it("the RBAC example denies service port 81 with 403; a tunnel without the port header is refused by the termination's guard", async () => {
        const before = app.accepted;
        assert.equal((await hboneConnect(`${SERVER_IP}:15008`, `${SERVER_IP}:9376`, { "x-tunnel-service-port": "81" }, certs.dir, "sleep")).status, 403);
        // No service port: the guard (first HTTP filter of the termination) answers 403 on the
        // CONNECT, before the filter or the application see anything.
        const missing = await hboneConnect(`${SERVER_IP}:15008`, `${SERVER_IP}:9376`, {}, certs.dir, "sleep");
        assert.equal(missing.status, 403);
        assert.equal(missing.received.includes("app"), false);
        assert.equal(app.accepted, before);
        const stats = await sidecar.envoy.stats();
        assert.equal(stats.get("http.tunnel_port_inbound.rbac.tunnel_port_guard_.denied"), 1);
        assert.equal(await counter(sidecar, "server.refused_missing_port"), 0);
      });
    });

    describe(`tunnel_port route ${route}, istiod ${label}, real Envoy: client sidecar`, () => {
      let certs: MeshCerts;
      let net: { release(): void };
      let terminator: HboneTerminator;
      let sidecar: IstioSidecar;

      before(async () => {
        certs = await meshCerts();
        net = meshNetwork();
        // The pod's 15008 (my-service's identity), recording what each tunnel carried.
        terminator = await startHboneTerminator({ name: "pod", host: SERVER_IP, port: 15008, certDir: certs.dir, certName: "my-service" });
        sidecar = await startSidecar(loadDump(era, "tunnel_port", route), certs, "sleep", { ecds: "ecdsAgent", name: `tp-client-${era}-${route}` });
      });

      after(async () => {
        net?.release();
        await sidecar?.envoy.stop();
        await terminator?.close();
      });

      it("a connection to the pod's IP is tunnelled to its 15008 over Istio mTLS with the client's identity", async () => {
        const reply = await exchange(SERVER_IP, 9376, "through the tunnel", 10_000, CLIENT_IP);
        assert.equal(reply.received.toString(), `pod authority=${SERVER_IP}:9376\nthrough the tunnel`);
        assert.equal(terminator.seen.length, 1);
        assert.equal(terminator.seen[0].authority, `${SERVER_IP}:9376`);
        assert.equal(terminator.seen[0].peer, `URI:${spiffe("default", "sleep")}`);
        assert.equal(await counter(sidecar, "client.tunneled"), 1);
      });
    });
  }
}

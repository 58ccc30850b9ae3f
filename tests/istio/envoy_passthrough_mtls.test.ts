// passthrough_mtls in the real Envoy, fed exactly what istiod generated from istio/passthrough_mtls
// (tests/istio/xds_files.ts: istiod's LDS/CDS/RDS/EDS/ECDS as files, istio-proxy-only extensions
// stripped and listed), for every supported era and both install routes. The client pod's
// connections are captured as a sidecar's are; the pods are real TLS servers on their own IPs.
// Runs inside the test network namespace (npm run test:istio).
import assert from "node:assert/strict";
import { createServer, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { spiffe } from "../support/certs.js";
import { ERAS, loadDump, trafficExtensionName } from "./dump.js";
import { CLIENT_IP, closeWithin, meshCerts, meshNetwork, type IstioSidecar, type MeshCerts, startSidecar } from "./envoy_sidecar.js";

const SLEEP = `URI:${spiffe("default", "sleep")}`;
const dial = (host: string, port: number, payload: string) => exchange(host, port, payload, 10_000, CLIENT_IP);

interface Pods {
  httpbin: TlsPod; // 10.244.1.17, tlsMode istio, identity httpbin; a port no service claims
  legacy: Backend; // 10.244.2.9, no sidecar
  postgres0: TlsPod; // 10.244.3.4:5432, headless service postgres
  outside: Backend; // 10.250.0.1, not in the mesh
}

async function startPods(certs: MeshCerts): Promise<Pods> {
  return {
    httpbin: await startTlsPod("httpbin", "10.244.1.17", 9999, certs.dir, "httpbin"),
    legacy: await startBackend("legacy-0", "10.244.2.9", 7000),
    postgres0: await startTlsPod("postgres-0", "10.244.3.4", 5432, certs.dir, "postgres"),
    outside: await startBackend("outside", "10.250.0.1", 9000),
  };
}

/** A TCP server that only counts the bytes it receives. */
function startRecorder(host: string, port: number): Promise<{ bytes: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const recorder = { bytes: 0, close: () => new Promise<void>((done) => { for (const s of sockets) s.destroy(); server.close(() => done()); }) };
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("data", (chunk: Buffer) => { recorder.bytes += chunk.length; });
    socket.on("error", () => socket.destroy());
    socket.on("close", () => sockets.delete(socket));
  });
  return new Promise((done) => server.listen(port, host, () => done(recorder)));
}

const counter = async (s: IstioSidecar, name: string) => (await s.envoy.stats()).get(`wasmcustom.passthrough_mtls.${name}`) ?? 0;

for (const { era, label } of ERAS) {
  for (const route of ["A", "B"]) {
    describe(`passthrough_mtls route ${route}, istiod ${label}, real Envoy`, () => {
      let certs: MeshCerts;
      let pods: Pods;
      let net: { release(): void };
      let sidecar: IstioSidecar;

      before(async () => {
        certs = await meshCerts();
        net = meshNetwork();
        pods = await startPods(certs);
        sidecar = await startSidecar(loadDump(era, "passthrough_mtls", route), certs, "sleep", { ecds: "ecdsAgent", name: `pt-${era}-${route}` });
      });

      after(async () => {
        net?.release();
        await sidecar?.envoy.stop();
        if (pods) await closeWithin(Object.values(pods));
      });

      it("takes istiod's listeners and clusters; the istio-proxy-only extensions removed are Istio's telemetry ones; every ECDS name is served", (t) => {
        const names = [...new Set(sidecar.translation.stripped.map((s) => `${s.name} (${s.type})`))].sort();
        t.diagnostic(`removed ${sidecar.translation.stripped.length}: ${names.join(", ")}`);
        assert.ok(names.length > 0 && names.every((n) => n.startsWith("istio.")), names.join(", "));
        assert.deepEqual(sidecar.translation.unserved, []);
      });

      it("a connection to a mesh pod's IP goes out over Istio mTLS with the sidecar's identity", async () => {
        const reply = await dial("10.244.1.17", 9999, "GET / over mTLS");
        assert.equal(reply.received.toString(), `httpbin peer=${SLEEP}\nGET / over mTLS`);
        assert.deepEqual(pods.httpbin.peers, [SLEEP]);
        assert.equal(await counter(sidecar, "mtls"), 1);
      });

      it("a pod without a sidecar and an address outside the mesh stay plain", async () => {
        assert.equal((await dial("10.244.2.9", 7000, "plain")).received.toString(), "legacy-0\nplain");
        assert.equal((await dial("10.250.0.1", 9000, "out")).received.toString(), "outside\nout");
        // Both leave through tcp_proxy's own PassthroughCluster; the pod without sidecar is counted
        // as a plaintext pod as well.
        assert.equal(await counter(sidecar, "passthrough"), 2);
        assert.equal(await counter(sidecar, "plaintext_pod"), 1);
      });

      it("a headless member on its service port takes Istio's per-pod listener, over Istio mTLS to exactly that pod", async () => {
        const reply = await dial("10.244.3.4", 5432, "select 1");
        assert.equal(reply.received.toString(), `postgres-0 peer=${SLEEP}\nselect 1`);
        // Istio names the cluster's stats by its alt_stat_name (the cluster name and a ';').
        const stats = await sidecar.envoy.stats();
        const opened = [...stats].filter(([n]) => n.startsWith("cluster.outbound|5432||postgres.data.svc.cluster.local") && n.endsWith(".upstream_cx_total"));
        assert.deepEqual(opened.map(([, v]) => v), [1]);
        assert.deepEqual(pods.postgres0.peers, [SLEEP]);
      });
    });
  }

  describe(`passthrough_mtls route B, istiod ${label}: the module cannot be fetched (FAIL_CLOSE)`, () => {
    let certs: MeshCerts;
    let pods: Pods;
    let net: { release(): void };
    let sidecar: IstioSidecar;

    before(async () => {
      certs = await meshCerts();
      net = meshNetwork();
      pods = await startPods(certs);
      // What pilot-agent hands Envoy when the pull fails: a deny-all RBAC filter under the name.
      sidecar = await startSidecar(loadDump(era, "passthrough_mtls", "B"), certs, "sleep", { ecds: "ecdsAgentFetchFailed", name: `pt-${era}-failed` });
    });

    after(async () => {
      net?.release();
      await sidecar?.envoy.stop();
      if (pods) await closeWithin(Object.values(pods));
    });

    it("Envoy accepts the stand-in (the hookup lists the RBAC type URL) and the catch-all chain closes every connection", async () => {
      const dump = await sidecar.envoy.admin("/config_dump");
      assert.match(dump, new RegExp(trafficExtensionName("istio-system", "passthrough-mtls").replace(/[.~]/g, "\\$&")));
      assert.match(dump, /envoy\.extensions\.filters\.network\.rbac\.v3\.RBAC/);
      const recorder = await startRecorder("10.250.0.2", 9000);
      try {
        // Client-first destinations: nothing comes back, nothing gets through.
        for (const [host, port] of [["10.244.1.17", 9999], ["10.250.0.2", 9000]] as const) {
          const reply = await dial(host, port, "must not pass");
          assert.equal(reply.received.length, 0, `${host}:${port} got bytes`);
        }
        // A server-first destination: its greeting can come back before the close (the RBAC
        // filter only sees the client's bytes), the client's bytes never arrive: no echo.
        const serverFirst = await dial("10.250.0.1", 9000, "must not pass");
        assert.equal(serverFirst.received.toString().includes("must not pass"), false);
      } finally {
        await recorder.close();
      }
      assert.equal(pods.httpbin.accepted, 0, "no mTLS session to the pod");
      // Envoy's network RBAC decides on the connection's first bytes, after tcp_proxy may have
      // opened its upstream connection: the destination can see a connection, never a byte.
      assert.equal(recorder.bytes, 0, "a byte reached the destination");
      const denied = [...(await sidecar.envoy.stats())].filter(([n, v]) => /rbac.*denied$/.test(n) && v > 0);
      assert.ok(denied.length > 0, "the RBAC stand-in counts the denials");
    });
  });
}

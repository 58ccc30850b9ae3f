// tunnel_port in the real Envoy: a client sidecar and two server sidecars (separate Envoy
// processes, the shipped configs) joined by real HBONE tunnels (HTTP/2 CONNECT over mTLS with
// test-made SPIFFE certificates), with sidecar-style capture in a private network namespace.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer as createHttpServer, request as httpRequest, type Server } from "node:http";
import { connect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { hboneConnect } from "../support/hbone.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { CERT_DIR, writeDemoCerts } from "../../scripts/demo-certs.js";
import { serverForPod } from "../../scripts/demo/tunnel_port.js";

const SLEEP = "spiffe://cluster.local/ns/default/sa/sleep";
const VIP = "127.10.0.1"; // my-service: 80 -> 9376 (p1), 9377 (p2, per-endpoint override)
const ADMIN_VIP = "127.10.0.2"; // admin: 80 and 81 -> 9376, p1 only; the server denies 81

function counter(stats: Map<string, number>, name: string): number {
  return stats.get(`wasmcustom.tunnel_port.${name}`) ?? 0;
}

function dial(host: string, port: number, payload: Buffer | string) {
  return exchange(host, port, payload, 10_000, CLIENT_ADDRESS);
}

/** Connects through the capture and returns the first bytes the server sends, sending none. */
function firstBytesWithoutSending(host: string, port: number): Promise<string> {
  return new Promise((done) => {
    const socket = connect({ host, port, localAddress: CLIENT_ADDRESS });
    const timer = setTimeout(() => {
      socket.destroy();
      done("");
    }, 5000);
    socket.once("data", (chunk) => {
      clearTimeout(timer);
      socket.destroy();
      done(chunk.toString());
    });
    socket.on("error", () => undefined);
  });
}

describe("tunnel_port: client and server sidecars in the real Envoy", () => {
  let client: EnvoyProcess;
  let serverP1: EnvoyProcess;
  let serverP2: EnvoyProcess;
  let apps: Backend[] = [];
  let appP1: Backend;
  let appP2: Backend;
  let sentinel: Backend;
  let web: Server;

  before(async () => {
    await writeDemoCerts();
    appP1 = await startBackend("app-p1-9376", "127.0.0.21", 9376);
    appP2 = await startBackend("app-p2-9377", "127.0.0.22", 9377);
    sentinel = await startBackend("sentinel-7777", "127.0.0.21", 7777); // a port p1 does not serve
    apps = [appP1, appP2, sentinel, await startBackend("outside", "127.0.0.30", 9000)];
    // web.default's HTTP app on p1 (target port 9380): answers with the Host it received.
    web = createHttpServer((request, response) => response.end(`host=${request.headers.host}`));
    await new Promise<void>((done) => web.listen(9380, "127.0.0.21", done));
    const serverConfig = shippedConfig("tunnel_port_server.yaml");
    serverP1 = await EnvoyProcess.start({ name: "tunnel-port-server-p1", adminPort: 15000, adminAddress: "127.0.0.21", config: serverConfig });
    // The second pod's sidecar: the same shipped config for the workload at 127.0.0.22.
    serverP2 = await EnvoyProcess.start({ name: "tunnel-port-server-p2", adminPort: 15000, adminAddress: "127.0.0.22", config: serverForPod(serverConfig, "127.0.0.22") });
    client = await EnvoyProcess.start({ name: "tunnel-port-client", adminPort: 15000, config: shippedConfig("tunnel_port_client.yaml") });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    for (const envoy of [client, serverP1, serverP2]) await envoy?.stop();
    for (const app of apps) await app.close();
    await new Promise((done) => web?.close(done));
  });

  function serverStats(pod: "p1" | "p2"): Promise<Map<string, number>> {
    return (pod === "p1" ? serverP1 : serverP2).stats();
  }

  it("carries a service connection to each endpoint's own target port, bytes unchanged, round robin", async () => {
    const first = randomBytes(64 * 1024);
    const second = randomBytes(64 * 1024);
    const viaP1 = await dial(VIP, 80, first);
    const viaP2 = await dial(VIP, 80, second);
    assert.deepEqual(viaP1.received, Buffer.concat([Buffer.from("app-p1-9376\n"), first]));
    assert.deepEqual(viaP2.received, Buffer.concat([Buffer.from("app-p2-9377\n"), second]));
  });

  it("records service port 80 and each pod's target port on the server side, with the client's identity", async () => {
    const p1 = /app service_port=80 target_port=9376 upstream=127\.0\.0\.21:9376 peer=spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep/;
    const p2 = /app service_port=80 target_port=9377 upstream=127\.0\.0\.22:9377/;
    assert.match(await serverP1.waitForAccessLog(p1), p1);
    assert.match(await serverP2.waitForAccessLog(p2), p2);
    const tunnel = new RegExp(`tunnel authority=127\\.0\\.0\\.21:9376 service_port=80 peer=${SLEEP.replaceAll("/", "\\/")} code=200`);
    assert.match(await serverP1.waitForAccessLog(tunnel), tunnel);
  });

  it("lets the server application speak first: nothing waits for client bytes", async () => {
    assert.equal(await firstBytesWithoutSending(ADMIN_VIP, 80), "app-p1-9376\n");
  });

  it("authorizes on the original service port: 80 allowed, 81 denied, same target port 9376", async () => {
    const accepted = appP1.accepted;
    const allowed = await dial(ADMIN_VIP, 80, "on 80");
    assert.equal(allowed.received.toString(), "app-p1-9376\non 80");
    const denied = await dial(ADMIN_VIP, 81, "on 81");
    assert.equal(denied.received.length, 0, "a denied tunnel must not even see the app's banner");
    assert.equal(appP1.accepted, accepted + 1, "the app was connected for 80 only");
    const stats = await serverStats("p1");
    assert.equal(stats.get("http.tunnel_port_inbound.rbac.denied"), 1);
  });

  it("refuses a forged authority naming a port the workload does not serve", async () => {
    const result = await hboneConnect("127.0.0.21:15008", "127.0.0.21:7777", { "x-tunnel-service-port": "80" }, CERT_DIR, "sidecar");
    assert.equal(result.received.includes("sentinel"), false);
    assert.equal(sentinel.accepted, 0);
    const stats = await serverStats("p1");
    assert.equal(counter(stats, "server.refused_unserved_port"), 1);
  });

  it("refuses a service port that does not map to the target port, and another workload's address", async () => {
    const before = appP2.accepted;
    const mismatch = await hboneConnect("127.0.0.21:15008", "127.0.0.21:9376", { "x-tunnel-service-port": "8080" }, CERT_DIR, "sidecar");
    assert.equal(mismatch.received.includes("app-p1"), false);
    const foreign = await hboneConnect("127.0.0.21:15008", "127.0.0.22:9377", { "x-tunnel-service-port": "80" }, CERT_DIR, "sidecar");
    assert.equal(foreign.received.includes("app-p2"), false);
    assert.equal(appP2.accepted, before);
    // No service port at all: the termination's guard refuses it on the CONNECT (403), before
    // the filter (tests/mesh/tunnel_port_canonical.test.ts has every other shape).
    const missing = await hboneConnect("127.0.0.21:15008", "127.0.0.21:9376", {}, CERT_DIR, "sidecar");
    assert.equal(missing.received.includes("app-p1"), false);
    assert.equal(missing.status, 403);
    const stats = await serverStats("p1");
    assert.equal(counter(stats, "server.refused_port_mismatch"), 1);
    assert.equal(counter(stats, "server.refused_foreign_authority"), 1);
    assert.equal(stats.get("http.tunnel_port_inbound.rbac.tunnel_port_guard_.denied"), 1);
  });

  it("refuses a plain-TCP client and a TLS client without a certificate on 15008", async () => {
    const plain = await exchange("127.0.0.21", 15008, "CONNECT 127.0.0.21:9376 HTTP/1.1\r\n\r\n");
    assert.equal(plain.received.length, 0);
    const noCert = await new Promise<string>((done) => {
      const socket = tlsConnect({ host: "127.0.0.21", port: 15008, ca: readFileSync(`${CERT_DIR}/ca.crt`), ALPNProtocols: ["h2"], checkServerIdentity: () => undefined });
      let received = "";
      socket.on("data", (chunk) => (received += chunk.toString("latin1")));
      socket.on("error", () => done("refused"));
      socket.on("close", () => done(received.length ? "answered" : "refused"));
      socket.on("secureConnect", () => socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    });
    assert.equal(noCert, "refused");
    const stats = await serverStats("p1");
    assert.ok((stats.get("listener.127.0.0.21_15008.ssl.connection_error") ?? 0) >= 1);
  });

  it("keeps service port 80 when an HTTP client writes :authority svc:8080 inside the stream", async () => {
    const recorded = () => serverP1.accessLog().split("\n").filter((line) => line.startsWith("app service_port=80 target_port=9376 ")).length;
    const before = recorded();
    const request = "GET / HTTP/1.1\r\nHost: admin.default.svc.cluster.local:8080\r\n\r\n";
    const reply = await dial(ADMIN_VIP, 80, request);
    assert.equal(reply.received.toString(), `app-p1-9376\n${request}`);
    // This connection added its own record of service port 80 / target 9376.
    for (let i = 0; i < 100 && recorded() <= before; i++) await new Promise((done) => setTimeout(done, 50));
    assert.ok(recorded() > before);
  });

  it("records service port 80 for an HTTP request whose route rewrote :authority to web:8080", async () => {
    const acceptedBefore = counter(await serverStats("p1"), "server.accepted");
    const body = await new Promise<string>((done, fail) => {
      const request = httpRequest(
        { host: "127.10.0.3", port: 80, path: "/", localAddress: CLIENT_ADDRESS, headers: { host: "web.default.svc.cluster.local" } },
        (response) => {
          let text = "";
          response.on("data", (chunk) => (text += chunk));
          response.on("end", () => done(text));
        },
      );
      request.on("error", fail);
      request.end();
    });
    assert.equal(body, "host=web.default.svc.cluster.local:8080", "the client route rewrote the authority");
    // The tunnel (kept open by the HTTP connection pool) carried service port 80 to target 9380,
    // and the server filter checked and accepted that pair.
    const stats = await serverP1.waitForStats((s) => counter(s, "server.accepted") > acceptedBefore);
    const tunnelLine = /tunnel authority=127\.0\.0\.21:9380 service_port=80 peer=\S+ code=200/;
    const appLine = /app service_port=80 target_port=9380 upstream=127\.0\.0\.21:9380/;
    assert.match(await serverP1.waitForAccessLog(tunnelLine), tunnelLine);
    assert.match(await serverP1.waitForAccessLog(appLine), appLine);
    assert.ok(counter(stats, "server.accepted") > acceptedBefore);
  });

  it("sends a destination the mesh does not know as plain TCP, counted", async () => {
    const reply = await dial("127.0.0.30", 9000, "outside the mesh");
    assert.equal(reply.received.toString(), "outside\noutside the mesh");
    const stats = await client.stats();
    assert.equal(counter(stats, "client.unknown_passthrough"), 1);
    assert.ok(counter(stats, "client.tunneled") >= 5);
  });

  it("ships configs with no metadata-exchange filter, no peer-exchange ALPN, nothing telemetry-related", () => {
    for (const name of ["tunnel_port_client.yaml", "tunnel_port_server.yaml"]) {
      const text = shippedConfig(name);
      for (const forbidden of ["metadata_exchange", "istio-peer-exchange", "peer_metadata", "istio.stats"]) {
        assert.equal(text.includes(forbidden), false, `${name} mentions ${forbidden}`);
      }
    }
  });
});

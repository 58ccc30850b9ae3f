// The mesh feed's channel through Istio's own mutual TLS, in the real Envoy, for every supported
// era and both install routes: the client sidecar runs what istiod generated for sleep-0 with
// passthrough_mtls (meshFeed through Istio's outbound cluster for the feed's Service; route A's
// EnvoyFilter or route B's WasmPlugin), the feed's sidecar runs what
// istiod generated for the feed's pod with the chart's STRICT PeerAuthentication and
// AuthorizationPolicy (scenario mesh_feed/istio of tests/istio/common/generate_test.go), and
// behind it the real feed process runs the chart's own configuration (identityFrom
// istio-sidecar), its mesh read from files. Capture as Istio's iptables sets it up: the client
// pod's outbound to 15001, the feed pod's inbound port to 15006 except what the sidecar sends
// from 127.0.0.6. Runs inside the test network namespace (npm run test:istio).
//
// Proved: the feed's model arrives through both sidecars and decides a connection the manifest's
// snapshot would have passed in clear; the feed logs the caller's SPIFFE id. Impostors: a mesh
// caller forging x-forwarded-client-cert is judged by the identity the sidecar appended; a
// request smuggled inside another's body (chunked, both lengths, two lengths) with a reader's
// forged element is refused by the sidecar or, for the framing it forwards, by the feed; a
// caller without a mesh certificate, or of another trust domain, never reaches the feed; a
// plain connection to the feed's port that bypasses the sidecar is refused by the feed and
// counted; a feed impostor with another mesh identity fails the client's SAN check and the
// client keeps its model.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { request as httpRequest } from "node:http";
import { connect as tlsConnect, createServer as createTlsServer, type Server as TlsServer } from "node:tls";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments, parse as parseYaml, stringify } from "yaml";
import { spiffe } from "../support/certs.js";
import { REPO_ROOT } from "../support/paths.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange } from "../support/tcp.js";
import { ERAS, loadDump } from "./dump.js";
import { CLIENT_IP, closeWithin, meshCerts, meshNetwork, startSidecar, type IstioSidecar, type MeshCerts } from "./envoy_sidecar.js";

const FEED_IP = "10.244.1.50"; // mesh-feed-0 of mesh.go
const FRESH_IP = "10.244.1.60"; // a pod only the feed's model has (not the manifest's snapshot)
const CHANNEL_PORT = 9443;
const OPERATOR = "http://127.0.0.1:9090";
const FEED_CLUSTER = "outbound|9443||mesh-feed.mesh-feed.svc.cluster.local";
const SLEEP = spiffe("default", "sleep");
const FEED_ID = spiffe("mesh-feed", "mesh-feed");

const POD = (name: string, ip: string, sa: string) => `apiVersion: v1
kind: Pod
metadata: { namespace: default, name: ${name}, labels: { security.istio.io/tlsMode: istio } }
spec: { serviceAccountName: ${sa} }
status: { phase: Running, podIP: ${ip}, conditions: [{ type: Ready, status: "True" }] }
`;

/** The chart's feed.yaml (istio.enabled, rendered by scripts/istio-gen.sh), its mesh from `meshDir`, read by sleep only. */
function feedConfig(dir: string, meshDir: string): { path: string; channel: Record<string, unknown> } {
  const rendered = readFileSync(join(REPO_ROOT, "build/istio/feed-chart-istio.yaml"), "utf8");
  const configMap = parseAllDocuments(rendered).map((d) => d.toJS()).find((o) => o?.kind === "ConfigMap");
  const config = parseYaml(configMap.data["feed.yaml"]);
  writeFileSync(join(dir, "meshNetworks.yaml"), configMap.data["meshNetworks.yaml"]);
  config.clusters = [{ id: "cluster1", files: meshDir }];
  // Its mesh comes from files here: no API server to hold remote secrets or the writers' Lease
  // (both on in the chart's defaults; this test is about the channel).
  delete config.remoteSecrets;
  delete config.leaderElection;
  config.wasmDir = join(REPO_ROOT, "build");
  config.targets[0].readers = [SLEEP.slice("spiffe://".length)];
  const path = join(dir, "feed.yaml");
  writeFileSync(path, stringify(config));
  return { path, channel: config.channel };
}

interface FeedProcess {
  child: ChildProcess;
  log(): string;
  stop(): Promise<void>;
}

async function startFeedProcess(configPath: string): Promise<FeedProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", join(REPO_ROOT, "feed/src/main.ts"), "--config", configPath], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let text = "";
  child.stdout?.on("data", (c: Buffer) => { text += c.toString(); });
  child.stderr?.on("data", (c: Buffer) => { text += c.toString(); });
  const feed: FeedProcess = {
    child,
    log: () => text,
    stop: () => new Promise<void>((done) => {
      if (child.exitCode !== null) return done();
      child.once("exit", () => done());
      child.kill("SIGTERM");
    }),
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the feed exited (${child.exitCode}):\n${text}`);
    try {
      if ((await fetch(`${OPERATOR}/readyz`)).status === 200) return feed;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await feed.stop();
      throw new Error(`the feed never became ready:\n${text}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function refused(reason: string): Promise<number> {
  const text = await (await fetch(`${OPERATOR}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`feed_channel_refused_total{reason="${reason}"} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

interface Answer {
  status: number;
  body: string;
}

/** An mTLS request to the feed's pod port as a mesh workload would make it (Istio's ALPN), from `from`. */
function meshGet(certs: MeshCerts, cert: string | null, from: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((done, fail) => {
    const req = httpsRequest({
      host: FEED_IP, port: CHANNEL_PORT, path, localAddress: from, headers,
      ...(cert === null ? {} : { cert: readFileSync(join(certs.dir, `${cert}.crt`)), key: readFileSync(join(certs.dir, `${cert}.key`)) }),
      ca: certs.ca.cert,
      ALPNProtocols: ["istio-http/1.1"],
      // The feed's sidecar presents the feed's SPIFFE id only (no DNS name to check).
      checkServerIdentity: (_host, peer) => (peer.subjectaltname === `URI:${FEED_ID}` ? undefined : new Error(`not the feed: ${peer.subjectaltname}`)),
      agent: false,
      timeout: 10_000,
    }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => { body += c.toString(); });
      res.on("end", () => done({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", fail);
    req.end();
  });
}

/**
 * Raw bytes over mTLS to the feed's pod port as a mesh workload (Istio's ALPN), from `from`:
 * the first response the sidecar sends back (by its content-length), or what came before it
 * closed (or 5 s passed).
 */
function meshRaw(certs: MeshCerts, cert: string, from: string, bytes: string): Promise<string> {
  return new Promise((done, fail) => {
    let text = "";
    const s = tlsConnect({
      host: FEED_IP, port: CHANNEL_PORT, localAddress: from,
      cert: readFileSync(join(certs.dir, `${cert}.crt`)), key: readFileSync(join(certs.dir, `${cert}.key`)), ca: certs.ca.cert,
      ALPNProtocols: ["istio-http/1.1"],
      checkServerIdentity: (_host, peer) => (peer.subjectaltname === `URI:${FEED_ID}` ? undefined : new Error(`not the feed: ${peer.subjectaltname}`)),
    }, () => s.write(bytes));
    const finish = () => {
      clearTimeout(timer);
      s.destroy();
      done(text);
    };
    const timer = setTimeout(finish, 5000);
    s.on("data", (c: Buffer) => {
      text += c.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      const length = /\r\ncontent-length: (\d+)\r\n/i.exec(text.slice(0, end + 2));
      if (end >= 0 && length && text.length - end - 4 >= Number(length[1])) finish();
    });
    s.on("error", fail);
    s.on("close", finish);
  });
}

/** A plain HTTP request to host:port from `from`; resolves with the answer or the error's code. */
function plainGet(host: string, port: number, from: string, path: string, headers: Record<string, string> = {}): Promise<Answer | { error: string }> {
  return new Promise((done) => {
    const req = httpRequest({ host, port, path, localAddress: from, headers, agent: false, timeout: 10_000 }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => { body += c.toString(); });
      res.on("end", () => done({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (e: NodeJS.ErrnoException) => done({ error: e.code ?? e.message }));
    req.end();
  });
}

async function waitFor<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const wasmCounter = async (s: IstioSidecar, name: string) => (await s.envoy.stats()).get(`wasmcustom.passthrough_mtls.${name}`) ?? 0;
const clusterStat = async (s: IstioSidecar, suffix: string) =>
  [...(await s.envoy.stats())].filter(([n]) => n.startsWith(`cluster.${FEED_CLUSTER}`) && n.endsWith(suffix)).reduce((sum, [, v]) => sum + v, 0);

/** Istio's inbound capture of the feed's pod: its channel port to 15006, except the sidecar's own (127.0.0.6). */
function captureFeedInbound(): void {
  execFileSync("iptables", ["-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", FEED_IP, "--dport", String(CHANNEL_PORT), "!", "-s", "127.0.0.6", "-j", "REDIRECT", "--to-ports", "15006"]);
}

/** The client sidecar per install route: route B from the mesh_feed scenario, route A from passthrough_mtls's (the same mesh, the feed's Service included). */
const CLIENT_DUMP = { A: ["passthrough_mtls", "A"], B: ["mesh_feed", "istio"] } as const;

for (const { era, label } of ERAS) {
  for (const route of ["A", "B"] as const) {
    describe(`the feed's channel through Istio's mTLS, route ${route}, istiod ${label}, real Envoy`, () => {
      let certs: MeshCerts;
      let net: { release(): void };
      let feed: FeedProcess;
      let feedSidecar: IstioSidecar | undefined;
      let client: IstioSidecar;
      let fresh: TlsPod;
      let channel: Record<string, unknown>;

      before(async () => {
        certs = await meshCerts();
        await certs.ca.issue("foreign", ["spiffe://example.org/ns/default/sa/sleep"]);
        net = meshNetwork([FEED_IP, FRESH_IP]);
        captureFeedInbound();
        mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
        const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "istio-feed-"));
        mkdirSync(join(dir, "mesh"));
        writeFileSync(join(dir, "mesh", "pods.yaml"), [POD("httpbin-0", "10.244.1.17", "httpbin"), POD("fresh-0", FRESH_IP, "httpbin")].join("---\n"));
        const config = feedConfig(dir, join(dir, "mesh"));
        channel = config.channel;
        feed = await startFeedProcess(config.path);
        fresh = await startTlsPod("fresh-0", FRESH_IP, 9999, certs.dir, "httpbin");
        feedSidecar = await startSidecar(loadDump(era, "mesh_feed", "istio", "feed"), certs, "mesh-feed", {
          ecds: "ecdsAgent", name: `feed-${era}-${route}`, namespace: "mesh-feed", pod: "mesh-feed-0", nodeIp: FEED_IP, adminPort: 15100,
          keepListener: (name) => name === "virtualInbound",
        });
        client = await startSidecar(loadDump(era, CLIENT_DUMP[route][0], CLIENT_DUMP[route][1], "client"), certs, "sleep", {
          ecds: "ecdsAgent", name: `feed-client-${era}-${route}`,
          keepListener: (name) => name !== "virtualInbound",
        });
      });

      after(async () => {
        net?.release();
        await client?.envoy.stop();
        await feedSidecar?.envoy.stop();
        await feed?.stop();
        if (fresh) await closeWithin([fresh]);
      });

      it("the feed runs the chart's channel: in clear behind the sidecar, identity from it", () => {
        assert.deepEqual(channel, { identityFrom: "istio-sidecar", address: "0.0.0.0", port: CHANNEL_PORT });
      });

      it("the feed's model arrives through both sidecars and decides a connection; the feed logs the caller's SPIFFE id", async () => {
        await waitFor("the client's first model from the feed", 60_000, async () => ((await wasmCounter(client, "feed.applied_full")) >= 1 ? true : undefined));
        // The manifest's snapshot does not know fresh-0: without the feed's model it would go in
        // clear. The counter is the sidecar's, summed over its VMs: the first full may be the main
        // thread's while the worker that takes the connection is still polling, so a connection
        // is tried until one is decided with the model (never, and the test fails).
        const expected = `fresh-0 peer=URI:${SLEEP}\nover mTLS`;
        let last = "";
        await waitFor("a connection to fresh-0 over mTLS", 30_000, async () => {
          last = await exchange(FRESH_IP, 9999, "over mTLS", 5_000, CLIENT_IP).then(
            (reply) => reply.received.toString(),
            (error: Error) => `error: ${error.message}`,
          );
          return last === expected ? true : undefined;
        }).catch((error: Error) => {
          throw new Error(`${error.message}; the last reply: ${JSON.stringify(last)}`);
        });
        assert.equal(last, expected);
        assert.match(feed.log(), new RegExp(`channel: ${SLEEP.replace(/[./]/g, "\\$&")} reads target "passthrough-mtls"`));
        // Through Istio's cluster, over its mTLS (the SAN of the feed checked), and nothing refused.
        assert.ok((await clusterStat(client, ".ssl.handshake")) >= 1);
        assert.equal(await clusterStat(client, ".ssl.fail_verify_san"), 0);
        assert.equal(await refused("not_sidecar"), 0);
      });

      it("a mesh caller forging x-forwarded-client-cert is judged by the identity its sidecar appended", async () => {
        const before = await refused("not_reader");
        // httpbin passes the AuthorizationPolicy (cluster.local/*) and claims to be sleep, the only reader.
        const a = await meshGet(certs, "httpbin", "10.244.1.17", "/delta/passthrough-mtls?epoch=0&version=0", { "x-forwarded-client-cert": `URI=${SLEEP}` });
        assert.equal(a.status, 403);
        assert.equal(a.body, `refused (not_reader): ${spiffe("default", "httpbin")} may not read target "passthrough-mtls"\n`);
        assert.equal(await refused("not_reader"), before + 1);
        // Envoy writes the header, the feed parses it: an open quote in the caller's part would make
      // a quote-aware parser read sleep's URI and a comma-splitting one httpbin's. Refused whole.
      const badBefore = await refused("bad_forwarded_identity");
      const quoted = await meshGet(certs, "httpbin", "10.244.1.17", "/delta/passthrough-mtls?epoch=0&version=0", { "x-forwarded-client-cert": `URI=${SLEEP};Subject="` });
      assert.equal(quoted.status, 403);
      assert.match(quoted.body, /^refused \(bad_forwarded_identity\): x-forwarded-client-cert: a quoted value is never closed/);
      assert.equal(await refused("bad_forwarded_identity"), badBefore + 1);
      // The same request as sleep itself is served: the route is right, only the identity differs.
        const b = await meshGet(certs, "sleep", CLIENT_IP, "/snapshot/passthrough-mtls");
        assert.equal(b.status, 200);
        assert.match(b.body, new RegExp(FRESH_IP.replace(/\./g, "\\.")));
      });

      it("a request smuggled past the sidecar inside another's body, with a reader's forged element, is never answered: the sidecar or the feed refuses the framing", async () => {
        // httpbin (no reader) hides a GET carrying sleep's identity as the last element, so that a
        // parser that splits the bytes differently from the sidecar would judge it as sleep.
        const smuggled = `GET /delta/passthrough-mtls?epoch=0&version=0 HTTP/1.1\r\nhost: mesh-feed\r\nx-forwarded-client-cert: By=${FEED_ID};URI=${SLEEP}\r\n\r\n`;
        const chunk = (text: string) => `${text.length.toString(16)}\r\n${text}\r\n`;
        const attempts = [
          // Chunked: the sidecar forwards a body it did not frame by length; the feed takes none.
          `POST /delta/passthrough-mtls?epoch=0&version=0 HTTP/1.1\r\nhost: mesh-feed\r\ntransfer-encoding: chunked\r\n\r\n${chunk(smuggled)}0\r\n\r\n`,
          // Both lengths: whoever reads content-length and whoever reads the chunks would disagree.
          `POST /delta/passthrough-mtls?epoch=0&version=0 HTTP/1.1\r\nhost: mesh-feed\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
          // A second length: one parser takes the first, another the last.
          `POST /delta/passthrough-mtls?epoch=0&version=0 HTTP/1.1\r\nhost: mesh-feed\r\ncontent-length: 0\r\ncontent-length: ${smuggled.length}\r\n\r\n${smuggled}`,
        ];
        const badRequests = async () => {
          const text = await (await fetch(`${OPERATOR}/metrics`)).text();
          const line = text.split("\n").find((l) => l.startsWith('feed_clients_dropped_total{reason="bad_request",server="channel"} '));
          return line ? Number(line.split(" ")[1]) : 0;
        };
        const before = await badRequests();
        const answers: string[] = [];
        for (const bytes of attempts) answers.push(await meshRaw(certs, "httpbin", "10.244.1.17", bytes));
        for (const answer of answers) assert.doesNotMatch(answer, /x-feed-kind/, `a model was answered: ${JSON.stringify(answer.slice(0, 300))}`);
        // Chunked: the sidecar forwards it as it came (chunked) and the feed refuses the framing,
        // where a parser that took the chunks would have read a body and answered it.
        assert.match(answers[0], /^HTTP\/1\.1 501 /);
        assert.match(answers[0], /\r\n\r\ntransfer-encoding: not taken by the channel/);
        assert.equal(await badRequests(), before + 1, "the feed counted the chunked request it refused");
        // Both lengths, or two: the sidecar refuses them itself, and nothing reaches the feed.
        for (const answer of answers.slice(1)) assert.match(answer, /^HTTP\/1\.1 400 Bad Request\r\n[^]*server: istio-envoy/);
      });

      it("a caller without a mesh certificate, of another trust domain, or not among the readers never reaches the feed", async () => {
        const counts = async () => Promise.all(["no_forwarded_identity", "bad_forwarded_identity", "no_spiffe_id", "not_reader", "not_sidecar"].map(refused));
        const before = await counts();
        // Plain HTTP to the pod's port: STRICT leaves the sidecar no plaintext chain for it.
        const plain = await plainGet(FEED_IP, CHANNEL_PORT, "10.244.1.17", "/delta/passthrough-mtls?epoch=0&version=0", { "x-forwarded-client-cert": `URI=${SLEEP}` });
        assert.ok("error" in plain, `plain HTTP got an answer: ${JSON.stringify(plain)}`);
      // TLS without a client certificate: the sidecar requires one (the handshake fails).
      await assert.rejects(meshGet(certs, null, "10.244.1.17", "/delta/passthrough-mtls?epoch=0&version=0", { "x-forwarded-client-cert": `URI=${SLEEP}` }));
        // A certificate of the mesh's root for another trust domain: refused in the handshake
        // (istiod's inbound validation matches the trust domain's SPIFFE prefix).
        await assert.rejects(meshGet(certs, "foreign", "10.244.1.17", "/delta/passthrough-mtls?epoch=0&version=0"), /certificate unknown|alert|ECONNRESET|socket hang up/);
        // A mesh identity no target lists (data/postgres; the AuthorizationPolicy admits
        // cluster.local/ns/default/*): mTLS holds, the sidecar's RBAC denies.
        const outsider = await meshGet(certs, "postgres", "10.244.3.4", "/delta/passthrough-mtls?epoch=0&version=0");
        assert.equal(outsider.status, 403);
        assert.equal(outsider.body, "RBAC: access denied");
        assert.deepEqual(await counts(), before, "the feed saw a request");
        assert.ok([...(await feedSidecar!.envoy.stats())].some(([n, v]) => /rbac.*denied$/.test(n) && v >= 1));
      });

      it("a plain connection to the feed's port that bypasses the sidecar is refused by the feed and counted", async () => {
        const before = await refused("not_sidecar");
        // What a container of the feed's pod (or a node where capture failed) would send.
        const a = await plainGet("127.0.0.1", CHANNEL_PORT, "127.0.0.1", "/delta/passthrough-mtls?epoch=0&version=0", {
          "x-forwarded-client-cert": `By=${FEED_ID};URI=${SLEEP}`,
        });
        assert.ok(!("error" in a));
        assert.equal(a.status, 403);
        assert.match(a.body, /^refused \(not_sidecar\): connection from 127\.0\.0\.1, not from the sidecar/);
        assert.equal(await refused("not_sidecar"), before + 1);
      });

      it("a feed impostor with another mesh identity fails the client's SAN check; the client keeps its model", async () => {
        const appliedBefore = await wasmCounter(client, "feed.applied_full");
        await feedSidecar?.envoy.stop();
        feedSidecar = undefined;
        // httpbin's certificate of the mesh's root on the feed pod's captured port, answering an empty model.
        const impostor: TlsServer = createTlsServer({
          cert: readFileSync(join(certs.dir, "httpbin.crt")), key: readFileSync(join(certs.dir, "httpbin.key")), ca: certs.ca.cert,
          requestCert: true, rejectUnauthorized: false,
        }, (socket) => {
          socket.on("error", () => socket.destroy());
          socket.end("HTTP/1.1 200 OK\r\ncontent-type: application/x-mesh-delta\r\ncontent-length: 0\r\n\r\n");
        });
        await new Promise<void>((done) => impostor.listen(15006, "0.0.0.0", () => done()));
        try {
          await waitFor("the client's SAN check to refuse the impostor", 90_000, async () => ((await clusterStat(client, ".ssl.fail_verify_san")) >= 1 ? true : undefined));
          assert.equal(await wasmCounter(client, "feed.applied_full"), appliedBefore);
          const reply = await exchange(FRESH_IP, 9999, "still over mTLS", 10_000, CLIENT_IP);
          assert.equal(reply.received.toString(), `fresh-0 peer=URI:${SLEEP}\nstill over mTLS`);
        } finally {
          await new Promise<void>((done) => impostor.close(() => done()));
        }
      });
    });
  }
}

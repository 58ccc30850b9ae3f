// Impostor feeds against the real Envoy: passthrough_mtls follows the real feed over the shipped
// mesh_feed cluster (envoy-configs/passthrough_mtls_feed.yaml: the sidecar's certificate, the
// mesh CA, the feed's SPIFFE id pinned), decides a pod's connections with the feed's model, and
// then the feed's address is taken by a server answering every poll with a forged full model
// (no workloads: every pod connection would go out in clear). The impostor is (a) plaintext,
// (b) self-signed with the feed's identity, (c) a valid mesh certificate of another identity,
// (d) another root's certificate with the feed's identity: Envoy refuses each in the handshake
// (its own ssl counters say which check), the filter counts the failed poll
// (feed.unavailable), never applies the forged model, and the pod's connections are still
// decided with the model it had. The control: the same forged answer from a server holding the
// feed's real certificate is adopted, so the refusals above were the TLS checks' doing.
// Private network namespace (the application's connections are captured as a sidecar's are):
// run under scripts/in-netns.sh, as npm run test:feed does.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createPlainServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { Server } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CERT_DIR, DEMO_IDENTITIES } from "../../scripts/demo-certs.js";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import type { PemPair } from "../support/certs.js";
import { EnvoyProcess } from "../support/envoy.js";
import { impostorCerts, meshCert } from "../support/feed_tls.js";
import { encodeMessage, KIND } from "../support/mesh_wire.js";
import { REPO_ROOT } from "../support/paths.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { freePort } from "../support/ports.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { meshFeedSidecarConfig } from "./delta_envoy_config.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";

const POD = `apiVersion: v1
kind: Pod
metadata: { namespace: default, name: httpbin-0, labels: { security.istio.io/tlsMode: istio } }
spec: { serviceAccountName: httpbin }
status: { phase: Running, podIP: 127.0.0.11, conditions: [{ type: Ready, status: "True" }] }
`;
const WORKERS = 1;
/** The plugin runs in each worker and in the main thread: each VM polls on its own. */
const VMS = WORKERS + 1;
/** Each impostor phase waits for every VM's next attempt: the filters' backoff doubles (unavailable: 500 ms to 5 s; refused: 1 s to 30 s). */
const PHASE_MS = 45_000;

/** A full model with no workloads and no services, as an impostor would send it. */
const FORGED = Buffer.from(encodeMessage({ kind: KIND.full, epoch: 4242n, baseVersion: 0n, version: 1n, workloadIdLimit: 64, serviceIdLimit: 64, records: [] }));

interface Impostor {
  /** TCP connections it accepted (each VM's attempt is one). */
  connections: number;
  /** Requests it answered with the forged model (0 unless a client completed TLS and asked). */
  answered: number;
  close(): Promise<void>;
}

async function startImpostor(port: number, tls?: PemPair): Promise<Impostor> {
  const state = { connections: 0, answered: 0 };
  const answer = (_req: IncomingMessage, res: ServerResponse) => {
    state.answered++;
    res.writeHead(200, { "content-type": "application/x-mesh-delta", "content-length": String(FORGED.length) }).end(FORGED);
  };
  const server: Server = tls ? createTlsServer({ cert: tls.cert, key: tls.key }, answer) : createPlainServer(answer);
  const sockets = new Set<import("node:net").Socket>();
  server.on("connection", (s) => {
    state.connections++;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(port, "127.0.0.1", () => done());
  });
  return {
    get connections() {
      return state.connections;
    },
    get answered() {
      return state.answered;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}

describe("impostor feeds: refused by Envoy's mesh_feed TLS, counted, the model kept", () => {
  let dir: string;
  let run: FeedRun | undefined;
  let envoy: EnvoyProcess;
  let pod: TlsPod;
  let plain: Backend;
  let feedPort: number;
  let impostors: Awaited<ReturnType<typeof impostorCerts>>;
  const stats = async () => envoy.stats();
  const stat = async (name: string) => (await stats()).get(name) ?? 0;
  const feedStat = (name: string) => stat(`wasmcustom.passthrough_mtls.feed.${name}`);
  const dial = async (port: number, payload: string) => (await exchange("127.0.0.11", port, payload, 1_000, CLIENT_ADDRESS)).received.toString();
  const mtlsTo11 = async () => (await dial(8443, "ping")) === `httpbin-0 peer=URI:${DEMO_IDENTITIES.sidecar}\nping`;
  const plainTo11 = async () => (await dial(8080, "hello")) === "plain-11\nhello";

  before(async () => {
    impostors = await impostorCerts();
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "channel-impostor-"));
    writeFileSync(join(dir, "httpbin-0.yaml"), POD);
    feedPort = await freePort();
    run = await runFeed([{ id: "cluster1", files: dir }], [{ name: "sidecar", filter: "passthrough_mtls" }], { channel: { port: feedPort } });
    pod = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
    plain = await startBackend("plain-11", "127.0.0.11", 8080);
    envoy = await EnvoyProcess.start({ name: "feed-impostor", adminPort: 15000, concurrency: WORKERS, config: meshFeedSidecarConfig(feedPort, "sidecar", 2) });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await run?.feed.stop();
    await pod?.close();
    await plain?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the real feed: every VM adopts its model over the channel; 127.0.0.11:8443 goes out over mTLS verifying httpbin", async () => {
    await eventually("the feed's model in every VM", 30_000, async () => ((await feedStat("applied_full")) >= VMS ? true : undefined), 100);
    assert.ok(await mtlsTo11());
    assert.equal(await feedStat("unavailable"), 0, "no failed poll against the real feed");
  });

  const cases: [string, () => PemPair | undefined, string][] = [
    ["(a) a plaintext server", () => undefined, "ssl.connection_error"],
    ["(b) a self-signed certificate carrying the feed's SPIFFE id", () => impostors.selfSignedFeed, "ssl.fail_verify_error"],
    ["(c) a valid mesh certificate of another identity", () => impostors.meshOtherIdentity, "ssl.fail_verify_san"],
    ["(d) another root's certificate carrying the feed's SPIFFE id", () => impostors.otherRootFeed, "ssl.fail_verify_error"],
  ];
  for (const [what, tls, sslStat] of cases) {
    it(`${what} at the feed's address: refused in Envoy's handshake (cluster.mesh_feed.${sslStat}), the failed poll counted, the model kept`, async () => {
      await run?.feed.stop();
      run = undefined;
      const before = { unavailable: await feedStat("unavailable"), full: await feedStat("applied_full"), delta: await feedStat("applied_delta"), refused: await feedStat("refused"), ssl: await stat(`cluster.mesh_feed.${sslStat}`) };
      const impostor = await startImpostor(feedPort, tls());
      try {
        await eventually(`every VM tried ${what}`, PHASE_MS, async () => (impostor.connections >= VMS && (await feedStat("unavailable")) >= before.unavailable + VMS ? true : undefined), 100);
        assert.equal(impostor.answered, 0, "no VM completed a request to the impostor");
        assert.ok((await stat(`cluster.mesh_feed.${sslStat}`)) > before.ssl, `Envoy's cluster.mesh_feed.${sslStat} counts the refusal`);
        assert.equal(await feedStat("applied_full"), before.full, "the forged model was not applied");
        assert.equal(await feedStat("applied_delta"), before.delta);
        assert.equal(await feedStat("refused"), before.refused, "nothing reached the decoder");
        for (let i = 0; i < 4; i++) assert.ok(await mtlsTo11(), `connection ${i}: still decided by the feed's model (mTLS verifying httpbin)`);
      } finally {
        await impostor.close();
      }
    });
  }

  it("control: the same forged answer from a server holding the feed's own certificate is adopted (what the TLS checks kept out)", async () => {
    const full = await feedStat("applied_full");
    const impostor = await startImpostor(feedPort, meshCert("feed"));
    try {
      await eventually("the forged model adopted by every VM", PHASE_MS, async () => ((await feedStat("applied_full")) >= full + VMS ? true : undefined), 100);
      assert.ok(impostor.answered >= VMS);
      // The forged model is empty: it lacks this proxy's network, so (never deciding from nothing)
      // connections follow noModelPolicy, closed by default, counted no_network: what an
      // impostor with the feed's key could do is shut the mesh's pod traffic, not read it.
      const noNetwork = await stat("wasmcustom.passthrough_mtls.no_network");
      await eventually("connections to 127.0.0.11 closed by the policy", 5_000, async () => (!(await mtlsTo11()) && (await stat("wasmcustom.passthrough_mtls.no_network")) > noNetwork ? true : undefined));
      assert.equal(await plainTo11(), false, "nothing goes out in clear either");
    } finally {
      await impostor.close();
    }
  });
});

// The feed's file source end to end, as the demo runs it: the feed reads a directory of YAML
// files (no API server) and delivers to passthrough_mtls in the real Envoy by ECDS file; the
// application's connections are captured as a sidecar's are (private network namespace). Pod
// files written, changed (in place and by an atomic rename) and removed: the running Envoy
// follows each. A bad file is refused with one line, counted in /metrics, and the objects it
// held before stay in force.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EcdsPlugin } from "../support/ecds.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { REPO_ROOT } from "../support/paths.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";
import { pod } from "./fixtures.js";

const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
/** The file debounce (20 ms) and the feed's (100 ms, harness default), plus a margin for the check, the ECDS file watch and a loaded 2-core machine. */
const BOUND_MS = 7000;
const SIDECAR_LABELS = { app: "demo", "security.istio.io/tlsMode": "istio" };

/** Short timeout: a connection in clear to a TLS pod gets no answer (payloads of >= 5 bytes fail the handshake at once). */
function dial(host: string, port: number, payload: string, timeoutMs = 1_000) {
  return exchange(host, port, payload, timeoutMs, CLIENT_ADDRESS);
}

describe("feed → passthrough_mtls by ECDS file, from a directory of YAML files", () => {
  let dir: string;
  let run: FeedRun;
  let envoy: EnvoyProcess;
  let plugin: EcdsPlugin;
  let httpbin: TlsPod; // 127.0.0.11:8443, certificate spiffe://cluster.local/ns/default/sa/httpbin
  let plain11: Backend; // 127.0.0.11:8080, answers only a connection that arrives in clear
  let pod13: TlsPod; // 127.0.0.13:8443, certificate spiffe://cluster.local/ns/default/sa/imposter
  const feedLines: string[] = [];
  const consoleError = console.error;
  const counters = async () => {
    const s = await envoy.stats();
    return { mtls: s.get("wasmcustom.passthrough_mtls.mtls") ?? 0, failSan: s.get("cluster.outbound_mtls_passthrough.ssl.fail_verify_san") ?? 0 };
  };
  const podFile = (name: string, ip: string, sa: string) => stringify(pod("default", name, { ip, sa, labels: SIDECAR_LABELS }));
  const metric = async (pattern: RegExp) => pattern.exec(await (await fetch(`${run.base}/metrics`)).text())?.[1];

  before(async () => {
    // The feed logs one line per event on stderr; keep them to check the refusal's line.
    console.error = (...args: unknown[]) => {
      feedLines.push(args.map(String).join(" "));
      consoleError(...args);
    };
    await writeDemoCerts();
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "feed-files-"));
    plugin = new EcdsPlugin("envoy-configs/passthrough_mtls_plugin", "passthrough_mtls.yaml");
    run = await runFeed([{ id: "files1", files: dir }], [{ name: "sidecar", filter: "passthrough_mtls", ecds: { file: join(plugin.dir, "passthrough_mtls.yaml") } }]);
    httpbin = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
    plain11 = await startBackend("plain-11", "127.0.0.11", 8080);
    pod13 = await startTlsPod("pod-13", "127.0.0.13", 8443, CERT_DIR, "pod-c");
    envoy = await EnvoyProcess.start({ name: "feed-files", adminPort: 15000, config: plugin.bootstrap(shippedConfig("passthrough_mtls_ecds.yaml")) });
    captureOutbound(15001);
  });

  after(async () => {
    console.error = consoleError;
    releaseCapture();
    await envoy?.stop();
    await run?.feed.stop();
    for (const p of [httpbin, plain11, pod13]) await p?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("an empty directory is an empty mesh: ready, and 127.0.0.11 goes out in clear", async () => {
    assert.equal((await fetch(`${run.base}/readyz`)).status, 200);
    assert.deepEqual(JSON.parse(await (await fetch(`${run.base}/snapshot/sidecar`)).text()).workloads, []);
    assert.equal((await dial("127.0.0.11", 8080, "hello")).received.toString(), "plain-11\nhello");
  });

  it("a pod file written: new connections to its IP go out over mTLS verifying its identity", async (t) => {
    writeFileSync(join(dir, "httpbin-0.yaml"), podFile("httpbin-0", "127.0.0.11", "httpbin"));
    const written = Date.now();
    await eventually("mTLS to httpbin-0", BOUND_MS, async () => {
      const reply = (await dial("127.0.0.11", 8443, "ping-1")).received.toString();
      return reply === `httpbin-0 peer=${SIDECAR}\nping-1` ? reply : undefined;
    });
    t.diagnostic(`file written -> first mTLS connection: ${Date.now() - written} ms`);
    const before = await counters();
    assert.notEqual((await dial("127.0.0.11", 8080, "hello")).received.toString(), "plain-11\nhello", "the pod's plain port gets mTLS too");
    assert.equal((await counters()).mtls, before.mtls + 1);
  });

  it("a pod file written, then changed (its service account) by an atomic rename: the identity verified follows", async () => {
    // reviews-0 holds 127.0.0.13, but the server there presents the imposter identity: refused.
    const file = join(dir, "pod-13.yaml");
    writeFileSync(file, podFile("reviews-0", "127.0.0.13", "reviews"));
    await eventually("reviews-0 in the filter (identity mismatch counted)", BOUND_MS, async () => {
      const before = (await counters()).failSan;
      const reply = (await dial("127.0.0.13", 8443, "secret")).received;
      return reply.length === 0 && (await counters()).failSan > before ? true : undefined;
    });
    assert.equal(pod13.accepted, 0, "nothing reached the pod presenting the wrong identity");
    // The same file, now naming the pod's real service account, written aside and renamed over it.
    writeFileSync(join(dir, ".pod-13.yaml.tmp"), podFile("reviews-0", "127.0.0.13", "imposter"));
    renameSync(join(dir, ".pod-13.yaml.tmp"), file);
    await eventually("mTLS to 127.0.0.13 with the imposter identity", BOUND_MS, async () => {
      const reply = (await dial("127.0.0.13", 8443, "now!!")).received.toString();
      return reply === `pod-13 peer=${SIDECAR}\nnow!!` ? reply : undefined;
    });
  });

  it("a bad file is refused with one line naming it, counted, and the pods it held before stay in force", async () => {
    const version = (await fetch(`${run.base}/snapshot/sidecar`)).headers.get("x-feed-version");
    const lines = feedLines.length;
    writeFileSync(join(dir, "pod-13.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: reviews-0\n");
    const count = await eventually("refusal counted", BOUND_MS, async () => (await metric(/feed_file_refused_total\{cluster="files1",reason="yaml"\} (\d+)/)) ?? undefined);
    assert.equal(count.value, "1");
    const refusals = feedLines.slice(lines).filter((l) => l.includes("refused"));
    assert.equal(refusals.length, 1);
    assert.match(refusals[0], /warn cluster files1: \S+\/pod-13\.yaml: document 1: .+; refused, its 1 objects read before stay$/);
    assert.equal((await dial("127.0.0.13", 8443, "still")).received.toString(), `pod-13 peer=${SIDECAR}\nstill`);
    assert.equal((await fetch(`${run.base}/snapshot/sidecar`)).headers.get("x-feed-version"), version, "nothing new published");
  });

  it("a pod file removed: plain passthrough again; the other file's pod stays", async () => {
    rmSync(join(dir, "httpbin-0.yaml"));
    await eventually("plain passthrough to 127.0.0.11", BOUND_MS, async () => {
      const reply = (await dial("127.0.0.11", 8080, "hello")).received.toString();
      return reply === "plain-11\nhello" ? reply : undefined;
    });
    const snapshot = JSON.parse(await (await fetch(`${run.base}/snapshot/sidecar`)).text());
    assert.deepEqual(
      snapshot.workloads.map((w: { uid: string; identity: string }) => [w.uid, w.identity]),
      [["files1//Pod/default/reviews-0", "spiffe://cluster.local/ns/default/sa/imposter"]],
    );
    assert.ok(httpbin.peers.every((p) => p === SIDECAR));
    const text = await (await fetch(`${run.base}/metrics`)).text();
    assert.match(text, /feed_objects\{cluster="files1",kind="pods"\} 1/);
    assert.doesNotMatch(text, /feed_render_errors_total/);
    assert.doesNotMatch(text, /feed_push_errors_total/);
  });
});

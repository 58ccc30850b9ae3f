// The feed publishes nothing before every informer of every cluster has its initial list: a
// feed started (or restarted) against an API server that already holds 10,000 mesh pods does
// not even listen on its channel until then (a poll is a refused connection; a 503 would do as
// well), and every model it serves afterwards must hold all of them.
// Without that rule the lists of the small kinds (namespaces, services, nodes) come in first,
// the debounced render fires, and version 1 goes out with the pods that were listed so far
// (none): every filter polling then would adopt a model without pods.
// A client polls /delta for a full message (epoch=0) every few milliseconds from the moment the
// feed is started, then follows each version with long polls: every answer is checked, not only
// the last. The same again after a restart (a new epoch, caches filled from nothing).
// Run: node --import tsx --test tests/feed/synced_publish.test.ts
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { channelGet } from "../support/feed_tls.js";
import { freePort } from "../support/ports.js";
import { decodeMessage } from "./delta_wire_decode.js";
import { runFeed, sleep, type FeedRun } from "./harness.js";

const PODS = 10_000;
const WRITERS = 24;
const LABELS = { "security.istio.io/tlsMode": "istio", app: "app" };

const ipOf = (i: number) => `10.${40 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;

interface Served {
  status: number;
  kind: string | null;
  version: number;
  epoch: number;
  workloads: number;
}

async function fetchDelta(base: string, epoch: number, version: number, wait: number): Promise<Served> {
  // The channel (mutual TLS), as the demo sidecar the harness's targets let read.
  const r = await channelGet(`${base}/delta/mesh?epoch=${epoch}&version=${version}&wait=${wait}`);
  const body = r.body;
  if (r.status !== 200) return { status: r.status, kind: null, version: 0, epoch: 0, workloads: 0 };
  const message = decodeMessage(body);
  const workloads = message.records.filter((rec) => rec.type === "workload").length;
  return { status: 200, kind: (r.headers["x-feed-kind"] as string | undefined) ?? null, version: Number(message.version), epoch: Number(message.epoch), workloads };
}

/**
 * Starts the feed and polls it from the first moment: full-message requests every few ms until
 * one is served, then long polls that follow each new version for `followMs`. Returns every answer.
 */
async function startAndWatch(cluster: KubeCluster, followMs: number): Promise<{ run: FeedRun; answers: Served[]; failures: string[] }> {
  const answers: Served[] = [];
  /** How each poll before the first model failed (the error's code). */
  const failures: string[] = [];
  // A fixed channel port, so the client can poll while startFeed is still listing (it resolves
  // only after the initial lists; its channel listens once it has a model).
  const port = await freePort();
  const base = `https://127.0.0.1:${port}`;
  let started: FeedRun | undefined;
  let failed: unknown;
  const starting = runFeed([{ id: "cluster1", cluster }], [{ name: "mesh", filter: "passthrough_mtls" }], { channel: { port } }).then(
    (r) => (started = r),
    (error) => (failed = error),
  );
  // Before anything is published: refused connections (or 503), as many as the lists take.
  let first: Served | undefined;
  while (!first) {
    if (failed) throw failed;
    const a = await fetchDelta(base, 0, 0, 0).catch((error: NodeJS.ErrnoException) => void failures.push(error.code ?? error.message));
    if (a) answers.push(a);
    if (a?.status === 200) first = a;
    else await sleep(5);
  }
  await starting;
  if (!started) throw failed;
  // Then every version it publishes, each one checked: the full message a new client would
  // get at each of them, and the long poll from the previous one.
  const until = Date.now() + followMs;
  let at = first;
  while (Date.now() < until) {
    const next = await fetchDelta(base, at.epoch, at.version, 1);
    if (next.status === 200 && next.kind !== "no-change") {
      answers.push(await fetchDelta(base, 0, 0, 0));
      at = next;
    }
  }
  return { run: started, answers, failures };
}

describe(`the feed publishes only after every informer has listed (${PODS} pods in a real API server)`, () => {
  let cluster: KubeCluster;
  let run: FeedRun | undefined;

  before(async () => {
    cluster = await startKubeCluster({ name: "feed-synced" });
    await cluster.createNamespace("default");
    await cluster.createService({ namespace: "default", name: "app", selector: { app: "app" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] });
    let next = 0;
    const writer = async () => {
      for (let i = next++; i < PODS; i = next++) {
        await cluster.createPod({ namespace: "default", name: `pod-${i}`, labels: LABELS, serviceAccountName: "app" });
        await cluster.setPodStatus("default", `pod-${i}`, { podIP: ipOf(i) });
      }
    };
    await Promise.all(Array.from({ length: WRITERS }, writer));
  });

  after(async () => {
    await run?.feed.stop();
    await cluster?.stop();
  });

  for (const round of ["started", "restarted"]) {
    it(`${round}: refused until the lists are in, then every model served holds all ${PODS} pods`, async (t) => {
      await run?.feed.stop();
      const watched = await startAndWatch(cluster, 3000);
      run = watched.run;
      const refused = watched.answers.filter((a) => a.status === 503).length;
      const served = watched.answers.filter((a) => a.status === 200);
      t.diagnostic(`${round}: ${watched.failures.length} polls refused and ${refused} answered 503 before the first model, then ${served.length} models served (versions ${[...new Set(served.map((a) => a.version))].join(", ")})`);
      assert.ok(watched.answers.every((a) => a.status === 200 || a.status === 503), `only 200 or 503: ${watched.answers.map((a) => a.status)}`);
      // Nothing accepted a connection and then dropped it: before the model, nothing listened.
      assert.deepEqual([...new Set(watched.failures)], watched.failures.length > 0 ? ["ECONNREFUSED"] : [], "how polls before the model failed");
      assert.ok(served.length >= 1);
      assert.ok(watched.failures.length + refused >= 1, "the client asked while the lists were coming in, and was refused");
      for (const a of served) {
        assert.equal(a.kind, "full");
        assert.equal(a.workloads, PODS, `version ${a.version} of epoch ${a.epoch} holds ${a.workloads} of ${PODS} pods`);
      }
    });
  }
});

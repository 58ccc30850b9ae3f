// GET /delta/<target> against a real API server: the feed (as deployed: its ServiceAccount,
// the shipped RBAC) watches it, and a client follows the versions as a filter's root context
// would (long polls with epoch and version), decoding every message with the test's own
// decoder. Pods churned → deltas with the right records and versions, converging on what a
// full message says; a client from another epoch, from the future, or behind the journal → a
// full; a long poll held until a change (and no-change when the wait runs out); a feed
// restart → a new epoch → full; a refused version (past the id limit the filters take) keeps
// the journal consistent and publishing resumes once the mesh is acceptable again.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { DecodedModel, decodeMessage, type DecodedMessage } from "./delta_wire_decode.js";
import { eventually, runFeed, sleep, type FeedRun } from "./harness.js";
import { channelGet } from "../support/feed_tls.js";
import { meshCert } from "../support/feed_tls.js";
import { trailerOf } from "./delta_wire_decode.js";

const LABELS = { "security.istio.io/tlsMode": "istio" };

interface Answer {
  status: number;
  kind: string | null;
  message?: DecodedMessage;
  ms: number;
}

/** A long poll on the feed's channel (mutual TLS, as the demo sidecar). */
async function poll(run: FeedRun, target: string, epoch: number, version: number, wait = 0): Promise<Answer> {
  const started = Date.now();
  const r = await run.get(`/delta/${target}?epoch=${epoch}&version=${version}&wait=${wait}`);
  if (r.status === 200) assert.equal(r.headers["content-type"], "application/x-mesh-delta");
  const kind = r.headers["x-feed-kind"];
  return { status: r.status, kind: typeof kind === "string" ? kind : null, ...(r.status === 200 && { message: decodeMessage(r.body) }), ms: Date.now() - started };
}

/** Brings `client` to the feed's current version (following deltas, or a full when told). */
async function follow(run: FeedRun, target: string, client: DecodedModel): Promise<DecodedMessage> {
  const a = await poll(run, target, client.epoch, client.version);
  assert.equal(a.status, 200);
  client.apply(a.message!);
  return a.message!;
}

async function metric(base: string, series: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

/**
 * A long poll at `client`'s version, returned once the feed holds it (feed_delta_held = 1). A
 * version published between the client's last poll and this one answers the poll at once (the
 * debounced tail of an earlier test's writes can do that): the client follows it and asks again.
 */
async function heldPoll<T>(run: FeedRun, client: DecodedModel, start: () => Promise<T>): Promise<{ answer: Promise<T> }> {
  const moved: string[] = [];
  for (let tries = 0; tries < 5; tries++) {
    await follow(run, "mesh", client);
    let answered = false;
    const pending = start();
    void pending.then(() => (answered = true), () => (answered = true));
    const held = await eventually("the poll held or answered", 10_000, async () => ((await metric(run.base, "feed_delta_held")) === 1 ? "held" : answered ? "answered" : undefined));
    // Wrapped: an async function returning the promise itself would wait for its answer.
    if (held.value === "held") return { answer: pending };
    moved.push(String(client.version));
  }
  throw new Error(`the poll was answered at once every time: the version moved after ${moved.join(", ")}`);
}

function addressesOf(client: DecodedModel): string[] {
  return [...client.workloads.values()].flatMap((w) => w.addresses).sort();
}

async function addPod(cluster: KubeCluster, name: string, ip: string, sa = "app", app = "app"): Promise<void> {
  await cluster.createPod({ namespace: "default", name, labels: { ...LABELS, app }, serviceAccountName: sa });
  await cluster.setPodStatus("default", name, { podIP: ip });
}

describe("feed deltas against a real API server (GET /delta long poll)", () => {
  let cluster: KubeCluster;
  let run: FeedRun;

  before(async () => {
    cluster = await startKubeCluster({ name: "feed-delta" });
    await cluster.createNamespace("default");
    await cluster.createService({ namespace: "default", name: "app", selector: { app: "app" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] });
    await addPod(cluster, "seed-0", "10.20.0.1");
    run = await runFeed([{ id: "cluster1", cluster }], [{ name: "mesh", filter: "passthrough_mtls" }], { delta: { journal: { maxRecords: 40 } } });
  });

  after(async () => {
    await run?.feed.stop();
    await cluster?.stop();
  });

  it("serves a full message to a client with nothing, with the pods and services of the API server", async () => {
    const a = await poll(run, "mesh", 0, 0);
    assert.equal(a.status, 200);
    assert.equal(a.kind, "full");
    const m = a.message!;
    assert.equal(m.kind, 1);
    assert.ok(m.epoch > 0);
    assert.ok(m.version >= 1);
    const client = new DecodedModel();
    client.apply(m);
    const w = [...client.workloads.values()].find((x) => x.addresses.includes("10.20.0.1"));
    assert.ok(w, "the seed pod is a workload");
    assert.equal(w.identity, "spiffe://cluster.local/ns/default/sa/app");
    assert.equal(w.flags & 3, 3, "istio and healthy");
    const s = [...client.services.values()].find((x) => x.hostname === "app.default.svc.cluster.local");
    assert.ok(s, "the Service is a service");
    assert.deepEqual(s.ports, [[80, 8080]]);
    assert.ok(m.workloadIdLimit > w.id && m.serviceIdLimit > s.id);
    // The JSON snapshot (rendered on request for a target without file or WasmPlugin delivery) has the same pod,
    // on the channel for its reader as on the operator's port.
    const snap = await fetch(`${run.base}/snapshot/mesh`);
    assert.equal(snap.status, 200);
    assert.ok(snap.headers.get("etag"));
    const text = await snap.text();
    assert.match(text, /"addresses":\["10\.20\.0\.1"\]/);
    const onChannel = await run.get("/snapshot/mesh");
    assert.equal(onChannel.status, 200);
    assert.equal(onChannel.body.toString(), text);
    // A target that does not exist is refused as one the caller may not read (names are not disclosed).
    assert.equal((await poll(run, "nope", 0, 0)).status, 403);
    assert.equal((await run.get("/delta/mesh?version=x")).status, 400);
  });

  it("pods churned: each version is a delta from the previous one with the records of what changed; the client converges on the full", async () => {
    const client = new DecodedModel();
    await follow(run, "mesh", client);
    const start = client.version;
    // A pod created with an IP: one version (or a few) whose records upsert a workload with that address.
    await addPod(cluster, "churn-0", "10.20.1.1", "other");
    const seen: DecodedMessage[] = [];
    await eventually("the new pod in a delta", 10_000, async () => {
      const m = await follow(run, "mesh", client);
      if (m.kind === 2) seen.push(m);
      return addressesOf(client).includes("10.20.1.1") ? true : undefined;
    });
    assert.ok(seen.length > 0);
    for (const m of seen) assert.ok(m.version > m.base && m.epoch === client.epoch);
    const upsert = seen.flatMap((m) => m.records).find((r) => r.type === "workload" && r.addresses.includes("10.20.1.1"));
    assert.ok(upsert && upsert.type === "workload");
    assert.equal(upsert.identity, "spiffe://cluster.local/ns/default/sa/other");
    const id = upsert.id;
    // Deleted: a workload remove of that id.
    await cluster.deletePod("default", "churn-0");
    const removal = await eventually("the removal in a delta", 10_000, async () => {
      const m = await follow(run, "mesh", client);
      return m.records.find((r) => r.type === "workloadRemove" && r.id === id);
    });
    assert.ok(removal.value);
    // Many pods at once, some deleted again, some given another IP: the client following deltas
    // ends where a full message says.
    const names = Array.from({ length: 30 }, (_, i) => `churn-${i + 1}`);
    await Promise.all(names.map((n, i) => addPod(cluster, n, `10.20.2.${i + 1}`)));
    for (let i = 0; i < 10; i++) await cluster.deletePod("default", names[i]);
    for (let i = 10; i < 15; i++) await cluster.setPodStatus("default", names[i], { podIP: `10.20.3.${i}` });
    const want = ["10.20.0.1", ...names.slice(10, 15).map((_, k) => `10.20.3.${k + 10}`), ...names.slice(15).map((_, k) => `10.20.2.${k + 16}`)].sort();
    await eventually("the client following deltas reaches the API state", 20_000, async () => {
      await follow(run, "mesh", client);
      return JSON.stringify(addressesOf(client)) === JSON.stringify(want) ? true : undefined;
    });
    assert.ok(client.version > start);
    const full = new DecodedModel();
    full.apply((await poll(run, "mesh", 0, 0)).message!);
    assert.equal(full.version, client.version);
    assert.deepEqual(client.contents(), full.contents());
    // Ids come from the content (delta/ids.ts): below the id table's size for the peak count
    // (64 for up to 51 pods) plus the overflow of its last run, whatever came and went.
    assert.ok((await poll(run, "mesh", client.epoch, client.version)).message!.workloadIdLimit <= 64 + 33);
  });

  it("another epoch, a version from the future, or one behind the journal → a full message (counted by reason)", async () => {
    const now = (await poll(run, "mesh", 0, 0)).message!;
    const other = await poll(run, "mesh", now.epoch + 1, now.version);
    assert.equal(other.kind, "full");
    assert.equal(other.message!.epoch, now.epoch);
    const future = await poll(run, "mesh", now.epoch, now.version + 5);
    assert.equal(future.kind, "full");
    assert.equal(future.message!.version, now.version);
    // The journal keeps at most 40 records (this feed's delta.journal.maxRecords): after the churn above, version 1 is gone.
    const behind = await poll(run, "mesh", now.epoch, 1);
    assert.equal(behind.kind, "full");
    assert.ok((await metric(run.base, 'feed_delta_full_total{reason="behind",target="mesh"}')) >= 1);
    assert.ok((await metric(run.base, 'feed_delta_full_total{reason="future",target="mesh"}')) >= 1);
    assert.ok((await metric(run.base, 'feed_delta_full_total{reason="epoch",target="mesh"}')) >= 2);
    assert.ok((await metric(run.base, "feed_delta_journal_records{target=\"mesh\"}")) <= 40);
  });

  it("a long poll at the current version is held until a change, and answered no-change when its wait runs out", async () => {
    const client = new DecodedModel();
    await follow(run, "mesh", client);
    const idle = await poll(run, "mesh", client.epoch, client.version, 1);
    assert.equal(idle.kind, "no-change");
    assert.equal(idle.message!.version, client.version);
    assert.equal(idle.message!.records.length, 0);
    assert.ok(idle.ms >= 900, `held ${idle.ms} ms`);
    const held = (await heldPoll(run, client, () => poll(run, "mesh", client.epoch, client.version, 30))).answer;
    const written = Date.now();
    await addPod(cluster, "woken", "10.20.4.1");
    const a = await held;
    assert.equal(a.kind, "delta");
    assert.ok(Date.now() - written < 25_000, "answered on the change, not at the end of the wait");
    client.apply(a.message!);
    assert.ok(addressesOf(client).includes("10.20.4.1") || (await follow(run, "mesh", client), addressesOf(client).includes("10.20.4.1")));
    assert.equal(await metric(run.base, "feed_delta_held"), 0);
  });

  it("a version past the filters' id limit is refused whole: the journal stays consistent, publishing resumes", async () => {
    const base = run;
    const client = new DecodedModel();
    await follow(base, "mesh", client);
    const before = client.version;
    const live = client.workloads.size;
    // Ids come from the content (delta/ids.ts), so a second feed over the same API server gives
    // the same ones: its filters take exactly the ids the mesh needs now, and `over` more pods
    // than fit below that limit must need more (more ids than the limit, whatever their layout).
    const limit = Math.max(...client.workloads.keys()) + 1;
    const over = Array.from({ length: limit - live + 1 }, (_, i) => `over-${i}`);
    const tight = await runFeed([{ id: "cluster1", cluster }], [{ name: "mesh", filter: "passthrough_mtls" }], { delta: { maxWorkloads: limit } });
    try {
      const c2 = new DecodedModel();
      await follow(tight, "mesh", c2);
      const v0 = c2.version;
      await Promise.all(over.map((name, i) => addPod(cluster, name, `10.20.5.${i + 1}`)));
      await eventually("the refusal", 10_000, async () => ((await metric(tight.base, 'feed_delta_refused_total{target="mesh"}')) >= 1 ? true : undefined));
      await sleep(300);
      // Whatever was published before the refusal applies cleanly; nothing past the limit was.
      await follow(tight, "mesh", c2);
      assert.ok(Math.max(...c2.workloads.keys()) < limit, `ids up to ${Math.max(...c2.workloads.keys())} published`);
      const stuck = c2.version;
      assert.equal((await poll(tight, "mesh", c2.epoch, c2.version)).kind, "no-change");
      // Back under the limit (and a pod's new IP, so there is something new whether or not a
      // part of them was published before the refusal): the next version is a delta from the
      // last published one, and nothing of the refused state is in it. (A new IP, not a new
      // pod: the same pods have the same ids, so the same limit.)
      await Promise.all(over.map((name) => cluster.deletePod("default", name)));
      await cluster.setPodStatus("default", "churn-15", { podIP: "10.20.6.1" });
      let first: number | undefined;
      await eventually("publishing resumes", 10_000, async () => {
        const a = await poll(tight, "mesh", c2.epoch, c2.version);
        if (a.kind !== "delta") return undefined;
        first ??= a.message!.base;
        c2.apply(a.message!);
        const now = addressesOf(c2);
        return now.includes("10.20.6.1") && !now.some((x) => x.startsWith("10.20.5.")) ? true : undefined;
      });
      // The first version after the refusals is a delta from the last one published before them.
      assert.equal(first, stuck);
      assert.ok(c2.version > v0);
      const full = new DecodedModel();
      full.apply((await poll(tight, "mesh", 0, 0)).message!);
      assert.deepEqual(c2.contents(), full.contents());
    } finally {
      await tight.feed.stop();
      await cluster.setPodStatus("default", "churn-15", { podIP: "10.20.3.14" });
    }
    // The first feed took every change (its limit is the filters' default), the deletions too.
    await eventually("the first feed follows", 10_000, async () => {
      await follow(base, "mesh", client);
      return addressesOf(client).some((x) => x.startsWith("10.20.5.") || x === "10.20.6.1") ? undefined : true;
    });
    assert.ok(client.version > before);
  });

  it("a stopping feed answers its held polls at once and holds no new one, each answer marked x-feed-stopping with connection: close", async () => {
    const client = new DecodedModel();
    const current = () => `/delta/mesh?epoch=${client.epoch}&version=${client.version}&wait=30`;
    const held = (await heldPoll(run, client, () => run.get(current()))).answer;
    const stopped = Date.now();
    // The controller's stop is where a SIGTERM starts (main.ts); the channel still listens here.
    run.feed.controller.stop();
    const woken = await held;
    assert.ok(Date.now() - stopped < 10_000, "answered on the stop, not at the end of the wait");
    assert.equal(woken.headers["x-feed-kind"], "no-change");
    assert.equal(woken.headers["x-feed-stopping"], "1");
    assert.equal(woken.headers.connection, "close");
    const raw = await run.get(current());
    // A poll arriving while the feed stops: answered at once (not held), marked the same.
    assert.equal(raw.status, 200);
    assert.equal(raw.headers["x-feed-stopping"], "1");
    assert.equal(raw.headers.connection, "close");
    assert.equal(decodeMessage(raw.body).version, client.version);
    assert.ok(Date.now() - stopped < 10_000, "not held");
    assert.equal(await metric(run.base, "feed_delta_held"), 0, "nothing held while stopping");
  });

  it("a feed restart is a new epoch: a client of the old one gets a full message", async () => {
    // The test before stopped its feed's controller, maybe before the tail of earlier writes was
    // published: the old epoch here is a feed started now, whose first version lists them all.
    await run.feed.stop();
    run = await runFeed([{ id: "cluster1", cluster }], [{ name: "mesh", filter: "passthrough_mtls" }]);
    const client = new DecodedModel();
    await follow(run, "mesh", client);
    const oldEpoch = client.epoch;
    await run.feed.stop();
    await sleep(5);
    run = await runFeed([{ id: "cluster1", cluster }], [{ name: "mesh", filter: "passthrough_mtls" }]);
    const a = await poll(run, "mesh", oldEpoch, client.version);
    assert.equal(a.kind, "full");
    assert.notEqual(a.message!.epoch, oldEpoch);
    const restarted = new DecodedModel();
    restarted.apply(a.message!);
    assert.deepEqual(addressesOf(restarted), addressesOf(client));
  });

  it("two feed processes over one API server serve the same content: the same ids and digest, a current client gets a no-change from the other, one that missed changes a repair", async () => {
    const other = await runFeed([{ id: "cluster1", cluster }], [{ name: "mesh", filter: "passthrough_mtls" }]);
    try {
      const get = (r: FeedRun, query: string, body?: Buffer) => channelGet(`${r.channel}/delta/mesh?${query}`, meshCert("sidecar"), {}, body);
      const hex = (d: bigint) => d.toString(16).padStart(16, "0");
      /** Both feeds' full messages (format 3) once they agree on the content digest. */
      const agreed = () =>
        eventually("both feeds at the same content", 20_000, async () => {
          const [a, b] = await Promise.all([get(run, "epoch=0&version=0&format=3"), get(other, "epoch=0&version=0&format=3")]);
          return a.status === 200 && b.status === 200 && a.body.readBigUInt64LE(48) === b.body.readBigUInt64LE(48) ? { a: a.body, b: b.body } : undefined;
        });
      const { a, b } = (await agreed()).value!;
      assert.notEqual(decodeMessage(a).epoch, decodeMessage(b).epoch, "two processes, two epochs");
      const ma = new DecodedModel();
      ma.applyBody(a);
      const mb = new DecodedModel();
      mb.applyBody(b);
      assert.deepEqual(ma.records(), mb.records(), "the same records under the same ids");
      assert.deepEqual(trailerOf(a), trailerOf(b), "the same bucket digests");
      // A client current with one feed asks the other: a 56-byte no-change at the other's epoch.
      const q = `epoch=${ma.epoch}&version=${ma.version}&format=3&digest=${hex(ma.digest!)}`;
      const rebased = await get(other, q);
      assert.equal(rebased.status, 200);
      assert.equal(rebased.headers["x-feed-kind"], "rebased");
      assert.equal(rebased.body.length, 56);
      ma.applyBody(rebased.body);
      assert.equal(ma.epoch, mb.epoch);

      // The client misses changes (a new pod, a pod deleted); asked again, the other feed wants
      // its bucket digests and sends back only the buckets that differ.
      const behind = new DecodedModel();
      behind.applyBody(a);
      await addPod(cluster, "resync-1", "10.20.9.1");
      await cluster.deletePod("default", "seed-0");
      await eventually("the other feed has the changes", 20_000, async () => {
        const f = new DecodedModel();
        f.applyBody((await get(other, "epoch=0&version=0&format=3")).body);
        const ips = addressesOf(f);
        return ips.includes("10.20.9.1") && !ips.includes("10.20.0.1") ? true : undefined;
      });
      const ask = await get(other, `epoch=${behind.epoch}&version=${behind.version}&format=3&digest=${hex(behind.digest!)}`);
      assert.equal(ask.headers["x-feed-kind"], "ask-buckets");
      assert.equal(ask.body.length, 56);
      const table = Buffer.alloc(8192 * 8);
      for (const [bucket, digest] of trailerOf(a)!) table.writeBigUInt64LE(digest, bucket * 8);
      const repair = await get(other, `epoch=${behind.epoch}&version=${behind.version}&format=3&digest=${hex(behind.digest!)}&repair=1`, table);
      assert.equal(repair.status, 200, repair.body.toString());
      assert.equal(repair.headers["x-feed-kind"], "repair");
      const full = (await get(other, "epoch=0&version=0&format=3")).body;
      assert.ok(repair.body.length < full.length, `repair ${repair.body.length} bytes, full ${full.length}`);
      behind.applyBody(repair.body);
      const fresh = new DecodedModel();
      fresh.applyBody(full);
      assert.deepEqual(behind.records(), fresh.records(), "the repaired model is the other feed's, ids included");
      assert.equal(behind.digest, fresh.digest);
      // A malformed body is refused with a line naming it.
      const short = await get(other, `epoch=${behind.epoch}&version=1&format=3&digest=${hex(1n)}&repair=1`, Buffer.alloc(100));
      assert.equal(short.status, 400);
      assert.match(short.body.toString(), /body: 100 bytes, expected 65536/);
    } finally {
      await other.feed.stop();
      await addPod(cluster, "seed-0", "10.20.0.1");
    }
  });
});

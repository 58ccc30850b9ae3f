// Clusters at run time, against two real API servers ("local", whose API server holds the feed's
// Secrets, and "east"): Istio's remote secrets (label istio/multiCluster: "true", a data key per
// cluster id, a kubeconfig as its value) add, rotate and remove a cluster while the feed runs;
// an unreachable remote does not keep the feed unready past clusterSyncTimeoutSeconds, and its
// objects arrive as a delta when it answers; a configuration edit adding a reader applies live.
// "Unreachable" is real TCP: east's API server is reached through a gate on a loopback port that
// refuses connections (nothing listens) until the test opens it.
// Run: bash scripts/in-netns.sh node --import tsx --test --test-concurrency=1 tests/feed/remote_clusters.test.ts
import assert from "node:assert/strict";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { createServer, connect, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse, stringify } from "yaml";
import { startKubeClusters, type KubeCluster } from "../support/kube.js";
import { channelGet, meshCert, SIDECAR_PRINCIPAL } from "../support/feed_tls.js";
import { freePort } from "../support/ports.js";
import { decodeMessage, DecodedModel } from "./delta_wire_decode.js";
import { eventually, feedKubeconfig, runFeed, type FeedRun } from "./harness.js";

const TIMEOUT_SECONDS = 3;
const HTTPBIN_PRINCIPAL = "cluster.local/ns/default/sa/httpbin";

/** A TCP gate in front of an API server: closed (connection refused) until opened; close() also cuts open connections. */
class Gate {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}
  open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
    this.server = server;
    return new Promise((done) => server.listen(this.port, "127.0.0.1", () => done()));
  }
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((done) => (this.server ? this.server.close(() => done()) : done()));
    this.server = undefined;
  }
}

function remoteSecret(name: string, data: Record<string, string>) {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { namespace: "mesh-feed", name, labels: { "istio/multiCluster": "true" }, annotations: { "networking.istio.io/cluster": Object.keys(data)[0] } },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")])),
  };
}

/** A kubeconfig text with its server (and optionally CA or token) replaced. */
function edited(text: string, change: { server?: string; ca?: string; token?: string }): string {
  const k = parse(text) as { clusters: Array<{ cluster: Record<string, string> }>; users: Array<{ user: Record<string, string> }> };
  if (change.server) k.clusters[0].cluster.server = change.server;
  if (change.ca) k.clusters[0].cluster["certificate-authority-data"] = change.ca;
  if (change.token) k.users[0].user = { token: change.token };
  return stringify(k);
}

async function runningPod(cluster: KubeCluster, name: string, ip: string): Promise<void> {
  await cluster.createPod({ namespace: "default", name, labels: { app: name, "security.istio.io/tlsMode": "istio" } });
  await cluster.setPodStatus("default", name, { podIP: ip });
}

interface Snapshot {
  workloads: Array<{ uid: string; addresses?: string[] }>;
}

describe("feed: remote clusters from Istio's remote secrets, the sync timeout, configuration reload (two real API servers)", () => {
  let local: KubeCluster;
  let east: KubeCluster;
  let gate: Gate;
  let run: FeedRun;
  let eastKubeconfig: string;
  let startMs = 0;
  const uids = async () => ((JSON.parse(await (await fetch(`${run.base}/snapshot/mesh`)).text()) as Snapshot).workloads ?? []).map((w) => w.uid).filter((u) => u.includes("//Pod/")).sort();
  const metrics = async () => (await fetch(`${run.base}/metrics`)).text();
  const metric = async (series: string) => {
    const line = (await metrics()).split("\n").find((l) => l.startsWith(series + " "));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  };
  /** Follows /delta as a client does; returns the kind of each answer. */
  const client = new DecodedModel();
  const follow = async (): Promise<string> => {
    const r = await channelGet(`${run.channel}/delta/mesh?epoch=${client.epoch}&version=${client.version}&wait=0`);
    assert.equal(r.status, 200, r.body.toString());
    client.apply(decodeMessage(r.body));
    return String(r.headers["x-feed-kind"]);
  };
  const clientAddresses = () => [...client.workloads.values()].flatMap((w) => w.addresses).sort();

  before(async () => {
    [local, east] = await startKubeClusters([{ name: "rc-local" }, { name: "rc-east" }]);
    await runningPod(local, "web-0", "10.1.0.1");
    await runningPod(east, "east-0", "10.2.0.1");
    // east: the feed's RBAC and a ServiceAccount token for the remote secret (what create-remote-secret packs).
    eastKubeconfig = readFileSync(await feedKubeconfig(east), "utf8");
    const eastPort = Number(new URL(east.server).port);
    gate = new Gate(await freePort(), { host: "127.0.0.1", port: eastPort });
    await local.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "mesh-feed" } } });
    // east through the closed gate: unreachable when the feed starts.
    await local.apply(remoteSecret("istio-remote-secret-east", { east: edited(eastKubeconfig, { server: `https://127.0.0.1:${gate.port}` }) }));
    // A secret naming the feed's own cluster: ignored, as istiod ignores its config cluster.
    await local.apply(remoteSecret("istio-remote-secret-rogue", { local: edited(eastKubeconfig, {}) }));
    const started = Date.now();
    run = await runFeed([{ id: "local", cluster: local }], [{ name: "mesh", filter: "passthrough_mtls", network: "" }], {
      remoteSecrets: { namespace: "mesh-feed" },
      clusterSyncTimeoutSeconds: TIMEOUT_SECONDS,
      configReloadMs: 200,
    });
    startMs = Date.now() - started;
  });

  after(async () => {
    await run?.feed.stop();
    await gate?.close();
    await local?.stop();
    await east?.stop();
  });

  it("an unreachable remote: ready after the timeout serving the local cluster, reported not synced, its pods a delta once it answers", async () => {
    assert.ok(startMs >= TIMEOUT_SECONDS * 1000, `startFeed waited for the timeout (${startMs} ms)`);
    const ready = await fetch(`${run.base}/readyz`);
    const body = await ready.text();
    assert.equal(ready.status, 200, body);
    assert.match(body, /degraded: clusters not synced: east/);
    assert.equal(await metric('feed_cluster_synced{cluster="east"}'), 0);
    assert.equal(await metric('feed_cluster_synced{cluster="local"}'), 1);
    assert.equal(await metric('feed_cluster_sync_timeouts_total{cluster="east"}'), 1);
    assert.equal(await metric('feed_remote_secret_refused_total{reason="config_cluster"}'), 1, "the secret naming the local cluster is ignored");
    assert.deepEqual(await uids(), ["local//Pod/default/web-0"], "the local cluster is served; nothing of east, nothing from the rogue secret");
    assert.equal(await follow(), "full");
    assert.deepEqual(clientAddresses(), ["10.1.0.1"]);

    await gate.open();
    await eventually("east's pod in the model", 30_000, async () => ((await uids()).includes("east//Pod/default/east-0") ? true : undefined), 100);
    // Its pods can be in before every one of its watches is (each failed watch retries after 1 s).
    await eventually("east synced", 30_000, async () => ((await metric('feed_cluster_synced{cluster="east"}')) === 1 ? true : undefined), 100);
    assert.equal((await (await fetch(`${run.base}/readyz`)).text()).trim(), "ok");
    assert.equal(await follow(), "delta", "east's objects arrive as a delta");
    assert.deepEqual(clientAddresses(), ["10.1.0.1", "10.2.0.1"]);
  });

  it("a rotated token: the feed keeps the cluster, reads it with the new credentials once the old ones are revoked", async () => {
    await east.apply({ apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: { name: "mesh-feed-next" }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "mesh-feed-reader" }, subjects: [{ kind: "ServiceAccount", name: "mesh-feed-next", namespace: "mesh-feed" }] });
    const next = readFileSync((await east.serviceAccountKubeconfig("mesh-feed", "mesh-feed-next")).path, "utf8");
    await local.apply(remoteSecret("istio-remote-secret-east", { east: next }));
    // The old credentials keep serving while the new lists come in: east-0 never leaves.
    let lost = 0;
    await eventually("the new credentials in use", 30_000, async () => {
      if (!(await uids()).includes("east//Pod/default/east-0")) lost++;
      const e = run.feed.clusters.describe().find((c) => c.id === "east");
      return e?.synced && !e.rotating && (await metric('feed_cluster_changes_total{event="updated",origin="secret"}')) === 1 ? true : undefined;
    }, 100);
    assert.equal(lost, 0, "east-0 stayed in the model throughout the rotation");
    // Revoke the old token (its ServiceAccount deleted) and cut the old path (the gate).
    await east.delete({ apiVersion: "v1", kind: "ServiceAccount", metadata: { namespace: "mesh-feed", name: "mesh-feed" } });
    await gate.close();
    await runningPod(east, "east-1", "10.2.0.2");
    await eventually("a pod created after the revocation", 30_000, async () => ((await uids()).includes("east//Pod/default/east-1") ? true : undefined), 100);
    assert.deepEqual(await uids(), ["east//Pod/default/east-0", "east//Pod/default/east-1", "local//Pod/default/web-0"]);
    assert.equal(await metric('feed_cluster_synced{cluster="east"}'), 1);
    assert.equal(await follow(), "delta");
    assert.deepEqual(clientAddresses(), ["10.1.0.1", "10.2.0.1", "10.2.0.2"]);
  });

  it("impostors on either side of a remote channel: an API server the secret's CA does not vouch for, a token the API server does not know, a kubeconfig that runs a program", async () => {
    const localCa = (parse(readFileSync(local.kubeconfigPath, "utf8")) as { clusters: Array<{ cluster: Record<string, string> }> }).clusters[0].cluster["certificate-authority-data"];
    const execConfig = edited(eastKubeconfig, {}).replace(/user:\n(\s+)token: .*/, "user:\n$1exec: { apiVersion: client.authentication.k8s.io/v1, command: /bin/true }");
    assert.match(execConfig, /exec:/);
    await local.apply(remoteSecret("istio-remote-secret-bad", {
      "forged-ca": edited(eastKubeconfig, { server: east.server, ca: localCa }),
      "forged-token": edited(eastKubeconfig, { server: east.server, token: "forged" }),
      exec: execConfig,
    }));
    // A second Secret claiming east, which istio-remote-secret-east registered: ignored.
    await local.apply(remoteSecret("istio-remote-secret-dup", { east: edited(eastKubeconfig, { server: east.server, token: "forged" }) }));
    await eventually("the duplicate refused", 10_000, async () => ((await metric('feed_remote_secret_refused_total{reason="duplicate"}')) === 1 ? true : undefined), 100);
    assert.equal(run.feed.clusters.describe().find((c) => c.id === "east")?.origin, "secret mesh-feed/istio-remote-secret-east");
    await local.delete({ apiVersion: "v1", kind: "Secret", metadata: { namespace: "mesh-feed", name: "istio-remote-secret-dup" } });
    await eventually("the kubeconfig with exec refused", 10_000, async () => ((await metric('feed_remote_secret_refused_total{reason="kubeconfig"}')) === 1 ? true : undefined), 100);
    await eventually("both impostor clusters timed out", 30_000, async () =>
      (await metric('feed_cluster_sync_timeouts_total{cluster="forged-ca"}')) === 1 && (await metric('feed_cluster_sync_timeouts_total{cluster="forged-token"}')) === 1 ? true : undefined, 200);
    assert.equal(await metric('feed_cluster_synced{cluster="forged-ca"}'), 0);
    assert.equal(await metric('feed_cluster_synced{cluster="forged-token"}'), 0);
    assert.equal(await metric('feed_cluster_synced{cluster="exec"}'), undefined, "never added");
    assert.deepEqual(await uids(), ["east//Pod/default/east-0", "east//Pod/default/east-1", "local//Pod/default/web-0"], "nothing from the impostors");
    assert.match(await (await fetch(`${run.base}/readyz`)).text(), /degraded: clusters not synced: forged-ca, forged-token/);
    await local.delete({ apiVersion: "v1", kind: "Secret", metadata: { namespace: "mesh-feed", name: "istio-remote-secret-bad" } });
    await eventually("the impostor clusters removed", 10_000, async () => ((await (await fetch(`${run.base}/readyz`)).text()).trim() === "ok" ? true : undefined), 100);
  });

  it("a configuration edit adding a reader applies live, and caps too; a field that needs a restart is said so; a broken edit changes nothing", async () => {
    const podA = meshCert("pod-a");
    const asPodA = () => channelGet(`${run.channel}/delta/mesh?epoch=0&version=0&wait=0`, podA);
    assert.equal((await asPodA()).status, 403, "httpbin is not a reader yet");
    const path = join(run.dir, "feed.yaml");
    const write = (config: Record<string, unknown>) => {
      writeFileSync(`${path}.new`, stringify(config));
      renameSync(`${path}.new`, path);
    };
    const config = parse(readFileSync(path, "utf8")) as Record<string, unknown> & { targets: Array<{ readers: string[] }> };
    config.targets[0].readers = [SIDECAR_PRINCIPAL, HTTPBIN_PRINCIPAL];
    write(config);
    await eventually("httpbin may read", 10_000, async () => ((await asPodA()).status === 200 ? true : undefined), 100);
    assert.equal(await metric('feed_config_reloads_total{result="applied"}'), 1);

    // caps apply live: a pod whose identity passes a lowered text cap leaves the model, and returns.
    await local.createPod({ namespace: "default", name: "long-0", serviceAccountName: "s".repeat(240), labels: { app: "long" } });
    await local.setPodStatus("default", "long-0", { podIP: "10.1.0.9" });
    await eventually("long-0 in the model", 10_000, async () => ((await uids()).includes("local//Pod/default/long-0") ? true : undefined), 100);
    const capped = { ...config, caps: { maxTextBytes: 256 } };
    write(capped);
    await eventually("long-0 left out under the lowered cap", 10_000, async () => (!(await uids()).includes("local//Pod/default/long-0") ? true : undefined), 100);
    assert.equal(await metric('feed_capped_objects{kind="workload",reason="text"}'), 1);
    write(config);
    await eventually("long-0 back", 10_000, async () => ((await uids()).includes("local//Pod/default/long-0") ? true : undefined), 100);
    await local.deletePod("default", "long-0");
    assert.equal(await metric('feed_config_reloads_total{result="needs_restart"}'), undefined, "caps apply without a restart");

    (config as { delta?: object }).delta = { quietMs: 10 };
    write(config);
    await eventually("the restart field reported", 10_000, async () => ((await metric('feed_config_reloads_total{result="needs_restart"}')) === 1 ? true : undefined), 100);

    write({ ...config, targets: [{ ...config.targets[0], readers: "everyone" }] });
    await eventually("the broken edit refused", 10_000, async () => ((await metric('feed_config_reloads_total{result="refused"}')) === 1 ? true : undefined), 100);
    assert.equal((await asPodA()).status, 200, "the readers in force stay");

    config.targets[0].readers = [SIDECAR_PRINCIPAL];
    write(config);
    await eventually("httpbin refused again", 10_000, async () => ((await asPodA()).status === 403 ? true : undefined), 100);
  });

  it("a cluster added while running that never lists (and no timeout) does not hold back the others' changes", async () => {
    const path = join(run.dir, "feed.yaml");
    const config = parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    writeFileSync(`${path}.new`, stringify({ ...config, clusterSyncTimeoutSeconds: 0 }));
    renameSync(`${path}.new`, path);
    await eventually("the timeout off", 10_000, async () => (run.feed.clusters.timeoutSeconds === 0 ? true : undefined), 100);
    const silent = new Gate(await freePort(), { host: "127.0.0.1", port: 9 }); // never opened
    await local.apply(remoteSecret("istio-remote-secret-silent", { silent: edited(eastKubeconfig, { server: `https://127.0.0.1:${silent.port}` }) }));
    await eventually("silent added", 10_000, async () => (run.feed.clusters.describe().some((c) => c.id === "silent") ? true : undefined), 100);
    await runningPod(local, "web-1", "10.1.0.2");
    await eventually("a local pod while silent lists", 10_000, async () => ((await uids()).includes("local//Pod/default/web-1") ? true : undefined), 100);
    assert.equal(await metric('feed_cluster_synced{cluster="silent"}'), 0);
    assert.match(await (await fetch(`${run.base}/readyz`)).text(), /degraded: clusters not synced: silent/);
    await local.delete({ apiVersion: "v1", kind: "Secret", metadata: { namespace: "mesh-feed", name: "istio-remote-secret-silent" } });
    await local.deletePod("default", "web-1");
    await eventually("silent removed, web-1 gone", 10_000, async () => (!run.feed.clusters.describe().some((c) => c.id === "silent") && !(await uids()).includes("local//Pod/default/web-1") ? true : undefined), 100);
  });

  it("the remote secret deleted: east's pods leave the model, as a delta", async () => {
    await local.delete({ apiVersion: "v1", kind: "Secret", metadata: { namespace: "mesh-feed", name: "istio-remote-secret-east" } });
    await eventually("east's pods gone", 30_000, async () => (JSON.stringify(await uids()) === JSON.stringify(["local//Pod/default/web-0"]) ? true : undefined), 100);
    assert.equal(await metric('feed_cluster_synced{cluster="east"}'), undefined, "east is no longer reported");
    assert.equal(await follow(), "delta");
    assert.deepEqual(clientAddresses(), ["10.1.0.1"]);
  });

  it("a cluster added to the configuration file joins; its kubeconfig file rewritten with a new token restarts it; removed, it leaves", async () => {
    const bind = (sa: string) => east.apply({ apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: { name: sa }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "mesh-feed-reader" }, subjects: [{ kind: "ServiceAccount", name: sa, namespace: "mesh-feed" }] });
    const path = join(run.dir, "feed.yaml");
    const kubeconfigPath = join(run.dir, "east.kubeconfig");
    const write = (file: string, text: string) => {
      writeFileSync(`${file}.new`, text);
      renameSync(`${file}.new`, file);
    };
    writeFileSync(kubeconfigPath, readFileSync((await east.serviceAccountKubeconfig("mesh-feed", "mesh-feed-next")).path, "utf8"));
    const config = parse(readFileSync(path, "utf8")) as Record<string, unknown> & { clusters: Array<Record<string, string>> };
    const withoutEast = stringify(config);
    config.clusters.push({ id: "east", kubeconfig: kubeconfigPath });
    write(path, stringify(config));
    await eventually("east back, from the configuration", 30_000, async () => ((await uids()).includes("east//Pod/default/east-1") ? true : undefined), 100);
    assert.equal(run.feed.clusters.describe().find((c) => c.id === "east")?.origin, "config");

    await bind("mesh-feed-third");
    write(kubeconfigPath, readFileSync((await east.serviceAccountKubeconfig("mesh-feed", "mesh-feed-third")).path, "utf8"));
    await eventually("the rewritten kubeconfig in use", 30_000, async () => {
      const e = run.feed.clusters.describe().find((c) => c.id === "east");
      return e?.synced && !e.rotating && (await metric('feed_cluster_changes_total{event="updated",origin="config"}')) === 1 ? true : undefined;
    }, 100);
    await east.delete({ apiVersion: "v1", kind: "ServiceAccount", metadata: { namespace: "mesh-feed", name: "mesh-feed-next" } });
    await runningPod(east, "east-2", "10.2.0.3");
    await eventually("a pod created after the old token's revocation", 30_000, async () => ((await uids()).includes("east//Pod/default/east-2") ? true : undefined), 100);

    write(path, withoutEast);
    await eventually("east gone again", 30_000, async () => (JSON.stringify(await uids()) === JSON.stringify(["local//Pod/default/web-0"]) ? true : undefined), 100);
    assert.equal(await follow(), "delta");
  });
});

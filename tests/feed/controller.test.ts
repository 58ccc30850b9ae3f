// The feed's controller without an API server (objects fed directly): every snapshot is checked
// by the compiled filter before it is published; a refused one keeps the previous snapshot; the
// ECDS file and the HTTP endpoint carry the same bytes and version; If-None-Match gives 304.
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse } from "yaml";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { parseFeedConfig } from "../../feed/src/config.js";
import { FeedController } from "../../feed/src/controller.js";
import { FeedHttpServer } from "../../feed/src/http.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { REPO_ROOT } from "../support/paths.js";
import { pod, service, slice } from "./fixtures.js";

function requireBuild(): void {
  for (const f of ["passthrough_mtls", "tunnel_port"]) {
    try {
      readFileSync(join(REPO_ROOT, "build", `${f}.wasm`));
    } catch {
      throw new Error(`build/${f}.wasm missing: run \`npm run build\` first (npm test does it)`);
    }
  }
}

describe("feed: controller, validation and delivery (no API server)", () => {
  let dir: string;
  let controller: FeedController;
  let http: FeedHttpServer;
  let base: string;
  let c1: ClusterObjects;
  const logs: string[] = [];

  before(async () => {
    requireBuild();
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "feed-ctl-"));
    copyFileSync(join(REPO_ROOT, "envoy-configs/passthrough_mtls_plugin/passthrough_mtls.yaml"), join(dir, "template.yaml"));
    const config = parseFeedConfig(
      JSON.stringify({
        wasmDir: join(REPO_ROOT, "build"),
        debounce: { quietMs: 20, maxMs: 200 },
        clusters: [{ id: "c1", kubeconfig: "/nonexistent" }],
        targets: [
          { name: "sidecar", filter: "passthrough_mtls", ecds: { file: join(dir, "plugin", "passthrough_mtls.yaml"), template: join(dir, "template.yaml") } },
          { name: "server", filter: "tunnel_port", config: { role: "server", localWorkload: "10.0.0.1" } },
        ],
      }),
      join(dir, "feed.json"),
    );
    c1 = new ClusterObjects("c1");
    c1.upsert("pods", pod("default", "app-0", { ip: "10.0.0.1", sa: "app" }));
    c1.upsert("services", service("default", "app", [{ port: 80, targetPort: 8080 }], { clusterIP: "10.96.0.5" }));
    c1.upsert("endpointSlices", slice("default", "app", "app-1", [{ port: 8080 }], [{ ip: "10.0.0.1", pod: "app-0" }]));
    controller = new FeedController(config, { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() }, [c1], undefined, (level, m) => logs.push(`${level} ${m}`));
    http = new FeedHttpServer(controller);
    const address = await http.listen(0, "127.0.0.1");
    base = `http://127.0.0.1:${address.port}`;
  });

  after(async () => {
    controller?.stop();
    await http?.close();
  });

  it("is not ready before the cluster synced and a snapshot was published", async () => {
    const r = await fetch(`${base}/readyz`);
    assert.equal(r.status, 503);
    assert.match(await r.text(), /waiting for the initial lists of c1/);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
  });

  it("publishes a snapshot each filter accepts; ECDS file and HTTP carry the same configuration and version", async () => {
    controller.markSynced("c1");
    await controller.flush();
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const r = await fetch(`${base}/snapshot/sidecar`);
    assert.equal(r.status, 200);
    const etag = r.headers.get("etag")!;
    const version = r.headers.get("x-feed-version")!;
    assert.equal(etag, `"${version}"`);
    const text = await r.text();
    const snapshot = JSON.parse(text);
    assert.deepEqual(snapshot.workloads, [{ uid: "c1//Pod/default/app-0", addresses: ["10.0.0.1"], identity: "spiffe://cluster.local/ns/default/sa/app", tlsMode: "istio" }]);
    const file = parse(readFileSync(join(dir, "plugin", "passthrough_mtls.yaml"), "utf8"));
    assert.equal(file.version_info, version);
    const wasm = file.resources[0].typed_config.config;
    assert.equal(wasm.configuration.value.trimEnd(), text);
    // Everything but the configuration comes from the template (the shipped ECDS file).
    assert.equal(wasm.root_id, "passthrough_mtls");
    assert.equal(wasm.failure_policy, "FAIL_CLOSED");
  });

  it("answers 304 to If-None-Match with the current version, 200 with a new ETag after a change", async () => {
    const first = await fetch(`${base}/snapshot/sidecar`);
    const etag = first.headers.get("etag")!;
    assert.equal((await fetch(`${base}/snapshot/sidecar`, { headers: { "if-none-match": etag } })).status, 304);
    assert.equal((await fetch(`${base}/snapshot/sidecar`, { headers: { "if-none-match": `"other", ${etag}` } })).status, 304);
    c1.upsert("pods", pod("default", "app-1", { ip: "10.0.0.2", sa: "app" }));
    controller.changed("c1");
    await controller.nextRender();
    const next = await fetch(`${base}/snapshot/sidecar`, { headers: { "if-none-match": etag } });
    assert.equal(next.status, 200);
    assert.notEqual(next.headers.get("etag"), etag);
    assert.equal(JSON.parse(await next.text()).workloads.length, 2);
    assert.equal((await fetch(`${base}/snapshot/nope`)).status, 404);
  });

  it("an unchanged mesh is not published again (same bytes, same version)", async () => {
    const before = (await fetch(`${base}/snapshot/sidecar`)).headers.get("etag");
    controller.changed("c1");
    await controller.nextRender();
    assert.equal((await fetch(`${base}/snapshot/sidecar`)).headers.get("etag"), before);
  });

  it("a snapshot the filter refuses is not published: one error line naming the filter's reason, the previous version stays", async () => {
    const server = await fetch(`${base}/snapshot/server`);
    assert.equal(server.status, 200);
    const kept = server.headers.get("etag");
    // The server sidecar's own workload leaves the mesh: tunnel_port refuses such a configuration.
    c1.remove("pods", pod("default", "app-0"));
    controller.changed("c1");
    await controller.nextRender();
    assert.equal((await fetch(`${base}/snapshot/server`)).headers.get("etag"), kept);
    // The JSON path refuses it, in one line naming the filter's reason.
    const refusals = logs.filter((l) => l.startsWith("error target server: tunnel_port refuses the new snapshot ("));
    assert.equal(refusals.length, 1, logs.join("\n"));
    assert.match(refusals[0], /localWorkload: no workload has address 10\.0\.0\.1/);
    assert.match(refusals[0], /not published, version \S+ stays$/);
    // The network's delta channel does publish it: a filter fed by meshFeed takes every valid
    // model (the delta is applied in place before the filter sees it) and its server refuses
    // each tunnel until its own workload is back (server.refused_no_local_workload), so the
    // compiled tunnel_port in the feed's shadow VM (delta/filter_shadow.ts) accepts it.
    assert.equal(logs.filter((l) => l.includes("delta refused")).length, 0, logs.join("\n"));
    assert.equal(controller.metrics.get("feed_delta_refused_total", { target: "server" }) ?? 0, 0);
    // The JSON path of a target with its own delivery is independent: it got the change.
    assert.equal(JSON.parse(await (await fetch(`${base}/snapshot/sidecar`)).text()).workloads.length, 1);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    assert.match(metrics, /feed_snapshot_version\{target="sidecar"\} \d+/);
    assert.match(metrics, /feed_objects\{cluster="c1",kind="pods"\} 1/);
  });
});

// The feed's caps (feed/src/compute_caps.ts) against a real API server and a file source: an
// object over a cap is left out of the model, named in one log line and counted in
// feed_capped_objects{kind,reason}; the rest of the mesh keeps flowing (new versions on the
// delta channel, the JSON snapshot); back under the cap the object is included again.
//   - a Service with 20,000 TCP ports: the API server accepts it (Kubernetes has no port count
//     limit, only the object's size), the default cap of 1,024 leaves it out;
//   - a pod that is an endpoint of more services than the cap (3 here);
//   - from files (no API server's validation): a Service with 20,000 ports and a pod whose
//     SPIFFE id is past the text cap.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT } from "../support/paths.js";
import { pod, service } from "./fixtures.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";

const SIDECAR = { "security.istio.io/tlsMode": "istio" };

interface Snapshot {
  workloads: Array<{ uid: string; addresses: string[] }>;
  services: Array<{ hostname: string; ports?: Record<string, number>; endpoints?: Array<{ workload: string }> }>;
}

/** n TCP ports 1..n, named short (the names count against the object's size). */
function manyPorts(n: number): Array<{ name: string; port: number }> {
  return Array.from({ length: n }, (_, i) => ({ name: `p${(i + 1).toString(36)}`, port: i + 1 }));
}

describe("feed: caps on what the feed forwards (real API server and files)", () => {
  let cluster: KubeCluster;
  let run: FeedRun;
  let filesDir: string;
  const lines: string[] = [];
  const consoleError = console.error;
  const snapshot = async (): Promise<Snapshot> => (await fetch(`${run.base}/snapshot/mesh`)).json() as Promise<Snapshot>;
  const capped = async (kind: string, reason: string): Promise<number> => {
    const m = new RegExp(`^feed_capped_objects\\{kind="${kind}",reason="${reason}"\\} (\\d+)$`, "m").exec(await (await fetch(`${run.base}/metrics`)).text());
    return m ? Number(m[1]) : 0;
  };
  const fullVersion = async (): Promise<number> => {
    // The channel, as the sidecar the harness's targets let read.
    const r = await run.get("/delta/mesh?epoch=0&version=0");
    assert.equal(r.status, 200);
    return Number(r.headers["x-feed-version"] ?? NaN);
  };
  const addPod = async (ns: string, name: string, ip: string, labels: Record<string, string> = {}) => {
    await cluster.createPod({ namespace: ns, name, labels: { ...SIDECAR, ...labels }, serviceAccountName: name });
    await cluster.setPodStatus(ns, name, { podIP: ip });
  };

  before(async () => {
    console.error = (...args: unknown[]) => {
      lines.push(args.map(String).join(" "));
      consoleError(...args);
    };
    cluster = await startKubeCluster({ name: "feed-caps" });
    await cluster.createNamespace("default");
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    filesDir = mkdtempSync(join(REPO_ROOT, ".tmp", "feed-caps-"));
    run = await runFeed(
      [
        { id: "api", cluster },
        { id: "files", files: filesDir },
      ],
      [{ name: "mesh", filter: "passthrough_mtls" }],
      { caps: { maxMembershipsPerWorkload: 3 } },
    );
  });

  after(async () => {
    console.error = consoleError;
    await run?.feed.stop();
    await cluster?.stop();
  });

  it("a Service with 20,000 ports (the API server takes it) is left out, named once and counted; the rest flows; under the cap it is back", async () => {
    // Created as kubectl create does (a server-side apply records every port in managedFields
    // and passes etcd's 2 MiB message limit: 2.7 MB at 20,000 ports).
    await cluster.core.createNamespacedService({ namespace: "default", body: { apiVersion: "v1", kind: "Service", metadata: { name: "big" }, spec: { selector: { app: "big" }, ports: manyPorts(20_000) } } });
    const stored = await cluster.core.readNamespacedService({ namespace: "default", name: "big" });
    assert.equal(stored.spec?.ports?.length, 20_000, "Kubernetes accepts 20,000 ports on one Service");
    await eventually("the service counted as capped", 20_000, async () => ((await capped("service", "ports")) === 1 ? true : undefined));
    assert.equal((await snapshot()).services.some((s) => s.hostname === "big.default.svc.cluster.local"), false);
    const said = lines.filter((l) => l.includes("service big.default.svc.cluster.local left out of the model"));
    assert.equal(said.length, 1, said.join("\n"));
    assert.match(said[0], /20000 TCP ports \(cap 1024\)/);
    // The rest of the mesh keeps flowing: a new pod is published on both paths.
    const before = await fullVersion();
    await addPod("default", "after-0", "10.50.0.1");
    await eventually("the new pod published", 10_000, async () => ((await snapshot()).workloads.some((w) => w.addresses.includes("10.50.0.1")) ? true : undefined));
    assert.ok((await fullVersion()) > before, "the delta channel published a new version");
    assert.equal(lines.filter((l) => l.includes("big.default.svc.cluster.local left out")).length, 1, "named once, not at every version");
    // Back under the cap (the ports list replaced by 10 ports): included again.
    await cluster.core.replaceNamespacedService({ namespace: "default", name: "big", body: { ...stored, spec: { ...stored.spec, ports: stored.spec?.ports?.slice(0, 10) } } });
    const back = await eventually("the service back", 20_000, async () => (await snapshot()).services.find((s) => s.hostname === "big.default.svc.cluster.local"));
    assert.equal(Object.keys(back.value.ports ?? {}).length, 10);
    assert.equal(await capped("service", "ports"), 0);
    assert.ok(lines.some((l) => l.includes("big.default.svc.cluster.local is within the caps again")));
  });

  it("a pod that is an endpoint of more services than the cap is left out; its services stay; one membership fewer and it is back", async () => {
    await addPod("default", "shared-0", "10.50.0.2", { app: "shared" });
    for (let i = 0; i < 4; i++) {
      await cluster.createService({ namespace: "default", name: `s${i}`, selector: { app: "shared" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] });
      await cluster.createEndpointSlice({ namespace: "default", name: `s${i}-1`, service: `s${i}`, ports: [{ name: "http", port: 8080 }], endpoints: [{ addresses: ["10.50.0.2"], pod: { name: "shared-0" } }] });
    }
    await eventually("the pod counted as capped", 10_000, async () => ((await capped("workload", "memberships")) === 1 ? true : undefined));
    const s = await snapshot();
    assert.equal(s.workloads.some((w) => w.uid === "api//Pod/default/shared-0"), false);
    for (let i = 0; i < 4; i++) assert.ok(s.services.some((x) => x.hostname === `s${i}.default.svc.cluster.local` && !x.endpoints));
    assert.equal(lines.filter((l) => l.includes("workload api//Pod/default/shared-0 left out of the model: endpoint of 4 services (cap 3)")).length, 1);
    await cluster.delete({ apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice", metadata: { namespace: "default", name: "s3-1" } });
    await eventually("the pod back with 3 memberships", 10_000, async () => {
      const now = await snapshot();
      const members = now.services.filter((x) => x.endpoints?.some((e) => e.workload === "api//Pod/default/shared-0"));
      return now.workloads.some((w) => w.uid === "api//Pod/default/shared-0") && members.length === 3 ? true : undefined;
    });
    assert.equal(await capped("workload", "memberships"), 0);
  });

  it("from files: a Service with 20,000 ports and a pod whose SPIFFE id passes the text cap are left out; the file's other objects are in", async () => {
    const longSa = "a".repeat(1100);
    const objects = [
      service("files-ns", "wide", manyPorts(20_000), { clusterIP: "10.96.7.7" }),
      pod("files-ns", "long-0", { ip: "10.60.0.1", sa: longSa, labels: SIDECAR }),
      pod("files-ns", "fine-0", { ip: "10.60.0.2", sa: "fine", labels: SIDECAR }),
    ];
    const tmp = join(filesDir, ".objects.yaml.tmp");
    writeFileSync(tmp, objects.map((o) => stringify(o)).join("---\n"));
    renameSync(tmp, join(filesDir, "objects.yaml"));
    const seen = await eventually("the file's pod in the model", 20_000, async () => {
      const s = await snapshot();
      return s.workloads.some((w) => w.uid === "files//Pod/files-ns/fine-0") ? s : undefined;
    });
    assert.equal(seen.value.workloads.some((w) => w.uid === "files//Pod/files-ns/long-0"), false);
    assert.equal(seen.value.services.some((x) => x.hostname === "wide.files-ns.svc.cluster.local"), false);
    assert.equal(await capped("workload", "text"), 1);
    assert.equal(await capped("service", "ports"), 1);
    const line = lines.find((l) => l.includes("workload files//Pod/files-ns/long-0 left out of the model"));
    const identityBytes = Buffer.byteLength(`spiffe://cluster.local/ns/files-ns/sa/${longSa}`);
    assert.ok((line ?? "").includes(`identity is ${identityBytes} bytes (cap 1024)`), line);
  });
});

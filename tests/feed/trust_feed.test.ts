// Which objects may decide another tenant's trust, against a real API server (the feed as
// deployed: its ServiceAccount, the shipped RBAC). docs/problems.md "The feed's rules" names
// each rule; here a tenant tries each one on a victim in another namespace or network:
//   - a pod labelled topology.istio.io/network with another network's name, holding a victim
//     pod's IP of that network (overlapping pod CIDRs): the label is not read, the victim keeps
//     its address and identity in its network's view;
//   - two live pods with one IP in two namespaces: the older (the victim) keeps it; once the
//     victim is gone the address moves (an IP reused);
//   - a Service in the tenant's namespace whose EndpointSlice names a pod of the victim's
//     namespace: no membership, and no say on that pod's health.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT } from "../support/paths.js";
import { namespace, pod } from "./fixtures.js";
import { eventually, runFeed, sleep, type FeedRun } from "./harness.js";

const SIDECAR = { "security.istio.io/tlsMode": "istio" };
const TD = "spiffe://cluster.local";

interface SnapshotWorkload {
  uid: string;
  addresses: string[];
  network?: string;
  identity?: string;
  healthy?: boolean;
}
interface SnapshotService {
  hostname: string;
  endpoints?: Array<{ workload: string }>;
}
interface Snapshot {
  workloads: SnapshotWorkload[];
  services: SnapshotService[];
}

async function snapshot(base: string, target: string): Promise<Snapshot> {
  const r = await fetch(`${base}/snapshot/${target}`);
  assert.equal(r.status, 200);
  return (await r.json()) as Snapshot;
}

async function metrics(base: string): Promise<string> {
  return (await fetch(`${base}/metrics`)).text();
}

function holderOf(s: Snapshot, ip: string): SnapshotWorkload | undefined {
  return s.workloads.find((w) => w.addresses.includes(ip));
}

describe("feed: trust decided by trusted objects (real API server)", () => {
  let cluster: KubeCluster;
  let run: FeedRun;
  let filesDir: string;

  before(async () => {
    cluster = await startKubeCluster({ name: "feed-trust" });
    for (const name of ["victim", "tenant"]) await cluster.createNamespace(name);
    await cluster.createNamespace({ name: "istio-system", labels: { "topology.istio.io/network": "net1" } });
    // The other network's cluster, from files: its system namespace on net2 and a victim pod
    // there whose IP the tenant's cluster also hands out (overlapping pod CIDRs).
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    filesDir = mkdtempSync(join(REPO_ROOT, ".tmp", "feed-trust-"));
    writeFileSync(
      join(filesDir, "east.yaml"),
      [namespace("istio-system", { "topology.istio.io/network": "net2" }), pod("payments", "db-0", { ip: "10.30.0.5", sa: "db", labels: SIDECAR, created: "2026-01-01T00:00:00Z" })].map((o) => stringify(o)).join("---\n"),
    );
    run = await runFeed(
      [
        { id: "west", cluster },
        { id: "east", files: filesDir },
      ],
      [
        { name: "west", filter: "passthrough_mtls", network: "net1" },
        { name: "east", filter: "passthrough_mtls", network: "net2" },
      ],
    );
  });

  after(async () => {
    await run?.feed.stop();
    await cluster?.stop();
  });

  it("a tenant pod labelled with another network's name stays on its cluster's network: the victim keeps its IP in that network's view", async () => {
    await cluster.createPod({ namespace: "tenant", name: "evil-0", labels: { ...SIDECAR, "topology.istio.io/network": "net2" }, serviceAccountName: "evil" });
    await cluster.setPodStatus("tenant", "evil-0", { podIP: "10.30.0.5" });
    const west = await eventually("the tenant pod in net1's view", 10_000, async () => {
      const s = await snapshot(run.base, "west");
      return holderOf(s, "10.30.0.5")?.identity === `${TD}/ns/tenant/sa/evil` ? s : undefined;
    });
    assert.equal(holderOf(west.value, "10.30.0.5")?.network, "net1", "on its cluster's network, not the label's");
    const east = await snapshot(run.base, "east");
    const holder = holderOf(east, "10.30.0.5");
    assert.equal(holder?.uid, "east//Pod/payments/db-0");
    assert.equal(holder?.identity, `${TD}/ns/payments/sa/db`);
    assert.equal(east.workloads.filter((w) => w.addresses.includes("10.30.0.5")).length, 1);
    assert.match(await metrics(run.base), /feed_model_gaps\{reason="foreign_network_label"\} 1/);
  });

  it("two live pods with one IP in two namespaces: the older keeps it; once it is gone the address moves to the other", async () => {
    await cluster.createPod({ namespace: "victim", name: "web-0", labels: SIDECAR, serviceAccountName: "web" });
    await cluster.setPodStatus("victim", "web-0", { podIP: "10.40.0.7" });
    await eventually("the victim's pod in the view", 10_000, async () => (holderOf(await snapshot(run.base, "west"), "10.40.0.7") ? true : undefined));
    // creationTimestamp has whole seconds: the tenant's pod is created in a later one.
    await sleep(1100);
    await cluster.createPod({ namespace: "tenant", name: "web-0", labels: SIDECAR, serviceAccountName: "thief" });
    await cluster.setPodStatus("tenant", "web-0", { podIP: "10.40.0.7" });
    await eventually("the conflict counted", 10_000, async () => {
      const m = /feed_view_dropped\{reason="address_conflict",target="west"\} (\d+)/.exec(await metrics(run.base));
      return m && Number(m[1]) >= 1 ? true : undefined;
    });
    const s = await snapshot(run.base, "west");
    assert.equal(holderOf(s, "10.40.0.7")?.identity, `${TD}/ns/victim/sa/web`);
    assert.equal(s.workloads.some((w) => w.uid === "west//Pod/tenant/web-0"), false);
    // The victim's pod deleted: the address is reused by the tenant's pod.
    await cluster.deletePod("victim", "web-0");
    await eventually("the address moved", 10_000, async () => (holderOf(await snapshot(run.base, "west"), "10.40.0.7")?.identity === `${TD}/ns/tenant/sa/thief` ? true : undefined));
  });

  it("a Service in the tenant's namespace whose EndpointSlice names the victim's pod: no membership, no say on its health", async () => {
    await cluster.createPod({ namespace: "victim", name: "api-0", labels: { ...SIDECAR, app: "api" }, serviceAccountName: "api" });
    await cluster.setPodStatus("victim", "api-0", { podIP: "10.40.0.8" });
    await cluster.createService({ namespace: "victim", name: "api", selector: { app: "api" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] });
    await cluster.createEndpointSlice({ namespace: "victim", name: "api-1", service: "api", ports: [{ name: "http", port: 8080 }], endpoints: [{ addresses: ["10.40.0.8"], pod: { name: "api-0" } }] });
    // The tenant's Service selects app=api; its slice (as a hand-written one could) names the
    // victim's pod by targetRef in the victim's namespace, and says it is not ready.
    await cluster.createService({ namespace: "tenant", name: "grab", selector: { app: "api" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] });
    await cluster.apply({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { namespace: "tenant", name: "grab-1", labels: { "kubernetes.io/service-name": "grab" } },
      addressType: "IPv4",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints: [{ addresses: ["10.40.0.8"], conditions: { ready: false }, targetRef: { kind: "Pod", namespace: "victim", name: "api-0" } }],
    } as never);
    // The tenant's slice seen (its endpoint refused and counted) before the view is judged: else
    // "no member" could hold only because the slice had not arrived yet.
    await eventually("the tenant's slice refused and counted", 10_000, async () =>
      /feed_model_gaps\{reason="cross_namespace_endpoint"\} 1/.test(await metrics(run.base)) ? true : undefined,
    );
    const seen = await eventually("both services in the view", 10_000, async () => {
      const s = await snapshot(run.base, "west");
      const own = s.services.find((x) => x.hostname === "api.victim.svc.cluster.local");
      const grab = s.services.find((x) => x.hostname === "grab.tenant.svc.cluster.local");
      return own?.endpoints?.length && grab ? { s, own, grab } : undefined;
    });
    assert.deepEqual(seen.value.own.endpoints, [{ workload: "west//Pod/victim/api-0" }]);
    assert.equal(seen.value.grab.endpoints, undefined, "the tenant's service has no member");
    const api = seen.value.s.workloads.find((w) => w.uid === "west//Pod/victim/api-0");
    assert.equal(api?.healthy, undefined, "still healthy: the tenant's slice has no say");
    assert.match(await metrics(run.base), /feed_model_gaps\{reason="cross_namespace_endpoint"\} 1/);
  });
});

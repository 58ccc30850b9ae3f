// A target's JSON snapshot is made in slices on the event loop and joined in the check worker
// (feed/src/render_slices.ts, check_worker.ts). Here, under random churn of pods (IPs reused
// between them, some on a second network whose gateway comes and goes), services sharing VIPs
// and EndpointSlices naming workloads outside the view:
//   - the sliced render of the incrementally kept view is byte for byte the whole render of a
//     from-scratch compute (view.ts viewFor, render.ts renderPluginConfig), for both networks;
//   - a render whose view changes between its slices is the view as it stood when it began;
//   - the event loop turns between slices;
//   - the worker's render publishes that same text, says `unchanged` for the digest already
//     published, and a configuration the filter refuses comes back refused; a render the worker
//     dies in is refused (nothing to publish) and the next render gets a new worker.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { WorkerValidator } from "../../feed/src/check_worker.js";
import { MeshComputer, type MeshOptions } from "../../feed/src/compute.js";
import { NetworkView } from "../../feed/src/delta/network_view.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { joinConfig, renderPluginConfig, type FilterName } from "../../feed/src/render.js";
import { renderViewInSlices, type Section } from "../../feed/src/render_slices.js";
import { viewFor } from "../../feed/src/view.js";
import { eastWestGateway, namespace, pod, service, slice } from "./fixtures.js";
import { ensureBuilt } from "../host/helpers.js";
import { seededRandom } from "../support/checksum_load.js";

const OPTIONS: MeshOptions = { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() };
const OWN = { mode: "direct" };

/** The reference: a from-scratch compute and view, rendered whole. */
function wholeRender(clusters: ClusterObjects[], network: string): string {
  return renderPluginConfig("passthrough_mtls", network, OWN, viewFor(new MeshComputer(OPTIONS).compute(clusters), network).snapshot).text;
}

/** The slices of `view`, collected and joined here (sorted by a plain sort of their keys). */
async function slicedRender(view: NetworkView, sliceObjects: number, between?: () => void): Promise<{ text: string; slices: number }> {
  const parts: Record<Section, Array<[string, string]>> = { workloads: [], services: [] };
  let slices = 0;
  await renderViewInSlices(
    view,
    (section, keys, texts) => {
      assert.ok(keys.length <= sliceObjects && keys.length === texts.length, `a slice of ${keys.length} objects`);
      keys.forEach((k, i) => parts[section].push([k, texts[i]]));
      if (slices++ === 0) between?.();
    },
    sliceObjects,
  );
  const texts = (section: Section) => parts[section].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([, t]) => t);
  const head = JSON.stringify({ ...OWN, localNetwork: view.network });
  return { text: joinConfig(head, texts("workloads"), texts("services")), slices };
}

/** Two clusters' objects under seeded churn, with the incrementally kept views of net1 and net2. */
class Churn {
  readonly c1 = new ClusterObjects("c1");
  readonly c2 = new ClusterObjects("c2");
  readonly computer = new MeshComputer(OPTIONS);
  readonly views = [new NetworkView("net1"), new NetworkView("net2")];
  private readonly rnd: () => number;
  private i = 0;

  constructor(seed: number) {
    this.rnd = seededRandom(seed);
    this.c1.upsert("namespaces", namespace("istio-system", { "topology.istio.io/network": "net1" }));
    this.c1.upsert("namespaces", namespace("default"));
    this.c2.upsert("namespaces", namespace("istio-system", { "topology.istio.io/network": "net2" }));
    this.c2.upsert("namespaces", namespace("default"));
    this.apply();
  }

  get clusters(): ClusterObjects[] {
    return [this.c1, this.c2];
  }

  /** A few random changes, then the views brought up to date. */
  step(): void {
    for (let k = 0; k < 4; k++) this.change();
    this.apply();
  }

  private pick<T>(xs: T[]): T {
    return xs[Math.floor(this.rnd() * xs.length)];
  }

  private change(): void {
    const r = this.rnd();
    const i = this.i++;
    const c = this.rnd() < 0.7 ? this.c1 : this.c2;
    const svc = this.pick(["a", "b", "c"]);
    if (r < 0.5) {
      // Few addresses for many pods: conflicts on one network.
      const name = `p-${Math.floor(this.rnd() * 40)}`;
      c.upsert("pods", pod("default", name, { ip: `10.0.0.${1 + Math.floor(this.rnd() * 12)}`, sa: this.pick(["sa1", "sa2"]), ready: this.rnd() < 0.8, created: `2026-01-01T00:00:${String(i % 60).padStart(2, "0")}Z`, labels: { app: svc, "security.istio.io/tlsMode": "istio" } }));
    } else if (r < 0.65) {
      c.remove("pods", pod("default", `p-${Math.floor(this.rnd() * 40)}`));
    } else if (r < 0.85) {
      const eps = [...c.pods.values()].filter((p) => p.metadata?.labels?.app === svc && p.status?.podIP).map((p) => ({ ip: p.status!.podIP!, pod: p.metadata!.name! }));
      c.upsert("endpointSlices", slice("default", svc, `${svc}-${c.clusterId}`, [{ name: "http", port: 8080 }], eps));
    } else if (r < 0.95) {
      // Shared ClusterIPs: VIP conflicts.
      c.upsert("services", service("default", svc, [{ name: "http", port: 80, targetPort: 8080 }], { clusterIP: this.pick(["10.96.0.1", "10.96.0.2", `10.96.1.${i % 200}`]) }));
    } else if (this.rnd() < 0.5) {
      this.c2.upsert("gateways", eastWestGateway("istio-system", "eastwest", "net2", this.pick(["192.168.0.2", "192.168.0.3"])));
    } else {
      this.c2.remove("gateways", eastWestGateway("istio-system", "eastwest", "net2", "192.168.0.2"));
    }
  }

  private apply(): void {
    const { mesh, changes } = this.computer.update(this.clusters);
    for (const v of this.views) v.update(mesh, changes);
  }
}

describe("feed: the JSON snapshot made in slices", () => {
  it("is byte for byte the whole render of a from-scratch view, under churn", async () => {
    for (const seed of [1, 2, 3]) {
      const churn = new Churn(seed);
      let remote = 0;
      for (let s = 0; s < 60; s++) {
        churn.step();
        for (const view of churn.views) {
          const { text } = await slicedRender(view, 1 + (s % 5));
          assert.equal(text, wholeRender(churn.clusters, view.network), `seed ${seed}, step ${s}, ${view.network}`);
          remote += view.stats().remoteWorkloads;
        }
      }
      assert.ok(remote > 0, `seed ${seed}: no step had a workload of the other network in view`);
    }
  });

  it("renders the view as it stood when the render began, whatever changes between slices", async () => {
    const churn = new Churn(7);
    for (let s = 0; s < 30; s++) churn.step();
    for (const view of churn.views) {
      const before = wholeRender(churn.clusters, view.network);
      const { text, slices } = await slicedRender(view, 2, () => {
        for (let s = 0; s < 20; s++) churn.step();
      });
      assert.ok(slices > 2, `only ${slices} slices`);
      assert.equal(text, before, `${view.network}: the render took in changes made after it began`);
      assert.notEqual(wholeRender(churn.clusters, view.network), before, "the churn between slices changed nothing: the case proves nothing");
    }
  });

  it("lets the event loop turn between slices", async () => {
    const churn = new Churn(11);
    for (let s = 0; s < 30; s++) churn.step();
    const view = churn.views[0];
    let turns = 0;
    let spinning = true;
    const spin = () => {
      turns++;
      if (spinning) setImmediate(spin);
    };
    setImmediate(spin);
    const seen: number[] = [];
    await renderViewInSlices(view, () => void seen.push(turns), 3);
    spinning = false;
    assert.ok(seen.length > 3, `only ${seen.length} slices`);
    for (let k = 1; k < seen.length; k++) assert.ok(seen[k] > seen[k - 1], `slices ${k - 1} and ${k} were made in one turn of the event loop (${JSON.stringify(seen)})`);
  });

  describe("in the check worker", () => {
    const wasm = ensureBuilt("passthrough_mtls");
    const worker = new WorkerValidator((_filter: FilterName) => wasm);
    after(() => worker.stop());

    it("publishes the whole render's text, then says unchanged for its digest, and refuses what the filter refuses", async () => {
      const churn = new Churn(5);
      for (let s = 0; s < 30; s++) churn.step();
      const view = churn.views[0];
      const want = wholeRender(churn.clusters, view.network);
      const first = await worker.render("passthrough_mtls", view.network, OWN, view);
      assert.equal(first.verdict.error, undefined);
      assert.ok(first.verdict.ok && !first.unchanged);
      assert.equal(first.rendered?.text, want);
      assert.equal(first.rendered?.bytes, Buffer.byteLength(want));
      assert.equal(first.stats.workloads, view.workloads.size);
      const again = await worker.render("passthrough_mtls", view.network, OWN, view, first.rendered?.digest);
      assert.ok(again.unchanged && again.verdict.ok && again.rendered === undefined);
      const refused = await worker.render("passthrough_mtls", view.network, { ...OWN, mode: "sideways" }, view);
      assert.equal(refused.verdict.ok, false);
      assert.match(refused.verdict.error ?? "", /mode/);
    });

    it("refuses a render the worker stops in, and renders the next in a new worker", async () => {
      const churn = new Churn(9);
      for (let s = 0; s < 30; s++) churn.step();
      const view = churn.views[0];
      const own = new WorkerValidator((_filter: FilterName) => wasm);
      try {
        const held = own.render("passthrough_mtls", view.network, OWN, view);
        await own.stop();
        const outcome = await held;
        assert.equal(outcome.verdict.ok, false);
        assert.match(outcome.verdict.error ?? "", /stopping|exited/);
        assert.equal(outcome.rendered, undefined);
        const next = await own.render("passthrough_mtls", view.network, OWN, view);
        assert.equal(next.rendered?.text, wholeRender(churn.clusters, view.network));
      } finally {
        await own.stop();
      }
    });
  });
});

// The feed cannot disagree with the filter about a delta: the filters' decoder (assembly/mesh,
// compiled) is the feed's only judge of a version. Under random churn that mixes valid objects
// with objects the model cannot carry (a service account that is no SPIFFE path segment, a
// namespace that makes no hostname, a control character in a locality), every candidate version
// the feed builds is also given to an independent copy of the decoder (bench/scale's MeshVm:
// assembly/mesh alone, built apart from the filter) holding the last published version:
//   - the feed publishes it exactly when that decoder takes it;
//   - a refusal the feed reports is `<filter> refuses it: <the decoder's own line>`, the version
//     stays, and nothing of it reaches a client;
// and through the controller a refusal is logged with that line and counted.
import assert from "node:assert/strict";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { MeshVm } from "../../bench/scale/mesh_vm.js";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { MeshComputer, type MeshOptions } from "../../feed/src/compute.js";
import { DEFAULT_DELTA, parseFeedConfig } from "../../feed/src/config.js";
import { FeedController } from "../../feed/src/controller.js";
import { DeltaChannel } from "../../feed/src/delta/channel.js";
import { FilterShadow, type MessageCheck, type ShadowSource } from "../../feed/src/delta/filter_shadow.js";
import { NetworkView } from "../../feed/src/delta/network_view.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { REPO_ROOT } from "../support/paths.js";
import { ensureBuilt } from "../host/helpers.js";
import { pod, service, slice } from "./fixtures.js";
import { seededRandom } from "../support/checksum_load.js";

const FILTER = "passthrough_mtls";
const OPTIONS: MeshOptions = { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() };

/** The compiled filter as the feed holds it, remembering each candidate it was asked about. */
class Recorded implements MessageCheck {
  candidates: Buffer[] = [];
  constructor(readonly inner: FilterShadow) {}
  check(message: Buffer, source: ShadowSource): string {
    this.candidates.push(Buffer.from(message));
    return this.inner.check(message, source);
  }
  reset(): void {
    this.inner.reset();
  }
}


describe("the feed cannot disagree with the filter's decoder", () => {
  const wasm = new Uint8Array(readFileSync(ensureBuilt(FILTER)));

  for (const seed of [11, 12]) {
    it(`publishes a version exactly when the decoder takes it, and refuses in the decoder's words (churn, seed ${seed})`, async () => {
      const rnd = seededRandom(seed);
      const pick = <T>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)];
      const c1 = new ClusterObjects("c1");
      c1.upsert("services", service("default", "app", [{ port: 80, targetPort: 8080 }], { clusterIP: "10.96.0.5" }));
      const computer = new MeshComputer(OPTIONS);
      const view = new NetworkView("");
      const recorded = new Recorded(new FilterShadow({ name: "mesh", filter: FILTER, network: "", config: {} }, () => wasm));
      const channel = new DeltaChannel(5000 + seed, DEFAULT_DELTA, [recorded]);
      const publish = () => {
        const { mesh, changes } = computer.update([c1]);
        return channel.publish(view, mesh, view.update(mesh, changes));
      };
      for (let i = 0; i < 4; i++) c1.upsert("pods", pod("default", `app-${i}`, { ip: `10.0.0.${i + 1}`, sa: "app", labels: { app: "app", "security.istio.io/tlsMode": "istio" } }));
      assert.ok(publish().published, "the first version");
      // Who follows the feed: the decoder alone, applying every answer the feed gives.
      const client = await MeshVm.create();
      assert.equal(client.apply(new Uint8Array(channel.answer(0, 0).body)), "");
      let clientVersion = channel.version;

      const bad = { sa: 0, namespace: 0, locality: 0 };
      const broken = new Set<string>();
      let published = 0;
      let refused = 0;
      const fields = new Set<string>();
      for (let step = 0; step < 60; step++) {
        const r = rnd();
        const name = `p-${Math.floor(rnd() * 8)}`;
        const ip = `10.0.1.${Math.floor(rnd() * 12) + 1}`;
        const good = (n: string) => c1.upsert("pods", pod("default", n, { ip: `10.0.1.${Math.floor(rnd() * 12) + 1}`, sa: pick(["app", "db"]), labels: { app: "app", "security.istio.io/tlsMode": "istio" } }));
        if (r < 0.35) {
          good(name); // a valid pod (it also replaces a bad one of the same name)
          broken.delete(name);
        } else if (r < 0.45) {
          bad.sa++;
          broken.add(name);
          c1.upsert("pods", pod("default", name, { ip, sa: "not a segment", labels: { "security.istio.io/tlsMode": "istio" } }));
        } else if (r < 0.5) {
          bad.locality++;
          broken.add(name);
          c1.upsert("pods", pod("default", name, { ip, sa: "app", labels: { "security.istio.io/tlsMode": "istio", "istio-locality": "region\u0001" } }));
        } else if (r < 0.55) {
          bad.namespace++;
          c1.upsert("services", service("bad|ns", "svc", [{ port: 80 }], { clusterIP: "10.96.0.9" }));
        } else if (r < 0.65) {
          c1.remove("pods", pod("default", name));
          broken.delete(name);
        } else {
          // The operator repairs what was wrong: the refused objects are published next.
          for (const n of broken) good(n);
          broken.clear();
          c1.remove("services", service("bad|ns", "svc", []));
        }
        c1.upsert("endpointSlices", slice("default", "app", "app-1", [{ port: 8080 }], [...c1.pods.values()].filter((p) => p.metadata!.labels!.app === "app").map((p) => ({ ip: p.status!.podIP!, pod: p.metadata!.name! }))));

        const before = channel.version;
        const previousFull = channel.full();
        const asked = recorded.candidates.length;
        const outcome = publish();
        if (recorded.candidates.length === asked) {
          assert.equal(outcome.published, false, `step ${step}: published without the filter`);
          continue; // nothing changed on the wire
        }
        assert.equal(recorded.candidates.length, asked + 1, `step ${step}: one candidate`);
        const candidate = recorded.candidates[asked];
        // The independent decoder at the published version judges the same bytes.
        const judge = await MeshVm.create();
        assert.equal(judge.apply(new Uint8Array(previousFull)), "", `step ${step}: the published full message`);
        const verdict = judge.apply(new Uint8Array(candidate));
        if (verdict === "") {
          assert.ok(outcome.published, `step ${step}: the decoder takes it, the feed refused it: ${JSON.stringify(outcome)}`);
          assert.equal(channel.version, before + 1);
          published++;
        } else {
          assert.deepEqual(outcome, { published: false, error: `${FILTER} refuses it: ${verdict}` }, `step ${step}`);
          const field = verdict.match(/^record \d+ \((?:workload|service) upsert id \d+\)\.(\w+)/)?.[1];
          assert.ok(field, `the line names the record and the field: ${verdict}`);
          fields.add(field);
          assert.equal(channel.version, before, "the previous version stays");
          assert.equal(channel.answer(channel.epoch, before).kind, 3, "a client at it gets no change");
          refused++;
        }
        // The client follows whatever was published, and never meets a message it refuses.
        const answer = channel.answer(channel.epoch, clientVersion);
        assert.equal(client.apply(new Uint8Array(answer.body)), "", `step ${step}: the client took the answer`);
        clientVersion = channel.version;
      }
      assert.ok(published >= 10 && refused >= 5, `both outcomes occurred: ${published} published, ${refused} refused (${JSON.stringify(bad)})`);
      assert.deepEqual([...fields].sort(), ["hostname", "identity", "locality"], "each kind of bad object was refused by the field it breaks");
      // In the end the client holds exactly the published model.
      const fresh = await MeshVm.create();
      assert.equal(fresh.apply(new Uint8Array(channel.full())), "");
      assert.equal(client.digest(), fresh.digest());
      channel.close();
    });
  }

  it("through the controller: a refused version is logged with the filter's line, counted, and the previous version stays; fixed, it is published", async () => {
    const config = parseFeedConfig(
      JSON.stringify({
        wasmDir: join(REPO_ROOT, "build"),
        delta: { quietMs: 1, maxMs: 10 },
        clusters: [{ id: "c1", kubeconfig: "/nonexistent" }],
        targets: [{ name: "mesh", filter: FILTER }],
      }),
      join(REPO_ROOT, "feed.json"),
    );
    const c1 = new ClusterObjects("c1");
    c1.upsert("pods", pod("default", "app-0", { ip: "10.0.0.1", sa: "app" }));
    const lines: string[] = [];
    const controller = new FeedController(config, OPTIONS, [c1], undefined, (level, message) => lines.push(`${level} ${message}`));
    try {
      controller.markSynced("c1");
      controller.renderDeltas();
      const version = controller.metrics.get("feed_delta_version", { target: "mesh" });
      assert.equal(version, 1);
      c1.upsert("pods", pod("default", "bad-0", { ip: "10.0.0.2", sa: "not a segment" }));
      controller.renderDeltas();
      controller.renderDeltas(); // still bad: refused again, counted again, logged once
      assert.equal(controller.metrics.get("feed_delta_version", { target: "mesh" }), 1);
      assert.equal(controller.metrics.get("feed_delta_refused_total", { target: "mesh" }), 2);
      const refusals = lines.filter((l) => l.includes("delta refused"));
      assert.equal(refusals.length, 1, lines.join("\n"));
      assert.match(
        refusals[0],
        /^error network "" \(targets mesh\): delta refused \(passthrough_mtls refuses it: record 0 \(workload upsert id \d+\)\.identity: not a SPIFFE identity .*"spiffe:\/\/cluster\.local\/ns\/default\/sa\/not a segment"\); not published, version 1 stays$/,
      );
      c1.upsert("pods", pod("default", "bad-0", { ip: "10.0.0.2", sa: "fixed" }));
      controller.renderDeltas();
      assert.equal(controller.metrics.get("feed_delta_version", { target: "mesh" }), 2);
      assert.equal(controller.metrics.get("feed_delta_refused_total", { target: "mesh" }), 2);
    } finally {
      controller.stop();
    }
  });
});

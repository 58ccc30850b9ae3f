// The feed renders each WasmPlugin of istio/ as istio/ ships it: for every WasmPlugin document
// under istio/ (all three filters, tunnel_port's two roles), a feed target configured with that
// document's name, namespace and spec (its placement: selector, type, phase, match, failure
// strategy, url) and its plugin fields (meshFeed included) is taken by the feed's configuration
// parser, and the object the feed applies (deliver/wasmplugin.ts) for the document's own snapshot
// is the shipped document: same placement, same meshFeed through Istio's cluster, same snapshot.
// (The plain manifests' target is compared with istio/passthrough_mtls by tests/feed/chart.test.ts.)
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { parseFeedConfig } from "../../feed/src/config.js";
import { wasmPluginObject } from "../../feed/src/deliver/wasmplugin.js";
import { renderPluginConfig } from "../../feed/src/render.js";
import { REPO_ROOT } from "../support/paths.js";

const ISTIO = join(REPO_ROOT, "istio");

function shippedWasmPlugins(): { file: string; doc: any }[] {
  const out: { file: string; doc: any }[] = [];
  for (const filter of readdirSync(ISTIO, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name)) {
    const file = `${filter}/wasmplugin.yaml`;
    let text: string;
    try {
      text = readFileSync(join(ISTIO, file), "utf8");
    } catch {
      continue;
    }
    for (const doc of parseAllDocuments(text).map((d) => d.toJS()).filter((o) => o?.kind === "WasmPlugin")) out.push({ file, doc });
  }
  return out;
}

describe("the feed's WasmPlugins are placed as istio/ places them", () => {
  const shipped = shippedWasmPlugins();

  it("finds every filter's WasmPlugin (tunnel_port: both roles)", () => {
    assert.deepEqual(shipped.map((s) => `${s.file} ${s.doc.metadata.name}`).sort(), [
      "passthrough_mtls/wasmplugin.yaml passthrough-mtls",
      "tunnel_port/wasmplugin.yaml tunnel-port-client",
      "tunnel_port/wasmplugin.yaml tunnel-port-server-my-service-0",
      "waypoint_route/wasmplugin.yaml waypoint-route",
    ].sort());
  });

  for (const { file, doc } of shipped) {
    it(`${file} ${doc.metadata.name}: the feed's target with its placement and fields renders the shipped object`, () => {
      const { pluginConfig, ...placement } = doc.spec;
      const { workloads, services, ...own } = pluginConfig;
      const config = parseFeedConfig(JSON.stringify({
        clusters: [{ id: "c1", kubeconfig: "in-cluster" }],
        targets: [{
          name: own.meshFeed.target,
          filter: doc.spec.pluginName,
          config: own,
          wasmPlugin: { namespace: doc.metadata.namespace, name: doc.metadata.name, spec: placement },
        }],
      }), "/etc/mesh-feed/feed.yaml");
      const target = config.targets[0];
      const rendered = JSON.parse(renderPluginConfig(target.filter, target.network, target.config, { workloads, services } as never).text);
      const object = wasmPluginObject(target, "v1", rendered);
      assert.deepEqual(object.spec, doc.spec);
      assert.deepEqual([object.metadata?.namespace, object.metadata?.name], [doc.metadata.namespace, doc.metadata.name]);
      assert.equal(object.spec.pluginConfig.meshFeed.cluster, "outbound|9443||mesh-feed.mesh-feed.svc.cluster.local");
    });
  }
});

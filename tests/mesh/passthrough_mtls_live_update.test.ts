// Live configuration updates for passthrough_mtls in the real Envoy: the plugin comes by ECDS
// from a watched file (envoy-configs/passthrough_mtls_ecds.yaml + passthrough_mtls_plugin/, a
// private copy). A new mesh snapshot takes effect for new connections while an open connection
// keeps flowing; an invalid snapshot is refused and the previous one stays in force.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EcdsPlugin } from "../support/ecds.js";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { OpenConnection } from "../support/open_connection.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange } from "../support/tcp.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";

const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
const IMPOSTER = "spiffe://cluster.local/ns/default/sa/imposter"; // the identity pod-c's certificate carries

function dial(host: string, port: number, payload: string) {
  return exchange(host, port, payload, 10_000, CLIENT_ADDRESS);
}

describe("passthrough_mtls: live configuration updates by ECDS", () => {
  let envoy: EnvoyProcess;
  let httpbin: TlsPod;
  let reviews: TlsPod;
  let plugin: EcdsPlugin;
  let open: OpenConnection;

  before(async () => {
    await writeDemoCerts();
    httpbin = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
    reviews = await startTlsPod("reviews-0", "127.0.0.13", 8443, CERT_DIR, "pod-c");
    plugin = new EcdsPlugin("envoy-configs/passthrough_mtls_plugin", "passthrough_mtls.yaml");
    envoy = await EnvoyProcess.start({ name: "passthrough-mtls-ecds", adminPort: 15000, config: plugin.bootstrap(shippedConfig("passthrough_mtls_ecds.yaml")) });
    captureOutbound(15001);
  });

  after(async () => {
    open?.close();
    releaseCapture();
    await envoy?.stop();
    await httpbin?.close();
    await reviews?.close();
  });

  it("runs the shipped snapshot: reviews-0 presenting another identity is refused", async () => {
    open = await OpenConnection.open("127.0.0.11", 8443, CLIENT_ADDRESS);
    assert.equal(await open.read(`httpbin-0 peer=${SIDECAR}\n`.length), `httpbin-0 peer=${SIDECAR}\n`);
    assert.equal(await open.roundTrip("before the update"), "before the update");
    assert.equal((await dial("127.0.0.13", 8443, "secret")).received.length, 0);
    assert.equal(reviews.accepted, 0);
  });

  it("applies a new snapshot to new connections while the open one keeps flowing", async () => {
    plugin.update((mesh) => {
      for (const workload of mesh.workloads) if (workload.uid === "default/reviews-0") workload.identity = IMPOSTER;
    });
    let reply = "";
    for (let attempt = 0; attempt < 50 && reply === ""; attempt++) {
      reply = (await dial("127.0.0.13", 8443, "now trusted")).received.toString();
      if (reply === "") await sleep(100);
    }
    assert.equal(reply, `reviews-0 peer=${SIDECAR}\nnow trusted`, "the new snapshot pins reviews-0 to the identity it presents");
    assert.equal(await open.roundTrip("after the update, same connection"), "after the update, same connection");
    assert.equal(open.closed, false);
    const stats = await envoy.stats();
    assert.ok((stats.get("extension_config_discovery.network_filter.passthrough_mtls.config_reload") ?? 0) >= 1);
  });

  it("refuses an invalid snapshot and keeps the previous one in force", async () => {
    plugin.push('{"workloads": [{"uid": "x", "addresses": ["10.0.0.300"]}]}');
    const stats = await envoy.waitForStats((s) => (s.get("extension_config_discovery.network_filter.passthrough_mtls.update_rejected") ?? 0) >= 1);
    assert.equal(stats.get("extension_config_discovery.network_filter.passthrough_mtls.update_rejected"), 1);
    assert.match(envoy.log(), /invalid plugin configuration: workloads\[0\]\.addresses\[0\]/);
    // Still the updated snapshot: reviews-0 is reached with its own identity pinned.
    assert.equal((await dial("127.0.0.13", 8443, "still")).received.toString(), `reviews-0 peer=${SIDECAR}\nstill`);
    assert.equal(await open.roundTrip("after the refused update"), "after the refused update");
  });
});

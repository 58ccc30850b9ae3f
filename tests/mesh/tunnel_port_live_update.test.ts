// Live configuration updates for tunnel_port in the real Envoy: the client sidecar's plugin comes
// by ECDS from a watched file (envoy-configs/tunnel_port_client_ecds.yaml + tunnel_port_plugin/,
// a private copy). A new mesh snapshot takes effect for new connections while an open tunnel keeps
// flowing; an invalid snapshot is refused and the previous one stays in force.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EcdsPlugin } from "../support/ecds.js";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { OpenConnection } from "../support/open_connection.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { serverForPod } from "../../scripts/demo/tunnel_port.js";

const VIP = "127.10.0.1"; // my-service: p1 (127.0.0.21:9376) and p2 (127.0.0.22:9377), round robin

async function bannersOf(count: number): Promise<string[]> {
  const banners: string[] = [];
  for (let i = 0; i < count; i++) banners.push((await exchange(VIP, 80, "", 10_000, CLIENT_ADDRESS)).received.toString().trim());
  return banners;
}

describe("tunnel_port: live configuration updates of the client sidecar by ECDS", () => {
  let client: EnvoyProcess;
  let servers: EnvoyProcess[] = [];
  let apps: Backend[] = [];
  let plugin: EcdsPlugin;
  let open: OpenConnection;

  before(async () => {
    await writeDemoCerts();
    apps = [await startBackend("app-p1-9376", "127.0.0.21", 9376), await startBackend("app-p2-9377", "127.0.0.22", 9377)];
    const serverConfig = shippedConfig("tunnel_port_server.yaml");
    servers = [
      await EnvoyProcess.start({ name: "tunnel-ecds-p1", adminPort: 15000, adminAddress: "127.0.0.21", config: serverConfig }),
      await EnvoyProcess.start({ name: "tunnel-ecds-p2", adminPort: 15000, adminAddress: "127.0.0.22", config: serverForPod(serverConfig, "127.0.0.22") }),
    ];
    plugin = new EcdsPlugin("envoy-configs/tunnel_port_plugin", "tunnel_port_client.yaml");
    client = await EnvoyProcess.start({ name: "tunnel-ecds-client", adminPort: 15000, config: plugin.bootstrap(shippedConfig("tunnel_port_client_ecds.yaml")) });
    captureOutbound(15001);
  });

  after(async () => {
    open?.close();
    releaseCapture();
    for (const envoy of [client, ...servers]) await envoy?.stop();
    for (const app of apps) await app.close();
  });

  it("runs the shipped snapshot: my-service alternates between its two pods", async () => {
    open = await OpenConnection.open(VIP, 80, CLIENT_ADDRESS);
    const banner = await open.read("app-p1-9376\n".length);
    assert.match(banner, /^app-p[12]-937[67]\n$/);
    assert.equal(await open.roundTrip("before the update"), "before the update");
    assert.deepEqual(new Set(await bannersOf(4)), new Set(["app-p1-9376", "app-p2-9377"]));
  });

  it("applies a new snapshot (p2 removed from my-service) to new connections while the open tunnel keeps flowing", async () => {
    plugin.update((mesh) => {
      for (const service of mesh.services) service.endpoints = service.endpoints.filter((endpoint: any) => endpoint.workload !== "default/my-service-p2");
    });
    let banners: string[] = [];
    for (let attempt = 0; attempt < 50; attempt++) {
      banners = await bannersOf(4);
      if (banners.every((banner) => banner === "app-p1-9376")) break;
      await sleep(100);
    }
    assert.deepEqual(banners, ["app-p1-9376", "app-p1-9376", "app-p1-9376", "app-p1-9376"]);
    assert.equal(await open.roundTrip("after the update, same tunnel"), "after the update, same tunnel");
    assert.equal(open.closed, false);
  });

  it("refuses an invalid snapshot and keeps the previous one in force", async () => {
    plugin.push('{"role": "client", "workloads": [{"uid": "x", "addresses": ["not-an-ip"]}]}');
    const stats = await client.waitForStats((s) => (s.get("extension_config_discovery.network_filter.tunnel_port.update_rejected") ?? 0) >= 1);
    assert.equal(stats.get("extension_config_discovery.network_filter.tunnel_port.update_rejected"), 1);
    assert.match(client.log(), /invalid plugin configuration/);
    assert.deepEqual(await bannersOf(2), ["app-p1-9376", "app-p1-9376"], "still the updated snapshot");
    assert.equal(await open.roundTrip("after the refused update"), "after the refused update");
  });
});

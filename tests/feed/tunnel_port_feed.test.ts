// The feed end to end for tunnel_port: a Service's targetPort changed through the real API
// server (and its EndpointSlice, as the EndpointSlice controller would rewrite it) → the client
// sidecar's next tunnel carries the new target port, and the server sidecar, fed by the same
// feed, serves it. Both plugins come by ECDS files the feed writes (the client's shipped ECDS
// config; the server's shipped config with its inline plugin turned into an ECDS reference).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { parse, stringify } from "yaml";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EcdsPlugin } from "../support/ecds.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT } from "../support/paths.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";
import { routeServiceRangeLocally, sliceAddress } from "./netns.js";

const BOUND_MS = 1000 + 6000;

/** tunnel_port_server.yaml with its inline plugin replaced by an ECDS reference to `dir`; returns the bootstrap and the ECDS file's path. */
function serverByEcds(dir: string): { bootstrap: string; file: string } {
  const config = parse(shippedConfig("tunnel_port_server.yaml"));
  const internal = config.static_resources.listeners.find((l: { name: string }) => l.name === "tunnel_port_inbound_internal");
  const filters = internal.filter_chains[0].filters;
  const index = filters.findIndex((f: { name: string }) => f.name === "envoy.filters.network.wasm");
  const file = join(dir, "tunnel_port_server.yaml");
  writeFileSync(file, stringify({ version_info: "0", resources: [{ "@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig", name: "tunnel_port", typed_config: filters[index].typed_config }] }));
  filters[index] = {
    name: "tunnel_port",
    config_discovery: {
      config_source: { path_config_source: { path: file, watched_directory: { path: dir } } },
      type_urls: ["type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm"],
    },
  };
  config.node ??= { id: "tunnel-port-server", cluster: "tunnel-port-server" };
  return { bootstrap: stringify(config), file };
}

describe("feed → tunnel_port: a targetPort change reaches the tunnel", () => {
  let cluster: KubeCluster;
  let run: FeedRun;
  let client: EnvoyProcess;
  let server: EnvoyProcess;
  let apps: Backend[] = [];
  let vip = "";

  before(async () => {
    await writeDemoCerts();
    routeServiceRangeLocally();
    cluster = await startKubeCluster({ name: "feed-tp" });
    await cluster.createNamespace("default");
    await cluster.createPod({ namespace: "default", name: "my-service-p1", labels: { app: "my-service", "security.istio.io/tlsMode": "istio" }, serviceAccountName: "my-service", ports: [{ name: "http", containerPort: 9376 }] });
    await cluster.setPodStatus("default", "my-service-p1", { podIP: "127.0.0.21" });
    const svc = await cluster.createService({ namespace: "default", name: "my-service", selector: { app: "my-service" }, ports: [{ name: "http", port: 80, targetPort: 9376 }] });
    vip = svc.spec?.clusterIP ?? "";
    await cluster.createEndpointSlice({ namespace: "default", name: "my-service-1", service: "my-service", ports: [{ name: "http", port: 9376 }], endpoints: [{ addresses: [sliceAddress("127.0.0.21")], pod: { name: "my-service-p1" } }] });
    apps = [await startBackend("app-9376", "127.0.0.21", 9376), await startBackend("app-9377", "127.0.0.21", 9377)];
    const clientPlugin = new EcdsPlugin("envoy-configs/tunnel_port_plugin", "tunnel_port_client.yaml");
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    const serverDir = mkdtempSync(join(REPO_ROOT, ".tmp", "tp-server-"));
    const serverConfig = serverByEcds(serverDir);
    run = await runFeed(
      [{ id: "cluster1", cluster }],
      [
        { name: "client", filter: "tunnel_port", config: { role: "client" }, ecds: { file: join(clientPlugin.dir, "tunnel_port_client.yaml") } },
        { name: "server", filter: "tunnel_port", config: { role: "server", localWorkload: "127.0.0.21" }, ecds: { file: serverConfig.file } },
      ],
    );
    server = await EnvoyProcess.start({ name: "feed-tp-server", adminPort: 15000, adminAddress: "127.0.0.21", config: serverConfig.bootstrap });
    client = await EnvoyProcess.start({ name: "feed-tp-client", adminPort: 15000, config: clientPlugin.bootstrap(shippedConfig("tunnel_port_client_ecds.yaml")) });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    await client?.stop();
    await server?.stop();
    await run?.feed.stop();
    for (const a of apps) await a.close();
    await cluster?.stop();
  });

  it("tunnels VIP:80 to the pod with the target port the API server has", async () => {
    const reply = (await exchange(vip, 80, "hi", 5000, CLIENT_ADDRESS)).received.toString();
    assert.equal(reply, "app-9376\nhi");
    assert.match(await server.waitForAccessLog(/tunnel authority=/), /tunnel authority=127\.0\.0\.21:9376 service_port=80 peer=spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep /);
  });

  it("targetPort changed (Service and EndpointSlice): the next tunnel carries the new target", async (t) => {
    const changed = Date.now();
    await cluster.core.patchNamespacedService(
      { namespace: "default", name: "my-service", body: { spec: { ports: [{ name: "http", port: 80, targetPort: 9377, protocol: "TCP" }] } } },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
    );
    await cluster.createEndpointSlice({ namespace: "default", name: "my-service-1", service: "my-service", ports: [{ name: "http", port: 9377 }], endpoints: [{ addresses: [sliceAddress("127.0.0.21")], pod: { name: "my-service-p1" } }] });
    await eventually("tunnel to :9377", BOUND_MS, async () => ((await exchange(vip, 80, "hi", 5000, CLIENT_ADDRESS)).received.toString() === "app-9377\nhi" ? true : undefined));
    t.diagnostic(`targetPort change -> first tunnel to the new target: ${Date.now() - changed} ms`);
    assert.match(await server.waitForAccessLog(/tunnel authority=127\.0\.0\.21:9377/), /service_port=80 /);
    const stats = await server.stats();
    assert.ok((stats.get("wasmcustom.tunnel_port.server.accepted") ?? 0) >= 2);
  });
});

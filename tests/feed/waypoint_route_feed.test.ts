// The feed end to end across two API servers on two networks: west (net1) holds the client, a
// local waypoint and the backend; east (net2) holds the east-west gateway (a Gateway of class
// istio-east-west) and a second instance of the waypoint. The feed renders net1's split-horizon
// view for waypoint_route in the client sidecar (ECDS file). Adding istio.io/use-waypoint to the
// service sends it through the local waypoint; when the local instance is not ready, its only
// healthy instance is east's, reached by double HBONE through east's gateway. The waypoints and
// the gateway are the real Envoys of envoy-configs/waypoint_route_*.yaml.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { PatchStrategy, setHeaderOptions, type V1Service } from "@kubernetes/client-node";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EcdsPlugin } from "../support/ecds.js";
import { EnvoyProcess } from "../support/envoy.js";
import { shippedConfig } from "../support/envoy_yaml.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { waypointAt } from "../../scripts/demo/waypoint_route_topology.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";
import { routeServiceRangeLocally, sliceAddress } from "./netns.js";

const BOUND_MS = 1000 + 6000;
const MESH = { "security.istio.io/tlsMode": "istio" };

async function setGatewayStatus(cluster: KubeCluster, namespace: string, name: string, addresses: Array<{ type: string; value: string }>): Promise<void> {
  await cluster.custom.patchNamespacedCustomObjectStatus(
    { group: "gateway.networking.k8s.io", version: "v1", namespace, plural: "gateways", name, body: { status: { addresses } } },
    setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
  );
}

async function meshPod(cluster: KubeCluster, name: string, sa: string, ip: string, labels: Record<string, string> = {}): Promise<void> {
  await cluster.createPod({ namespace: "default", name, labels: { ...MESH, ...labels }, serviceAccountName: sa });
  await cluster.setPodStatus("default", name, { podIP: ip });
}

/** The waypoint Gateway, its Service and one instance (as Istio's deployment controller would create them). */
async function waypoint(cluster: KubeCluster, instance: string, ip: string): Promise<void> {
  await cluster.apply({
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    metadata: { namespace: "default", name: "waypoint" },
    spec: { gatewayClassName: "istio-waypoint", listeners: [{ name: "mesh", port: 15008, protocol: "HBONE" }] },
  } as never);
  await setGatewayStatus(cluster, "default", "waypoint", [{ type: "Hostname", value: "waypoint.default.svc.cluster.local" }]);
  await cluster.createService({ namespace: "default", name: "waypoint", labels: { "gateway.istio.io/managed": "istio.io-mesh-controller" }, selector: { "gateway.networking.k8s.io/gateway-name": "waypoint" }, ports: [{ name: "mesh", port: 15008 }] });
  await meshPod(cluster, instance, "waypoint", ip, { "gateway.networking.k8s.io/gateway-name": "waypoint" });
  await cluster.createEndpointSlice({ namespace: "default", name: "waypoint-1", service: "waypoint", ports: [{ name: "mesh", port: 15008 }], endpoints: [{ addresses: [sliceAddress(ip)], pod: { name: instance } }] });
}

describe("feed → waypoint_route from two API servers on two networks (split horizon, double HBONE)", () => {
  let west: KubeCluster;
  let east: KubeCluster;
  let run: FeedRun;
  let plugin: EcdsPlugin;
  const envoys: EnvoyProcess[] = [];
  let client: EnvoyProcess;
  let backends: Backend[] = [];
  let vip = "";

  const counter = async (name: string) => (await client.stats()).get(`wasmcustom.waypoint_route.${name}`) ?? 0;
  const dial = (payload: Buffer) => exchange(vip, 80, payload, 5_000, CLIENT_ADDRESS);

  before(async () => {
    await writeDemoCerts();
    routeServiceRangeLocally();
    [west, east] = [await startKubeCluster({ name: "feed-west" }), await startKubeCluster({ name: "feed-east" })];
    for (const [c, net] of [[west, "net1"], [east, "net2"]] as const) {
      await c.createNamespace({ name: "istio-system", labels: { "topology.istio.io/network": net } });
      await c.createNamespace("default");
    }
    // west: the client sleep-0 (its sidecar is the one under test), backend-0, waypoint-0.
    await meshPod(west, "sleep-0", "sleep", "127.0.0.100");
    await meshPod(west, "backend-0", "backend", "127.0.0.42");
    const svc: V1Service = await west.createService({ namespace: "default", name: "my-svc", selector: { app: "backend" }, ports: [{ name: "http", port: 80, targetPort: 9080 }] });
    vip = svc.spec?.clusterIP ?? "";
    await west.createEndpointSlice({ namespace: "default", name: "my-svc-1", service: "my-svc", ports: [{ name: "http", port: 9080 }], endpoints: [{ addresses: [sliceAddress("127.0.0.42")], pod: { name: "backend-0" } }] });
    await waypoint(west, "waypoint-0", "127.0.0.41");
    // east: the east-west gateway of net2 and the waypoint's second instance.
    await east.apply({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "Gateway",
      metadata: { namespace: "istio-system", name: "eastwest", labels: { "topology.istio.io/network": "net2" } },
      spec: { gatewayClassName: "istio-east-west", listeners: [{ name: "mesh", port: 15008, protocol: "HBONE", tls: { mode: "Terminate", options: { "gateway.istio.io/tls-terminate-mode": "ISTIO_MUTUAL" } } }] },
    } as never);
    await setGatewayStatus(east, "istio-system", "eastwest", [{ type: "IPAddress", value: "127.0.0.51" }]);
    await waypoint(east, "waypoint-east-0", "127.0.0.61");

    backends = [await startBackend("backend-net1", "127.0.0.42", 9080), await startBackend("backend-net2", "127.0.0.62", 9080)];
    envoys.push(await EnvoyProcess.start({ name: "fw-wp-local", adminPort: 15000, adminAddress: "127.0.0.41", config: shippedConfig("waypoint_route_waypoint.yaml") }));
    envoys.push(await EnvoyProcess.start({ name: "fw-wp-remote", adminPort: 15000, adminAddress: "127.0.0.61", config: waypointAt("127.0.0.61", "127.0.0.62") }));
    envoys.push(await EnvoyProcess.start({ name: "fw-eastwest", adminPort: 15000, adminAddress: "127.0.0.51", config: shippedConfig("waypoint_route_eastwest.yaml") }));
    plugin = new EcdsPlugin("envoy-configs/waypoint_route_plugin", "waypoint_route.yaml");
    run = await runFeed(
      [{ id: "west", cluster: west }, { id: "east", cluster: east }],
      [{ name: "client", filter: "waypoint_route", network: "net1", config: { localWorkload: "127.0.0.100" }, ecds: { file: join(plugin.dir, "waypoint_route.yaml") } }],
    );
    client = await EnvoyProcess.start({ name: "fw-client", adminPort: 15000, config: plugin.bootstrap(shippedConfig("waypoint_route_client.yaml")) });
    envoys.push(client);
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    for (const e of envoys) await e.stop();
    await run?.feed.stop();
    for (const b of backends) await b.close();
    await west?.stop();
    await east?.stop();
  });

  it("net1's view: east's waypoint instance is address-less behind net2's gateway, the gateway a workload with its identity", async () => {
    const snapshot = JSON.parse(await (await fetch(`${run.base}/snapshot/client`)).text());
    const byUid = new Map<string, Record<string, unknown>>(snapshot.workloads.map((w: { uid: string }) => [w.uid, w]));
    assert.deepEqual(byUid.get("east//Pod/default/waypoint-east-0"), {
      uid: "east//Pod/default/waypoint-east-0",
      addresses: [],
      network: "net2",
      identity: "spiffe://cluster.local/ns/default/sa/waypoint",
      tlsMode: "istio",
      networkGateway: { address: "127.0.0.51", hboneMtlsPort: 15008 },
    });
    assert.deepEqual(byUid.get("NetworkGateway/net2/127.0.0.51/15008")?.identity, "spiffe://cluster.local/ns/istio-system/sa/eastwest");
    const wp = snapshot.services.find((s: { hostname: string }) => s.hostname === "waypoint.default.svc.cluster.local");
    assert.deepEqual(wp.endpoints.map((e: { workload: string }) => e.workload), ["east//Pod/default/waypoint-east-0", "west//Pod/default/waypoint-0"]);
    assert.equal(wp.waypoint, undefined, "a waypoint's own service never gets a waypoint");
  });

  it("without istio.io/use-waypoint the service goes straight to its endpoint (no waypoint)", async () => {
    const before = await counter("hbone_endpoint");
    await dial(Buffer.from("x"));
    assert.equal(await counter("hbone_endpoint"), before + 1);
    assert.equal(await counter("hbone_waypoint"), 0);
  });

  it("the label added through the API server: new connections go through the local waypoint", async (t) => {
    const labelled = Date.now();
    await west.core.patchNamespacedService(
      { namespace: "default", name: "my-svc", body: { metadata: { labels: { "istio.io/use-waypoint": "waypoint" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const payload = randomBytes(64 * 1024);
    await eventually("through the local waypoint", BOUND_MS, async () => {
      const r = (await dial(payload)).received;
      return r.equals(Buffer.concat([Buffer.from("backend-net1\n"), payload])) ? true : undefined;
    });
    t.diagnostic(`label -> first connection through the waypoint: ${Date.now() - labelled} ms`);
    assert.ok((await counter("hbone_waypoint")) >= 1);
    const line = await envoys[0].waitForAccessLog(/waypoint authority=/);
    assert.match(line, new RegExp(`authority=${vip.replaceAll(".", "\\.")}:80 `));
  });

  it("the local instance not ready: the only healthy one is on net2, reached by double HBONE through its gateway", async () => {
    await west.setPodStatus("default", "waypoint-0", { podIP: "127.0.0.41", ready: false });
    const payload = randomBytes(64 * 1024);
    await eventually("double HBONE to the remote waypoint", BOUND_MS, async () => {
      const r = (await dial(payload)).received;
      return r.equals(Buffer.concat([Buffer.from("backend-net2\n"), payload])) ? true : undefined;
    });
    assert.ok((await counter("double_hbone_waypoint")) >= 1);
    assert.match(await envoys[2].waitForAccessLog(/gateway authority=/), /gateway authority=my-svc\.default\.svc\.cluster\.local:80 /);
  });
});

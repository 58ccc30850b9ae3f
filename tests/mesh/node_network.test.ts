// One fleet-wide plugin configuration, two sidecars on two networks, in the real Envoy: the
// configuration does not pin `localNetwork`, each Envoy's node metadata says NETWORK (as Istio
// sets it), and each sidecar must pick its own network's pod (docs/problems.md, "one
// configuration for the whole fleet").
//
// The same pod IP, 127.0.0.11, is a pod on both networks with a different identity: on "west" it
// is httpbin (the TLS server on :8443 presents httpbin's certificate), on "east" it is db (the
// TLS server on :9443 presents db's). passthrough_mtls pins the identity of its own network's pod,
// so each sidecar reaches exactly the server whose identity its network gives that IP, and the
// other one's handshake fails. Both Envoys run the shipped passthrough_mtls.yaml with only the
// ports, the node metadata and the mesh snapshot changed.
// A second check runs tunnel_port's server role, whose configuration is refused unless the
// filter finds its own workload on the network the node metadata names.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { parse, stringify } from "yaml";
import { captureOutbound, releaseCapture } from "../support/capture.js";
import { EcdsPlugin } from "../support/ecds.js";
import { EnvoyProcess } from "../support/envoy.js";
import { pluginConfiguration, shippedConfig } from "../support/envoy_yaml.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange } from "../support/tcp.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";

const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
const POD_IP = "127.0.0.11";

/** The one plugin configuration every sidecar gets: no localNetwork. */
const FLEET_SNAPSHOT = {
  workloads: [
    { uid: "west/httpbin-0", addresses: [POD_IP], network: "west", tlsMode: "istio", identity: DEMO_IDENTITIES["pod-a"] },
    { uid: "east/db-0", addresses: [POD_IP], network: "east", tlsMode: "istio", identity: DEMO_IDENTITIES["pod-h"] },
  ],
  services: [],
};

interface Sidecar {
  network: string;
  /** The application's address on this sidecar's pod: its connections are captured to this Envoy. */
  client: string;
  adminPort: number;
  outboundPort: number;
}

const WEST: Sidecar = { network: "west", client: "127.0.0.100", adminPort: 15000, outboundPort: 15001 };
const EAST: Sidecar = { network: "east", client: "127.0.0.101", adminPort: 15100, outboundPort: 15101 };

/** Every wasm plugin configuration in `node` (any depth) replaced by `configuration`. */
function replacePluginConfiguration(node: any, configuration: string): void {
  if (!node || typeof node !== "object") return;
  if (node["@type"] === "type.googleapis.com/google.protobuf.StringValue" && typeof node.value === "string") node.value = configuration;
  for (const value of Object.values(node)) replacePluginConfiguration(value, configuration);
}

/** The shipped passthrough_mtls.yaml for one sidecar: its ports, its node metadata, the fleet snapshot. */
function sidecarConfig(sidecar: Sidecar): string {
  const config = parse(shippedConfig("passthrough_mtls.yaml"));
  config.node = { id: `sidecar~${sidecar.client}~sleep-${sidecar.network}.default~default.svc.cluster.local`, cluster: "sleep.default", metadata: { NETWORK: sidecar.network, CLUSTER_ID: `cluster-${sidecar.network}` } };
  config.admin.address.socket_address.port_value = sidecar.adminPort;
  const outbound = config.static_resources.listeners.find((l: any) => l.name === "virtualOutbound");
  outbound.address.socket_address.port_value = sidecar.outboundPort;
  replacePluginConfiguration(config.static_resources, JSON.stringify(FLEET_SNAPSHOT));
  return stringify(config);
}

/** Envoy's log once it shows `pattern` (the log file is flushed asynchronously), or as it is after 5 s. */
async function logShowing(envoy: EnvoyProcess, pattern: RegExp): Promise<string> {
  const deadline = Date.now() + 5000;
  while (!pattern.test(envoy.log()) && Date.now() < deadline) await new Promise((done) => setTimeout(done, 50));
  return envoy.log();
}

function counter(stats: Map<string, number>, name: string): number {
  return stats.get(`wasmcustom.passthrough_mtls.${name}`) ?? 0;
}

describe("passthrough_mtls: one configuration, each sidecar's network from its node metadata (real Envoy)", () => {
  const envoys = new Map<string, EnvoyProcess>();
  let httpbin: TlsPod;
  let db: TlsPod;

  before(async () => {
    await writeDemoCerts();
    httpbin = await startTlsPod("httpbin-0", POD_IP, 8443, CERT_DIR, "pod-a");
    db = await startTlsPod("db-0", POD_IP, 9443, CERT_DIR, "pod-h");
    for (const sidecar of [WEST, EAST]) {
      envoys.set(sidecar.network, await EnvoyProcess.start({ name: `node-network-${sidecar.network}`, adminPort: sidecar.adminPort, config: sidecarConfig(sidecar) }));
      captureOutbound(sidecar.outboundPort, sidecar.client);
    }
  });

  after(async () => {
    releaseCapture();
    for (const envoy of envoys.values()) await envoy.stop();
    await httpbin?.close();
    await db?.close();
  });

  it("the two sidecars really run the same plugin configuration, without localNetwork", () => {
    const deployed = [...envoys.values()].map((envoy) => {
      const found: string[] = [];
      const visit = (node: any): void => {
        if (node && typeof node === "object") {
          if (node.name === "passthrough_mtls" && node.configuration?.value !== undefined) found.push(node.configuration.value);
          for (const value of Object.values(node)) visit(value);
        }
      };
      visit(parse(readFileSync(envoy.configPath, "utf8")));
      return found;
    });
    assert.equal(deployed[0]!.length, 1);
    assert.deepEqual(deployed[0], deployed[1]);
    assert.equal("localNetwork" in JSON.parse(deployed[0]![0]!), false);
  });

  it("each Envoy's filter read its own NETWORK from the node metadata at configure time", async () => {
    for (const [network, envoy] of envoys) {
      const line = new RegExp(`local network "${network}" \\(from node metadata NETWORK\\)`);
      assert.match(await logShowing(envoy, line), line, network);
    }
  });

  it("west's sidecar reaches west's pod for 127.0.0.11 (httpbin's identity), and not east's", async () => {
    const ok = await exchange(POD_IP, 8443, "west to httpbin", 10_000, WEST.client);
    assert.equal(ok.received.toString(), `httpbin-0 peer=${SIDECAR}\nwest to httpbin`);
    const wrong = await exchange(POD_IP, 9443, "west to db", 10_000, WEST.client);
    assert.equal(wrong.received.length, 0, "db's certificate is not west's pod identity for this IP");
  });

  it("east's sidecar reaches east's pod for 127.0.0.11 (db's identity), and not west's", async () => {
    const ok = await exchange(POD_IP, 9443, "east to db", 10_000, EAST.client);
    assert.equal(ok.received.toString(), `db-0 peer=${SIDECAR}\neast to db`);
    const wrong = await exchange(POD_IP, 8443, "east to httpbin", 10_000, EAST.client);
    assert.equal(wrong.received.length, 0, "httpbin's certificate is not east's pod identity for this IP");
  });

  it("both sidecars decided mTLS with their local pod winning; the wrong pairings failed SAN verification", async () => {
    for (const [network, envoy] of envoys) {
      const stats = await envoy.waitForStats((s) => counter(s, "mtls") >= 2);
      assert.equal(counter(stats, "mtls"), 2, network);
      assert.equal(counter(stats, "local_network_wins"), 2, network);
      assert.equal(counter(stats, "passthrough"), 0, network);
      assert.equal(stats.get("cluster.outbound_mtls_passthrough.ssl.fail_verify_san"), 1, network);
    }
    assert.deepEqual(httpbin.peers, [SIDECAR]);
    assert.deepEqual(db.peers, [SIDECAR]);
  });
});

describe("tunnel_port server: its own workload found on the network the node metadata names (real Envoy)", () => {
  let envoy: EnvoyProcess | undefined;

  after(async () => {
    await envoy?.stop();
  });

  /** The shipped server config with every workload on network "east", no pin, and `metadata` as the node's. */
  function serverConfig(metadata: Record<string, string> | undefined): string {
    const config = parse(shippedConfig("tunnel_port_server.yaml"));
    const shipped = pluginConfiguration("tunnel_port_server.yaml", "tunnel_port");
    // Every workload moves to network "east"; the pin goes, so only the node metadata can say "east".
    delete shipped.localNetwork;
    for (const workload of shipped.workloads) workload.network = "east";
    for (const service of shipped.services) for (const vip of service.vips ?? []) vip.network = "east";
    replacePluginConfiguration(config.static_resources, JSON.stringify(shipped));
    config.node = { id: "sidecar~127.0.0.21~my-service-p1.default~default.svc.cluster.local", cluster: "my-service.default", ...(metadata && { metadata }) };
    return stringify(config);
  }

  it("without NETWORK the same configuration is refused: its workload is on no workload of the default network", async () => {
    await writeDemoCerts();
    await assert.rejects(
      EnvoyProcess.start({ name: "node-network-tunnel-none", adminPort: 15000, adminAddress: "127.0.0.21", config: serverConfig(undefined), readyTimeoutMs: 15_000 }),
      /localWorkload: no workload has address 127\.0\.0\.21 on this network/,
    );
  });

  it("with NETWORK east it starts: the filter found its workload on the node metadata's network", async () => {
    envoy = await EnvoyProcess.start({ name: "node-network-tunnel-server", adminPort: 15000, adminAddress: "127.0.0.21", config: serverConfig({ NETWORK: "east" }) });
    assert.match(await logShowing(envoy, /local network "east"/), /local network "east" \(from node metadata NETWORK\)/);
    assert.doesNotMatch(envoy.log(), /invalid plugin configuration/);
  });
});

describe("waypoint_route: the ECDS-delivered plugin reads NETWORK in the real Envoy", () => {
  let envoy: EnvoyProcess | undefined;

  after(async () => {
    await envoy?.stop();
  });

  it("a client sidecar whose node metadata says net1 looks its workload up on net1 and says so", async () => {
    await writeDemoCerts();
    const plugin = new EcdsPlugin("envoy-configs/waypoint_route_plugin", "waypoint_route.yaml");
    const config = parse(plugin.bootstrap(shippedConfig("waypoint_route_client.yaml")));
    config.node = { ...config.node, metadata: { NETWORK: "net1" } };
    envoy = await EnvoyProcess.start({ name: "node-network-waypoint", adminPort: 15000, config: stringify(config) });
    const stats = await envoy.waitForStats((s) => (s.get("extension_config_discovery.network_filter.waypoint_route.config_reload") ?? 0) >= 1);
    assert.equal(stats.get("extension_config_discovery.network_filter.waypoint_route.update_rejected") ?? 0, 0);
    assert.match(await logShowing(envoy, /local network "net1"/), /local network "net1" \(from node metadata NETWORK\)/);
  });
});

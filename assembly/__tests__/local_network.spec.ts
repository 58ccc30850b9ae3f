// The proxy's own network (assembly/mesh/local_network.ts): what the node metadata NETWORK
// value decodes to, which source wins, and how each filter's configuration uses it. The host
// read itself (proxy_get_property on xds.node.metadata.NETWORK) is tested on the compiled
// filters in tests/host/node_network.test.ts and in the real Envoy in tests/mesh/node_network.test.ts.
import { ConfigReader, parseJsonString } from "../json";
import { LocalNetwork, NetworkSource, NodeNetwork, nodeNetworkFromHost, resolveLocalNetwork } from "../mesh";
import { parsePassthroughConfig } from "../../filters/passthrough_mtls/config";
import { parseTunnelConfig } from "../../filters/tunnel_port/config";
import { parseWaypointConfig } from "../../filters/waypoint_route/config";

const OK: u32 = 0;
const NOT_FOUND: u32 = 1;
const SERIALIZATION_FAILURE: u32 = 3;
const UNIMPLEMENTED: u32 = 12;

function fromBytes(status: u32, bytes: u8[]): NodeNetwork {
  const buffer = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) buffer[i] = bytes[i];
  return nodeNetworkFromHost(status, bytes.length == 0 ? 0 : buffer.dataStart, bytes.length);
}

function fromText(text: string): NodeNetwork {
  const utf8 = Uint8Array.wrap(String.UTF8.encode(text));
  return nodeNetworkFromHost(OK, utf8.dataStart, utf8.length);
}

function resolve(json: string, node: NodeNetwork): LocalNetwork {
  const reader = new ConfigReader();
  const network = resolveLocalNetwork(reader, parseJsonString(json).value!, node);
  expect(reader.error()).toBe("");
  return network;
}

function refusal(json: string, node: NodeNetwork): string {
  const reader = new ConfigReader();
  resolveLocalNetwork(reader, parseJsonString(json).value!, node);
  return reader.error();
}

describe("node metadata NETWORK as Envoy serves it", () => {
  it("takes a string value's raw bytes as the network name", () => {
    const n = fromText("net-west");
    expect(n.present).toBe(true);
    expect(n.name).toBe("net-west");
    expect(n.error).toBe("");
  });

  it("keeps UTF-8 names whole", () => {
    expect(fromText("réseau-ouest").name).toBe("réseau-ouest");
  });

  it("reads an empty string as the default network, set", () => {
    const n = fromBytes(OK, []);
    expect(n.present).toBe(true);
    expect(n.name).toBe("");
  });

  it("treats NOT_FOUND, and a host that does not serve node metadata, as not set", () => {
    expect(fromBytes(NOT_FOUND, []).present).toBe(false);
    expect(fromBytes(UNIMPLEMENTED, []).present).toBe(false);
  });

  it("calls a null NETWORK (SERIALIZATION_FAILURE in Envoy) set but unusable", () => {
    const n = fromBytes(SERIALIZATION_FAILURE, []);
    expect(n.present).toBe(true);
    expect(n.error).toBe("is not a string");
  });

  it("refuses a number (8-byte double) and a bool (one byte), which Envoy serves raw", () => {
    // 7.0 as Envoy serves it: little-endian IEEE double.
    expect(fromBytes(OK, [0, 0, 0, 0, 0, 0, 0x1c, 0x40]).error).toBe("is not a network name (byte 0 is 0x0)");
    expect(fromBytes(OK, [1]).error).toBe("is not a network name (byte 0 is 0x1)");
  });

  it("refuses invalid UTF-8, DEL and over-long values", () => {
    expect(fromBytes(OK, [0x6e, 0xff]).error).toBe("is not UTF-8 text");
    expect(fromBytes(OK, [0x6e, 0x7f]).error).toBe("is not a network name (byte 1 is 0x7f)");
    expect(fromText("n".repeat(254)).error).toBe("is 254 bytes long (at most 253)");
    expect(fromText("n".repeat(253)).name.length).toBe(253);
  });
});

describe("which network wins", () => {
  it("a pinned localNetwork wins over the node metadata, even when it pins the default network", () => {
    const west = resolve(`{"localNetwork": "west"}`, NodeNetwork.of("east"));
    expect(west.name).toBe("west");
    expect(west.source).toBe(NetworkSource.Pinned);
    const empty = resolve(`{"localNetwork": ""}`, NodeNetwork.of("east"));
    expect(empty.name).toBe("");
    expect(empty.source).toBe(NetworkSource.Pinned);
  });

  it("without localNetwork (or with null) the node metadata names it", () => {
    const a = resolve(`{}`, NodeNetwork.of("east"));
    expect(a.name).toBe("east");
    expect(a.source).toBe(NetworkSource.NodeMetadata);
    expect(a.describe()).toBe(`"east" (from node metadata NETWORK)`);
    expect(resolve(`{"localNetwork": null}`, NodeNetwork.of("east")).name).toBe("east");
  });

  it("with neither, the default network", () => {
    const n = resolve(`{}`, NodeNetwork.absent());
    expect(n.name).toBe("");
    expect(n.source).toBe(NetworkSource.Default);
  });

  it("an unusable NETWORK refuses only a configuration that does not pin the network", () => {
    const bad = new NodeNetwork(true, "", "is not a string");
    expect(refusal(`{}`, bad)).toBe(
      "localNetwork: not set, and the node metadata NETWORK is not a string: set localNetwork or fix the proxy's NETWORK",
    );
    expect(refusal(`{"localNetwork": "west"}`, bad)).toBe("");
  });

  it("a localNetwork of the wrong type is refused as before", () => {
    expect(refusal(`{"localNetwork": 3}`, NodeNetwork.of("east"))).toBe("localNetwork: expected a string");
  });
});

// Two networks with a pod at the same IP (10.0.0.1), so the local network decides.
const MESH = `
  "workloads": [
    {"uid": "app-west", "addresses": ["10.0.0.1"], "network": "west", "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/west"},
    {"uid": "app-east", "addresses": ["10.0.0.1"], "network": "east", "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/east"}
  ],
  "services": [
    {"hostname": "app.default.svc.cluster.local", "vips": [{"address": "10.96.0.1"}], "ports": {"80": 8080},
     "endpoints": [{"workload": "app-west"}, {"workload": "app-east"}]}
  ]`;

describe("each filter takes its network from the node metadata", () => {
  it("passthrough_mtls", () => {
    const c = parsePassthroughConfig(String.UTF8.encode(`{${MESH}}`), NodeNetwork.of("east")).config!;
    expect(c.localNetworkName).toBe("east");
    expect(c.localNetwork).toBe(c.mesh.networkId("east"));
    const pinned = parsePassthroughConfig(String.UTF8.encode(`{"localNetwork": "west", ${MESH}}`), NodeNetwork.of("east")).config!;
    expect(pinned.localNetwork).toBe(pinned.mesh.networkId("west"));
  });

  it("passthrough_mtls: a NETWORK the snapshot does not know behaves as a pinned unknown network", () => {
    const c = parsePassthroughConfig(String.UTF8.encode(`{${MESH}}`), NodeNetwork.of("north")).config!;
    expect(c.localNetwork).toBe(-1);
    expect(c.localNetworkName).toBe("north");
  });

  it("tunnel_port client and server", () => {
    const client = parseTunnelConfig(String.UTF8.encode(`{"role": "client", ${MESH}}`), NodeNetwork.of("east")).config!;
    expect(client.localNetwork).toBe(client.mesh.networkId("east"));
    const server = parseTunnelConfig(String.UTF8.encode(`{"role": "server", "localWorkload": "10.0.0.1", ${MESH}}`), NodeNetwork.of("west")).config!;
    expect(server.localWorkload).toBe(0); // app-west
    const east = parseTunnelConfig(String.UTF8.encode(`{"role": "server", "localWorkload": "10.0.0.1", ${MESH}}`), NodeNetwork.of("east")).config!;
    expect(east.localWorkload).toBe(1); // app-east
  });

  it("tunnel_port server: a NETWORK without the local workload is refused, naming where it came from", () => {
    const r = parseTunnelConfig(String.UTF8.encode(`{"role": "server", "localWorkload": "10.0.0.1", ${MESH}}`), NodeNetwork.of("north"));
    expect(r.config).toBeNull();
    expect(r.error).toBe(`localWorkload: no workload has address 10.0.0.1 on this network (network "north", from node metadata NETWORK)`);
  });

  it("waypoint_route: the node's network picks which of two same-IP workloads is this sidecar", () => {
    const west = parseWaypointConfig(String.UTF8.encode(`{"localWorkload": "10.0.0.1", ${MESH}}`), NodeNetwork.of("west")).config!;
    expect(west.source).toBe(0);
    expect(west.network).toBe(west.mesh.networkId("west"));
    const east = parseWaypointConfig(String.UTF8.encode(`{"localWorkload": "10.0.0.1", ${MESH}}`), NodeNetwork.of("east")).config!;
    expect(east.source).toBe(1);
    expect(east.network).toBe(east.mesh.networkId("east"));
    const pinned = parseWaypointConfig(String.UTF8.encode(`{"localWorkload": "10.0.0.1", "localNetwork": "east", ${MESH}}`), NodeNetwork.of("west")).config!;
    expect(pinned.source).toBe(1);
  });

  it("waypoint_route: without any network the first network holding the address is used, as before", () => {
    const c = parseWaypointConfig(String.UTF8.encode(`{"localWorkload": "10.0.0.1", ${MESH}}`)).config!;
    expect(c.source).toBe(0);
  });

  it("waypoint_route: a NETWORK without the local workload is refused", () => {
    const r = parseWaypointConfig(String.UTF8.encode(`{"localWorkload": "10.0.0.1", ${MESH}}`), NodeNetwork.of("north"));
    expect(r.config).toBeNull();
    expect(r.error).toBe(`localWorkload: no workload has address 10.0.0.1 on network "north" (from node metadata NETWORK)`);
    const pinned = parseWaypointConfig(String.UTF8.encode(`{"localWorkload": "10.0.0.1", "localNetwork": "north", ${MESH}}`));
    expect(pinned.error).toBe(`localWorkload: no workload has address 10.0.0.1 on network "north"`);
  });
});

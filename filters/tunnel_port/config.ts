// tunnel_port plugin configuration: one module, two roles (the client sidecar's outbound and the
// server sidecar's inbound), the shared mesh model, and a few fields per role. See README.md.
import { ByteSource, ConfigReader, JsonValue } from "../../assembly/json";
import { acceptConfig, ConfigResult, refuseConfig } from "../../assembly/runtime/config_root";
import { FeedConfig, MESH_FEED_FIELD, readFeedConfig } from "../../assembly/runtime/feed_config";
import { Address, IpParse, LocalNetwork, Mesh, MESH_FIELDS, MeshDocument, NetworkSource, NodeNetwork, parseIpString, parseMeshDocument, parseMeshSource, resolveLocalNetwork } from "../../assembly/mesh";

export const ROLE_CLIENT = "client";
export const ROLE_SERVER = "server";
export const UNKNOWN_PASSTHROUGH = "passthrough";
export const UNKNOWN_REFUSE = "refuse";

const COMMON_FIELDS = ["role", "localNetwork", MESH_FEED_FIELD];
const CLIENT_FIELDS = ["tunnelCluster", "unknownDestination"];
const SERVER_FIELDS = ["localWorkload", "appCluster"];

export class TunnelConfig {
  mesh: Mesh;
  localNetwork: i32 = 0;
  /** The network's name and where it came from (localNetwork, node metadata NETWORK, default). */
  network: LocalNetwork = new LocalNetwork("", NetworkSource.Default);
  client: bool = true;
  // client
  tunnelCluster: ArrayBuffer = new ArrayBuffer(0);
  refuseUnknown: bool = false;
  // server
  /** This proxy's workload (index in the mesh), -1 for a client. */
  localWorkload: i32 = -1;
  appCluster: ArrayBuffer = new ArrayBuffer(0);
  /** Server: localWorkload as configured, and parsed (looked up again after every feed message). */
  localWorkloadText: string = "";
  localAddress: Address = new Address();
  /** Where live changes come from (null: the snapshot is the model until the next configuration). */
  feed: FeedConfig | null = null;

  constructor(mesh: Mesh) {
    this.mesh = mesh;
  }
}

/**
 * Streams the configuration (no JSON tree: large meshes fit). The role comes first, then the
 * fields of that role (another role's fields are unknown here), then the mesh.
 */
export function parseTunnelConfig(bytes: ArrayBuffer, node: NodeNetwork = NodeNetwork.absent()): ConfigResult<TunnelConfig> {
  return tunnelConfigOf(parseMeshDocument(bytes, ALL_OWN_FIELDS), node);
}

/** parseTunnelConfig over the host's configuration, read in windows (never whole in memory). */
export function parseTunnelConfigFrom(source: ByteSource, node: NodeNetwork): ConfigResult<TunnelConfig> {
  return tunnelConfigOf(parseMeshSource(source, ALL_OWN_FIELDS), node);
}

const ALL_OWN_FIELDS = COMMON_FIELDS.concat(CLIENT_FIELDS).concat(SERVER_FIELDS);

function tunnelConfigOf(doc: MeshDocument, node: NodeNetwork): ConfigResult<TunnelConfig> {
  const root = doc.own;
  if (root === null) return refuseConfig<TunnelConfig>(doc.error); // JSON, root type or a field no role knows
  const reader = new ConfigReader();
  const role = reader.requireEnum(root, "role", "", [ROLE_CLIENT, ROLE_SERVER]);
  if (reader.failed()) return refuseConfig<TunnelConfig>(reader.error());
  const client = role == ROLE_CLIENT;
  reader.onlyKnownFields(root, "", COMMON_FIELDS.concat(client ? CLIENT_FIELDS : SERVER_FIELDS).concat(MESH_FIELDS));
  const network = resolveLocalNetwork(reader, root, node);
  const feed = readFeedConfig(reader, root);
  if (reader.failed()) return refuseConfig<TunnelConfig>(reader.error());
  const mesh = doc.mesh;
  if (mesh === null) return refuseConfig<TunnelConfig>(doc.error);
  const config = new TunnelConfig(mesh);
  config.feed = feed;
  config.client = client;
  config.localNetwork = mesh.networkId(network.name);
  config.network = network;
  if (client) readClient(reader, root, config);
  else readServer(reader, root, config);
  if (reader.failed()) return refuseConfig<TunnelConfig>(reader.error());
  return acceptConfig<TunnelConfig>(config);
}

function readClient(reader: ConfigReader, root: JsonValue, config: TunnelConfig): void {
  const cluster = reader.optionalString(root, "tunnelCluster", "", "tunnel_port_hbone");
  if (!reader.failed() && cluster.length == 0) reader.fail("tunnelCluster", "must not be empty");
  config.tunnelCluster = String.UTF8.encode(cluster);
  const unknown = reader.optionalEnum(root, "unknownDestination", "", [UNKNOWN_PASSTHROUGH, UNKNOWN_REFUSE], UNKNOWN_PASSTHROUGH);
  config.refuseUnknown = unknown == UNKNOWN_REFUSE;
  // Pod-IP destinations: the model's own memberships say which service port a (pod, target
  // port) stands for (Mesh.servicePortForTarget / mapsPort): nothing derived, nothing to rebuild.
}

function readServer(reader: ConfigReader, root: JsonValue, config: TunnelConfig): void {
  const text = reader.requireString(root, "localWorkload", "");
  const cluster = reader.optionalString(root, "appCluster", "", "tunnel_port_inbound");
  if (reader.failed()) return;
  if (cluster.length == 0) {
    reader.fail("appCluster", "must not be empty");
    return;
  }
  config.appCluster = String.UTF8.encode(cluster);
  config.localWorkloadText = text;
  const error = deriveServer(config);
  if (error.length > 0) reader.fail("localWorkload", error);
}

/**
 * The configuration's check of the server's own workload: an IP address, on a workload of this
 * network that serves some port. A configuration failing it is refused (the operator's form:
 * the previous configuration stays). Models from the feed are not held to it (adoptMesh), and
 * with meshFeed an empty snapshot is taken (the workload comes with the feed's first model;
 * until then connections wait: the runtime's model gate).
 */
function deriveServer(config: TunnelConfig): string {
  const text = config.localWorkloadText;
  if (parseIpString(text, config.localAddress) != IpParse.Ok) return "not an IP address: \"" + text + "\"";
  const w = findLocalWorkload(config);
  if (w < 0 && config.feed !== null && config.mesh.workloadCount() == 0 && config.mesh.serviceCount() == 0) return "";
  if (w < 0) return "no workload has address " + text + " on this network" + config.network.origin();
  if (!config.mesh.servesAnyPort(w)) return "workload " + text + " is an endpoint of no service: it serves no port";
  return "";
}

/** This server's workload in config.mesh (-1: none has its address on its network); O(1). */
function findLocalWorkload(config: TunnelConfig): i32 {
  const w = config.mesh.workloadByAddress(config.localNetwork, config.localAddress);
  config.localWorkload = w;
  return w;
}

/**
 * A model from the mesh feed, taken whatever it says (a delta is already applied in place when
 * this runs, so refusing here could not keep the old model): the network's interned id and the
 * server's own workload are looked up again, O(1). A model without the server's workload (its
 * pod going away, or not yet in the feed) is adopted too: every tunnel is then refused
 * (`refused_no_local_workload`) until a model has it again.
 */
export function adoptMesh(config: TunnelConfig, mesh: Mesh): void {
  config.mesh = mesh;
  config.localNetwork = mesh.networkId(config.network.name);
  if (!config.client) findLocalWorkload(config);
}

// tunnel_port plugin configuration: one module, two roles (the client sidecar's outbound and the
// server sidecar's inbound), the shared mesh model, and a few fields per role. See README.md.
import { ByteSource, ConfigReader, JsonValue } from "../../assembly/json";
import { PodMemberships } from "./memberships";
import { FeedConfig, MESH_FEED_FIELD, readFeedConfig } from "../../assembly/runtime/feed_config";
import { Address, IpParse, LocalNetwork, Mesh, MESH_FIELDS, MeshLimits, MeshDocument, NetworkSource, NodeNetwork, parseIpString, parseMeshDocument, parseMeshSource, resolveLocalNetwork } from "../../assembly/mesh";

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
  /**
   * Server: the (service port << 16 | target port) pairs this workload serves, from every service
   * that lists it as an endpoint (per-endpoint overrides applied). Small: one workload's ports.
   */
  servedPairs: Set<u32> = new Set<u32>();
  /** Server: the target ports alone. */
  servedTargets: Set<i32> = new Set<i32>();
  /** Client: the services listing each workload, for connections that dial a pod IP directly. */
  memberships: PodMemberships | null = null;
  /** Server: localWorkload as configured (found again in every model the feed delivers). */
  localWorkloadText: string = "";
  /** Where live changes come from (null: the snapshot is the model until the next configuration). */
  feed: FeedConfig | null = null;

  constructor(mesh: Mesh) {
    this.mesh = mesh;
  }
}

export class TunnelConfigResult {
  constructor(readonly config: TunnelConfig | null, readonly error: string) {}
}

function refuse(error: string): TunnelConfigResult {
  return new TunnelConfigResult(null, error);
}

/**
 * Streams the configuration (no JSON tree: large meshes fit). The role comes first, then the
 * fields of that role (another role's fields are unknown here), then the mesh.
 */
export function parseTunnelConfig(bytes: ArrayBuffer, node: NodeNetwork = NodeNetwork.absent()): TunnelConfigResult {
  return tunnelConfigOf(parseMeshDocument(bytes, ALL_OWN_FIELDS), node);
}

/** parseTunnelConfig over the host's configuration, read in windows (never whole in memory). */
export function parseTunnelConfigFrom(source: ByteSource, node: NodeNetwork): TunnelConfigResult {
  return tunnelConfigOf(parseMeshSource(source, ALL_OWN_FIELDS, WITH_MEMBERSHIPS), node);
}

/** The client's PodMemberships index in the build's reservation (the role is read in the same
 *  pass, so a server reserves it too: 12 bytes per pod that linear memory then keeps). */
const WITH_MEMBERSHIPS = withMemberships();

function withMemberships(): MeshLimits {
  const limits = new MeshLimits();
  limits.derivedBytesPerWorkload = PodMemberships.BYTES_PER_WORKLOAD;
  limits.derivedBytesPerEndpoint = PodMemberships.BYTES_PER_MEMBERSHIP;
  return limits;
}

const ALL_OWN_FIELDS = COMMON_FIELDS.concat(CLIENT_FIELDS).concat(SERVER_FIELDS);

function tunnelConfigOf(doc: MeshDocument, node: NodeNetwork): TunnelConfigResult {
  const root = doc.own;
  if (root === null) return refuse(doc.error); // JSON, root type or a field no role knows
  const reader = new ConfigReader();
  const role = reader.requireEnum(root, "role", "", [ROLE_CLIENT, ROLE_SERVER]);
  if (reader.failed()) return refuse(reader.error());
  const client = role == ROLE_CLIENT;
  reader.onlyKnownFields(root, "", COMMON_FIELDS.concat(client ? CLIENT_FIELDS : SERVER_FIELDS).concat(MESH_FIELDS));
  const network = resolveLocalNetwork(reader, root, node);
  const feed = readFeedConfig(reader, root);
  if (reader.failed()) return refuse(reader.error());
  const mesh = doc.mesh;
  if (mesh === null) return refuse(doc.error);
  const config = new TunnelConfig(mesh);
  config.feed = feed;
  config.client = client;
  config.localNetwork = mesh.networkId(network.name);
  config.network = network;
  if (client) readClient(reader, root, config);
  else readServer(reader, root, config);
  if (reader.failed()) return refuse(reader.error());
  return new TunnelConfigResult(config, "");
}

function readClient(reader: ConfigReader, root: JsonValue, config: TunnelConfig): void {
  const cluster = reader.optionalString(root, "tunnelCluster", "", "tunnel_port_hbone");
  if (!reader.failed() && cluster.length == 0) reader.fail("tunnelCluster", "must not be empty");
  config.tunnelCluster = String.UTF8.encode(cluster);
  const unknown = reader.optionalEnum(root, "unknownDestination", "", [UNKNOWN_PASSTHROUGH, UNKNOWN_REFUSE], UNKNOWN_PASSTHROUGH);
  config.refuseUnknown = unknown == UNKNOWN_REFUSE;
  if (reader.failed()) return;
  // Pod-IP destinations: which service port a (pod, target port) stands for.
  config.memberships = new PodMemberships(config.mesh);
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

/** The server's own workload and the ports it serves, from config.mesh; "" or why not. */
function deriveServer(config: TunnelConfig): string {
  const text = config.localWorkloadText;
  const address = new Address();
  if (parseIpString(text, address) != IpParse.Ok) return "not an IP address: \"" + text + "\"";
  const mesh = config.mesh;
  const w = mesh.workloadByAddress(config.localNetwork, address);
  if (w < 0) return "no workload has address " + text + " on this network" + config.network.origin();
  config.localWorkload = w;
  config.servedPairs = new Set<u32>();
  config.servedTargets = new Set<i32>();
  for (let s = 0, services = mesh.serviceCount(); s < services; s++) {
    for (let e = 0, endpoints = mesh.endpointCount(s); e < endpoints; e++) {
      if (mesh.endpointWorkload(s, e) != w) continue;
      for (let i = 0, ports = mesh.servicePortCount(s); i < ports; i++) {
        const servicePort = mesh.servicePortAt(s, i);
        const target = mesh.targetPort(s, e, servicePort);
        if (target <= 0) continue;
        config.servedPairs.add((<u32>servicePort << 16) | <u32>target);
        config.servedTargets.add(target);
      }
    }
  }
  if (config.servedTargets.size == 0) return "workload " + text + " is an endpoint of no service: it serves no port";
  return "";
}

/**
 * A model from the mesh feed, as a new config (the one in force stays untouched when this
 * refuses): the network's interned id and, per role, the client's pod memberships or the
 * server's own workload and ports, derived again. O(model) for now: the membership index and
 * the served ports are rebuilt whole (see the runtime README, "Live updates").
 */
export function adoptMesh(current: TunnelConfig, mesh: Mesh): TunnelConfigResult {
  const config = new TunnelConfig(mesh);
  config.client = current.client;
  config.network = current.network;
  config.localNetwork = mesh.networkId(current.network.name);
  config.tunnelCluster = current.tunnelCluster;
  config.refuseUnknown = current.refuseUnknown;
  config.appCluster = current.appCluster;
  config.localWorkloadText = current.localWorkloadText;
  config.feed = current.feed;
  if (config.client) {
    config.memberships = new PodMemberships(mesh);
    return new TunnelConfigResult(config, "");
  }
  const error = deriveServer(config);
  return error.length > 0 ? refuse("localWorkload: " + error) : new TunnelConfigResult(config, "");
}

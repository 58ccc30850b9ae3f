// waypoint_route plugin configuration: the shared mesh model, this sidecar's own workload (its
// network and locality drive every choice), and the two clusters. See README.md.
import { ByteSource, ConfigReader } from "../../assembly/json";
import { FeedConfig, MESH_FEED_FIELD, readFeedConfig } from "../../assembly/runtime/feed_config";
import { Address, IpParse, LOCAL_NETWORK_FIELD, LocalNetwork, Mesh, MeshDocument, NetworkSource, NodeNetwork, parseIpString, parseMeshDocument, parseMeshSource, resolveLocalNetwork } from "../../assembly/mesh";

const OWN_FIELDS = ["localWorkload", "hboneCluster", "doubleHboneCluster", "plainCluster", "unknownDestination", LOCAL_NETWORK_FIELD, MESH_FEED_FIELD];

/** The configuration's own fields: what a model from the mesh feed is derived with again. */
export class WaypointSettings {
  constructor(
    readonly localWorkload: string,
    readonly hboneCluster: string,
    readonly doubleHboneCluster: string,
    readonly plainCluster: string,
    readonly refuseUnknown: bool,
    readonly network: LocalNetwork,
    readonly feed: FeedConfig | null,
  ) {}
}

export class WaypointConfig {
  constructor(
    readonly mesh: Mesh,
    /** This proxy's workload: the source of every connection. */
    readonly source: i32,
    readonly network: i32,
    readonly hboneCluster: ArrayBuffer,
    readonly doubleHboneCluster: ArrayBuffer,
    readonly refuseUnknown: bool,
    /** Where the network came from: localNetwork, node metadata NETWORK, or the workload itself. */
    readonly localNetwork: LocalNetwork = new LocalNetwork("", NetworkSource.Default),
    /** ORIGINAL_DST plain-TCP cluster for local service endpoints without HBONE (rule 7). */
    readonly plainCluster: ArrayBuffer = String.UTF8.encode("waypoint_route_plain"),
  ) {
    // Per-service texts the decision writes to the host, built once here so that no
    // connection builds a string: the comma-joined SAN list and the hostname, as UTF-8.
    const services = mesh.serviceCount();
    this.sans = new Array<ArrayBuffer>(services);
    this.hostnames = new Array<ArrayBuffer>(services);
    for (let s = 0; s < services; s++) {
      unchecked((this.sans[s] = joinSans(mesh, s)));
      unchecked((this.hostnames[s] = String.UTF8.encode(mesh.serviceHostname(s))));
    }
  }

  private sans: Array<ArrayBuffer>;
  private hostnames: Array<ArrayBuffer>;
  /** The own fields this config was derived with (set by deriveWaypoint). */
  settings: WaypointSettings | null = null;

  /** Service s's subject alt names joined with ","; empty when it has none (or s is out of range). */
  serviceSans(s: i32): ArrayBuffer {
    return s >= 0 && s < this.sans.length ? unchecked(this.sans[s]) : EMPTY;
  }

  /** Service s's hostname as UTF-8; empty for an out-of-range index. */
  serviceHostnameUtf8(s: i32): ArrayBuffer {
    return s >= 0 && s < this.hostnames.length ? unchecked(this.hostnames[s]) : EMPTY;
  }
}

const EMPTY = new ArrayBuffer(0);

function joinSans(mesh: Mesh, s: i32): ArrayBuffer {
  const n = mesh.sanCount(s);
  if (n == 0) return EMPTY;
  let text = mesh.san(s, 0);
  for (let i = 1; i < n; i++) text += "," + mesh.san(s, i);
  return String.UTF8.encode(text);
}

export class WaypointConfigResult {
  constructor(readonly config: WaypointConfig | null, readonly error: string) {}
}

function refuse(error: string): WaypointConfigResult {
  return new WaypointConfigResult(null, error);
}

/** Streams the configuration (no JSON tree: large meshes fit); own fields are checked first. */
export function parseWaypointConfig(bytes: ArrayBuffer, node: NodeNetwork = NodeNetwork.absent()): WaypointConfigResult {
  return configOf(parseMeshDocument(bytes, OWN_FIELDS), node);
}

/** parseWaypointConfig over the host's configuration, read in windows (never whole in memory). */
export function parseWaypointConfigFrom(source: ByteSource, node: NodeNetwork): WaypointConfigResult {
  return configOf(parseMeshSource(source, OWN_FIELDS), node);
}

function configOf(doc: MeshDocument, node: NodeNetwork): WaypointConfigResult {
  const root = doc.own;
  if (root === null) return refuse(doc.error); // JSON, root type or unknown field
  const reader = new ConfigReader();
  const local = reader.requireString(root, "localWorkload", "");
  const hbone = reader.optionalString(root, "hboneCluster", "", "waypoint_route_hbone");
  const double = reader.optionalString(root, "doubleHboneCluster", "", "waypoint_route_double_hbone");
  const plain = reader.optionalString(root, "plainCluster", "", "waypoint_route_plain");
  const unknown = reader.optionalEnum(root, "unknownDestination", "", ["passthrough", "refuse"], "passthrough");
  const network = resolveLocalNetwork(reader, root, node);
  const feed = readFeedConfig(reader, root);
  if (!reader.failed() && hbone.length == 0) reader.fail("hboneCluster", "must not be empty");
  if (!reader.failed() && double.length == 0) reader.fail("doubleHboneCluster", "must not be empty");
  if (!reader.failed() && plain.length == 0) reader.fail("plainCluster", "must not be empty");
  if (reader.failed()) return refuse(reader.error());
  const mesh = doc.mesh;
  if (mesh === null) return refuse(doc.error);
  return deriveWaypoint(mesh, new WaypointSettings(local, hbone, double, plain, unknown == "refuse", network, feed));
}

/**
 * The config for `mesh`: this sidecar's own workload found in it, the per-service texts built.
 * Used for the configuration's snapshot and again for every model the mesh feed delivers
 * (O(services) for now: the texts are rebuilt whole).
 */
export function deriveWaypoint(mesh: Mesh, settings: WaypointSettings): WaypointConfigResult {
  const reader = new ConfigReader();
  const local = settings.localWorkload;
  const network = settings.network;
  const address = new Address();
  if (parseIpString(local, address) != IpParse.Ok) {
    reader.fail("localWorkload", "not an IP address: \"" + local + "\"");
    return refuse(reader.error());
  }
  // With a known network (pinned, or the node metadata's), the workload is looked up there (the
  // same pod IP may exist on two networks); otherwise on each network in turn.
  let source = -1;
  if (network.source != NetworkSource.Default) {
    source = mesh.workloadByAddress(mesh.networkId(network.name), address);
  } else {
    for (let n = 0, networks = mesh.networkCount(); n < networks && source < 0; n++) source = mesh.workloadByAddress(n, address);
  }
  if (source < 0) {
    const where = network.source == NetworkSource.Default ? "" : " on network " + network.describe();
    reader.fail("localWorkload", "no workload has address " + local + where);
    return refuse(reader.error());
  }
  const config = new WaypointConfig(
    mesh,
    source,
    mesh.workloadNetwork(source),
    String.UTF8.encode(settings.hboneCluster),
    String.UTF8.encode(settings.doubleHboneCluster),
    settings.refuseUnknown,
    network,
    String.UTF8.encode(settings.plainCluster),
  );
  config.settings = settings;
  return new WaypointConfigResult(config, "");
}

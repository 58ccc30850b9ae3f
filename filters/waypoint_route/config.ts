// waypoint_route plugin configuration: the shared mesh model, this sidecar's own workload (its
// network and locality drive every choice), and the two clusters. See README.md.
import { ByteSource, ConfigReader } from "../../assembly/json";
import { acceptConfig, ConfigResult, refuseConfig } from "../../assembly/runtime/config_root";
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
    /** The model in force (replaced by a full model from the feed; a delta changes it in place). */
    public mesh: Mesh,
    /** This proxy's workload: the source of every connection; -1 when the model has none at localWorkload. */
    public source: i32,
    /** The source's network (kept from the last model that had the source). */
    public network: i32,
    readonly hboneCluster: ArrayBuffer,
    readonly doubleHboneCluster: ArrayBuffer,
    readonly refuseUnknown: bool,
    /** Where the network came from: localNetwork, node metadata NETWORK, or the workload itself. */
    readonly localNetwork: LocalNetwork = new LocalNetwork("", NetworkSource.Default),
    /** ORIGINAL_DST plain-TCP cluster for local service endpoints without HBONE (rule 7). */
    readonly plainCluster: ArrayBuffer = String.UTF8.encode("waypoint_route_plain"),
  ) {
    // Per-service texts the decision writes to the host, built here so that no connection
    // builds a string: the comma-joined SAN list and the hostname, as UTF-8. After a delta only
    // the services it named are built again (refreshServices).
    const services = mesh.serviceCount();
    this.sans = new Array<ArrayBuffer>(services);
    this.hostnames = new Array<ArrayBuffer>(services);
    for (let s = 0; s < services; s++) this.buildTexts(s);
  }

  private sans: Array<ArrayBuffer>;
  private hostnames: Array<ArrayBuffer>;
  /** The own fields this config was derived with (set by deriveWaypoint). */
  settings: WaypointSettings | null = null;

  /** Where live changes come from (meshFeed in the settings; null: none). */
  get feed(): FeedConfig | null {
    const settings = this.settings;
    return settings === null ? null : settings.feed;
  }

  /**
   * After a delta applied to this.mesh in place: the texts of the services it named
   * (Mesh.changedServices) built again, the arrays grown by doubling for new ids. O(records).
   */
  refreshServices(): void {
    const mesh = this.mesh;
    const total = mesh.serviceCount();
    if (total > this.sans.length) {
      const room = max(total, this.sans.length * 2);
      for (let s = this.sans.length; s < room; s++) {
        this.sans.push(EMPTY);
        this.hostnames.push(EMPTY);
      }
    }
    const changed = mesh.changedServices;
    for (let i = 0, n = changed.length; i < n; i++) {
      const s = unchecked(changed[i]);
      if (s >= 0 && s < this.sans.length) this.buildTexts(s);
    }
  }

  private buildTexts(s: i32): void {
    unchecked((this.sans[s] = joinSans(this.mesh, s)));
    const hostname = this.mesh.serviceHostname(s);
    unchecked((this.hostnames[s] = hostname.length == 0 ? EMPTY : String.UTF8.encode(hostname)));
  }

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

/** Streams the configuration (no JSON tree: large meshes fit); own fields are checked first. */
export function parseWaypointConfig(bytes: ArrayBuffer, node: NodeNetwork = NodeNetwork.absent()): ConfigResult<WaypointConfig> {
  return configOf(parseMeshDocument(bytes, OWN_FIELDS), node);
}

/** parseWaypointConfig over the host's configuration, read in windows (never whole in memory). */
export function parseWaypointConfigFrom(source: ByteSource, node: NodeNetwork): ConfigResult<WaypointConfig> {
  return configOf(parseMeshSource(source, OWN_FIELDS), node);
}

function configOf(doc: MeshDocument, node: NodeNetwork): ConfigResult<WaypointConfig> {
  const root = doc.own;
  if (root === null) return refuseConfig<WaypointConfig>(doc.error); // JSON, root type or unknown field
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
  if (reader.failed()) return refuseConfig<WaypointConfig>(reader.error());
  const mesh = doc.mesh;
  if (mesh === null) return refuseConfig<WaypointConfig>(doc.error);
  return deriveWaypoint(mesh, new WaypointSettings(local, hbone, double, plain, unknown == "refuse", network, feed));
}

/**
 * The configuration's config for `mesh`: this sidecar's own workload must be in it (the
 * operator's form: a configuration without it is refused, the previous one stays in force),
 * unless the configuration has meshFeed and an empty snapshot: then the workload comes with the
 * feed's first model (an empty snapshot is no model: connections wait for the feed, see the
 * runtime's model gate, assembly/runtime/model_gate.ts).
 */
export function deriveWaypoint(mesh: Mesh, settings: WaypointSettings): ConfigResult<WaypointConfig> {
  const reader = new ConfigReader();
  const local = settings.localWorkload;
  const network = settings.network;
  const address = new Address();
  if (parseIpString(local, address) != IpParse.Ok) {
    reader.fail("localWorkload", "not an IP address: \"" + local + "\"");
    return refuseConfig<WaypointConfig>(reader.error());
  }
  const source = findSource(mesh, settings, address);
  if (source < 0 && settings.feed !== null && mesh.workloadCount() == 0 && mesh.serviceCount() == 0) {
    return acceptConfig<WaypointConfig>(configFor(mesh, settings, -1, max(0, mesh.networkId(network.name))));
  }
  if (source < 0) {
    const where = network.source == NetworkSource.Default ? "" : " on network " + network.describe();
    reader.fail("localWorkload", "no workload has address " + local + where);
    return refuseConfig<WaypointConfig>(reader.error());
  }
  return acceptConfig<WaypointConfig>(configFor(mesh, settings, source, mesh.workloadNetwork(source)));
}

/**
 * A model from the mesh feed, always taken (a delta is already applied in place when this
 * runs: refusing could not bring the old model back). The same Mesh (a delta): the services it
 * named get their texts again and the own workload is looked up again, O(records + networks).
 * A new Mesh (a full model): a new config, texts built once. When the model has no workload at
 * localWorkload (the pod going away, or not in the feed yet), source is -1 and every connection
 * is closed as error_no_local_workload until a model has it again. Returns the config in force.
 */
export function adoptWaypointMesh(current: WaypointConfig, mesh: Mesh): WaypointConfig {
  const settings = current.settings;
  if (settings === null) return current;
  const address = new Address();
  parseIpString(settings.localWorkload, address); // checked when the configuration was taken
  const source = findSource(mesh, settings, address);
  const network = source >= 0 ? mesh.workloadNetwork(source) : current.network;
  if (mesh === current.mesh) {
    current.source = source;
    current.network = network;
    current.refreshServices();
    return current;
  }
  return configFor(mesh, settings, source, network);
}

/**
 * With a known network (pinned, or the node metadata's), the workload is looked up there (the
 * same pod IP may exist on two networks); otherwise on each network in turn. -1 when none.
 */
function findSource(mesh: Mesh, settings: WaypointSettings, address: Address): i32 {
  const network = settings.network;
  if (network.source != NetworkSource.Default) return mesh.workloadByAddress(mesh.networkId(network.name), address);
  let source = -1;
  for (let n = 0, networks = mesh.networkCount(); n < networks && source < 0; n++) source = mesh.workloadByAddress(n, address);
  return source;
}

function configFor(mesh: Mesh, settings: WaypointSettings, source: i32, network: i32): WaypointConfig {
  const config = new WaypointConfig(
    mesh,
    source,
    network,
    String.UTF8.encode(settings.hboneCluster),
    String.UTF8.encode(settings.doubleHboneCluster),
    settings.refuseUnknown,
    settings.network,
    String.UTF8.encode(settings.plainCluster),
  );
  config.settings = settings;
  return config;
}

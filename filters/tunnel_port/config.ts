// tunnel_port plugin configuration: one module, two roles (the client sidecar's outbound and the
// server sidecar's inbound), the shared mesh model, and a few fields per role. See README.md.
import { ByteSource, ConfigReader, JsonValue } from "../../assembly/json";
import { Address, IpParse, Mesh, MESH_FIELDS, MeshDocument, parseIpString, parseMeshDocument, parseMeshSource } from "../../assembly/mesh";

export const ROLE_CLIENT = "client";
export const ROLE_SERVER = "server";
export const UNKNOWN_PASSTHROUGH = "passthrough";
export const UNKNOWN_REFUSE = "refuse";

const COMMON_FIELDS = ["role", "localNetwork"];
const CLIENT_FIELDS = ["tunnelCluster", "tunnelPort", "unknownDestination"];
const SERVER_FIELDS = ["localWorkload", "appCluster"];

export class TunnelConfig {
  mesh: Mesh;
  localNetwork: i32 = 0;
  client: bool = true;
  // client
  tunnelCluster: ArrayBuffer = new ArrayBuffer(0);
  tunnelPort: i32 = 15008;
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
  /**
   * Client: (workload << 16 | target port) → service port, for connections that dial a pod IP
   * directly; the first service in configuration order that maps to that target wins.
   */
  podServicePort: Map<u64, i32> = new Map<u64, i32>();
  /** Client: every (workload << 32 | service port << 16 | target port) the mesh defines. */
  podPortTriples: Set<u64> = new Set<u64>();

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
export function parseTunnelConfig(bytes: ArrayBuffer): TunnelConfigResult {
  return tunnelConfigOf(parseMeshDocument(bytes, ALL_OWN_FIELDS));
}

/** parseTunnelConfig over the host's configuration, read in windows (never whole in memory). */
export function parseTunnelConfigFrom(source: ByteSource): TunnelConfigResult {
  return tunnelConfigOf(parseMeshSource(source, ALL_OWN_FIELDS));
}

const ALL_OWN_FIELDS = COMMON_FIELDS.concat(CLIENT_FIELDS).concat(SERVER_FIELDS);

function tunnelConfigOf(doc: MeshDocument): TunnelConfigResult {
  const root = doc.own;
  if (root === null) return refuse(doc.error); // JSON, root type or a field no role knows
  const reader = new ConfigReader();
  const role = reader.requireEnum(root, "role", "", [ROLE_CLIENT, ROLE_SERVER]);
  if (reader.failed()) return refuse(reader.error());
  const client = role == ROLE_CLIENT;
  reader.onlyKnownFields(root, "", COMMON_FIELDS.concat(client ? CLIENT_FIELDS : SERVER_FIELDS).concat(MESH_FIELDS));
  const localNetwork = reader.optionalString(root, "localNetwork", "", "");
  if (reader.failed()) return refuse(reader.error());
  const mesh = doc.mesh;
  if (mesh === null) return refuse(doc.error);
  const config = new TunnelConfig(mesh);
  config.client = client;
  config.localNetwork = mesh.networkId(localNetwork);
  if (client) readClient(reader, root, config);
  else readServer(reader, root, config);
  if (reader.failed()) return refuse(reader.error());
  return new TunnelConfigResult(config, "");
}

function readClient(reader: ConfigReader, root: JsonValue, config: TunnelConfig): void {
  const cluster = reader.optionalString(root, "tunnelCluster", "", "tunnel_port_hbone");
  if (!reader.failed() && cluster.length == 0) reader.fail("tunnelCluster", "must not be empty");
  config.tunnelCluster = String.UTF8.encode(cluster);
  config.tunnelPort = <i32>reader.optionalInteger(root, "tunnelPort", "", 1, 65535, 15008);
  const unknown = reader.optionalEnum(root, "unknownDestination", "", [UNKNOWN_PASSTHROUGH, UNKNOWN_REFUSE], UNKNOWN_PASSTHROUGH);
  config.refuseUnknown = unknown == UNKNOWN_REFUSE;
  if (reader.failed()) return;
  // Pod-IP destinations: index which service port each (pod, target port) stands for.
  const mesh = config.mesh;
  for (let s = 0, services = mesh.serviceCount(); s < services; s++) {
    for (let e = 0, endpoints = mesh.endpointCount(s); e < endpoints; e++) {
      const w = mesh.endpointWorkload(s, e);
      for (let i = 0, ports = mesh.servicePortCount(s); i < ports; i++) {
        const servicePort = mesh.servicePortAt(s, i);
        const target = mesh.targetPort(s, e, servicePort);
        const key = (<u64>w << 16) | <u64>target;
        if (w < 0 || target <= 0) continue;
        if (!config.podServicePort.has(key)) config.podServicePort.set(key, servicePort);
        config.podPortTriples.add((<u64>w << 32) | (<u64>servicePort << 16) | <u64>target);
      }
    }
  }
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
  const address = new Address();
  if (parseIpString(text, address) != IpParse.Ok) {
    reader.fail("localWorkload", "not an IP address: \"" + text + "\"");
    return;
  }
  const mesh = config.mesh;
  const w = mesh.workloadByAddress(config.localNetwork, address);
  if (w < 0) {
    reader.fail("localWorkload", "no workload has address " + text + " on this network");
    return;
  }
  config.localWorkload = w;
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
  if (config.servedTargets.size == 0) reader.fail("localWorkload", "workload " + text + " is an endpoint of no service: it serves no port");
}

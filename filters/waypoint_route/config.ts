// waypoint_route plugin configuration: the shared mesh model, this sidecar's own workload (its
// network and locality drive every choice), and the two clusters. See README.md.
import { ConfigReader, parseJson } from "../../assembly/json";
import { Address, IpParse, Mesh, MESH_FIELDS, parseIpString, parseMesh } from "../../assembly/mesh";

const OWN_FIELDS = ["localWorkload", "hboneCluster", "doubleHboneCluster", "unknownDestination"];

export class WaypointConfig {
  constructor(
    readonly mesh: Mesh,
    /** This proxy's workload: the source of every connection. */
    readonly source: i32,
    readonly network: i32,
    readonly hboneCluster: ArrayBuffer,
    readonly doubleHboneCluster: ArrayBuffer,
    readonly refuseUnknown: bool,
  ) {}
}

export class WaypointConfigResult {
  constructor(readonly config: WaypointConfig | null, readonly error: string) {}
}

function refuse(error: string): WaypointConfigResult {
  return new WaypointConfigResult(null, error);
}

export function parseWaypointConfig(bytes: ArrayBuffer): WaypointConfigResult {
  const parsed = parseJson(bytes);
  const root = parsed.value;
  if (!parsed.ok() || root === null) return refuse(parsed.error);
  const reader = new ConfigReader();
  if (!root.isObject()) {
    reader.fail("", "expected an object");
    return refuse(reader.error());
  }
  reader.onlyKnownFields(root, "", OWN_FIELDS.concat(MESH_FIELDS));
  const local = reader.requireString(root, "localWorkload", "");
  const hbone = reader.optionalString(root, "hboneCluster", "", "waypoint_route_hbone");
  const double = reader.optionalString(root, "doubleHboneCluster", "", "waypoint_route_double_hbone");
  const unknown = reader.optionalEnum(root, "unknownDestination", "", ["passthrough", "refuse"], "passthrough");
  if (!reader.failed() && hbone.length == 0) reader.fail("hboneCluster", "must not be empty");
  if (!reader.failed() && double.length == 0) reader.fail("doubleHboneCluster", "must not be empty");
  const mesh: Mesh | null = reader.failed() ? null : parseMesh(root, reader, "");
  if (mesh === null || reader.failed()) return refuse(reader.error());
  const address = new Address();
  if (parseIpString(local, address) != IpParse.Ok) {
    reader.fail("localWorkload", "not an IP address: \"" + local + "\"");
    return refuse(reader.error());
  }
  // This sidecar's workload may sit on any network: look for it on each.
  let source = -1;
  for (let n = 0, networks = mesh.networkCount(); n < networks && source < 0; n++) source = mesh.workloadByAddress(n, address);
  if (source < 0) {
    reader.fail("localWorkload", "no workload has address " + local);
    return refuse(reader.error());
  }
  return new WaypointConfigResult(
    new WaypointConfig(mesh, source, mesh.workloadNetwork(source), String.UTF8.encode(hbone), String.UTF8.encode(double), unknown == "refuse"),
    "",
  );
}

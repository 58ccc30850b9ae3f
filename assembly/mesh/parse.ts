// Builds the Mesh from the plugin configuration's `workloads` and `services` fields, streaming
// the configuration bytes (no JsonValue tree).
//
// Two passes over the bytes, both with JsonStream:
//   1. scan: validates the whole document exactly as parseJson would (so a JSON error anywhere
//      wins, as before), refuses unknown top-level fields, copies the caller's own fields into a
//      small JsonValue object, notes where `workloads` and `services` start, and counts what the
//      columns need (items, addresses per family, endpoints, ports, VIPs, SANs).
//   2. build: allocates every column once at its exact size, then reads each workload and
//      service straight into them. Each item's fields are located in one pass and then checked
//      in a fixed order (fields.ts), so messages and their precedence are the tree reader's.
// Counting first instead of growing columns keeps the peak at the final size: a column grown
// by doubling leaves its old block behind as a free region, and linear memory never shrinks.
//
// Per pod nothing is allocated that outlives the pod, except what the model keeps: uids are
// matched by their bytes in the input (a transient index of 4-byte slots plus one 4-byte offset
// per workload, freed at the end), interned texts (identity, network, locality) are looked up
// by their bytes, and references are deduplicated by value. Strings are decoded only for the
// first occurrence of a text, for the per-service texts the model keeps, and for messages.
//
// Every check goes through the ConfigReader, so the first problem becomes one line naming the
// field ("workloads[3].addresses[1]: not an IP address: ...") and the whole configuration is
// refused.
//
// This file holds the document's schema (the fields of each object, in the order they are
// checked; the enumerations; the limits), the results and the entry points. The passes:
// parse_scan.ts (1), parse_build.ts (2) with parse_workloads.ts and parse_services.ts, the
// state and shared checks in parse_context.ts, lookups by bytes in parse_lookup.ts.
import { ConfigReader, JsonNames, JsonStream, JsonValue, writeJson } from "../json";
import { ByteSource } from "../json/source";
import { DEFAULT_MARGIN, DEFAULT_WINDOW } from "../json/stream";
import { Mesh } from "./model";
import { buildMesh } from "./parse_build";
import { MeshParser } from "./parse_context";
import { MeshScan } from "./parse_scan";
import { MAX_TABLE_NETWORKS } from "./table";

export { defaultClusterName } from "./parse_text";
export { lastReservation } from "./parse_build";

/** The fields parseMesh reads; add them to the filter's own list for onlyKnownFields. */
export const MESH_FIELDS: string[] = ["workloads", "services"];
/**
 * The same, as the scan looks them up. Kept beside MESH_FIELDS: parse_scan.ts is initialised
 * before this file (they import each other), so its globals cannot read this file's.
 */
export const MESH_NAMES = new JsonNames(MESH_FIELDS);

/** Limits, checked before anything is allocated for them. */
export const MAX_WORKLOADS: i32 = 2000000;
export const MAX_SERVICES: i32 = 2000000;
/** Workload addresses in total; service VIPs in total have the same limit. */
export const MAX_ADDRESSES: i32 = 2000000;
/** Endpoints, service ports and subject alt names, each in total over all services. */
export const MAX_SERVICE_ITEMS: i32 = 4000000;
/** Distinct network names (address-table entries hold the network id in 11 bits). */
export const MAX_NETWORKS: i32 = MAX_TABLE_NETWORKS;
/** Distinct localities (ids fit the u16 locality column; "" is id 0). */
export const MAX_LOCALITIES: i32 = 65535;

export const DEFAULT_HBONE_PORT: i32 = 15008;

/** The limits a parse enforces; the defaults are the MAX_* constants (tests pass smaller). */
export class MeshLimits {
  workloads: i32 = MAX_WORKLOADS;
  services: i32 = MAX_SERVICES;
  addresses: i32 = MAX_ADDRESSES;
  serviceItems: i32 = MAX_SERVICE_ITEMS;
  /**
   * Bytes a filter derives per workload and per endpoint right after the build (an index of its
   * own), added to the build's one memory reservation: allocated later on its own, that index
   * would find the heap full and grow linear memory by its whole current size.
   */
  derivedBytesPerWorkload: i32 = 0;
  derivedBytesPerEndpoint: i32 = 0;
}

export const DEFAULT_LIMITS = new MeshLimits();

// Known fields of each object, and each field's index in its list.
export const WORKLOAD_FIELDS = [
  "uid",
  "addresses",
  "network",
  "identity",
  "tlsMode",
  "healthy",
  "locality",
  "waypoint",
  "networkGateway",
];
export const WF_UID = 0;
export const WF_ADDRESSES = 1;
export const WF_NETWORK = 2;
export const WF_IDENTITY = 3;
export const WF_TLS_MODE = 4;
export const WF_HEALTHY = 5;
export const WF_LOCALITY = 6;
export const WF_WAYPOINT = 7;
export const WF_GATEWAY = 8;

export const SERVICE_FIELDS = [
  "hostname",
  "vips",
  "ports",
  "endpoints",
  "waypoint",
  "subjectAltNames",
  "headless",
  "cluster",
  "loadBalancing",
];
export const SF_HOSTNAME = 0;
export const SF_VIPS = 1;
export const SF_PORTS = 2;
export const SF_ENDPOINTS = 3;
export const SF_WAYPOINT = 4;
export const SF_SANS = 5;
export const SF_HEADLESS = 6;
export const SF_CLUSTER = 7;
export const SF_LB = 8;

export const VIP_FIELDS = ["network", "address"];
export const VF_NETWORK = 0;
export const VF_ADDRESS = 1;

export const ENDPOINT_FIELDS = ["workload", "ports"];
export const EF_WORKLOAD = 0;
export const EF_PORTS = 1;

// A reference: the port field is "port" for a waypoint, "hboneMtlsPort" for a gateway.
export const WAYPOINT_FIELDS = ["address", "hostname", "port"];
export const GATEWAY_FIELDS = ["address", "hostname", "hboneMtlsPort"];
export const RF_ADDRESS = 0;
export const RF_HOSTNAME = 1;
export const RF_PORT = 2;

export const LB_FIELDS = ["routingPreference", "mode"];
export const LF_PREFERENCE = 0;
export const LF_MODE = 1;

export const TLS_MODES = new JsonNames(["istio", "disabled"]);
export const TLS_ISTIO = 0;
export const TLS_DISABLED = 1;
export const LB_MODES = new JsonNames(["failover", "standard"]);
export const LB_STANDARD = 1;
/** In Scope order: index + 1 is the Scope value. */
export const SCOPES = new JsonNames(["network", "region", "zone", "subzone"]);

export class MeshParseResult {
  constructor(public mesh: Mesh | null, public error: string) {}

  ok(): bool {
    return this.mesh !== null && this.error.length == 0;
  }
}

/** A filter configuration streamed by parseMeshDocument: the mesh and the filter's own fields. */
export class MeshDocument {
  constructor(
    /**
     * The caller's own top-level fields that are present, as a JSON object (read them with a
     * ConfigReader at path ""); null when the document failed before them: JSON syntax, a root
     * that is not an object, or an unknown top-level field.
     */
    public own: JsonValue | null,
    /** The mesh; null when `error` is set. */
    public mesh: Mesh | null,
    /** The first problem, "" when none: the document's when `own` is null, else the mesh's. */
    public error: string,
  ) {}

  ok(): bool {
    return this.own !== null && this.mesh !== null && this.error.length == 0;
  }
}

// ==================================================================== entry points

/**
 * Streams a filter's whole configuration object: `workloads` and `services` go straight into
 * the Mesh, the filter's own top-level fields (`ownFields`) come back as a small JsonValue
 * object to read with a ConfigReader, and any other top-level field is refused
 * (`x: unknown field (known: <ownFields>, workloads, services)`).
 *
 * The first problem wins in the order the tree reader had: JSON syntax anywhere ("byte N:
 * ..."), a root that is not an object, an unknown field (these three leave `own` null); then
 * the mesh. The caller checks its own fields between the two (see MeshDocument), so its
 * messages keep their place before the mesh's.
 */
export function parseMeshDocument(
  bytes: ArrayBuffer,
  ownFields: string[],
  limits: MeshLimits = DEFAULT_LIMITS,
): MeshDocument {
  return parseMeshStream(new JsonStream(bytes), ownFields, limits);
}

/**
 * parseMeshDocument over a document that is never whole in linear memory: every reader reads
 * `source` (the host's plugin configuration, say) through its own window of `window` bytes.
 * Same model, same messages. `margin` is the look-ahead kept in each window (tests shrink
 * both to make every token cross a window boundary).
 */
export function parseMeshSource(
  source: ByteSource,
  ownFields: string[],
  limits: MeshLimits = DEFAULT_LIMITS,
  window: i32 = DEFAULT_WINDOW,
  margin: i32 = DEFAULT_MARGIN,
): MeshDocument {
  return parseMeshStream(JsonStream.windowed(source, window, margin), ownFields, limits);
}

function parseMeshStream(stream: JsonStream, ownFields: string[], limits: MeshLimits): MeshDocument {
  const scan = new MeshScan();
  const known = ownFields.concat(MESH_FIELDS);
  if (!scan.run(stream, new JsonNames(ownFields), known)) return new MeshDocument(null, null, scan.error);
  const reader = new ConfigReader();
  const mesh = buildMesh(new MeshParser(reader, limits, stream), scan, "");
  if (mesh === null || reader.failed()) return new MeshDocument(scan.own, null, reader.error());
  return new MeshDocument(scan.own, mesh, "");
}

/**
 * Reads `workloads` and `services` of `root` (the filter's own configuration object, already
 * parsed into a tree) into a Mesh. `path` is root's path for messages ("" at the top).
 * Failures are recorded in `reader` (first one wins) and give null. The caller checks unknown
 * fields itself, with MESH_FIELDS added to its own list.
 *
 * For small configurations and tests: the two fields are written back to JSON and streamed
 * through the same parser as parseMeshDocument, so both give the same model and messages.
 * Large configurations should use parseMeshDocument and never build the tree.
 */
export function parseMesh(
  root: JsonValue,
  reader: ConfigReader,
  path: string,
  limits: MeshLimits = DEFAULT_LIMITS,
): Mesh | null {
  if (reader.failed()) return null;
  if (!root.isObject()) {
    reader.fail(path, "expected an object");
    return null;
  }
  const subset = JsonValue.newObject();
  for (let i = 0; i < MESH_FIELDS.length; i++) {
    const key = unchecked(MESH_FIELDS[i]);
    const value = root.get(key);
    if (value !== null) subset.addField(key, value);
  }
  const stream = JsonStream.fromString(writeJson(subset));
  const scan = new MeshScan();
  if (!scan.run(stream, new JsonNames([]), MESH_FIELDS)) {
    // Only a tree no JSON text can spell (a lone surrogate in a string) gets here.
    reader.fail(path, scan.error);
    return null;
  }
  return buildMesh(new MeshParser(reader, limits, stream), scan, path);
}

/** Parses a configuration that holds only the mesh (tests, tools). */
export function parseMeshConfig(bytes: ArrayBuffer, limits: MeshLimits = DEFAULT_LIMITS): MeshParseResult {
  const doc = parseMeshDocument(bytes, [], limits);
  return new MeshParseResult(doc.mesh, doc.error);
}

/** parseMeshConfig for a string. */
export function parseMeshConfigString(text: string, limits: MeshLimits = DEFAULT_LIMITS): MeshParseResult {
  return parseMeshConfig(String.UTF8.encode(text), limits);
}

// The mesh snapshot the filters read (assembly/mesh/README.md "Configuration"), as TypeScript
// types. The AssemblyScript parser is the authority on the field names: the key lists below are
// checked against assembly/mesh/parse.ts's own lists by tests/feed/schema.test.ts, so a field
// renamed or added on one side fails the tests until the other side follows.

/** `{"address": ip}` or `{"hostname": host}` plus the port (a waypoint's `port`). */
export interface WaypointRef {
  address?: string;
  hostname?: string;
  port?: number;
}

/** A network gateway reference: as a waypoint reference, with `hboneMtlsPort`. */
export interface GatewayRef {
  address?: string;
  hostname?: string;
  hboneMtlsPort?: number;
}

export interface Workload {
  uid: string;
  addresses: string[];
  network?: string;
  identity?: string;
  tlsMode?: "istio" | "disabled";
  healthy?: boolean;
  locality?: string;
  waypoint?: WaypointRef;
  networkGateway?: GatewayRef;
}

export interface Vip {
  network?: string;
  address: string;
}

export interface Endpoint {
  workload: string;
  /** Service port → this endpoint's target port, only where it differs from the service's. */
  ports?: Record<string, number>;
}

export interface LoadBalancing {
  routingPreference?: Array<"network" | "region" | "zone" | "subzone">;
  mode?: "failover" | "standard";
}

export interface Service {
  hostname: string;
  vips?: Vip[];
  /** Service port → default target port. */
  ports?: Record<string, number>;
  endpoints?: Endpoint[];
  waypoint?: WaypointRef;
  subjectAltNames?: string[];
  headless?: boolean;
  cluster?: string;
  loadBalancing?: LoadBalancing;
}

export interface MeshSnapshot {
  workloads: Workload[];
  services: Service[];
}

// The keys each object may carry, in the order parse.ts lists them. `satisfies` keeps them in
// step with the interfaces above at compile time; the schema test keeps them in step with the
// AssemblyScript side.
export const MESH_KEYS = ["workloads", "services"] as const satisfies ReadonlyArray<keyof MeshSnapshot>;
export const WORKLOAD_KEYS = [
  "uid",
  "addresses",
  "network",
  "identity",
  "tlsMode",
  "healthy",
  "locality",
  "waypoint",
  "networkGateway",
] as const satisfies ReadonlyArray<keyof Workload>;
export const SERVICE_KEYS = [
  "hostname",
  "vips",
  "ports",
  "endpoints",
  "waypoint",
  "subjectAltNames",
  "headless",
  "cluster",
  "loadBalancing",
] as const satisfies ReadonlyArray<keyof Service>;
export const VIP_KEYS = ["network", "address"] as const satisfies ReadonlyArray<keyof Vip>;
export const ENDPOINT_KEYS = ["workload", "ports"] as const satisfies ReadonlyArray<keyof Endpoint>;
export const WAYPOINT_KEYS = ["address", "hostname", "port"] as const satisfies ReadonlyArray<keyof WaypointRef>;
export const GATEWAY_KEYS = ["address", "hostname", "hboneMtlsPort"] as const satisfies ReadonlyArray<keyof GatewayRef>;
export const LB_KEYS = ["routingPreference", "mode"] as const satisfies ReadonlyArray<keyof LoadBalancing>;

/** The default HBONE port (waypoint `port`, gateway `hboneMtlsPort`). */
export const HBONE_PORT = 15008;

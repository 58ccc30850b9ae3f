// What the fuzzer runs per filter: the module and root_id, the valid configuration it mutates,
// the outcome counters its README lists (each connection bumps exactly one of `outcomes`; the
// `extras` may come on top), which outcomes close the connection, the outcome a connection
// without a usable destination must get, and the per-connection inputs it reads.
import { meshSnapshot, servedPairs, type Json, type Snapshot, LOCAL_NETWORK } from "./snapshot.js";

export interface Target {
  /** Fuzz target name: the filter, plus the role for tunnel_port. */
  readonly name: string;
  readonly filter: string;
  /** The filter's valid configuration for `snapshot`. */
  baseConfig(snapshot: Snapshot): Json;
  /** Counter name suffixes (after `<filter>.`); each connection bumps exactly one. */
  readonly outcomes: readonly string[];
  /** Counters that may be bumped in addition to the outcome. */
  readonly extras: readonly string[];
  /** Outcomes (or extras) after which the connection is closed; every other continues. */
  readonly closing: readonly string[];
  /** The outcome of a connection whose destination is missing or malformed (README). */
  readonly noDestination: string;
  /** Reads the tunnel_port server's filter state. */
  readonly server?: boolean;
  /** Reads the tunnel_port client's route metadata. */
  readonly client?: boolean;
}

const mesh = (s: Snapshot) => ({ workloads: s.workloads, services: s.services });

export const TARGETS: readonly Target[] = [
  {
    name: "probe",
    filter: "probe",
    baseConfig: (s) => ({
      routes: Object.fromEntries(s.knownDestinations.slice(0, 12).map((d, i) => [d.replace(/^\[|\]?:\d+$/g, ""), `backend_${i}`])),
      default_cluster: "fallback",
    }),
    outcomes: ["routed", "defaulted", "unmatched", "no_destination"],
    extras: ["filter_state_refused"],
    closing: [],
    noDestination: "no_destination",
  },
  {
    name: "passthrough_mtls",
    filter: "passthrough_mtls",
    baseConfig: (s) => ({ localNetwork: LOCAL_NETWORK, mode: "direct", mtlsCluster: "outbound_mtls_passthrough", subsetCluster: "passthrough_mtls_subset", ...mesh(s) }),
    outcomes: ["mtls", "headless", "passthrough", "no_destination", "rejected"],
    extras: ["plaintext_pod", "local_network_wins"],
    closing: ["rejected"],
    noDestination: "no_destination",
  },
  {
    name: "tunnel_port_client",
    filter: "tunnel_port",
    baseConfig: (s) => ({ role: "client", localNetwork: LOCAL_NETWORK, tunnelCluster: "tunnel_port_hbone", unknownDestination: "passthrough", ...mesh(s) }),
    outcomes: ["client.tunneled", "client.unknown_passthrough", "client.unknown_refused", "client.no_endpoint", "rejected"],
    extras: ["client.panic_routing"],
    closing: ["client.unknown_refused", "client.no_endpoint", "rejected"],
    noDestination: "client.unknown_passthrough",
    client: true,
  },
  {
    name: "tunnel_port_server",
    filter: "tunnel_port",
    baseConfig: (s) => ({ role: "server", localNetwork: LOCAL_NETWORK, localWorkload: s.localWorkload, appCluster: "tunnel_port_inbound", ...mesh(s) }),
    outcomes: [
      "server.accepted",
      "server.refused_no_peer",
      "server.refused_missing_port",
      "server.refused_malformed_port",
      "server.refused_malformed_authority",
      "server.refused_foreign_authority",
      "server.refused_unserved_port",
      "server.refused_port_mismatch",
      "rejected",
    ],
    extras: [],
    closing: [
      "server.refused_no_peer",
      "server.refused_missing_port",
      "server.refused_malformed_port",
      "server.refused_malformed_authority",
      "server.refused_foreign_authority",
      "server.refused_unserved_port",
      "server.refused_port_mismatch",
      "rejected",
    ],
    noDestination: "server.refused_missing_port",
    server: true,
  },
  {
    name: "waypoint_route",
    filter: "waypoint_route",
    baseConfig: (s) => ({
      localWorkload: s.localWorkload,
      hboneCluster: "waypoint_route_hbone",
      doubleHboneCluster: "waypoint_route_double_hbone",
      plainCluster: "waypoint_route_plain",
      unknownDestination: "passthrough",
      ...mesh(s),
    }),
    outcomes: [
      "hbone_waypoint",
      "double_hbone_waypoint",
      "hbone_endpoint",
      "double_hbone_endpoint",
      "hbone_pod",
      "unknown",
      "plaintext_pod",
      "error_unknown_waypoint",
      "error_no_valid_destination",
      "error_unknown_gateway",
      "error_no_endpoint",
      "plaintext_endpoint",
      "hbone_pod_waypoint",
      "error_unlisted_port",
      "error_unknown_pod_waypoint",
      "error_unknown_gateway_port",
      "error_unknown_waypoint_port",
    ],
    extras: ["unknown_refused", "rejected"],
    closing: [
      "error_unknown_waypoint",
      "error_no_valid_destination",
      "error_unknown_gateway",
      "error_no_endpoint",
      "error_unlisted_port",
      "error_unknown_pod_waypoint",
      "error_unknown_gateway_port",
      "error_unknown_waypoint_port",
      "unknown_refused",
      "rejected",
    ],
    noDestination: "unknown",
  },
];

export function targetByName(name: string): Target {
  const target = TARGETS.find((t) => t.name === name);
  if (!target) throw new Error(`unknown fuzz target ${name}; known: ${TARGETS.map((t) => t.name).join(", ")}`);
  return target;
}

/** The snapshot every target's connection cases run against (small: the VM is reused). */
export const FUZZ_SNAPSHOT = meshSnapshot(40, 8);

/**
 * The snapshot configuration cases mutate: the smallest that still has every kind of workload
 * and service, so that a million configurations parse in minutes.
 */
export const CONFIG_SNAPSHOT = meshSnapshot(8, 4);

/** Ports the generators draw from: every service and target port in the snapshot, and a few more. */
export const FUZZ_PORTS = [80, 443, 9000, 8080, 8443, 9376, 15008, 1, 65535, 81];

/** The tunnel_port server's served (service port/target port) pairs, from the snapshot alone. */
export const SERVED_PAIRS = servedPairs(FUZZ_SNAPSHOT, FUZZ_SNAPSHOT.localWorkload);

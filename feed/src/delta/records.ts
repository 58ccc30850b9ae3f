// A view's workloads and services (the JSON model's objects, schema.ts) as format-v1 records:
// the same content the JSON snapshot carries, with ids in place of uids and hostnames and a
// workload's service memberships on the workload (the JSON puts them on the service as
// `endpoints`), as ztunnel's WDS Workload.services does.
import type { Endpoint, GatewayRef, Service, WaypointRef, Workload } from "../schema.js";
import { HBONE_PORT } from "../schema.js";
import {
  DEFAULT_LB_PREFS,
  SCOPE,
  SF_CLUSTER,
  SF_HEADLESS,
  SF_LB_STANDARD,
  SF_WAYPOINT,
  WF_GATEWAY,
  WF_HEALTHY,
  WF_ISTIO,
  WF_WAYPOINT,
  type WireMembership,
  type WireRef,
  type WireService,
  type WireWorkload,
} from "./wire.js";

function waypointRef(r: WaypointRef): WireRef {
  return r.hostname !== undefined ? { hostname: r.hostname, port: r.port ?? HBONE_PORT } : { address: r.address ?? "", port: r.port ?? HBONE_PORT };
}

function gatewayRef(r: GatewayRef): WireRef {
  return r.hostname !== undefined ? { hostname: r.hostname, port: r.hboneMtlsPort ?? HBONE_PORT } : { address: r.address ?? "", port: r.hboneMtlsPort ?? HBONE_PORT };
}

/** A service membership as an endpoint entry gives it: overrides sorted by service port. */
export function membershipOf(service: number, endpoint: Pick<Endpoint, "ports">): WireMembership {
  const overrides: Array<[number, number]> = [];
  if (endpoint.ports) for (const [port, target] of Object.entries(endpoint.ports)) overrides.push([Number(port), target]);
  overrides.sort((a, b) => a[0] - b[0]);
  return { service, overrides };
}

export function wireWorkload(id: number, w: Workload, memberships: WireMembership[]): WireWorkload {
  let flags = 0;
  if (w.tlsMode === "istio") flags |= WF_ISTIO;
  if (w.healthy !== false) flags |= WF_HEALTHY;
  if (w.waypoint) flags |= WF_WAYPOINT;
  if (w.networkGateway) flags |= WF_GATEWAY;
  return {
    id,
    flags,
    network: w.network ?? "",
    identity: w.identity ?? "",
    locality: w.locality ?? "",
    ...(w.waypoint && { waypoint: waypointRef(w.waypoint) }),
    ...(w.networkGateway && { gateway: gatewayRef(w.networkGateway) }),
    addresses: w.addresses,
    memberships,
  };
}

export function wireService(id: number, s: Service): WireService {
  let flags = 0;
  if (s.headless) flags |= SF_HEADLESS;
  if (s.loadBalancing?.mode === "standard") flags |= SF_LB_STANDARD;
  if (s.waypoint) flags |= SF_WAYPOINT;
  if (s.cluster !== undefined) flags |= SF_CLUSTER;
  let lbPrefs = DEFAULT_LB_PREFS;
  const prefs = s.loadBalancing?.routingPreference;
  if (prefs) {
    lbPrefs = 0;
    prefs.forEach((scope, i) => {
      lbPrefs |= SCOPE[scope] << (8 * i);
    });
    lbPrefs >>>= 0;
  }
  const ports: Array<[number, number]> = Object.entries(s.ports ?? {}).map(([p, t]) => [Number(p), t]);
  ports.sort((a, b) => a[0] - b[0]);
  return {
    id,
    hostname: s.hostname,
    flags,
    ...(s.cluster !== undefined && { cluster: s.cluster }),
    lbPrefs,
    ports,
    vips: (s.vips ?? []).map((v) => ({ network: v.network ?? "", address: v.address })),
    ...(s.waypoint && { waypoint: waypointRef(s.waypoint) }),
    sans: s.subjectAltNames ?? [],
  };
}

// A service's computation (compute.ts): ports, VIPs, endpoints with per-endpoint target ports
// from its EndpointSlices, SANs, waypoint and load balancing, merged across clusters by hostname.
import { isIP } from "node:net";
import type { ClusterObjects } from "./cluster_objects.js";
import { GAP, type GapReason, type WorkloadInfo } from "./mesh_model.js";
import { canonicalIp } from "./ip.js";
import type { EndpointSlice, Service as KubeService } from "./kube_objects.js";
import {
  ANNOTATION_CANONICAL_SERVICE_ACCOUNTS,
  ANNOTATION_SERVICE_ACCOUNTS,
  numericTargetPort,
  serviceCannotHaveWaypoint,
  serviceHeadless,
  serviceLoadBalancing,
  sliceEndpointUid,
  spiffeIdentity,
  tcpPorts,
} from "./istio_rules.js";
import type { Endpoint, LoadBalancing, Service, Vip, WaypointRef, Workload } from "./schema.js";
import type { ClusterWaypoints } from "./waypoints.js";
import { sameNamespace } from "./compute_index.js";

/** What a service's computation reads from the computer: its gap counter, the trust domain, the workloads. */
export interface ServiceContext {
  gap(reason: GapReason): void;
  trustDomain: string;
  /** A computed workload by uid, including one held out of the model for its memberships (compute_caps.ts). */
  workload(uid: string): WorkloadInfo | undefined;
}

export interface PortSpec {
  name: string;
  port: number;
  /** undefined for a named targetPort (resolved per endpoint). */
  target: number | undefined;
}

export interface ServiceBuild {
  hostname: string;
  headless: boolean;
  ports: PortSpec[];
  vips: Vip[];
  waypoint?: WaypointRef;
  lb?: LoadBalancing;
  /** uid → service port → the endpoint's resolved target port (undefined: the slice lacks it). */
  endpoints: Map<string, Map<number, number | undefined>>;
  extraSans: string[];
}

export function portSpecs(svc: KubeService): PortSpec[] {
  return tcpPorts(svc).map((p) => ({ name: p.name ?? "", port: p.port as number, target: numericTargetPort(p) }));
}

export function newBuild(ctx: ServiceContext, c: ClusterObjects, svc: KubeService, hostname: string, waypoints: ClusterWaypoints): ServiceBuild {
  const nsAnnotations = c.namespaces.get(svc.metadata?.namespace ?? "")?.metadata?.annotations ?? {};
  const { lb, gap } = serviceLoadBalancing(svc, nsAnnotations);
  if (gap) ctx.gap(gap);
  if (svc.spec?.publishNotReadyAddresses) ctx.gap(GAP.publishNotReady);
  const annotations = svc.metadata?.annotations ?? {};
  const namespace = svc.metadata?.namespace ?? "";
  // Service accounts declared on the service (kube/conversion.go ConvertService).
  const extraSans = [
    ...(annotations[ANNOTATION_SERVICE_ACCOUNTS] ?? "").split(",").map((s) => s.trim()).filter(Boolean).map((sa) => spiffeIdentity(ctx.trustDomain, namespace, sa)),
    ...(annotations[ANNOTATION_CANONICAL_SERVICE_ACCOUNTS] ?? "").split(",").map((s) => s.trim()).filter(Boolean),
  ];
  return {
    hostname,
    headless: serviceHeadless(svc),
    ports: portSpecs(svc),
    vips: [],
    waypoint: serviceCannotHaveWaypoint(svc) ? undefined : waypoints.forService(svc),
    lb,
    endpoints: new Map(),
    extraSans,
  };
}

/**
 * One EndpointSlice of a service: each endpoint's workload (its Pod by targetRef, else a
 * workload of its own as endpointSlicesBuilder makes for selector-less services) and the
 * target port of each service port, resolved by port name from the slice (the EndpointSlice
 * controller has already resolved named target ports per pod; the sidecar registry reads
 * them the same way, endpointslice.go).
 */
export function addSlice(ctx: ServiceContext, c: ClusterObjects, slice: EndpointSlice, b: ServiceBuild, network: string, made: Map<string, WorkloadInfo>): void {
  if (slice.addressType !== "IPv4" && slice.addressType !== "IPv6") return; // FQDN: not supported by istiod
  const slicePorts = new Map<string, number>();
  for (const p of slice.ports ?? []) {
    if ((p.protocol ?? "TCP") !== "TCP" || typeof p.port !== "number") continue;
    slicePorts.set(p.name ?? "", p.port);
  }
  const namespace = slice.metadata?.namespace ?? "";
  for (const ep of slice.endpoints ?? []) {
    const addresses = (ep.addresses ?? []).filter((a) => isIP(a) !== 0);
    if (addresses.length === 0) continue;
    const ready = ep.conditions?.ready !== false;
    let uid: string;
    if (ep.targetRef?.kind === "Pod") {
      if (!sameNamespace(ep.targetRef.namespace, namespace)) {
        ctx.gap(GAP.crossNamespaceEndpoint);
        continue;
      }
      // The Pod must be a workload (istiod skips the endpoint otherwise); its health from the
      // slices is the pod's computation (readyInSlices).
      uid = `${c.clusterId}//Pod/${namespace}/${ep.targetRef.name ?? ""}`;
      if (!ctx.workload(uid)) continue;
    } else {
      const ip = canonicalIp(addresses[0]);
      uid = sliceEndpointUid(c.clusterId, namespace, slice.metadata?.name ?? "", ip);
      if (!made.has(uid)) {
        const workload: Workload = { uid, addresses: [ip], ...(network && { network }), ...(!ready && { healthy: false }) };
        made.set(uid, { workload, clusterId: c.clusterId, source: "endpoint", created: 0, deleting: false, reachableEverywhere: false });
      }
    }
    let targets = b.endpoints.get(uid);
    if (!targets) {
      targets = new Map();
      b.endpoints.set(uid, targets);
    }
    for (const p of b.ports) {
      const resolved = slicePorts.get(p.name) ?? p.target;
      if (resolved !== undefined || !targets.has(p.port)) targets.set(p.port, resolved);
    }
  }
}

/** Default target per port, per-endpoint overrides, SANs. */
export function finishService(ctx: ServiceContext, b: ServiceBuild, made: Map<string, WorkloadInfo>): Service {
  const ports: Record<string, number> = {};
  for (const p of b.ports) {
    let target = p.target;
    if (target === undefined) {
      // A named targetPort has no number of its own: the default is the target most of the
      // endpoints resolve it to (so few endpoints carry an override), else the port itself.
      const votes = new Map<number, number>();
      for (const targets of b.endpoints.values()) {
        const t = targets.get(p.port);
        if (t !== undefined) votes.set(t, (votes.get(t) ?? 0) + 1);
      }
      let best: [number, number] | undefined;
      for (const [t, n] of votes) if (!best || n > best[1] || (n === best[1] && t < best[0])) best = [t, n];
      target = best ? best[0] : p.port;
    }
    ports[String(p.port)] = target;
  }
  const endpoints: Endpoint[] = [];
  const sans = new Set<string>(b.extraSans);
  for (const uid of [...b.endpoints.keys()].sort()) {
    const targets = b.endpoints.get(uid)!;
    const overrides: Record<string, number> = {};
    let any = false;
    for (const p of b.ports) {
      const t = targets.get(p.port);
      if (t === undefined) {
        if (p.target === undefined) ctx.gap(GAP.missingTargetPort);
        continue;
      }
      if (t !== ports[String(p.port)]) {
        overrides[String(p.port)] = t;
        any = true;
      }
    }
    endpoints.push({ workload: uid, ...(any && { ports: overrides }) });
    const identity = (made.get(uid) ?? ctx.workload(uid))?.workload.identity;
    if (identity) sans.add(identity);
  }
  return {
    hostname: b.hostname,
    ...(b.vips.length > 0 && { vips: b.vips }),
    ...(b.ports.length > 0 && { ports }),
    ...(endpoints.length > 0 && { endpoints }),
    ...(b.waypoint && { waypoint: b.waypoint }),
    ...(sans.size > 0 && { subjectAltNames: [...sans].sort() }),
    ...(b.headless && { headless: true }),
    ...(b.lb && { loadBalancing: b.lb }),
  };
}

// Computes the mesh model from every cluster's objects, with istiod's semantics: one pass over
// the pods (workloads), one over the services and their EndpointSlices (services, endpoints,
// per-endpoint target ports), Gateways for waypoints and network gateways. The result is keyed
// by workload uid and service hostname (what a delta would be keyed by, issue 15); view.ts
// turns it into one network's split-horizon snapshot.
import { isIP } from "node:net";
import type { ClusterObjects } from "./cluster_objects.js";
import { canonicalIp } from "./ip.js";
import type { EndpointSlice, Pod, Service as KubeService } from "./kube_objects.js";
import { labelsOf } from "./kube_objects.js";
import {
  ANNOTATION_CANONICAL_SERVICE_ACCOUNTS,
  ANNOTATION_SERVICE_ACCOUNTS,
  CLASS_EAST_WEST,
  LABEL_GATEWAY_NAME,
  LABEL_NETWORK,
  LABEL_SERVICE_NAME,
  gatewayUid,
  numericTargetPort,
  podHealthy,
  podIps,
  podLocality,
  podNetwork,
  podTerminal,
  podUid,
  serviceCannotHaveWaypoint,
  serviceHeadless,
  serviceHostname,
  serviceLoadBalancing,
  serviceVips,
  sliceEndpointUid,
  spiffeIdentity,
  tcpPorts,
  tlsModeOf,
} from "./istio_rules.js";
import type { NetworkResolver } from "./mesh_networks.js";
import type { Endpoint, LoadBalancing, Service, Vip, WaypointRef, Workload } from "./schema.js";
import { ClusterWaypoints, gatewayRef, networkGatewaysOf, type NetworkGateway } from "./waypoints.js";

export interface MeshOptions {
  trustDomain: string;
  domainSuffix: string;
  /** The namespace whose topology.istio.io/network label names a cluster's network (istio-system). */
  systemNamespace: string;
  networks: NetworkResolver;
}

export interface WorkloadInfo {
  workload: Workload;
  clusterId: string;
  /** Milliseconds since the epoch (0 when unknown): a reused IP goes to the newer pod. */
  created: number;
  deleting: boolean;
  /** An east-west gateway's own pod, or a gateway workload: reachable from every network. */
  reachableEverywhere: boolean;
}

export interface ComputedMesh {
  workloads: Map<string, WorkloadInfo>;
  services: Map<string, Service>;
  /** The gateway of each network (the first valid one, as getNetworkGatewayAddress takes). */
  gateways: Map<string, NetworkGateway>;
  /** What the model cannot say, by reason, with how many objects it touched (README). */
  gaps: Map<string, number>;
}

interface PortSpec {
  name: string;
  port: number;
  /** undefined for a named targetPort (resolved per endpoint). */
  target: number | undefined;
}

interface ServiceBuild {
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

function time(t: Date | string | undefined): number {
  if (!t) return 0;
  const ms = t instanceof Date ? t.getTime() : Date.parse(t);
  return Number.isFinite(ms) ? ms : 0;
}

export class MeshComputer {
  private gaps = new Map<string, number>();

  constructor(private readonly options: MeshOptions) {}

  private gap(reason: string, n = 1): void {
    this.gaps.set(reason, (this.gaps.get(reason) ?? 0) + n);
  }

  /** The network a cluster's own objects (VIPs, slice endpoints) are on. */
  clusterNetwork(c: ClusterObjects): string {
    const ns = c.namespaces.get(this.options.systemNamespace);
    return labelsOf(ns)[LABEL_NETWORK] || this.options.networks.registryNetwork(c.clusterId);
  }

  compute(clusters: ClusterObjects[]): ComputedMesh {
    this.gaps = new Map();
    const sorted = [...clusters].sort((a, b) => a.clusterId.localeCompare(b.clusterId));
    const workloads = new Map<string, WorkloadInfo>();
    const builds = new Map<string, ServiceBuild>();
    const gateways = this.networkGateways(sorted);
    for (const g of gateways.values()) this.addGatewayWorkload(g, workloads);
    for (const c of sorted) {
      const waypoints = new ClusterWaypoints(c);
      this.addPodWorkloads(c, waypoints, workloads);
      this.addServices(c, waypoints, workloads, builds);
    }
    const services = new Map<string, Service>();
    for (const b of [...builds.values()].sort((a, b) => a.hostname.localeCompare(b.hostname))) {
      services.set(b.hostname, this.finishService(b, workloads));
    }
    return { workloads, services, gateways, gaps: this.gaps };
  }

  // ------------------------------------------------------------------ gateways

  private networkGateways(clusters: ClusterObjects[]): Map<string, NetworkGateway> {
    const all: NetworkGateway[] = [];
    for (const c of clusters) for (const gw of c.gateways.values()) all.push(...networkGatewaysOf(c.clusterId, gw));
    // getNetworkGatewayAddress takes the first valid gateway of a network; sorted for a stable pick.
    all.sort((a, b) => a.network.localeCompare(b.network) || a.clusterId.localeCompare(b.clusterId) || a.source.localeCompare(b.source) || a.address.localeCompare(b.address));
    const first = new Map<string, NetworkGateway>();
    for (const g of all) if (!first.has(g.network)) first.set(g.network, g);
    return first;
  }

  /** convertGateway: a gateway with an IP is a workload the gateway reference resolves to. */
  private addGatewayWorkload(g: NetworkGateway, workloads: Map<string, WorkloadInfo>): void {
    if (isIP(g.address) === 0) return; // a hostname names the gateway's Service instead
    const uid = gatewayUid(g.network, g.address, g.port);
    const workload: Workload = {
      uid,
      addresses: [canonicalIp(g.address)],
      ...(g.network && { network: g.network }),
      identity: spiffeIdentity(this.options.trustDomain, g.serviceAccount.namespace, g.serviceAccount.name),
      tlsMode: "istio",
    };
    workloads.set(uid, { workload, clusterId: g.clusterId, created: 0, deleting: false, reachableEverywhere: true });
  }

  // ------------------------------------------------------------------ workloads

  private addPodWorkloads(c: ClusterObjects, waypoints: ClusterWaypoints, workloads: Map<string, WorkloadInfo>): void {
    const systemNetwork = labelsOf(c.namespaces.get(this.options.systemNamespace))[LABEL_NETWORK] ?? "";
    const registryNetwork = this.options.networks.registryNetwork(c.clusterId);
    const eastWest = new Set<string>();
    for (const [key, gw] of c.gateways) if (gw.spec?.gatewayClassName === CLASS_EAST_WEST) eastWest.add(key);
    for (const pod of c.pods.values()) {
      const w = this.podWorkload(c, pod, waypoints, systemNetwork, registryNetwork);
      if (!w) continue;
      const instanceOf = labelsOf(pod)[LABEL_GATEWAY_NAME];
      workloads.set(w.uid, {
        workload: w,
        clusterId: c.clusterId,
        created: time(pod.metadata?.creationTimestamp),
        deleting: !!pod.metadata?.deletionTimestamp,
        reachableEverywhere: !!instanceOf && eastWest.has(`${pod.metadata?.namespace ?? ""}/${instanceOf}`),
      });
    }
  }

  /** podWorkloadBuilder (ambient/workloads.go) reduced to the model's fields. */
  private podWorkload(c: ClusterObjects, pod: Pod, waypoints: ClusterWaypoints, systemNetwork: string, registryNetwork: string): Workload | undefined {
    if (podTerminal(pod)) return undefined;
    const raw = podIps(pod);
    if (raw.length === 0) return undefined;
    if (raw.some((ip) => isIP(ip) === 0)) {
      this.gap("pod with an unparsable IP (skipped, as istiod does)");
      return undefined;
    }
    if (pod.spec?.hostNetwork) {
      // The node's IP is shared by every host-network pod: not an address of this pod alone.
      this.gap("host-network pod (NetworkMode HOST_NETWORK: no per-pod address)");
      return undefined;
    }
    const labels = labelsOf(pod);
    const namespace = pod.metadata?.namespace ?? "";
    const addresses = [...new Set(raw.map(canonicalIp))];
    const network = podNetwork(labels, systemNetwork, registryNetwork, () => this.options.networks.cidrNetwork(addresses[0]));
    const tlsMode = tlsModeOf(labels);
    const locality = podLocality(pod, c.nodes.get(pod.spec?.nodeName ?? ""));
    const waypoint = waypoints.forWorkload(pod);
    return {
      uid: podUid(c.clusterId, pod),
      addresses,
      ...(network && { network }),
      identity: spiffeIdentity(this.options.trustDomain, namespace, pod.spec?.serviceAccountName),
      ...(tlsMode === "istio" && { tlsMode }),
      ...(!podHealthy(pod) && { healthy: false }),
      ...(locality && { locality }),
      ...(waypoint && { waypoint }),
    };
  }

  // ------------------------------------------------------------------ services

  private addServices(c: ClusterObjects, waypoints: ClusterWaypoints, workloads: Map<string, WorkloadInfo>, builds: Map<string, ServiceBuild>): void {
    const network = this.clusterNetwork(c);
    const slicesByService = new Map<string, EndpointSlice[]>();
    for (const slice of c.endpointSlices.values()) {
      const name = labelsOf(slice)[LABEL_SERVICE_NAME];
      if (!name) continue;
      const key = `${slice.metadata?.namespace ?? ""}/${name}`;
      const list = slicesByService.get(key);
      if (list) list.push(slice);
      else slicesByService.set(key, [slice]);
    }
    for (const [key, svc] of c.services) {
      if (svc.spec?.type === "ExternalName") {
        this.gap("ExternalName service (not implemented by istiod's ambient index either)");
        continue;
      }
      const hostname = serviceHostname(svc, this.options.domainSuffix);
      let b = builds.get(hostname);
      if (!b) {
        b = this.newBuild(c, svc, hostname, waypoints);
        builds.set(hostname, b);
      } else {
        // Same namespace/name in another cluster: one service (istiod merges by hostname); the
        // first cluster's ports come first, new ports are added.
        for (const p of this.portSpecs(svc)) if (!b.ports.some((q) => q.port === p.port)) b.ports.push(p);
        if (!b.waypoint) b.waypoint = serviceCannotHaveWaypoint(svc) ? undefined : waypoints.forService(svc);
      }
      for (const ip of serviceVips(svc)) {
        if (isIP(ip) === 0) continue;
        b.vips.push({ ...(network && { network }), address: canonicalIp(ip) });
      }
      for (const slice of slicesByService.get(key) ?? []) this.addSlice(c, svc, slice, b, network, workloads);
    }
  }

  private portSpecs(svc: KubeService): PortSpec[] {
    return tcpPorts(svc).map((p) => ({ name: p.name ?? "", port: p.port as number, target: numericTargetPort(p) }));
  }

  private newBuild(c: ClusterObjects, svc: KubeService, hostname: string, waypoints: ClusterWaypoints): ServiceBuild {
    const nsAnnotations = c.namespaces.get(svc.metadata?.namespace ?? "")?.metadata?.annotations ?? {};
    const { lb, gap } = serviceLoadBalancing(svc, nsAnnotations);
    if (gap) this.gap(gap);
    if (svc.spec?.publishNotReadyAddresses) this.gap("publishNotReadyAddresses (HealthPolicy ALLOW_ALL)");
    const annotations = svc.metadata?.annotations ?? {};
    const namespace = svc.metadata?.namespace ?? "";
    // Service accounts declared on the service (kube/conversion.go ConvertService).
    const extraSans = [
      ...(annotations[ANNOTATION_SERVICE_ACCOUNTS] ?? "").split(",").map((s) => s.trim()).filter(Boolean).map((sa) => spiffeIdentity(this.options.trustDomain, namespace, sa)),
      ...(annotations[ANNOTATION_CANONICAL_SERVICE_ACCOUNTS] ?? "").split(",").map((s) => s.trim()).filter(Boolean),
    ];
    return {
      hostname,
      headless: serviceHeadless(svc),
      ports: this.portSpecs(svc),
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
  private addSlice(c: ClusterObjects, svc: KubeService, slice: EndpointSlice, b: ServiceBuild, network: string, workloads: Map<string, WorkloadInfo>): void {
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
        const pod = c.pods.get(`${ep.targetRef.namespace ?? namespace}/${ep.targetRef.name ?? ""}`);
        const info = pod ? workloads.get(podUid(c.clusterId, pod)) : undefined;
        if (!info) continue; // the Pod is not (or not yet) a workload: istiod skips it too
        uid = info.workload.uid;
        // The model keeps one health per workload: not ready in any slice is unhealthy.
        if (!ready) info.workload.healthy = false;
      } else {
        const ip = canonicalIp(addresses[0]);
        uid = sliceEndpointUid(c.clusterId, namespace, slice.metadata?.name ?? "", ip);
        if (!workloads.has(uid)) {
          const workload: Workload = { uid, addresses: [ip], ...(network && { network }), ...(!ready && { healthy: false }) };
          workloads.set(uid, { workload, clusterId: c.clusterId, created: 0, deleting: false, reachableEverywhere: false });
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
    void svc;
  }

  /** Default target per port, per-endpoint overrides, SANs. */
  private finishService(b: ServiceBuild, workloads: Map<string, WorkloadInfo>): Service {
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
          if (p.target === undefined) this.gap("endpoint without the service's named target port (istiod drops that port for it)");
          continue;
        }
        if (t !== ports[String(p.port)]) {
          overrides[String(p.port)] = t;
          any = true;
        }
      }
      endpoints.push({ workload: uid, ...(any && { ports: overrides }) });
      const identity = workloads.get(uid)?.workload.identity;
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
}

export { gatewayRef };

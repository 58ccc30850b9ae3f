// Computes the mesh model from every cluster's objects, with istiod's semantics: one pass over
// the pods (workloads), one over the services and their EndpointSlices (services, endpoints,
// per-endpoint target ports), Gateways for waypoints and network gateways. The result is keyed
// by workload uid and service hostname (what each delta record is keyed by); view.ts
// turns it into one network's split-horizon snapshot.
import { isIP } from "node:net";
import type { ClusterObjects } from "./cluster_objects.js";
import { canonicalIp } from "./ip.js";
import type { Pod } from "./kube_objects.js";
import { labelsOf } from "./kube_objects.js";
import {
  CLASS_EAST_WEST,
  LABEL_GATEWAY_NAME,
  LABEL_NETWORK,
  gatewayUid,
  podHealthy,
  podIps,
  podLocality,
  podNetwork,
  podTerminal,
  podUid,
  serviceCannotHaveWaypoint,
  serviceVips,
  spiffeIdentity,
  tlsModeOf,
} from "./istio_rules.js";
import type { NetworkResolver } from "./mesh_networks.js";
import { GAP, type CappedObject, type ComputedMesh, type GapReason, type MeshChanges, type WorkloadInfo } from "./mesh_model.js";
import type { Service, Workload } from "./schema.js";
import { MembershipIndex } from "./memberships.js";
import { ClusterWaypoints, gatewayRef, networkGatewaysOf, type NetworkGateway } from "./waypoints.js";
import { addSlice, finishService, newBuild, portSpecs, type ServiceBuild, type ServiceContext } from "./compute_service.js";
import { DEFAULT_CAPS, serviceTextOver, workloadTextOver, type FeedCaps } from "./compute_caps.js";
import { addTo, membersOf, namespaceSignature, nodeSignature, removeFrom, sliceIndexOf, type ClusterState, type SliceIndex } from "./compute_index.js";

export interface MeshOptions {
  trustDomain: string;
  domainSuffix: string;
  /** The namespace whose topology.istio.io/network label names a cluster's network (istio-system). */
  systemNamespace: string;
  networks: NetworkResolver;
  /** What one object may forward (compute_caps.ts); DEFAULT_CAPS when absent. */
  caps?: FeedCaps;
}

const EMPTY_GAPS: ReadonlyMap<GapReason, number> = new Map();
const IDENTITIES_KEPT = 65_536;

function time(t: Date | string | undefined): number {
  if (!t) return 0;
  const ms = t instanceof Date ? t.getTime() : Date.parse(t);
  return Number.isFinite(ms) ? ms : 0;
}

/**
 * Computes the mesh model and keeps it: `compute` from scratch, `update` for what changed
 * since (the clusters' dirty keys). An update recomputes only the objects a change touches:
 * a pod → its workload and the services whose slices name it; an EndpointSlice → its service
 * (before and after) and the pods it names (health); a Service → that service and its slices'
 * pods; a node's locality labels → the pods on it. Gateways, gateway classes, namespace label
 * or annotation changes and relists recompute everything (they move waypoints, networks and
 * gateways of many objects at once; they are rare). Both paths run the same per-object code,
 * so an update gives what a compute from scratch would (tests/feed/incremental.test.ts).
 */
export class MeshComputer {
  private mesh: ComputedMesh = emptyMesh();
  private clusterStates: ClusterState[] = [];
  private readonly objectGaps = new Map<string, Map<GapReason, number>>();
  private gapSink: Map<GapReason, number> | undefined;
  /** hostname → the uids of the workloads its selector-less slice endpoints made. */
  private readonly sliceWorkloads = new Map<string, string[]>();
  /**
   * Workloads held out of the model for passing the memberships cap: still computed, so that
   * the services keep counting them and they come back once under the cap.
   */
  private readonly membershipHeld = new Map<string, WorkloadInfo>();
  private readonly caps: FeedCaps;
  /**
   * One string per identity, shared by its pods (every pod of a service account has the same
   * one: at 100k pods a string each is ~6 MB). Cleared when it passes IDENTITIES_KEPT, so
   * identities gone from the mesh cannot grow it without bound.
   */
  private readonly identities = new Map<string, string>();

  constructor(private readonly options: MeshOptions) {
    this.caps = options.caps ?? DEFAULT_CAPS;
  }

  private sharedIdentity(identity: string): string {
    const kept = this.identities.get(identity);
    if (kept !== undefined) return kept;
    if (this.identities.size >= IDENTITIES_KEPT) this.identities.clear();
    this.identities.set(identity, identity);
    return identity;
  }

  get current(): ComputedMesh {
    return this.mesh;
  }

  private gap(reason: GapReason, n = 1): void {
    // Created on the first gap: most objects have none.
    const sink = (this.gapSink ??= new Map());
    sink.set(reason, (sink.get(reason) ?? 0) + n);
  }

  /** Runs `fn` with its gaps attributed to `key` (replacing what that object reported before). */
  private withGaps<T>(key: string, fn: () => T): T {
    this.gapSink = undefined;
    try {
      return fn();
    } finally {
      const sink = this.gapSink ?? EMPTY_GAPS;
      this.gapSink = undefined;
      const totals = this.mesh.gaps;
      const old = this.objectGaps.get(key);
      if (old) for (const [reason, n] of old) {
        const left = (totals.get(reason) ?? 0) - n;
        if (left > 0) totals.set(reason, left);
        else totals.delete(reason);
      }
      if (sink.size > 0) {
        this.objectGaps.set(key, sink as Map<GapReason, number>);
        for (const [reason, n] of sink) totals.set(reason, (totals.get(reason) ?? 0) + n);
      } else this.objectGaps.delete(key);
    }
  }

  /** The network a cluster's own objects (VIPs, slice endpoints) are on. */
  clusterNetwork(c: ClusterObjects): string {
    const ns = c.namespaces.get(this.options.systemNamespace);
    return labelsOf(ns)[LABEL_NETWORK] || this.options.networks.registryNetwork(c.clusterId);
  }

  private hostnameOf(serviceKey: string): string {
    const slash = serviceKey.indexOf("/");
    return `${serviceKey.slice(slash + 1)}.${serviceKey.slice(0, slash)}.svc.${this.options.domainSuffix}`;
  }

  // ------------------------------------------------------------------ from scratch

  compute(clusters: ClusterObjects[]): ComputedMesh {
    this.computeAll(clusters);
    return this.mesh;
  }

  private computeAll(clusters: ClusterObjects[]): MeshChanges {
    const before = this.mesh;
    const changes: MeshChanges = { full: true, workloads: new Set(before.workloads.keys()), services: new Set(before.services.keys()) };
    for (const c of clusters) c.takeDirty();
    this.mesh = emptyMesh();
    this.objectGaps.clear();
    this.sliceWorkloads.clear();
    this.membershipHeld.clear();
    const sorted = [...clusters].sort((a, b) => a.clusterId.localeCompare(b.clusterId));
    this.withGaps("gateways", () => {
      this.mesh.gateways = this.networkGateways(sorted);
      for (const g of this.mesh.gateways.values()) this.addGatewayWorkload(g, this.mesh.workloads);
    });
    this.clusterStates = sorted.map((c) => this.clusterState(c));
    for (const st of this.clusterStates) for (const key of st.c.pods.keys()) this.computePod(st, key);
    const serviceKeys = new Set<string>();
    for (const st of this.clusterStates) for (const key of st.c.services.keys()) serviceKeys.add(key);
    this.computeServices([...serviceKeys].sort((a, b) => this.hostnameOf(a).localeCompare(this.hostnameOf(b))), changes);
    for (const uid of this.mesh.workloads.keys()) changes.workloads.add(uid);
    for (const uid of this.mesh.memberships.uids()) changes.workloads.add(uid);
    for (const h of this.mesh.services.keys()) changes.services.add(h);
    this.capMemberships(changes.workloads);
    return changes;
  }

  private clusterState(c: ClusterObjects): ClusterState {
    const eastWest = new Set<string>();
    for (const [key, gw] of c.gateways) if (gw.spec?.gatewayClassName === CLASS_EAST_WEST) eastWest.add(key);
    const st: ClusterState = {
      c,
      waypoints: new ClusterWaypoints(c),
      systemNetwork: labelsOf(c.namespaces.get(this.options.systemNamespace))[LABEL_NETWORK] ?? "",
      registryNetwork: this.options.networks.registryNetwork(c.clusterId),
      network: this.clusterNetwork(c),
      eastWest,
      slices: new Map(),
      podSlices: new Map(),
      serviceSlices: new Map(),
      nodePods: new Map(),
      podNode: new Map(),
      nodeSignatures: new Map(),
      namespaceSignatures: new Map(),
    };
    for (const key of c.endpointSlices.keys()) this.reindexSlice(st, key);
    for (const [key, node] of c.nodes) st.nodeSignatures.set(key, nodeSignature(node));
    for (const [key, ns] of c.namespaces) st.namespaceSignatures.set(key, namespaceSignature(ns));
    return st;
  }

  /** Re-reads a slice into the indexes; returns what it named before and now. */
  private reindexSlice(st: ClusterState, key: string): { before?: SliceIndex; after?: SliceIndex } {
    const before = st.slices.get(key);
    if (before) {
      if (before.service) removeFrom(st.serviceSlices, before.service, key);
      for (const p of before.pods) removeFrom(st.podSlices, p, key);
    }
    const after = sliceIndexOf(st.c.endpointSlices.get(key));
    if (after) {
      st.slices.set(key, after);
      if (after.service) addTo(st.serviceSlices, after.service, key);
      for (const p of after.pods) addTo(st.podSlices, p, key);
    } else st.slices.delete(key);
    return { before, after };
  }

  // ------------------------------------------------------------------ incremental

  /**
   * Forgets what the incremental path knows, so the next update recomputes everything (after
   * an update failed halfway, its dirty keys are gone and the indexes may be half-updated).
   */
  invalidate(): void {
    this.clusterStates = [];
  }

  /** Brings the mesh up to date with what changed in `clusters` since the last call. */
  update(clusters: ClusterObjects[]): { mesh: ComputedMesh; changes: MeshChanges } {
    const sameClusters = clusters.length === this.clusterStates.length && clusters.every((c) => this.clusterStates.some((st) => st.c === c));
    if (!sameClusters) {
      const changes = this.computeAll(clusters);
      return { mesh: this.mesh, changes };
    }
    const dirty = this.clusterStates.map((st) => ({ st, d: st.c.takeDirty() }));
    const wholesale = dirty.some(({ st, d }) => {
      if (d.all || (d.keys.get("gateways")?.size ?? 0) > 0 || (d.keys.get("gatewayClasses")?.size ?? 0) > 0) return true;
      for (const key of d.keys.get("namespaces") ?? []) if (namespaceSignature(st.c.namespaces.get(key)) !== (st.namespaceSignatures.get(key) ?? "")) return true;
      return false;
    });
    if (wholesale) {
      const changes = this.computeAll(clusters);
      return { mesh: this.mesh, changes };
    }
    const changes: MeshChanges = { full: false, workloads: new Set(), services: new Set() };
    const services = new Set<string>();
    const podsOf = new Map<ClusterState, Set<string>>();
    for (const { st, d } of dirty) {
      const pods = new Set<string>();
      podsOf.set(st, pods);
      for (const key of d.keys.get("nodes") ?? []) {
        const sig = nodeSignature(st.c.nodes.get(key));
        if (sig === (st.nodeSignatures.get(key) ?? "")) continue;
        if (sig) st.nodeSignatures.set(key, sig);
        else st.nodeSignatures.delete(key);
        for (const p of membersOf(st.nodePods, key)) pods.add(p);
      }
      for (const key of d.keys.get("endpointSlices") ?? []) {
        const { before, after } = this.reindexSlice(st, key);
        for (const s of [before, after]) {
          if (!s) continue;
          if (s.service) services.add(s.service);
          for (const p of s.pods) pods.add(p);
        }
      }
      for (const key of d.keys.get("services") ?? []) {
        services.add(key);
        // Whether a slice's "not ready" counts depends on its service existing.
        for (const slice of membersOf(st.serviceSlices, key)) for (const p of st.slices.get(slice)?.pods ?? []) pods.add(p);
      }
      for (const key of d.keys.get("pods") ?? []) {
        pods.add(key);
        for (const slice of membersOf(st.podSlices, key)) {
          const s = st.slices.get(slice)?.service;
          if (s) services.add(s);
        }
      }
    }
    for (const [st, pods] of podsOf) for (const key of pods) changes.workloads.add(this.computePod(st, key));
    this.computeServices([...services], changes);
    this.capMemberships(changes.workloads);
    return { mesh: this.mesh, changes };
  }

  // ------------------------------------------------------------------ per object

  /** Recomputes one pod's workload; returns its uid. */
  private computePod(st: ClusterState, key: string): string {
    const c = st.c;
    const uid = `${c.clusterId}//Pod/${key}`;
    const pod = c.pods.get(key);
    const oldNode = st.podNode.get(key);
    const node = pod?.spec?.nodeName ?? "";
    if (oldNode !== undefined && oldNode !== node) removeFrom(st.nodePods, oldNode, key);
    if (pod && node) {
      st.podNode.set(key, node);
      addTo(st.nodePods, node, key);
    } else st.podNode.delete(key);
    const w = this.withGaps(`pod ${uid}`, () => (pod ? this.podWorkload(c, uid, pod, st.waypoints, st.systemNetwork, st.registryNetwork) : undefined));
    // Decided afresh: the memberships cap again after the services (capMemberships).
    this.membershipHeld.delete(uid);
    this.mesh.capped.delete(uid);
    const overText = w && workloadTextOver(w, this.caps.maxTextBytes);
    if (overText) this.mesh.capped.set(uid, { kind: "workload", reason: "text", detail: overText });
    if (!pod || !w || overText) {
      this.mesh.workloads.delete(uid);
      return uid;
    }
    // The model keeps one health per workload: not ready in any slice is unhealthy.
    if (!this.readyInSlices(st, key)) w.healthy = false;
    const instanceOf = labelsOf(pod)[LABEL_GATEWAY_NAME];
    this.mesh.workloads.set(uid, {
      workload: w,
      clusterId: c.clusterId,
      source: "pod",
      created: time(pod.metadata?.creationTimestamp),
      deleting: !!pod.metadata?.deletionTimestamp,
      reachableEverywhere: !!instanceOf && st.eastWest.has(`${pod.metadata?.namespace ?? ""}/${instanceOf}`),
    });
    return uid;
  }

  /** False when a slice of an existing (not ExternalName) service says the pod is not ready. */
  private readyInSlices(st: ClusterState, podKey: string): boolean {
    for (const sliceKey of membersOf(st.podSlices, podKey)) {
      const index = st.slices.get(sliceKey);
      if (!index?.service || !index.notReady?.has(podKey)) continue;
      const svc = st.c.services.get(index.service);
      if (svc && svc.spec?.type !== "ExternalName") return false;
    }
    return true;
  }

  /**
   * Recomputes the services of these keys (namespace/name, merged across clusters by
   * hostname), the workloads their selector-less endpoints make, and the memberships.
   */
  private computeServices(keys: string[], changes: MeshChanges): void {
    const workloads = this.mesh.workloads;
    const held = this.membershipHeld;
    const ctx: ServiceContext = { gap: (reason) => this.gap(reason), trustDomain: this.options.trustDomain, workload: (uid) => workloads.get(uid) ?? held.get(uid) };
    const results: Array<{ hostname: string; service?: Service; made: Map<string, WorkloadInfo> }> = [];
    for (const key of keys) {
      const hostname = this.hostnameOf(key);
      const made = new Map<string, WorkloadInfo>();
      const service = this.withGaps(`service ${hostname}`, () => {
        let b: ServiceBuild | undefined;
        for (const st of this.clusterStates) {
          const svc = st.c.services.get(key);
          if (!svc) continue;
          if (svc.spec?.type === "ExternalName") {
            this.gap(GAP.externalName);
            continue;
          }
          if (!b) b = newBuild(ctx, st.c, svc, hostname, st.waypoints);
          else {
            // Same namespace/name in another cluster: one service (istiod merges by hostname); the
            // first cluster's ports come first, new ports are added.
            for (const p of portSpecs(svc)) if (!b.ports.some((q) => q.port === p.port)) b.ports.push(p);
            if (!b.waypoint) b.waypoint = serviceCannotHaveWaypoint(svc) ? undefined : st.waypoints.forService(svc);
          }
          for (const ip of serviceVips(svc)) {
            if (isIP(ip) === 0) continue;
            // Two clusters on one network may give the same Service the same ClusterIP (every
            // cluster's kubernetes Service is the first address of its, often default, range):
            // one VIP, as the filters refuse a service listing one twice.
            const vip = { ...(st.network && { network: st.network }), address: canonicalIp(ip) };
            if (!b.vips.some((v) => v.address === vip.address && (v.network ?? "") === (vip.network ?? ""))) b.vips.push(vip);
          }
          for (const sliceKey of membersOf(st.serviceSlices, key)) {
            const slice = st.c.endpointSlices.get(sliceKey);
            if (slice) addSlice(ctx, st.c, slice, b, st.network, made);
          }
        }
        this.mesh.capped.delete(hostname);
        if (!b) return undefined;
        const capped = this.capService(b, made);
        if (capped) {
          this.mesh.capped.set(hostname, capped);
          made.clear();
          return undefined;
        }
        const service = finishService(ctx, b, made);
        const overText = serviceTextOver(service, this.caps.maxTextBytes);
        if (overText) {
          this.mesh.capped.set(hostname, { kind: "service", reason: "text", detail: overText });
          made.clear();
          return undefined;
        }
        return service;
      });
      results.push({ hostname, service, made });
    }
    // Selector-less endpoint workloads: drop the ones no longer made, then set the new ones.
    const madeNow = new Set<string>();
    for (const r of results) for (const uid of r.made.keys()) madeNow.add(uid);
    for (const r of results) {
      for (const uid of this.sliceWorkloads.get(r.hostname) ?? []) {
        changes.workloads.add(uid);
        if (!madeNow.has(uid)) this.mesh.workloads.delete(uid);
      }
      for (const [uid, info] of r.made) {
        this.mesh.workloads.set(uid, info);
        changes.workloads.add(uid);
      }
      if (r.made.size > 0) this.sliceWorkloads.set(r.hostname, [...r.made.keys()]);
      else this.sliceWorkloads.delete(r.hostname);
    }
    for (const { hostname, service } of results) {
      const before = this.mesh.services.get(hostname);
      const oldMembers = new Map<string, string>();
      for (const e of before?.endpoints ?? []) oldMembers.set(e.workload, e.ports ? JSON.stringify(e.ports) : "");
      const newMembers = new Set<string>();
      for (const e of service?.endpoints ?? []) {
        newMembers.add(e.workload);
        const was = oldMembers.get(e.workload);
        if (was === (e.ports ? JSON.stringify(e.ports) : "")) continue;
        this.mesh.memberships.set(e.workload, hostname, e.ports);
        changes.workloads.add(e.workload);
      }
      for (const uid of oldMembers.keys()) {
        if (newMembers.has(uid)) continue;
        this.mesh.memberships.delete(uid, hostname);
        changes.workloads.add(uid);
      }
      if (service) this.mesh.services.set(hostname, service);
      else this.mesh.services.delete(hostname);
      changes.services.add(hostname);
    }
  }

  // ------------------------------------------------------------------ caps

  /** The ports cap of a service (after the merge across clusters), or undefined. */
  private capService(b: ServiceBuild, made: Map<string, WorkloadInfo>): CappedObject | undefined {
    if (b.ports.length > this.caps.maxPortsPerService) return { kind: "service", reason: "ports", detail: `${b.ports.length} TCP ports (cap ${this.caps.maxPortsPerService})` };
    for (const info of made.values()) {
      const over = workloadTextOver(info.workload, this.caps.maxTextBytes);
      if (over) return { kind: "service", reason: "text", detail: `endpoint ${info.workload.uid.slice(0, 200)}: ${over}` };
    }
    return undefined;
  }

  /**
   * The memberships cap, for the workloads whose memberships may have moved: one over it is
   * held out of the model (its services keep counting it), one back under it returns.
   */
  private capMemberships(uids: Iterable<string>): void {
    const max = this.caps.maxMembershipsPerWorkload;
    for (const uid of uids) {
      const n = this.mesh.memberships.count(uid);
      const held = this.membershipHeld.get(uid);
      const info = this.mesh.workloads.get(uid) ?? held;
      if (!info || n <= max) {
        this.membershipHeld.delete(uid);
        if (this.mesh.capped.get(uid)?.reason === "memberships") this.mesh.capped.delete(uid);
        if (info && held) this.mesh.workloads.set(uid, info);
        continue;
      }
      this.mesh.workloads.delete(uid);
      this.membershipHeld.set(uid, info);
      this.mesh.capped.set(uid, { kind: "workload", reason: "memberships", detail: `endpoint of ${n} services (cap ${max})` });
    }
  }

  // ------------------------------------------------------------------ gateways

  private networkGateways(clusters: ClusterObjects[]): Map<string, NetworkGateway> {
    const all: NetworkGateway[] = [];
    for (const c of clusters) for (const gw of c.gateways.values()) all.push(...networkGatewaysOf(c.clusterId, gw));
    // getNetworkGatewayAddress takes the first valid gateway of a network; sorted for a stable pick.
    // A gateway of the system namespace first: istiod takes any one, and any namespace may
    // declare one (its identity is that namespace's); the operator's own is the one to prefer.
    const system = (g: NetworkGateway) => (g.source.startsWith(`${this.options.systemNamespace}/`) ? 0 : 1);
    all.sort((a, b) => a.network.localeCompare(b.network) || system(a) - system(b) || a.clusterId.localeCompare(b.clusterId) || a.source.localeCompare(b.source) || a.address.localeCompare(b.address));
    const first = new Map<string, NetworkGateway>();
    for (const g of all) {
      if (first.has(g.network)) continue;
      const key = gatewayUid(g.network, g.address, g.port);
      const texts: Workload = { uid: key, addresses: [], network: g.network, identity: spiffeIdentity(this.options.trustDomain, g.serviceAccount.namespace, g.serviceAccount.name), waypoint: { hostname: g.address } };
      const overText = workloadTextOver(texts, this.caps.maxTextBytes);
      if (overText) {
        this.mesh.capped.set(key, { kind: "gateway", reason: "text", detail: overText });
        continue;
      }
      first.set(g.network, g);
    }
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
    workloads.set(uid, { workload, clusterId: g.clusterId, source: "gateway", created: 0, deleting: false, reachableEverywhere: true });
  }

  // ------------------------------------------------------------------ workloads

  /** podWorkloadBuilder (ambient/workloads.go) reduced to the model's fields. */
  private podWorkload(c: ClusterObjects, key: string, pod: Pod, waypoints: ClusterWaypoints, systemNetwork: string, registryNetwork: string): Workload | undefined {
    if (podTerminal(pod)) return undefined;
    const raw = podIps(pod);
    if (raw.length === 0) return undefined;
    if (raw.some((ip) => isIP(ip) === 0)) {
      this.gap(GAP.unparsableIp);
      return undefined;
    }
    if (pod.spec?.hostNetwork) {
      // The node's IP is shared by every host-network pod: not an address of this pod alone.
      this.gap(GAP.hostNetwork);
      return undefined;
    }
    const labels = labelsOf(pod);
    const namespace = pod.metadata?.namespace ?? "";
    // Sized exactly (a spread of a Set leaves spare capacity, once per pod).
    const addresses = raw.length === 1 ? [canonicalIp(raw[0])] : Array.from(new Set(raw.map(canonicalIp)));
    const network = podNetwork(systemNetwork, registryNetwork, () => this.options.networks.cidrNetwork(addresses[0]));
    const labelled = labels[LABEL_NETWORK];
    if (labelled !== undefined && labelled !== network) this.gap(GAP.foreignNetworkLabel);
    const tlsMode = tlsModeOf(labels);
    const locality = podLocality(pod, c.nodes.get(pod.spec?.nodeName ?? ""));
    const waypoint = waypoints.forWorkload(pod);
    // The map key when it is the same text: one string per pod instead of two.
    const uid = podUid(c.clusterId, pod);
    return {
      uid: uid === key ? key : uid,
      addresses,
      ...(network && { network }),
      identity: this.sharedIdentity(spiffeIdentity(this.options.trustDomain, namespace, pod.spec?.serviceAccountName)),
      ...(tlsMode === "istio" && { tlsMode }),
      ...(!podHealthy(pod) && { healthy: false }),
      ...(locality && { locality }),
      ...(waypoint && { waypoint }),
    };
  }
}

function emptyMesh(): ComputedMesh {
  return { workloads: new Map(), services: new Map(), gateways: new Map(), gaps: new Map(), memberships: new MembershipIndex(), capped: new Map() };
}

export { gatewayRef };

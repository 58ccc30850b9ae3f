// The computed mesh's shapes, shared by the computation (compute.ts, compute_service.ts) and
// its readers (view.ts, delta/): the workloads by uid and the services by hostname, with what
// each view needs to pick owners and gateways. Types only, so every side can import it.
import type { Service, Workload } from "./schema.js";
import type { NetworkGateway } from "./waypoints.js";

/** A workload and what the views decide with: its cluster, its age, whether it is going away. */
export interface WorkloadInfo {
  workload: Workload;
  clusterId: string;
  /** Where it comes from: a Pod keeps an address over an endpoint without a Pod or a gateway. */
  source: "pod" | "endpoint" | "gateway";
  /** Milliseconds since the epoch (0 when unknown): of two live pods claiming one address, the older keeps it. */
  created: number;
  deleting: boolean;
  /** An east-west gateway's own pod, or a gateway workload: reachable from every network. */
  reachableEverywhere: boolean;
}

import type { MembershipIndex } from "./memberships.js";

export type { Membership } from "./memberships.js";

export type CapKind = "workload" | "service" | "gateway";
export type CapReason = "ports" | "memberships" | "text";

/** An object left out of the model (compute_caps.ts), and why (one log line, one metric label pair). */
export interface CappedObject {
  kind: CapKind;
  reason: CapReason;
  /** What was over the cap, e.g. `20000 TCP ports (cap 1024)`. */
  detail: string;
}

export { GAP, type GapReason } from "./gaps.js";

export interface ComputedMesh {
  workloads: Map<string, WorkloadInfo>;
  services: Map<string, Service>;
  /** The gateway of each network (the first valid one, as getNetworkGatewayAddress takes). */
  gateways: Map<string, NetworkGateway>;
  /** What the model cannot say, by reason, with how many objects it touched (README). */
  gaps: Map<GapReason, number>;
  /** uid → hostname → its endpoint entry's port overrides: the services a workload is in. */
  memberships: MembershipIndex;
  /** Objects left out for passing a cap (compute_caps.ts), by workload uid, service hostname or gateway uid. */
  capped: Map<string, CappedObject>;
}

/** What an update changed (added, changed or removed): the keys a view must look at again. */
export interface MeshChanges {
  /** Everything was recomputed (a wholesale change: gateways, namespaces, a relist). */
  full: boolean;
  /** Workload uids whose workload or memberships may have changed. */
  workloads: Set<string>;
  /** Service hostnames whose service may have changed. */
  services: Set<string>;
}

// What waypoint_route decided for one connection: the outcome (one counter each), the rule of
// problem 3 that fired, and everything the host glue writes. One Decision per root, reused.
import { Address } from "../../assembly/mesh";
import { ByteText } from "../../assembly/runtime/text";

export const HBONE_PORT = 15008;

/** One per counter `waypoint_route.<name>`, in OUTCOME_NAMES order; new outcomes go last. */
export enum Outcome {
  /** Rule 1 / 6: single HBONE to a service's waypoint on this network. */
  HboneWaypoint,
  /** Rule 1 / 6: double HBONE through a gateway to a service's waypoint on another network. */
  DoubleHboneWaypoint,
  /** Rule 2: single HBONE to a service endpoint on this network (no waypoint). */
  HboneEndpoint,
  /** Rule 2 / 7: double HBONE through a gateway to a service endpoint on another network. */
  DoubleHboneEndpoint,
  /** Rule 4: a mesh pod dialled by IP on this network. */
  HbonePod,
  /** Not a service or pod of this network's mesh view. */
  Unknown,
  /** Rule 4: a pod of this network without a sidecar (tlsMode disabled): plain TCP, as dialled. */
  PlaintextPod,
  ErrorUnknownWaypoint,
  ErrorNoValidDestination,
  ErrorUnknownGateway,
  ErrorNoEndpoint,
  /** Rule 7: a local service endpoint without HBONE: plain TCP to podIP:T. */
  PlaintextEndpoint,
  /** Rule 5: a pod dialled by IP whose workload has its own waypoint: HBONE to that waypoint. */
  HbonePodWaypoint,
  /** Rule 6: a service VIP dialled on a port it does not list, and no waypoint. */
  ErrorUnlistedPort,
  /** Rule 5: the pod's own waypoint has no usable instance on this network. */
  ErrorUnknownPodWaypoint,
  /** Rule 8: a gateway service that does not expose the gateway's HBONE port (an unknown gateway). */
  ErrorUnknownGatewayPort,
  /** Rule 8: a waypoint service that does not list the waypoint's HBONE port (an unknown waypoint). */
  ErrorUnknownWaypointPort,
  /**
   * The model in force (from the mesh feed) has no workload at localWorkload: without this
   * sidecar's network and locality no choice can be made, and a plain fallback could bypass a
   * waypoint's policy, so the connection is closed.
   */
  ErrorNoLocalWorkload,
}

export const OUTCOME_NAMES: string[] = [
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
  "error_no_local_workload",
];

/** The counter name of an outcome (bounds-checked: a log line can never trap the VM). */
export function outcomeName(outcome: Outcome): string {
  const i = <i32>outcome;
  return i >= 0 && i < OUTCOME_NAMES.length ? unchecked(OUTCOME_NAMES[i]) : "unnamed_outcome";
}

export class Decision {
  outcome: Outcome = Outcome.Unknown;
  /** The rule of problem 3 (docs/problems.md) that decided, 0 for none (unknown destination). */
  rule: i32 = 0;
  /** Why, in words, for the log line (a constant: nothing is built per connection). */
  reason: string = "";
  service: i32 = -1;
  servicePort: i32 = -1;
  /** The chosen waypoint or endpoint workload. */
  instance: i32 = -1;
  /** The gateway workload (double HBONE), -1 otherwise. */
  gateway: i32 = -1;
  /** Where the first TCP connection goes: waypoint:HBONE port, pod:15008, pod:T (plain) or gateway:HBONE port. */
  readonly nextHop: Address = new Address();
  /** Inner CONNECT authority (single HBONE: the only one), formatted in place. */
  readonly authority: ByteText = new ByteText();
  /** Comma-separated SANs the (inner) TLS peer may present. */
  readonly sans: ByteText = new ByteText(128);
  /** Double HBONE: SANs the gateway may present. */
  readonly gatewaySans: ByteText = new ByteText(128);

  reset(): void {
    this.outcome = Outcome.Unknown;
    this.rule = 0;
    this.reason = "";
    this.service = -1;
    this.servicePort = -1;
    this.instance = -1;
    this.gateway = -1;
    this.nextHop.clear();
    this.authority.clear();
    this.sans.clear();
    this.gatewaySans.clear();
  }

  /** Sets the outcome and the rule that decided it; returns true (for `return out.done(...)`). */
  done(outcome: Outcome, rule: i32, reason: string): bool {
    this.outcome = outcome;
    this.rule = rule;
    this.reason = reason;
    return true;
  }

  /** Sets an error outcome and the rule that fired; returns false. */
  fail(outcome: Outcome, rule: i32, reason: string): bool {
    this.done(outcome, rule, reason);
    return false;
  }
}

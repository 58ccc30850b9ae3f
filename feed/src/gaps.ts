// The reasons an object carries something the model cannot express (its own module: the rules
// that find them and the model that counts them both import it).
/**
 * Why an object carries something the model cannot express: the `reason` label of
 * feed_model_gaps (short and fixed, so that alerts and dashboards can name it; feed/README.md
 * explains each).
 */
export const GAP = {
  externalName: "external_name",
  unparsableIp: "unparsable_pod_ip",
  hostNetwork: "host_network_pod",
  foreignNetworkLabel: "foreign_network_label",
  publishNotReady: "publish_not_ready_addresses",
  crossNamespaceEndpoint: "cross_namespace_endpoint",
  missingTargetPort: "missing_target_port",
  internalTrafficLocal: "internal_traffic_policy_local",
  preferSameNode: "prefer_same_node",
} as const;
export type GapReason = (typeof GAP)[keyof typeof GAP];

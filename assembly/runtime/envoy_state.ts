// Names the filters hand to Envoy, encoded once per VM: the filter-state keys Envoy registers an
// object factory for (set_envoy_filter_state accepts nothing else) and the properties they read.
import { propertyPath } from "./property";

/** tcp_proxy's per-connection cluster choice. */
export const TCP_PROXY_CLUSTER = String.UTF8.encode("envoy.tcp_proxy.cluster");
/** The address an ORIGINAL_DST cluster connects to (IP:PORT). */
export const ORIGINAL_DST_ADDRESS = String.UTF8.encode("envoy.network.transport_socket.original_dst_address");
/** The SANs the upstream TLS peer must present (comma list). */
export const UPSTREAM_SUBJECT_ALT_NAMES = String.UTF8.encode("envoy.network.upstream_subject_alt_names");
/** "true" turns tcp_proxy's tunneling_config off for this connection (plain TCP). */
export const DISABLE_TUNNELING = String.UTF8.encode("envoy.tcp_proxy.disable_tunneling");
export const TRUE_VALUE = String.UTF8.encode("true");

/** The connection's destination as Envoy prints it ("10.0.0.1:80", "[fd00::1]:80"). */
export const DESTINATION_ADDRESS = propertyPath(["destination", "address"]);

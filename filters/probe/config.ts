// The probe's plugin configuration, parsed once per root context.
//
//   { "routes": { "<destination IP>": "<cluster>", ... }, "default_cluster": "<cluster>" }
//
// `routes` is required; `default_cluster` is optional (without it an unmatched connection keeps
// tcp_proxy's own cluster). Unknown fields are refused.
import { ConfigReader, JsonValue, parseJson } from "../../assembly/json";
import { acceptConfig, ConfigResult, refuseConfig } from "../../assembly/runtime/config_root";

export class ProbeConfig {
  /** destination IP (as Envoy prints it, IPv6 without brackets) → cluster name, UTF-8 encoded */
  routes: Map<string, ArrayBuffer> = new Map<string, ArrayBuffer>();
  /** UTF-8 cluster name, or null to leave tcp_proxy's choice alone */
  defaultCluster: ArrayBuffer | null = null;
}

const KNOWN_FIELDS = ["routes", "default_cluster"];

/** Parses and validates the configuration; the error names the offending field. */
export function parseProbeConfig(bytes: ArrayBuffer): ConfigResult<ProbeConfig> {
  const parsed = parseJson(bytes);
  const root = parsed.value;
  if (!parsed.ok() || root === null) return refuseConfig<ProbeConfig>(parsed.error);
  const reader = new ConfigReader();
  if (!root.isObject()) {
    reader.fail("(root)", "expected an object");
    return refuseConfig<ProbeConfig>(reader.error());
  }
  reader.onlyKnownFields(root, "", KNOWN_FIELDS);
  const config = new ProbeConfig();
  const routes = reader.requireObject(root, "routes", "");
  if (routes !== null) readRoutes(reader, routes, config);
  const fallback = reader.optionalString(root, "default_cluster", "", "");
  if (fallback.length > 0) config.defaultCluster = String.UTF8.encode(fallback);
  if (reader.failed()) return refuseConfig<ProbeConfig>(reader.error());
  return acceptConfig<ProbeConfig>(config);
}

function readRoutes(reader: ConfigReader, routes: JsonValue, config: ProbeConfig): void {
  const destinations = routes.keys();
  for (let i = 0; i < destinations.length; i++) {
    const destination = unchecked(destinations[i]);
    const cluster = reader.requireString(routes, destination, "routes");
    if (reader.failed()) return;
    if (cluster.length == 0) {
      reader.fail(reader.childPath("routes", destination), "cluster name must not be empty");
      return;
    }
    config.routes.set(destination, String.UTF8.encode(cluster));
  }
}

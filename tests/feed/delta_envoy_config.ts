// The shipped direct-mode sidecar config (envoy-configs/passthrough_mtls.yaml) with the mesh
// coming only from the feed: passthrough_mtls's configuration is `meshFeed` (cluster mesh_feed →
// the feed's HTTP server) and an empty snapshot. Used by tests/feed/delta_envoy.test.ts and
// bench/feed/delta_run.ts.
import { parse, stringify } from "yaml";
import { staticCluster } from "../support/envoy_config.js";
import { shippedConfig } from "../support/envoy_yaml.js";

/** `meshFeed` holds more meshFeed fields (startupWaitMs, noModelPolicy, ...). */
export function meshFeedSidecarConfig(feedPort: number, target: string, waitSeconds = 5, meshFeed: Record<string, unknown> = {}): string {
  const config = parse(shippedConfig("passthrough_mtls.yaml"));
  let replaced = 0;
  const visit = (node: any): void => {
    if (!node || typeof node !== "object") return;
    if (node.name === "passthrough_mtls" && node.configuration?.value !== undefined) {
      node.configuration.value = JSON.stringify({ workloads: [], services: [], meshFeed: { cluster: "mesh_feed", target, waitSeconds, ...meshFeed } });
      replaced++;
    }
    for (const v of Object.values(node)) visit(v);
  };
  visit(config);
  if (replaced !== 1) throw new Error(`passthrough_mtls.yaml: expected one passthrough_mtls filter, found ${replaced}`);
  config.static_resources.clusters.push(staticCluster("mesh_feed", "127.0.0.1", feedPort));
  return stringify(config);
}

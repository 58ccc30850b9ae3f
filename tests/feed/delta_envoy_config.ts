// The shipped sidecar config that follows the feed (envoy-configs/passthrough_mtls_feed.yaml):
// passthrough_mtls's configuration is `meshFeed` and an empty snapshot, and the cluster
// mesh_feed speaks mutual TLS to the feed (the sidecar's certificate, the mesh CA, the feed's
// SPIFFE id pinned). Only what a test must change is changed: the feed's address (127.0.0.1 and
// the test's port instead of the feed's Service), the target and the long poll's wait. Used by
// tests/feed/delta_envoy.test.ts, the impostor tests, tests/mesh and bench/feed/delta_run.ts.
import { parse, stringify } from "yaml";
import { socketAddress } from "../support/envoy_config.js";
import { shippedConfig } from "../support/envoy_yaml.js";

export const MESH_FEED_CONFIG = "passthrough_mtls_feed.yaml";

/** The shipped mesh_feed cluster (its mutual TLS as shipped), pointed at 127.0.0.1:`feedPort`. */
export function meshFeedCluster(feedPort: number): any {
  const feed = parse(shippedConfig(MESH_FEED_CONFIG)).static_resources.clusters.find((c: { name: string }) => c.name === "mesh_feed");
  if (!feed?.transport_socket) throw new Error(`${MESH_FEED_CONFIG}: no mesh_feed cluster with its TLS`);
  feed.type = "STATIC";
  feed.load_assignment.endpoints = [{ lb_endpoints: [{ endpoint: { address: socketAddress("127.0.0.1", feedPort) } }] }];
  return feed;
}

/** `meshFeed` holds more meshFeed fields (startupWaitMs, noModelPolicy, ...). */
export function meshFeedSidecarConfig(feedPort: number, target: string, waitSeconds = 5, meshFeed: Record<string, unknown> = {}): string {
  const config = parse(shippedConfig(MESH_FEED_CONFIG));
  let replaced = 0;
  const visit = (node: any): void => {
    if (!node || typeof node !== "object") return;
    if (node.name === "passthrough_mtls" && node.configuration?.value !== undefined) {
      const own = JSON.parse(node.configuration.value);
      node.configuration.value = JSON.stringify({ ...own, meshFeed: { ...own.meshFeed, target, waitSeconds, ...meshFeed } });
      replaced++;
    }
    for (const v of Object.values(node)) visit(v);
  };
  visit(config);
  if (replaced !== 1) throw new Error(`${MESH_FEED_CONFIG}: expected one passthrough_mtls filter, found ${replaced}`);
  const clusters = config.static_resources.clusters;
  const i = clusters.findIndex((c: { name: string }) => c.name === "mesh_feed");
  if (i < 0) throw new Error(`${MESH_FEED_CONFIG}: no mesh_feed cluster`);
  clusters[i] = meshFeedCluster(feedPort);
  return stringify(config);
}

// A target's plugin configuration: the filter's own fields (as the operator configured them)
// followed by the mesh snapshot of the target's network. Keys in a fixed order and compact JSON,
// so the same mesh renders to the same bytes (the version/ETag only moves when content does).
//
// The text is put together from parts (`joinConfig`): the head's JSON and each workload's and
// service's JSON, so a render can make the object texts in slices on the event loop and join
// them elsewhere (render_slices.ts, check_worker.ts). Joined, the parts are byte for byte
// JSON.stringify of the whole object; tests/feed/render_slices.test.ts checks that they are.
import { createHash } from "node:crypto";
import type { MeshSnapshot } from "./schema.js";

export const FILTERS = ["passthrough_mtls", "tunnel_port", "waypoint_route"] as const;
export type FilterName = (typeof FILTERS)[number];

/** Filters with a `localNetwork` field of their own (waypoint_route takes it from localWorkload). */
const HAS_LOCAL_NETWORK: ReadonlySet<FilterName> = new Set(["passthrough_mtls", "tunnel_port"]);

export interface RenderedConfig {
  text: string;
  bytes: number;
  /** sha256 of the text, hex; the HTTP ETag carries a prefix of it. */
  digest: string;
}

/** The fields before the mesh: the target's own, with the network as `localNetwork` where the filter has one. */
export function pluginHead(filter: FilterName, network: string, own: Record<string, unknown>): Record<string, unknown> {
  const head: Record<string, unknown> = { ...own };
  if (HAS_LOCAL_NETWORK.has(filter) && head.localNetwork === undefined && network !== "") head.localNetwork = network;
  return head;
}

/**
 * The configuration's text from its parts: `head` is the head object's JSON, `workloads` and
 * `services` each object's JSON in order. The head never carries `workloads` or `services`
 * (config.ts refuses them in a target's own fields), so they come last, as in the whole object.
 */
export function joinConfig(head: string, workloads: readonly string[], services: readonly string[]): string {
  const open = head === "{}" ? "{" : `${head.slice(0, -1)},`;
  return `${open}"workloads":[${workloads.join(",")}],"services":[${services.join(",")}]}`;
}

export function configDigest(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

export function renderPluginConfig(filter: FilterName, network: string, own: Record<string, unknown>, mesh: MeshSnapshot): RenderedConfig {
  const head = JSON.stringify(pluginHead(filter, network, own));
  const text = joinConfig(head, mesh.workloads.map((w) => JSON.stringify(w)), mesh.services.map((s) => JSON.stringify(s)));
  return { text, bytes: Buffer.byteLength(text), digest: configDigest(text) };
}

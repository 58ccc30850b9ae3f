// A target's plugin configuration: the filter's own fields (as the operator configured them)
// followed by the mesh snapshot of the target's network. Keys in a fixed order and compact JSON,
// so the same mesh renders to the same bytes (the version/ETag only moves when content does).
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

export function renderPluginConfig(filter: FilterName, network: string, own: Record<string, unknown>, mesh: MeshSnapshot): RenderedConfig {
  const head: Record<string, unknown> = { ...own };
  if (HAS_LOCAL_NETWORK.has(filter) && head.localNetwork === undefined && network !== "") head.localNetwork = network;
  const text = JSON.stringify({ ...head, workloads: mesh.workloads, services: mesh.services });
  return { text, bytes: Buffer.byteLength(text), digest: createHash("sha256").update(text).digest("hex") };
}

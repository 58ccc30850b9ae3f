// STAND-IN until issue 15's model work (assembly/mesh, helper meshdelta) is merged: the entry
// point the contract names, `applyMeshMessage(mesh, data): MeshApplyResult`, with the same
// signature and result fields, refusing every message. At the merge delete this file and import
// applyMeshMessage / MeshApplyResult from "../../assembly/mesh" in sink.ts (one line).
// Until then a filter configured with meshFeed polls the feed, refuses what it gets (counted in
// <filter>.feed.refused, one warning) and keeps deciding with its configuration's snapshot.
import { Mesh } from "../../assembly/mesh";

export class MeshApplyResult {
  constructor(
    /** The model after the message: the same object for a delta applied in place, a new one for a full. */
    readonly mesh: Mesh | null,
    /** "" when applied; else one line naming the record and field, and `mesh` is the input unchanged. */
    readonly error: string,
    readonly kind: u16 = 0,
    readonly epoch: u64 = 0,
    readonly version: u64 = 0,
  ) {}
}

export function applyMeshMessage(mesh: Mesh | null, data: ArrayBuffer): MeshApplyResult {
  return new MeshApplyResult(mesh, "this build cannot apply mesh feed messages yet (assembly/mesh has no applyMeshMessage)");
}

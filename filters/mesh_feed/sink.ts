// The glue between the runtime's feed client (assembly/runtime/feed_client.ts) and a filter's
// mesh model: the MeshSink every mesh filter gives its FeedClient. A message is applied to the
// model through applyMeshMessage (assembly/mesh: validated whole, then applied in place or, for
// a full message, built anew); the filter then adopts the result, refreshing what it derives
// from the model (its network's interned id, its own workload, per-service texts). Per
// connection nothing changes: a connection reads the root's current config, as before.
import { Mesh } from "../../assembly/mesh";
import { FeedHeader } from "../../assembly/runtime/feed_message";
import { MeshSink } from "../../assembly/runtime/feed_client";
import { applyMeshMessage, collectAfterMessage } from "../../assembly/mesh";

/** What a filter's root gives the sink: its model and how to adopt a new one. */
export class MeshHolder {
  /** The model in force (null before the first configuration). */
  currentMesh(): Mesh | null {
    return null;
  }
  /**
   * Takes `mesh` as the model in force and refreshes what the filter derives from it. Returns
   * "" or why the filter cannot decide with it (the feed client then counts a refusal).
   */
  adopt(mesh: Mesh): string {
    return "this filter does not take models from the feed";
  }
}

export class MeshFeedSink extends MeshSink {
  constructor(readonly holder: MeshHolder) {
    super();
  }

  apply(message: ArrayBuffer, header: FeedHeader): string {
    const result = applyMeshMessage(this.holder.currentMesh(), message);
    let error = result.error;
    const mesh = result.mesh;
    if (error.length == 0) error = mesh === null ? "the model update produced no model" : this.holder.adopt(mesh);
    collectAfterMessage(result.kind, message.byteLength);
    return error;
  }
}

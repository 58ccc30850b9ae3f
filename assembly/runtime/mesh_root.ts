// The root context of a mesh filter (passthrough_mtls, tunnel_port, waypoint_route): a
// configuration holding the shared mesh model, parsed streaming from the host with this node's
// network, and live models from the mesh feed when it has `meshFeed`. Everything here is the same
// for the three: the configure flow (config_root.ts), the feed's start and sink, how the sink
// reaches the model in force, and the closing of a connection whose filter state Envoy refused.
// The chain: RootContext → ConfiguredRoot (configure flow) → FeedRootContext (the feed client)
// → MeshRootContext.
// Each filter keeps its parser, what it derives from a model (`adoptModel`, `use`) and its policy.
// The one runtime file that knows the mesh model (assembly/mesh) and the filters' sink
// (filters/mesh_feed): the rest of the runtime stays free of both.
import { ByteSource } from "../json/source";
import { Mesh, NodeNetwork, readNodeNetwork } from "../mesh";
import { MeshFeedSink, MeshHolder } from "../../filters/mesh_feed/sink";
import { closeDownstream } from "./buffer";
import { ConfigResult } from "./config_root";
import { FeedRootContext } from "./feed_root";
import { logEnabled, logError } from "./log";
import { Counter } from "./metrics";
import { FilterStatus, LogLevel } from "./types";

/**
 * `C` is the filter's configuration; the root reads two fields of it: `mesh: Mesh`, the model in
 * force, and `feed: FeedConfig | null`, where live models come from (null: none).
 */
export class MeshRootContext<C> extends FeedRootContext<C> {
  /** Connections closed because Envoy refused a filter-state write: `<name>.rejected`. */
  readonly rejected: Counter;
  /** Built once: the line of a rejected connection, for filters that add nothing to it. */
  private readonly rejectLine: string;

  /**
   * `name` is the filter's name token (its root_id, the prefix of its counters and of its feed
   * client's); `parser` its streaming parser, given this node's network (node metadata NETWORK).
   */
  constructor(id: u32, readonly name: string, private readonly parser: (source: ByteSource, node: NodeNetwork) => ConfigResult<C>) {
    super(id);
    this.rejected = new Counter(name + ".rejected");
    this.rejectLine = "closing connection: Envoy refused the filter state " + name + " needs";
  }

  /** The mesh is streamed from the host in windows: the configuration is never whole in memory. */
  protected parse(source: ByteSource): ConfigResult<C> {
    const parser = this.parser;
    return parser(source, readNodeNetwork());
  }

  /** The feed starts after each configuration that has `meshFeed` (a new root: a full load). */
  protected started(config: C): void {
    this.startFeed(config.feed, new MeshFeedSink(new RootMeshHolder<C>(this)), this.name);
  }

  /**
   * Takes a model from the feed into `config`, the configuration in force: returns "" or why the
   * filter cannot decide with it (counted as a refusal by the feed client). A delta is already
   * applied in place when this runs, so the mesh filters take every model.
   */
  adoptModel(config: C, mesh: Mesh): string {
    return "this filter does not take models from the feed";
  }

  /**
   * Envoy refused a filter-state write: the connection cannot be set up as decided, so it must
   * not go on. Counted (`rejected`) and closed; the caller has logged why, or calls `reject`.
   */
  closeRejected(): FilterStatus {
    this.rejected.inc();
    closeDownstream();
    return FilterStatus.StopIteration;
  }

  /** closeRejected with the filter's one error line. */
  reject(): FilterStatus {
    if (logEnabled(LogLevel.Error)) logError(this.rejectLine);
    return this.closeRejected();
  }
}

/** What the feed's sink (filters/mesh_feed/sink.ts) sees of a mesh root: the model in force, and adoption. */
class RootMeshHolder<C> extends MeshHolder {
  constructor(readonly root: MeshRootContext<C>) {
    super();
  }

  currentMesh(): Mesh | null {
    const config = this.root.config;
    return config === null ? null : config.mesh;
  }

  adopt(mesh: Mesh): string {
    const root = this.root;
    const config = root.config;
    return config === null ? "not configured" : root.adoptModel(config, mesh);
  }
}

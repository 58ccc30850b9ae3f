// The root context of a mesh filter (passthrough_mtls, tunnel_port, waypoint_route): a
// configuration holding the shared mesh model, parsed streaming from the host with this node's
// network, and live models from the mesh feed when it has `meshFeed`. Everything here is the same
// for the three: the configure flow (config_root.ts), the feed's start and sink, how the sink
// reaches the model in force, and the closing of a connection whose filter state Envoy refused.
// The chain: RootContext → ConfiguredRoot (configure flow) → FeedRootContext (the feed client)
// → MeshRootContext. With meshFeed, connections pass the model gate first (model_gate.ts): they
// wait for a first model, or follow noModelPolicy, instead of being decided from nothing.
// Each filter keeps its parser, what it derives from a model (`adoptModel`, `use`) and its policy.
// The one runtime file that knows the mesh model (assembly/mesh) and the filters' sink
// (filters/mesh_feed): the rest of the runtime stays free of both.
import { ByteSource } from "../json/source";
import { Mesh, NodeNetwork, readNodeNetwork } from "../mesh";
import { MeshFeedSink, MeshHolder } from "../../filters/mesh_feed/sink";
import { closeDownstream, continueDownstream } from "./buffer";
import { ConfigResult, RootConnection } from "./config_root";
import { ConnectionContext } from "./context";
import { TICK_MS } from "./feed_client";
import { FeedRootContext } from "./feed_root";
import { actFor } from "./held";
import { logEnabled, logError } from "./log";
import { Counter } from "./metrics";
import { Gate, ModelGate } from "./model_gate";
import { nowMilliseconds, setTickPeriod } from "./timer";
import { FilterStatus, LogLevel } from "./types";

/** The tick while connections may wait for a first model: how late past its deadline a wait ends. */
const WAIT_TICK_MS: u32 = 100;

/**
 * `C` is the filter's configuration; the root reads two fields of it: `mesh: Mesh`, the model in
 * force, and `feed: FeedConfig | null`, where live models come from (null: none).
 */
export class MeshRootContext<C> extends FeedRootContext<C> {
  /** Connections closed because Envoy refused a filter-state write: `<name>.rejected`. */
  readonly rejected: Counter;
  /** Built once: the line of a rejected connection, for filters that add nothing to it. */
  private readonly rejectLine: string;
  /** Whether connections may be decided now, and the ones waiting for a first model. */
  readonly gate: ModelGate;
  /** A connection context the root decides held connections with (it keeps only id and root). */
  private resumer: ConnectionContext | null = null;
  private fastTicks: bool = false;

  /**
   * `name` is the filter's name token (its root_id, the prefix of its counters and of its feed
   * client's); `parser` its streaming parser, given this node's network (node metadata NETWORK).
   */
  constructor(id: u32, readonly name: string, private readonly parser: (source: ByteSource, node: NodeNetwork) => ConfigResult<C>) {
    super(id);
    this.rejected = new Counter(name + ".rejected");
    this.rejectLine = "closing connection: Envoy refused the filter state " + name + " needs";
    this.gate = new ModelGate(name);
  }

  /** The mesh is streamed from the host in windows: the configuration is never whole in memory. */
  protected parse(source: ByteSource): ConfigResult<C> {
    const parser = this.parser;
    return parser(source, readNodeNetwork());
  }

  /**
   * The feed starts after each configuration that has `meshFeed` (a new root: a full load). A
   * snapshot with at least one workload or service counts as a model; an empty one does not.
   */
  protected started(config: C): void {
    const mesh = config.mesh;
    this.gate.start(config.feed, !isEmpty(mesh), nowMilliseconds());
    this.refreshGate(config);
    this.startFeed(config.feed, new MeshFeedSink(new RootMeshHolder<C>(this)), this.name);
  }

  /** After configure and each adopted model: open, or why not. */
  refreshGate(config: C): void {
    const gate = this.gate;
    gate.network = this.ownNetwork(config);
    const mesh = config.mesh;
    gate.update(isEmpty(mesh) || mesh.networkId(gate.network) < 0, nowMilliseconds());
  }

  /** The name of this proxy's network in `config` (the filter's: each keeps it its own way). */
  ownNetwork(config: C): string {
    return "";
  }

  /**
   * noModelPolicy passthrough for this filter: by default the connection goes on untouched
   * (tcp_proxy's own cluster). A filter whose tcp_proxy would tunnel overrides it.
   */
  passWithoutModel(config: C): FilterStatus {
    return FilterStatus.Continue;
  }

  /** A new connection while the gate is not open: it waits, or follows the policy. */
  admit(id: u32, config: C): FilterStatus {
    const gate = this.gate;
    gate.expire(nowMilliseconds());
    if (gate.state == Gate.Waiting && gate.held.hold(id)) {
      gate.waited.inc();
      this.tickFast(true);
      return FilterStatus.StopIteration;
    }
    return this.withoutModel(config);
  }

  /** noModelPolicy for one connection: counted by why, then closed or passed through. */
  private withoutModel(config: C): FilterStatus {
    const gate = this.gate;
    if (gate.state == Gate.NoNetwork) gate.noNetwork.inc();
    else gate.noModel.inc();
    if (gate.passthrough) return this.passWithoutModel(config);
    closeDownstream();
    return FilterStatus.StopIteration;
  }

  onTick(): void {
    super.onTick();
    this.gate.expire(nowMilliseconds());
    // The feed client sets its own period on its first tick: while connections wait, ours holds.
    if (this.fastTicks && this.gate.state == Gate.Waiting) setTickPeriod(WAIT_TICK_MS);
    this.settle();
  }

  onHttpCallResponse(token: u32, headers: u32, bodySize: u32, trailers: u32): void {
    super.onHttpCallResponse(token, headers, bodySize, trailers);
    this.settle();
  }

  onDelete(): void {
    this.gate.held.retire();
  }

  /**
   * Once the gate is no longer Waiting, each held connection is decided: with the model if the
   * gate is open, else by the policy. The root acts for each (proxy_set_effective_context), so
   * its filter-state writes and its resume or close are that connection's; one that went away
   * meanwhile is skipped. Then the root acts for itself again (the feed's next call is the root's).
   */
  private settle(): void {
    const gate = this.gate;
    const config = this.config;
    if (gate.state == Gate.Waiting || config === null) return;
    this.tickFast(false);
    if (gate.held.count == 0) return;
    let resumer = this.resumer;
    if (resumer === null) {
      resumer = this.newConnection(0);
      this.resumer = resumer;
    }
    const ids = gate.held.drain();
    for (let i = 0; i < ids.length; i++) {
      const id = unchecked(ids[i]);
      if (!actFor(id)) continue;
      resumer.id = id;
      const status = gate.state == Gate.Open ? resumer.onResume() : this.withoutModel(config);
      if (status == FilterStatus.Continue) continueDownstream();
    }
    actFor(this.id);
  }

  /** While connections may wait, tick often enough to end the wait on time. */
  private tickFast(on: bool): void {
    if (on == this.fastTicks) return;
    this.fastTicks = on;
    setTickPeriod(on ? WAIT_TICK_MS : TICK_MS);
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
    if (config === null) return "not configured";
    const refused = root.adoptModel(config, mesh);
    const now = root.config;
    if (refused.length == 0 && now !== null) {
      root.gate.hasModel = true;
      root.refreshGate(now);
    }
    return refused;
  }
}

/** No workload and no service: nothing to decide with. */
function isEmpty(mesh: Mesh): bool {
  return mesh.workloadCount() == 0 && mesh.serviceCount() == 0;
}

/**
 * A mesh filter's connection: it passes the model gate, then decides with the configuration in
 * force (`onConnection`). `R` is the filter's root (a MeshRootContext<C>).
 */
export class MeshConnection<R, C> extends RootConnection<R, C> {
  onNewConnection(): FilterStatus {
    const root = this.root;
    const config = root.config;
    // Unreachable: Envoy sends no connection to a plugin whose configuration was refused.
    if (config === null) return FilterStatus.Continue;
    if (root.gate.state != Gate.Open) return root.admit(this.id, config);
    return this.onConnection(config);
  }

  /** A held connection, decided once the model came (the root acts for it). */
  onResume(): FilterStatus {
    const config = this.root.config;
    return config === null ? FilterStatus.Continue : this.onConnection(config);
  }
}

// The feed's core loop, independent of how objects arrive (watch.ts feeds it from API servers;
// tests can feed it directly). A change pokes two debouncers:
//   - the delta path (short debounce): the mesh is updated for what changed (compute.ts
//     `update`), each network's view for the objects that moved (delta/network_view.ts), and
//     each network's delta channel publishes one version with the records that differ, once
//     the targets' compiled filters took it (delta/channel.ts, filter_shadow.ts); held long
//     polls are answered;
//   - the snapshot path (the `debounce` setting): for targets delivered by ECDS file or
//     WasmPlugin, the whole view is rendered as JSON, checked in the compiled filter, and only
//     then delivered. Targets without those deliveries render their JSON only when asked
//     (GET /snapshot), so a mesh consumed through deltas never pays a full render per change.
// A refused or failed render keeps the previous snapshot / version everywhere.
import { join } from "node:path";
import type { ClusterObjects } from "./cluster_objects.js";
import { KINDS } from "./cluster_objects.js";
import { MeshComputer, type MeshOptions } from "./compute.js";
import { CapReporter } from "./compute_caps.js";
import type { FeedConfig, TargetConfig } from "./config.js";
import { Debouncer } from "./debounce.js";
import { EcdsFileTarget } from "./deliver/ecds.js";
import type { PublishedSnapshot, SnapshotSource } from "./http.js";
import { Metrics } from "./metrics.js";
import { renderPluginConfig } from "./render.js";
import { FilterValidator } from "./validate.js";
import { viewFor } from "./view.js";
import { DeltaChannel, type ClientState, type DeltaAnswer } from "./delta/channel.js";
import { NetworkView } from "./delta/network_view.js";
import { FilterShadow } from "./delta/filter_shadow.js";

/** Applies a target's snapshot as a WasmPlugin (deliver/wasmplugin.ts); absent without an API. */
export interface WasmPluginApplier {
  apply(target: TargetConfig, version: string, pluginConfig: Record<string, unknown>, bytes: number): Promise<void>;
}

export type Logger = (level: "info" | "warn" | "error", message: string) => void;

const RANK = { info: 0, warn: 1, error: 2 } as const;

/** One line per event on stderr; FEED_LOG_LEVEL=warn (or error) drops the per-publish info lines. */
export const defaultLogger: Logger = (level, message) => {
  const floor = RANK[(process.env.FEED_LOG_LEVEL ?? "info") as keyof typeof RANK] ?? 0;
  if (RANK[level] >= floor) console.error(`${new Date().toISOString()} ${level} ${message}`);
};

interface TargetState {
  target: TargetConfig;
  ecds?: EcdsFileTarget;
  published?: PublishedSnapshot & { digest: string };
  lastError?: string;
  /** Rendered on every snapshot render (it has a delivery); otherwise only when asked. */
  eager: boolean;
  /** The delta version the lazy snapshot was last rendered at. */
  renderedAt?: number;
}

/** One network's delta state: its incremental view and channel (shared by its targets). */
interface NetworkDelta {
  view: NetworkView;
  channel: DeltaChannel;
  lastError?: string;
  /** Long polls waiting for the next version. */
  waiters: Set<() => void>;
}

export class FeedController implements SnapshotSource {
  readonly metrics = new Metrics();
  private readonly computer: MeshComputer;
  private readonly caps: CapReporter;
  private readonly validator: FilterValidator;
  private readonly debouncer: Debouncer;
  private readonly deltaDebouncer: Debouncer;
  private readonly targets: TargetState[];
  private readonly networks = new Map<string, NetworkDelta>();
  deltaRenders = 0;
  private readonly epoch = Date.now();
  private sequence = 0;
  private readonly synced = new Set<string>();
  /** When the oldest change not yet rendered arrived (0: none pending). */
  private oldestPending = 0;
  private readonly waiters: Array<() => void> = [];
  renders = 0;

  constructor(
    readonly config: FeedConfig,
    mesh: MeshOptions,
    readonly clusters: ClusterObjects[],
    private readonly wasmPlugins?: WasmPluginApplier,
    private readonly log: Logger = defaultLogger,
  ) {
    this.computer = new MeshComputer(mesh);
    this.caps = new CapReporter(this.metrics, (level, message) => this.log(level, message));
    this.validator = new FilterValidator((filter) => join(config.wasmDir, `${filter}.wasm`));
    this.debouncer = new Debouncer(config.debounce, () => this.render());
    this.deltaDebouncer = new Debouncer({ quietMs: config.delta.quietMs, maxMs: config.delta.maxMs }, async () => this.renderDeltas());
    this.targets = config.targets.map((target) => ({
      target,
      eager: !!(target.ecds || target.wasmPlugin),
      ...(target.ecds && { ecds: new EcdsFileTarget(target.ecds.file, target.ecds.template) }),
    }));
    for (const t of config.targets) {
      if (this.networks.has(t.network)) continue;
      // One shadow of each compiled filter (and own configuration) the network's targets run.
      const shadows = new Map<string, FilterShadow>();
      for (const u of config.targets) {
        if (u.network !== t.network) continue;
        const key = JSON.stringify([u.filter, u.config]);
        if (!shadows.has(key)) shadows.set(key, new FilterShadow(u, () => this.validator.bytes(u.filter), () => viewFor(this.computer.current, u.network).snapshot));
      }
      this.networks.set(t.network, { view: new NetworkView(t.network), channel: new DeltaChannel(this.epoch, config.delta, [...shadows.values()]), waiters: new Set() });
    }
    const m = this.metrics;
    m.declare("feed_objects", "gauge", "objects the feed holds, by cluster and kind");
    m.declare("feed_events_total", "counter", "watch events received, by cluster");
    m.declare("feed_file_refused_total", "counter", "files (or documents) a file source refused, by cluster and reason; a refused file's previous objects stay");
    m.declare("feed_snapshot_version", "gauge", "sequence number of the target's published snapshot (the n of <epoch>-<n>)");
    m.declare("feed_snapshot_bytes", "gauge", "size of the target's published plugin configuration");
    m.declare("feed_snapshot_workloads", "gauge", "workloads in the target's published snapshot");
    m.declare("feed_snapshot_services", "gauge", "services in the target's published snapshot");
    m.declare("feed_render_seconds", "gauge", "duration of the last render (compute, views, JSON, validation, delivery)");
    m.declare("feed_render_seconds_sum", "counter", "total render time");
    m.declare("feed_renders_total", "counter", "renders run");
    m.declare("feed_validate_seconds", "gauge", "duration of the last validation in the compiled filter, by target");
    m.declare("feed_render_errors_total", "counter", "snapshots the filter refused (not published; the previous one stays), by target");
    m.declare("feed_push_errors_total", "counter", "deliveries that failed, by target and delivery");
    m.declare("feed_model_gaps", "gauge", "objects carrying something the model cannot express, by reason");
    m.declare("feed_view_dropped", "gauge", "workloads, addresses and VIPs left out of a target's view, by reason");
    m.declare("feed_delta_version", "gauge", "the target's current delta version (in epoch feed_delta_epoch)");
    m.declare("feed_delta_epoch", "gauge", "the feed's epoch (its start time in ms): a client of another epoch gets a full message");
    m.declare("feed_delta_render_seconds", "gauge", "duration of the last delta render (incremental compute, views, diff, check)");
    m.declare("feed_delta_render_seconds_sum", "counter", "total delta render time");
    m.declare("feed_delta_renders_total", "counter", "delta renders run");
    m.declare("feed_delta_published_records_total", "counter", "records published in new versions, by target");
    m.declare("feed_delta_refused_total", "counter", "versions a target's compiled filter refused, or past the id limits (not published; the previous version stays), by target");
    m.declare("feed_delta_journal_records", "gauge", "records the target's journal keeps");
    m.declare("feed_delta_journal_bytes", "gauge", "bytes the target's journal keeps");
    m.declare("feed_delta_journal_oldest", "gauge", "oldest version a delta can start from");
    m.declare("feed_delta_full_bytes", "gauge", "size of the target's full message");
    m.declare("feed_delta_requests_total", "counter", "GET /delta answers, by target and kind (full, delta, no_change, rebased: a no-change to a client of another epoch holding the same content, ask_buckets, repair)");
    m.declare("feed_delta_full_total", "counter", "full messages sent, by target and reason (epoch, future, behind, smaller)");
    m.declare("feed_delta_bytes_total", "counter", "bytes of /delta answers, by target and kind");
    m.declare("feed_delta_full_builds", "gauge", "full messages built in this epoch (at most one per version, shared by every caller), by target");
    m.declare("feed_delta_held", "gauge", "long polls held now");
    m.declare("feed_delta_held_total", "counter", "long polls that were held (answered on a change or when their wait ran out)");
    this.metrics.set("feed_delta_epoch", {}, this.epoch);
  }

  // ------------------------------------------------------------------ inputs

  /** The watch layer (or a test) changed some cluster's objects. */
  changed(clusterId?: string): void {
    if (clusterId) this.metrics.add("feed_events_total", { cluster: clusterId });
    if (this.oldestPending === 0) this.oldestPending = Date.now();
    this.deltaDebouncer.poke();
    if (this.targets.some((t) => t.eager)) this.debouncer.poke();
  }

  /** A file source refused a file or a document (file_source.ts); the objects in force stay. */
  sourceRefused(clusterId: string, reason: string): void {
    this.metrics.add("feed_file_refused_total", { cluster: clusterId, reason });
  }

  markSynced(clusterId: string): void {
    this.synced.add(clusterId);
    this.changed();
  }

  /** Every cluster's initial lists are in (watch.ts, file_source.ts): only then is anything published. */
  allSynced(): boolean {
    return this.clusters.every((c) => this.synced.has(c.clusterId));
  }

  /** Renders now (start-up after the initial lists; tests). */
  flush(): Promise<void> {
    return this.debouncer.flush();
  }

  stop(): void {
    this.debouncer.stop();
    this.deltaDebouncer.stop();
    for (const n of this.networks.values()) {
      for (const w of [...n.waiters]) w();
      n.channel.close();
    }
  }

  /** Resolves after the next render finishes. */
  nextRender(): Promise<void> {
    return new Promise((done) => this.waiters.push(done));
  }

  // ------------------------------------------------------------------ render

  /**
   * The delta path: brings the mesh, every network's view and channel up to date. Synchronous
   * (nothing else runs in between), cheap when little changed.
   */
  renderDeltas(): void {
    // Nothing is computed, let alone published, from caches still filling: a feed restarted
    // mid-list would otherwise push a model without the pods not listed yet. markSynced of the
    // last cluster renders.
    if (!this.allSynced()) return;
    const started = performance.now();
    try {
      for (const c of this.clusters) for (const [kind, n] of Object.entries(c.count())) this.metrics.set("feed_objects", { cluster: c.clusterId, kind }, n);
      const { mesh, changes } = this.computer.update(this.clusters);
      if (changes.full || changes.workloads.size > 0 || changes.services.size > 0) {
        this.metrics.clear("feed_model_gaps");
        for (const [reason, n] of mesh.gaps) this.metrics.set("feed_model_gaps", { reason }, n);
        this.caps.report(mesh, changes);
      }
      for (const [network, n] of this.networks) {
        const moved = n.view.update(mesh, changes);
        const outcome = n.channel.publish(n.view, mesh, moved);
        const names = this.targets.filter((t) => t.target.network === network).map((t) => t.target.name);
        if (outcome.published) {
          n.lastError = undefined;
          for (const name of names) {
            this.metrics.set("feed_delta_version", { target: name }, outcome.version);
            this.metrics.add("feed_delta_published_records_total", { target: name }, outcome.records);
          }
          const waiters = [...n.waiters];
          n.waiters.clear();
          for (const w of waiters) w();
        } else if (outcome.error) {
          for (const name of names) this.metrics.add("feed_delta_refused_total", { target: name });
          const message = `network ${JSON.stringify(network)} (targets ${names.join(", ")}): delta refused (${outcome.error}); not published, version ${n.channel.version} stays`;
          if (message !== n.lastError) this.log("error", message);
          n.lastError = message;
        }
        const st = n.channel.stats;
        for (const name of names) {
          this.metrics.set("feed_delta_journal_records", { target: name }, st.journalRecords);
          this.metrics.set("feed_delta_journal_bytes", { target: name }, st.journalBytes);
          this.metrics.set("feed_delta_journal_oldest", { target: name }, st.oldestBase);
          this.metrics.set("feed_delta_full_bytes", { target: name }, st.fullBytes);
          const vs = n.view.stats();
          for (const [reason, v] of Object.entries({ no_gateway: vs.droppedNoGateway, address_conflict: vs.addressConflicts, vip_conflict: vs.vipConflicts })) {
            this.metrics.set("feed_view_dropped", { target: name, reason }, v);
          }
        }
      }
    } catch (error) {
      // A bug or an unexpected object: nothing new is published, the previous versions stay;
      // the next render recomputes everything (what this one touched may be half-updated) and
      // publishes the difference from the last published version.
      this.computer.invalidate();
      setTimeout(() => this.deltaDebouncer.poke(), 1000).unref();
      this.metrics.add("feed_render_errors_total", { target: "*" });
      this.log("error", `delta render failed, previous versions kept: ${(error as Error).stack ?? error}`);
    } finally {
      const seconds = (performance.now() - started) / 1000;
      this.metrics.set("feed_delta_render_seconds", {}, seconds);
      this.metrics.add("feed_delta_render_seconds_sum", {}, seconds);
      this.metrics.add("feed_delta_renders_total", {});
      this.deltaRenders++;
    }
  }

  /** The snapshot path: the delta path first (so both see the same mesh), then every eager target's JSON. */
  private async render(): Promise<void> {
    if (!this.allSynced()) {
      for (const w of this.waiters.splice(0)) w();
      return;
    }
    const started = performance.now();
    const changeSeen = this.oldestPending;
    this.oldestPending = 0;
    try {
      this.renderDeltas();
      const mesh = this.computer.current;
      const views = new Map<string, ReturnType<typeof viewFor>>();
      for (const state of this.targets) {
        if (!state.eager) continue;
        const t = state.target;
        let view = views.get(t.network);
        if (!view) {
          view = viewFor(mesh, t.network);
          views.set(t.network, view);
        }
        await this.renderTarget(state, view.snapshot, view.stats);
      }
    } catch (error) {
      // A bug or an unexpected object: nothing is published, the previous snapshots stay.
      this.metrics.add("feed_render_errors_total", { target: "*" });
      this.log("error", `render failed, previous snapshots kept: ${(error as Error).stack ?? error}`);
    } finally {
      const seconds = (performance.now() - started) / 1000;
      this.metrics.set("feed_render_seconds", {}, seconds);
      this.metrics.add("feed_render_seconds_sum", {}, seconds);
      this.metrics.add("feed_renders_total", {});
      this.renders++;
      void changeSeen;
      for (const w of this.waiters.splice(0)) w();
    }
  }

  /** A lazy target's snapshot, rendered (and checked) now if the mesh moved since. */
  private renderLazy(state: TargetState): void {
    const n = this.networks.get(state.target.network);
    if (!n || n.channel.version === 0) return;
    // Once per version, whatever the outcome: a refused target is not re-rendered per request.
    if (state.renderedAt === n.channel.version) return;
    state.renderedAt = n.channel.version;
    try {
      this.renderDeltas();
      const view = viewFor(this.computer.current, state.target.network);
      this.checkAndKeep(state, view.snapshot, view.stats);
    } catch (error) {
      this.metrics.add("feed_render_errors_total", { target: state.target.name });
      this.log("error", `target ${state.target.name}: render failed, previous snapshot kept: ${(error as Error).stack ?? error}`);
    }
  }

  /** Renders and checks one target's snapshot; keeps it as published when the filter accepts it. */
  private checkAndKeep(state: TargetState, snapshot: ReturnType<typeof viewFor>["snapshot"], stats: ReturnType<typeof viewFor>["stats"]): { version: string; text: string; bytes: number } | undefined {
    const t = state.target;
    const rendered = renderPluginConfig(t.filter, t.network, t.config, snapshot);
    if (state.published?.digest === rendered.digest) return undefined;
    const verdict = this.validator.check(t.filter, rendered.text);
    this.metrics.set("feed_validate_seconds", { target: t.name }, verdict.ms / 1000);
    if (!verdict.ok) {
      this.metrics.add("feed_render_errors_total", { target: t.name });
      const kept = state.published ? `version ${state.published.version} stays` : "nothing published yet";
      const message = `target ${t.name}: ${t.filter} refuses the new snapshot (${verdict.error}); not published, ${kept}`;
      if (message !== state.lastError) this.log("error", message);
      state.lastError = message;
      return undefined;
    }
    state.lastError = undefined;
    const version = `${this.epoch}-${++this.sequence}`;
    state.published = { target: t.name, version, text: rendered.text, bytes: rendered.bytes, publishedAt: Date.now(), digest: rendered.digest };
    this.metrics.set("feed_snapshot_version", { target: t.name }, this.sequence);
    this.metrics.set("feed_snapshot_bytes", { target: t.name }, rendered.bytes);
    this.metrics.set("feed_snapshot_workloads", { target: t.name }, stats.workloads);
    this.metrics.set("feed_snapshot_services", { target: t.name }, stats.services);
    this.log("info", `target ${t.name}: published ${version} (${stats.workloads} workloads, ${stats.services} services, ${rendered.bytes} bytes; checked by ${t.filter} in ${verdict.ms.toFixed(0)} ms)`);
    return { version, text: rendered.text, bytes: rendered.bytes };
  }

  private async renderTarget(state: TargetState, snapshot: ReturnType<typeof viewFor>["snapshot"], stats: ReturnType<typeof viewFor>["stats"]): Promise<void> {
    const t = state.target;
    const kept = this.checkAndKeep(state, snapshot, stats);
    if (!kept) return;
    const { version, text, bytes } = kept;
    if (state.ecds) {
      try {
        state.ecds.write(version, text);
      } catch (error) {
        this.metrics.add("feed_push_errors_total", { target: t.name, delivery: "ecds" });
        this.log("error", `target ${t.name}: writing ${t.ecds?.file} failed: ${(error as Error).message}`);
      }
    }
    if (t.wasmPlugin && this.wasmPlugins) {
      try {
        await this.wasmPlugins.apply(t, version, JSON.parse(text) as Record<string, unknown>, bytes);
      } catch (error) {
        this.metrics.add("feed_push_errors_total", { target: t.name, delivery: "wasmplugin" });
        this.log("error", `target ${t.name}: WasmPlugin ${t.wasmPlugin.namespace}/${t.wasmPlugin.name} not applied: ${(error as Error).message}`);
      }
    }
  }

  // ------------------------------------------------------------------ SnapshotSource

  snapshot(target: string): PublishedSnapshot | undefined {
    const state = this.targets.find((s) => s.target.name === target);
    if (state && !state.eager) this.renderLazy(state);
    return state?.published;
  }

  snapshots(): PublishedSnapshot[] {
    return this.targets.flatMap((s) => {
      if (!s.eager) this.renderLazy(s);
      return s.published ? [s.published] : [];
    });
  }

  ready(): { ready: boolean; reason: string } {
    const notSynced = this.clusters.filter((c) => !this.synced.has(c.clusterId)).map((c) => c.clusterId);
    if (notSynced.length > 0) return { ready: false, reason: `waiting for the initial lists of ${notSynced.join(", ")}` };
    const unpublished = this.targets.filter((s) => (s.eager ? !s.published : (this.networks.get(s.target.network)?.channel.version ?? 0) === 0)).map((s) => s.target.name);
    if (unpublished.length > 0) return { ready: false, reason: `nothing published yet for ${unpublished.join(", ")}` };
    return { ready: true, reason: "ok" };
  }

  // ------------------------------------------------------------------ DeltaSource

  /** The target's channel, or undefined for an unknown target. */
  private channelOf(target: string): NetworkDelta | undefined {
    const t = this.targets.find((s) => s.target.name === target);
    return t ? this.networks.get(t.target.network) : undefined;
  }

  hasTarget(target: string): boolean {
    return this.channelOf(target) !== undefined;
  }

  /** The target's current delta version (0: nothing published yet). */
  deltaVersion(target: string): number {
    return this.channelOf(target)?.channel.version ?? 0;
  }

  deltaUpToDate(target: string, epoch: number, version: number): boolean {
    return this.channelOf(target)?.channel.upToDate(epoch, version) ?? false;
  }

  /** Resolves on the target's next version, or after `ms`; returns a cancel function too. */
  waitForDelta(target: string, ms: number): { done: Promise<void>; cancel: () => void } {
    const n = this.channelOf(target);
    let finish: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (finish = resolve));
    if (!n) {
      finish();
      return { done, cancel: () => undefined };
    }
    const timer = setTimeout(() => wake(), ms);
    const wake = () => {
      clearTimeout(timer);
      n.waiters.delete(wake);
      finish();
    };
    n.waiters.add(wake);
    return { done, cancel: wake };
  }

  deltaAnswer(target: string, epoch: number, version: number, client?: ClientState): DeltaAnswer | undefined {
    const n = this.channelOf(target);
    if (!n || n.channel.version === 0) return undefined;
    const a = n.channel.answer(epoch, version, client);
    const kind = a.rebased ? "rebased" : (["", "full", "delta", "no_change", "repair", "ask_buckets"][a.kind] ?? "?");
    this.metrics.add("feed_delta_requests_total", { target, kind });
    this.metrics.add("feed_delta_bytes_total", { target, kind }, a.body.length);
    if (a.reason) {
      this.metrics.add("feed_delta_full_total", { target, reason: a.reason });
      this.metrics.set("feed_delta_full_builds", { target }, n.channel.fullBuilds);
    }
    return a;
  }

  /** Long polls held now (metrics) */
  heldChanged(delta: number): void {
    this.metrics.add("feed_delta_held", {}, delta);
    if (delta > 0) this.metrics.add("feed_delta_held_total", {});
  }

  metricsText(): string {
    return this.metrics.text();
  }

  /** The last error of each target (for tests and /snapshots). */
  lastErrors(): Record<string, string | undefined> {
    return Object.fromEntries(this.targets.map((s) => [s.target.name, s.lastError]));
  }
}

export { KINDS };

// The feed's core loop, independent of how objects arrive (watch.ts feeds it from API servers;
// tests can feed it directly). A change pokes two debouncers:
//   - the delta path (short debounce): the mesh is updated for what changed (compute.ts
//     `update`), each network's view for the objects that moved (delta/network_view.ts), and
//     each network's delta channel publishes one version with the records that differ, once
//     the targets' compiled filters took it (delta/channel.ts, filter_shadow.ts); held long
//     polls are answered;
//   - the snapshot path (the `debounce` setting): for targets delivered by ECDS file or
//     WasmPlugin, the whole view is rendered as JSON (in slices on the event loop, joined and
//     checked in the compiled filter in the check worker: render_slices.ts), and only
//     then delivered. Targets without those deliveries render their JSON only when asked
//     (GET /snapshot), so a mesh consumed through deltas never pays a full render per change.
// A refused or failed render keeps the previous snapshot / version everywhere. Deliveries are
// driven until they land (deliver/pusher.ts: retried with backoff), and only by the writer: the
// replica holding the Lease when several run (leader.ts); every replica renders and serves.
import { join } from "node:path";
import type { ClusterObjects } from "./cluster_objects.js";
import { KINDS } from "./cluster_objects.js";
import { MeshComputer, type MeshOptions } from "./compute.js";
import { CapReporter } from "./compute_caps.js";
import type { FeedConfig, TargetConfig } from "./config.js";
import { Debouncer } from "./debounce.js";
import { DEFAULT_PUSH } from "./config_ha.js";
import { EcdsFileTarget } from "./deliver/ecds.js";
import { Pusher, type Delivery } from "./deliver/pusher.js";
import type { PublishedSnapshot, SnapshotSource } from "./http.js";
import { ClusterSyncMetrics, declareBuildInfo, declareFeedMetrics } from "./feed_metrics.js";
import { Metrics } from "./metrics.js";
import { ServingGate } from "./serving_gate.js";
import type { FilterName } from "./render.js";
import { WorkerValidator } from "./check_worker.js";
import { FilterValidator } from "./validate.js";
import { viewFor } from "./view.js";
import { DeltaChannel, type ClientState, type DeltaAnswer } from "./delta/channel.js";
import { DeltaEndpoints, type NetworkDelta } from "./delta_endpoints.js";
import { NetworkView } from "./delta/network_view.js";
import { FilterShadow } from "./delta/filter_shadow.js";

/** Applies a target's snapshot as a WasmPlugin (deliver/wasmplugin.ts); absent without an API. */
export interface WasmPluginApplier {
  apply(target: TargetConfig, version: string, pluginConfig: Record<string, unknown>, bytes: number, digest?: string): Promise<void>;
  /** The digest the stored WasmPlugin carries (undefined: none); absent: unknown, always write. */
  landedDigest?(target: TargetConfig): Promise<string | undefined>;
}

/** The writers' Lease as the controller sees it (leader.ts). */
export interface WriterLease {
  leading(): boolean;
  holder(): string;
  /** Time since the API server holding the Lease last answered. */
  contactAgeMs(): number;
}

export { defaultLogger, type Logger } from "./logger.js";
import { defaultLogger, type Logger } from "./logger.js";

interface TargetState {
  target: TargetConfig;
  ecds?: EcdsFileTarget;
  published?: PublishedSnapshot & { digest: string };
  lastError?: string;
  /** Rendered on every snapshot render (it has a delivery); otherwise only when asked. */
  eager: boolean;
  /** The delta version the lazy snapshot was last rendered at. */
  renderedAt?: number;
  /** The lazy render in progress (its check runs in the worker). */
  lazyRender?: Promise<void>;
}


export class FeedController implements SnapshotSource {
  readonly metrics = new Metrics();
  /** Every delivery of every target, driven until it lands (deliver/pusher.ts). */
  readonly pushes: Pusher;
  private lease: WriterLease | undefined;
  private gate: ServingGate | undefined;
  private readonly computer: MeshComputer;
  private readonly caps: CapReporter;
  /** The compiled modules (read once) the delta path's shadows run. */
  private readonly modules: FilterValidator;
  private readonly validator: WorkerValidator;
  private readonly debouncer: Debouncer;
  private readonly deltaDebouncer: Debouncer;
  private readonly targets: TargetState[];
  private readonly networks = new Map<string, NetworkDelta>();
  /** The channel's side of the networks' deltas (long polls, answers). */
  private readonly deltas: DeltaEndpoints;
  deltaRenders = 0;
  private readonly epoch = Date.now();
  private sequence = 0;
  private readonly synced = new Set<string>();
  /** Clusters whose initial lists did not come in within clusterSyncTimeoutSeconds. */
  private readonly timedOut = new Set<string>();
  /** Per target: the oldest change its pending snapshot carries (timed when a delivery lands). */
  private readonly changeSeenOf = new Map<string, number>();
  /** The start-up gate (allSynced) is open. */
  private started = false;
  private startHolds = 0;
  /** When the oldest change not yet rendered arrived (0: none pending). */
  private oldestPending = 0;
  /** When the oldest change not yet in a delta version arrived (0: none pending). */
  private oldestDeltaPending = 0;
  /** Per-cluster sync state and its metrics. */
  readonly clusterState: ClusterSyncMetrics;
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
    const wasmFor = (filter: FilterName) => join(config.wasmDir, `${filter}.wasm`);
    this.modules = new FilterValidator(wasmFor);
    this.validator = new WorkerValidator(wasmFor);
    this.debouncer = new Debouncer(config.debounce, () => this.render());
    this.deltaDebouncer = new Debouncer({ quietMs: config.delta.quietMs, maxMs: config.delta.maxMs }, async () => this.renderDeltas());
    this.targets = config.targets.map((target) => ({
      target,
      eager: !!(target.ecds || target.wasmPlugin),
      ...(target.ecds && { ecds: new EcdsFileTarget(target.ecds.file, target.ecds.template) }),
    }));
    this.deltas = new DeltaEndpoints((name) => this.targets.find((s) => s.target.name === name)?.target.network, this.networks, this.metrics);
    this.pushes = new Pusher(config.push ?? DEFAULT_PUSH, this.metrics, (level, message) => this.log(level, message));
    for (const state of this.targets) for (const d of this.deliveriesOf(state)) this.pushes.add(state.target.name, d);
    for (const t of config.targets) {
      if (this.networks.has(t.network)) continue;
      // One shadow of each compiled filter (and own configuration) the network's targets run.
      const shadows = new Map<string, FilterShadow>();
      for (const u of config.targets) {
        if (u.network !== t.network) continue;
        const key = JSON.stringify([u.filter, u.config]);
        if (!shadows.has(key)) shadows.set(key, new FilterShadow(u, () => this.modules.bytes(u.filter), () => viewFor(this.computer.current, u.network).snapshot));
      }
      this.networks.set(t.network, { view: new NetworkView(t.network), channel: new DeltaChannel(this.epoch, config.delta, [...shadows.values()]), shadows: [...shadows.values()], waiters: new Set() });
    }
    const m = this.metrics;
    declareFeedMetrics(m);
    this.metrics.set("feed_delta_epoch", {}, this.epoch);
    declareBuildInfo(m);
    this.clusterState = new ClusterSyncMetrics(m, clusters.map((c) => c.clusterId));
  }

  // ------------------------------------------------------------------ inputs

  /** The watch layer (or a test) changed some cluster's objects. */
  changed(clusterId?: string): void {
    if (clusterId) {
      this.metrics.add("feed_events_total", { cluster: clusterId });
      this.clusterState.event(clusterId);
    }
    if (this.oldestPending === 0) this.oldestPending = Date.now();
    if (this.oldestDeltaPending === 0) this.oldestDeltaPending = Date.now();
    this.deltaDebouncer.poke();
    if (this.targets.some((t) => t.eager)) this.debouncer.poke();
  }

  /** A file source refused a file or a document (file_source.ts); the objects in force stay. */
  sourceRefused(clusterId: string, reason: string): void {
    this.metrics.add("feed_file_refused_total", { cluster: clusterId, reason });
  }

  markSynced(clusterId: string): void {
    this.synced.add(clusterId);
    this.timedOut.delete(clusterId);
    this.clusterState.listed(clusterId);
    // The initial lists are not changes to propagate: feed_propagation_seconds times the first
    // publication after them from here, not from the first object listed (a restart at 100k pods
    // would otherwise add one sample of the whole initial sync).
    if (this.allSynced()) {
      this.oldestPending = 0;
      this.oldestDeltaPending = 0;
    }
    this.changed();
  }

  /**
   * Every cluster's initial lists are in (watch.ts, file_source.ts), or the clusters still
   * listing were given up on (clusterTimedOut): only then is anything published. Once open, the
   * gate stays open: a cluster added later joins the model when its lists are in (synced()).
   */
  allSynced(): boolean {
    if (!this.started) this.started = this.startHolds === 0 && this.clusters.every((c) => this.synced.has(c.clusterId) || this.timedOut.has(c.clusterId));
    return this.started;
  }

  /** Keeps the start-up gate shut until the returned function runs (the remote secrets' first list). */
  holdStart(): () => void {
    this.startHolds++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.startHolds--;
      this.changed();
    };
  }

  /** The clusters whose objects the model is computed from: those whose initial lists are in. */
  private syncedClusters(): ClusterObjects[] {
    return this.clusters.filter((c) => this.synced.has(c.clusterId));
  }

  // -------------------------------------------- cluster lifecycle (cluster_set.ts calls these)

  /** A cluster joins (its objects count once it is synced). */
  addCluster(objects: ClusterObjects): void {
    this.clusters.push(objects);
    this.clusterState.added(objects.clusterId);
  }

  /** A cluster's objects are replaced by a new, synced set (new credentials, relisted). */
  replaceCluster(objects: ClusterObjects): void {
    const i = this.clusters.findIndex((c) => c.clusterId === objects.clusterId);
    if (i >= 0) this.clusters[i] = objects;
    else this.clusters.push(objects);
    this.markSynced(objects.clusterId);
  }

  /** A cluster leaves: its objects leave the model (published as a delta). */
  removeCluster(clusterId: string): void {
    const i = this.clusters.findIndex((c) => c.clusterId === clusterId);
    if (i >= 0) this.clusters.splice(i, 1);
    this.synced.delete(clusterId);
    this.timedOut.delete(clusterId);
    this.clusterState.forget(clusterId);
    this.metrics.clear("feed_objects");
    this.changed();
  }

  /** The model's options changed in place (caps, by config_reload.ts): recompute everything, publish the difference. */
  recompute(): void {
    this.computer.invalidate();
    this.changed();
  }

  /** The feed stops waiting for this cluster's initial lists (it keeps listing; synced() later). */
  /** A watch of the cluster failed / works again (feed_cluster_synced, feed_cluster_watch_errors_total). */
  watchFailed(clusterId: string, kind: string): void {
    this.clusterState.watchFailed(clusterId, kind);
  }

  watchRecovered(clusterId: string, kind: string): void {
    this.clusterState.watchRecovered(clusterId, kind);
  }

  clusterTimedOut(clusterId: string): void {
    if (!this.synced.has(clusterId)) this.timedOut.add(clusterId);
    this.changed();
  }

  /** Renders now (start-up after the initial lists; tests). */
  flush(): Promise<void> {
    return this.debouncer.flush();
  }

  /** Several replicas: only the Lease's holder writes, and only a replica in touch with its API server serves (serving_gate.ts). */
  useLease(lease: WriterLease, cluster: string, renewDeadlineMs: number): void {
    this.lease = lease;
    this.pushes.gate(() => lease.leading());
    const inputs = { contactAgeMs: () => lease.contactAgeMs(), failingWatches: () => this.clusterState.failingKinds(cluster), deltaPending: () => this.oldestDeltaPending !== 0 };
    // Cut off: the held polls are released, each then answered 503.
    this.gate = new ServingGate(renewDeadlineMs, inputs, this.metrics, this.log, () => this.networks.forEach((n) => [...n.waiters].forEach((w) => w())));
    this.gate.start();
  }

  /** Why this replica does not serve the channel now (undefined: it serves); `answered`: a 503 is sent (counted). */
  notServing(answered = false): string | undefined {
    return this.gate?.refusal(answered);
  }

  /** Set by stop(): the channel answers every poll at once, marked stopping (http.ts). */
  private stoppingNow = false;

  /** Whether the feed is stopping: its answers tell the filters to reconnect soon (http.ts). */
  stopping(): boolean {
    return this.stoppingNow;
  }

  stop(): void {
    this.stoppingNow = true;
    void this.validator.stop();
    this.gate?.stop();
    this.pushes.stop();
    this.debouncer.stop();
    this.deltaDebouncer.stop();
    for (const n of this.networks.values()) {
      for (const w of [...n.waiters]) w();
      n.channel.close();
    }
    // Every held poll is answered (marked stopping) before the channel's sockets close.
    this.deltas.answerAllNow();
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
    const changeSeen = this.oldestDeltaPending;
    let refused = false;
    try {
      const clusters = this.syncedClusters();
      for (const c of clusters) for (const [kind, n] of Object.entries(c.count())) this.metrics.set("feed_objects", { cluster: c.clusterId, kind }, n);
      const { mesh, changes } = this.computer.update(clusters);
      if (changes.full || changes.workloads.size > 0 || changes.services.size > 0) {
        this.metrics.clear("feed_model_gaps");
        for (const [reason, n] of mesh.gaps) this.metrics.set("feed_model_gaps", { reason }, n);
        this.caps.report(mesh, changes);
      }
      for (const [network, n] of this.networks) {
        const moved = n.view.update(mesh, changes);
        const checkedMs = n.shadows.reduce((sum, s) => sum + s.ms, 0);
        const outcome = n.channel.publish(n.view, mesh, moved);
        const checkMs = n.shadows.reduce((sum, s) => sum + s.ms, 0) - checkedMs;
        if (checkMs > 0) this.metrics.observe("feed_check_seconds", { path: "delta" }, checkMs / 1000);
        const names = this.targets.filter((t) => t.target.network === network).map((t) => t.target.name);
        if (outcome.published) {
          n.lastError = undefined;
          const now = Date.now();
          for (const name of names) {
            this.metrics.set("feed_delta_version", { target: name }, outcome.version);
            this.metrics.add("feed_delta_published_records_total", { target: name }, outcome.records);
            this.metrics.set("feed_delta_published_timestamp_seconds", { target: name }, now / 1000);
            if (changeSeen > 0) this.metrics.observe("feed_propagation_seconds", { target: name, path: "delta" }, (now - changeSeen) / 1000);
          }
          const waiters = [...n.waiters];
          n.waiters.clear();
          for (const w of waiters) w();
        } else if (outcome.error) {
          refused = true;
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
      refused = true;
      setTimeout(() => this.deltaDebouncer.poke(), 1000).unref();
      this.metrics.add("feed_render_errors_total", { target: "*" });
      this.log("error", `delta render failed, previous versions kept: ${(error as Error).stack ?? error}`);
    } finally {
      // A refused or failed version leaves its changes pending: the propagation of the version
      // that finally carries them counts from their arrival.
      if (!refused) this.oldestDeltaPending = 0;
      this.metrics.observe("feed_delta_render_seconds", {}, (performance.now() - started) / 1000);
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
      for (const state of this.targets) {
        const n = this.networks.get(state.target.network);
        if (state.eager && n) await this.renderTarget(state, n.view, changeSeen);
      }
    } catch (error) {
      // A bug or an unexpected object: nothing is published, the previous snapshots stay.
      this.metrics.add("feed_render_errors_total", { target: "*" });
      this.log("error", `render failed, previous snapshots kept: ${(error as Error).stack ?? error}`);
    } finally {
      this.metrics.observe("feed_render_seconds", {}, (performance.now() - started) / 1000);
      this.renders++;
      for (const w of this.waiters.splice(0)) w();
    }
  }

  /**
   * A lazy target's snapshot, rendered (and checked) now if the mesh moved since. Requests that
   * arrive while it is checked wait for the same render.
   */
  private renderLazy(state: TargetState): Promise<void> {
    const n = this.networks.get(state.target.network);
    if (!n || n.channel.version === 0) return Promise.resolve();
    if (state.lazyRender) return state.lazyRender;
    // Once per version, whatever the outcome: a refused target is not re-rendered per request.
    if (state.renderedAt === n.channel.version) return Promise.resolve();
    state.renderedAt = n.channel.version;
    const render = (async () => {
      try {
        this.renderDeltas();
        await this.checkAndKeep(state, n.view);
      } catch (error) {
        this.metrics.add("feed_render_errors_total", { target: state.target.name });
        this.log("error", `target ${state.target.name}: render failed, previous snapshot kept: ${(error as Error).stack ?? error}`);
      } finally {
        state.lazyRender = undefined;
      }
    })();
    state.lazyRender = render;
    return render;
  }

  /**
   * Renders and checks one target's snapshot of its network's view (the JSON made in slices, the
   * join and the check in the worker: check_worker.ts); keeps it as published when the filter
   * accepts it.
   */
  private async checkAndKeep(state: TargetState, view: NetworkView): Promise<{ version: string; text: string; bytes: number; digest: string; publishedAt: number } | undefined> {
    const t = state.target;
    const { verdict, rendered, unchanged, stats } = await this.validator.render(t.filter, t.network, t.config, view, state.published?.digest);
    if (unchanged) return undefined;
    this.metrics.observe("feed_check_seconds", { path: "snapshot" }, verdict.ms / 1000);
    if (!verdict.ok || !rendered) {
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
    return { version, text: rendered.text, bytes: rendered.bytes, digest: rendered.digest, publishedAt: state.published.publishedAt };
  }

  private async renderTarget(state: TargetState, view: NetworkView, changeSeen: number): Promise<void> {
    const kept = await this.checkAndKeep(state, view);
    if (!kept) return;
    // The oldest change this snapshot carries: its propagation is timed when a delivery lands.
    if (changeSeen > 0 && !this.changeSeenOf.has(state.target.name)) this.changeSeenOf.set(state.target.name, changeSeen);
    // The first attempt is awaited (a render ends with its deliveries tried); failures retry on their own.
    await this.pushes.want(state.target.name, kept, kept.publishedAt);
  }

  /** The target's deliveries as the pusher drives them. */
  private deliveriesOf(state: TargetState): Delivery[] {
    const t = state.target;
    const out: Delivery[] = [];
    const ecds = state.ecds;
    if (ecds) {
      out.push({
        kind: "ecds",
        where: `ECDS file ${t.ecds?.file}`,
        landed: async () => ecds.heldDigest(),
        push: (s) => this.timedPush(t.name, "ecds", async () => void ecds.write(s.version, s.text)),
      });
    }
    const applier = this.wasmPlugins;
    if (t.wasmPlugin && applier) {
      out.push({
        kind: "wasmplugin",
        where: `WasmPlugin ${t.wasmPlugin.namespace}/${t.wasmPlugin.name}`,
        landed: async () => applier.landedDigest?.(t),
        push: (s) => this.timedPush(t.name, "wasmplugin", () => applier.apply(t, s.version, JSON.parse(s.text) as Record<string, unknown>, s.bytes, s.digest)),
      });
    }
    return out;
  }

  /** One delivery attempt, timed (`feed_push_seconds`); a landed one stamps the target's delivery and propagation. */
  private async timedPush(target: string, delivery: string, push: () => Promise<void>): Promise<void> {
    const started = performance.now();
    try {
      await push();
    } finally {
      this.metrics.observe("feed_push_seconds", { target, delivery }, (performance.now() - started) / 1000);
    }
    const now = Date.now();
    this.metrics.set("feed_snapshot_delivered_timestamp_seconds", { target }, now / 1000);
    const seen = this.changeSeenOf.get(target);
    this.changeSeenOf.delete(target);
    if (seen !== undefined) this.metrics.observe("feed_propagation_seconds", { target, path: "snapshot" }, (now - seen) / 1000);
  }

  // ------------------------------------------------------------------ SnapshotSource

  async snapshot(target: string): Promise<PublishedSnapshot | undefined> {
    const state = this.targets.find((s) => s.target.name === target);
    if (state && !state.eager) await this.renderLazy(state);
    return state?.published;
  }

  async snapshots(): Promise<PublishedSnapshot[]> {
    await Promise.all(this.targets.filter((s) => !s.eager).map((s) => this.renderLazy(s)));
    return this.targets.flatMap((s) => (s.published ? [s.published] : []));
  }

  /**
   * Why the feed has no model to serve yet (its start: the initial lists are not in, or a target
   * has published nothing); undefined once it has one. The channel listens from then on (main.ts).
   */
  noModel(): string | undefined {
    const notSynced = this.clusters.filter((c) => !this.synced.has(c.clusterId)).map((c) => c.clusterId);
    if (!this.allSynced()) return notSynced.length > 0 ? `waiting for the initial lists of ${notSynced.join(", ")}` : "waiting for the remote secrets' first list";
    const unpublished = this.targets.filter((s) => (s.eager ? !s.published : (this.networks.get(s.target.network)?.channel.version ?? 0) === 0)).map((s) => s.target.name);
    if (unpublished.length > 0) return `nothing published yet for ${unpublished.join(", ")}`;
    return undefined;
  }

  /** main.ts: whether the channel listens (it does once there is a model); unready until it does. */
  channelListening: (() => boolean) | undefined;

  ready(): { ready: boolean; reason: string } {
    const notSynced = this.clusters.filter((c) => !this.synced.has(c.clusterId)).map((c) => c.clusterId);
    const noModel = this.noModel();
    if (noModel !== undefined) return { ready: false, reason: noModel };
    if (this.channelListening?.() === false) return { ready: false, reason: "the channel is not listening yet" };
    const notServing = this.gate?.refusal();
    if (notServing !== undefined) return { ready: false, reason: `not serving the channel: ${notServing}` };
    const now = Date.now();
    const behind = this.pushes.behind().map((b) => `${b.target} (${b.delivery}) behind for ${Math.round((now - b.since) / 1000)} s${b.error ? `: ${b.error}` : ""}`);
    const unreadyAfter = (this.config.push ?? DEFAULT_PUSH).unreadyAfterMs;
    const late = this.pushes.behind().some((b) => now - b.since >= unreadyAfter);
    if (late) return { ready: false, reason: `target ${behind.join("; ")}` };
    const role = this.lease ? (this.lease.leading() ? "; the writers' leader" : `; leader ${this.lease.holder() || "unknown"}`) : "";
    // Serving, degraded: the model lacks these clusters' objects (istiod serves what it has too).
    const degraded = notSynced.length > 0 ? `, degraded: clusters not synced: ${notSynced.join(", ")}` : "";
    return { ready: true, reason: `ok${degraded}${role}${behind.length > 0 ? `; retrying ${behind.join("; ")}` : ""}` };
  }

  // ------------------------------------------------------------------ DeltaSource (delta_endpoints.ts)

  hasTarget = (target: string): boolean => this.deltas.hasTarget(target);
  deltaVersion = (target: string): number => this.deltas.deltaVersion(target);
  deltaUpToDate = (target: string, epoch: number, version: number): boolean => this.deltas.deltaUpToDate(target, epoch, version);
  waitForDelta = (target: string, ms: number, woken: () => void): (() => void) => this.deltas.waitForDelta(target, ms, woken);
  answerInTurn = (answer: () => void): void => this.deltas.answerInTurn(answer);
  deltaAnswer = (target: string, epoch: number, version: number, client?: ClientState): DeltaAnswer | undefined => this.deltas.deltaAnswer(target, epoch, version, client);
  heldChanged = (delta: number): void => this.deltas.heldChanged(delta);

  metricsText(): Promise<string> {
    this.pushes.refreshMetrics();
    return this.metrics.text();
  }

  /** The last error of each target (for tests and /snapshots). */
  lastErrors(): Record<string, string | undefined> {
    return Object.fromEntries(this.targets.map((s) => [s.target.name, s.lastError]));
  }
}

export { KINDS };

// The feed's core loop, independent of how objects arrive (watch.ts feeds it from API servers;
// tests can feed it directly): a change pokes the debouncer; a render computes the mesh once,
// renders each target's view, checks it in the compiled filter, and only then publishes it to
// the target's deliveries. A refused or failed render keeps the previous snapshot everywhere.
import { join } from "node:path";
import type { ClusterObjects } from "./cluster_objects.js";
import { KINDS } from "./cluster_objects.js";
import { MeshComputer, type MeshOptions } from "./compute.js";
import type { FeedConfig, TargetConfig } from "./config.js";
import { Debouncer } from "./debounce.js";
import { EcdsFileTarget } from "./deliver/ecds.js";
import type { PublishedSnapshot, SnapshotSource } from "./http.js";
import { Metrics } from "./metrics.js";
import { renderPluginConfig } from "./render.js";
import { FilterValidator } from "./validate.js";
import { viewFor } from "./view.js";

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
}

export class FeedController implements SnapshotSource {
  readonly metrics = new Metrics();
  private readonly computer: MeshComputer;
  private readonly validator: FilterValidator;
  private readonly debouncer: Debouncer;
  private readonly targets: TargetState[];
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
    this.validator = new FilterValidator((filter) => join(config.wasmDir, `${filter}.wasm`));
    this.debouncer = new Debouncer(config.debounce, () => this.render());
    this.targets = config.targets.map((target) => ({ target, ...(target.ecds && { ecds: new EcdsFileTarget(target.ecds.file, target.ecds.template) }) }));
    const m = this.metrics;
    m.declare("feed_objects", "gauge", "objects the feed holds, by cluster and kind");
    m.declare("feed_events_total", "counter", "watch events received, by cluster");
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
  }

  // ------------------------------------------------------------------ inputs

  /** The watch layer (or a test) changed some cluster's objects. */
  changed(clusterId?: string): void {
    if (clusterId) this.metrics.add("feed_events_total", { cluster: clusterId });
    if (this.oldestPending === 0) this.oldestPending = Date.now();
    this.debouncer.poke();
  }

  markSynced(clusterId: string): void {
    this.synced.add(clusterId);
    this.changed();
  }

  /** Renders now (start-up after the initial lists; tests). */
  flush(): Promise<void> {
    return this.debouncer.flush();
  }

  stop(): void {
    this.debouncer.stop();
  }

  /** Resolves after the next render finishes. */
  nextRender(): Promise<void> {
    return new Promise((done) => this.waiters.push(done));
  }

  // ------------------------------------------------------------------ render

  private async render(): Promise<void> {
    const started = performance.now();
    const changeSeen = this.oldestPending;
    this.oldestPending = 0;
    try {
      for (const c of this.clusters) for (const [kind, n] of Object.entries(c.count())) this.metrics.set("feed_objects", { cluster: c.clusterId, kind }, n);
      const mesh = this.computer.compute(this.clusters);
      this.metrics.clear("feed_model_gaps");
      for (const [reason, n] of mesh.gaps) this.metrics.set("feed_model_gaps", { reason }, n);
      const views = new Map<string, ReturnType<typeof viewFor>>();
      for (const state of this.targets) {
        const t = state.target;
        let view = views.get(t.network);
        if (!view) {
          view = viewFor(mesh, t.network);
          views.set(t.network, view);
        }
        for (const [reason, n] of Object.entries({ no_gateway: view.stats.droppedNoGateway, address_conflict: view.stats.addressConflicts, vip_conflict: view.stats.vipConflicts })) {
          this.metrics.set("feed_view_dropped", { target: t.name, reason }, n);
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

  private async renderTarget(state: TargetState, snapshot: ReturnType<typeof viewFor>["snapshot"], stats: ReturnType<typeof viewFor>["stats"]): Promise<void> {
    const t = state.target;
    const rendered = renderPluginConfig(t.filter, t.network, t.config, snapshot);
    if (state.published?.digest === rendered.digest) return;
    const verdict = this.validator.check(t.filter, rendered.text);
    this.metrics.set("feed_validate_seconds", { target: t.name }, verdict.ms / 1000);
    if (!verdict.ok) {
      this.metrics.add("feed_render_errors_total", { target: t.name });
      const kept = state.published ? `version ${state.published.version} stays` : "nothing published yet";
      const message = `target ${t.name}: ${t.filter} refuses the new snapshot (${verdict.error}); not published, ${kept}`;
      if (message !== state.lastError) this.log("error", message);
      state.lastError = message;
      return;
    }
    state.lastError = undefined;
    const version = `${this.epoch}-${++this.sequence}`;
    const published = { target: t.name, version, text: rendered.text, bytes: rendered.bytes, publishedAt: Date.now(), digest: rendered.digest };
    if (state.ecds) {
      try {
        state.ecds.write(version, rendered.text);
      } catch (error) {
        this.metrics.add("feed_push_errors_total", { target: t.name, delivery: "ecds" });
        this.log("error", `target ${t.name}: writing ${t.ecds?.file} failed: ${(error as Error).message}`);
      }
    }
    if (t.wasmPlugin && this.wasmPlugins) {
      try {
        await this.wasmPlugins.apply(t, version, JSON.parse(rendered.text) as Record<string, unknown>, rendered.bytes);
      } catch (error) {
        this.metrics.add("feed_push_errors_total", { target: t.name, delivery: "wasmplugin" });
        this.log("error", `target ${t.name}: WasmPlugin ${t.wasmPlugin.namespace}/${t.wasmPlugin.name} not applied: ${(error as Error).message}`);
      }
    }
    state.published = published;
    this.metrics.set("feed_snapshot_version", { target: t.name }, this.sequence);
    this.metrics.set("feed_snapshot_bytes", { target: t.name }, rendered.bytes);
    this.metrics.set("feed_snapshot_workloads", { target: t.name }, stats.workloads);
    this.metrics.set("feed_snapshot_services", { target: t.name }, stats.services);
    this.log("info", `target ${t.name}: published ${version} (${stats.workloads} workloads, ${stats.services} services, ${rendered.bytes} bytes; checked by ${t.filter} in ${verdict.ms.toFixed(0)} ms)`);
  }

  // ------------------------------------------------------------------ SnapshotSource

  snapshot(target: string): PublishedSnapshot | undefined {
    return this.targets.find((s) => s.target.name === target)?.published;
  }

  snapshots(): PublishedSnapshot[] {
    return this.targets.flatMap((s) => (s.published ? [s.published] : []));
  }

  ready(): { ready: boolean; reason: string } {
    const notSynced = this.clusters.filter((c) => !this.synced.has(c.clusterId)).map((c) => c.clusterId);
    if (notSynced.length > 0) return { ready: false, reason: `waiting for the initial lists of ${notSynced.join(", ")}` };
    const unpublished = this.targets.filter((s) => !s.published).map((s) => s.target.name);
    if (unpublished.length > 0) return { ready: false, reason: `nothing published yet for ${unpublished.join(", ")}` };
    return { ready: true, reason: "ok" };
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

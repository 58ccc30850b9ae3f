// The configuration file, followed at run time. Every `configReloadMs` the file (and each
// kubeconfig file it names) is read again; when it changed it is checked as at start
// (config.ts) and then:
//   - a file that does not parse or check: one line naming the field, nothing changes, counted
//     as `refused`;
//   - what can change safely applies now: `clusters` (added, removed, another kubeconfig or
//     files path, or the kubeconfig file's content: cluster_set.ts restarts that cluster's
//     informers), the `readers` of each target, `caps` (the model is recomputed and the
//     difference published), `debounce` (the next burst), `clusterSyncTimeoutSeconds` (for
//     clusters added from then on), `configReloadMs`;
//   - everything else keeps its running value until a restart: one line per field saying it
//     "needs a restart", counted as `needs_restart` (feed/README.md's configuration table says
//     which field is which).
import { readFileSync } from "node:fs";
import type { ClusterSet, ClusterSource } from "./cluster_set.js";
import { parseFeedConfig, type ClusterConfig, type FeedConfig } from "./config.js";
import type { Logger } from "./controller.js";
import type { Metrics } from "./metrics.js";
import { fingerprint } from "./remote_secrets.js";
import { loadKubeConfig } from "./watch.js";

const RELOADS = "feed_config_reloads_total";

/** The fields that apply without a restart (the rest need one). */
export const LIVE_FIELDS = ["clusters", "targets[].readers", "caps", "debounce", "clusterSyncTimeoutSeconds", "configReloadMs"] as const;

/** A configured cluster's source; its fingerprint changes with the kubeconfig file's content. */
export function configClusterSource(c: ClusterConfig): ClusterSource {
  if (c.kubeconfig) {
    const text = c.kubeconfig === "in-cluster" ? "in-cluster" : readFileSync(c.kubeconfig, "utf8");
    return { kind: "kube", kubeConfig: loadKubeConfig(c.kubeconfig), fingerprint: `kubeconfig ${c.kubeconfig} ${fingerprint(text)}` };
  }
  return { kind: "files", path: c.files ?? "", fingerprint: `files ${c.files ?? ""}` };
}

/** The fingerprint alone (cheap: no client built), to tell whether a cluster's source changed. */
function sourceFingerprint(c: ClusterConfig): string {
  if (c.kubeconfig) return `kubeconfig ${c.kubeconfig} ${fingerprint(c.kubeconfig === "in-cluster" ? "in-cluster" : readFileSync(c.kubeconfig, "utf8"))}`;
  return `files ${c.files ?? ""}`;
}

/** Fields whose change needs a restart, as [name, value] pairs compared by their JSON. */
function restartFields(c: FeedConfig): Array<[string, unknown]> {
  return [
    ["trustDomain", c.trustDomain],
    ["domainSuffix", c.domainSuffix],
    ["systemNamespace", c.systemNamespace],
    ["meshNetworksFile", c.meshNetworksFile],
    ["delta", c.delta],
    ["operator", c.operator],
    ["channel", c.channel],
    ["health", c.health],
    ["wasmDir", c.wasmDir],
    ["remoteSecrets", c.remoteSecrets],
    // Targets own channels, shadow VMs and deliveries; only their readers change live.
    ["targets (other than readers)", c.targets.map((t) => ({ ...t, readers: undefined }))],
  ];
}

export interface ReloadHooks {
  clusters: ClusterSet;
  setReaders(target: string, readers: readonly string[]): void;
  /** The model's options (caps) changed in place: recompute the model. */
  recompute(): void;
  metrics: Metrics;
  log: Logger;
}

export class ConfigReloader {
  private text: string;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The last warning per cluster about its kubeconfig file. */
  private readonly warned = new Map<string, string>();

  constructor(
    private readonly path: string,
    /** The configuration in force (live fields updated as they apply). */
    private running: FeedConfig,
    private readonly hooks: ReloadHooks,
  ) {
    this.text = readFileSync(path, "utf8");
    hooks.metrics.declare(RELOADS, "counter", "configuration file changes, by result (applied, needs_restart: some fields wait for a restart, refused: the file does not check)");
  }

  start(): void {
    const tick = () => {
      if (this.stopped || this.running.configReloadMs === 0) return;
      this.timer = setTimeout(() => {
        this.check();
        tick();
      }, this.running.configReloadMs);
      this.timer.unref();
    };
    tick();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** Reads the file (and the kubeconfigs) again; applies what changed. */
  check(): void {
    const { log, metrics } = this.hooks;
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (error) {
      // A ConfigMap volume swaps its files through a symlink: a read can miss once.
      log("warn", `config reload: cannot read ${this.path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); the configuration in force stays`);
      return;
    }
    if (text !== this.text) {
      this.text = text;
      let next: FeedConfig;
      try {
        next = parseFeedConfig(text, this.path);
      } catch (error) {
        metrics.add(RELOADS, { result: "refused" });
        log("error", `config reload refused, the configuration in force stays: ${(error as Error).message}`);
        return;
      }
      this.apply(next);
    }
    this.followKubeconfigs();
  }

  private apply(next: FeedConfig): void {
    const { log, metrics } = this.hooks;
    const now = new Map(restartFields(next));
    const waiting: string[] = [];
    for (const [field, value] of restartFields(this.running)) {
      if (JSON.stringify(value) !== JSON.stringify(now.get(field))) waiting.push(field);
    }
    for (const field of waiting) log("warn", `config reload: ${field} changed: needs a restart (the running value stays)`);
    this.applyClusters(next);
    this.applyReaders(next);
    // The controller's debouncer and the computer hold these very objects (main.ts): changed in place.
    if (JSON.stringify(this.running.debounce) !== JSON.stringify(next.debounce)) {
      Object.assign(this.running.debounce, next.debounce);
      log("info", `config reload: debounce now ${JSON.stringify(next.debounce)}`);
    }
    if (JSON.stringify(this.running.caps) !== JSON.stringify(next.caps)) {
      Object.assign(this.running.caps, next.caps);
      log("info", `config reload: caps now ${JSON.stringify(next.caps)}; the model is recomputed`);
      this.hooks.recompute();
    }
    this.hooks.clusters.timeoutSeconds = next.clusterSyncTimeoutSeconds;
    this.running = { ...this.running, clusters: next.clusters, clusterSyncTimeoutSeconds: next.clusterSyncTimeoutSeconds, configReloadMs: next.configReloadMs, targets: this.running.targets.map((t) => ({ ...t, readers: next.targets.find((n) => n.name === t.name)?.readers ?? t.readers })) };
    metrics.add(RELOADS, { result: waiting.length > 0 ? "needs_restart" : "applied" });
    log("info", `config reload: applied (${LIVE_FIELDS.join(", ")})${waiting.length > 0 ? `; waiting for a restart: ${waiting.join(", ")}` : ""}`);
  }

  private applyClusters(next: FeedConfig): void {
    const set = this.hooks.clusters;
    const wanted = new Map(next.clusters.map((c) => [c.id, c]));
    for (const id of set.ids()) if (set.originOf(id) === "config" && !wanted.has(id)) set.remove(id);
    set.waitForever = next.clusters[0]?.id;
    for (const c of next.clusters) {
      const origin = set.originOf(c.id);
      if (origin !== undefined && origin !== "config") {
        this.hooks.log("error", `config reload: clusters: ${c.id} is held by ${origin}; the configuration's entry is not used while it is`);
        continue;
      }
      let source: ClusterSource;
      try {
        if (origin === "config" && set.fingerprintOf(c.id) === sourceFingerprint(c)) continue;
        source = configClusterSource(c);
      } catch (error) {
        this.hooks.log("error", `config reload: clusters: ${c.id}: ${(error as Error).message}; ${origin ? "its previous source stays" : "not added"}`);
        continue;
      }
      if (origin === "config") set.update(c.id, source);
      else set.add(c.id, "config", source);
    }
  }

  private applyReaders(next: FeedConfig): void {
    for (const t of next.targets) {
      const before = this.running.targets.find((r) => r.name === t.name);
      if (!before || JSON.stringify(before.readers) === JSON.stringify(t.readers)) continue;
      this.hooks.setReaders(t.name, t.readers);
      this.hooks.log("info", `config reload: target ${t.name}: readers now ${JSON.stringify(t.readers)}`);
    }
  }

  /** A kubeconfig file rewritten in place (a rotated token or certificate) restarts its cluster. */
  private followKubeconfigs(): void {
    const set = this.hooks.clusters;
    for (const c of this.running.clusters) {
      if (!c.kubeconfig || c.kubeconfig === "in-cluster" || set.originOf(c.id) !== "config") continue;
      try {
        if (set.fingerprintOf(c.id) === sourceFingerprint(c)) continue;
        set.update(c.id, configClusterSource(c));
      } catch (error) {
        // Once per problem, not every configReloadMs.
        const message = `config reload: clusters: ${c.id}: ${(error as Error).message}; its previous credentials stay`;
        if (this.warned.get(c.id) !== message) this.hooks.log("warn", message);
        this.warned.set(c.id, message);
        continue;
      }
      this.warned.delete(c.id);
    }
  }
}

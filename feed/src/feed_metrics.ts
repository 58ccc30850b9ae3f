// The feed's own metrics that are not one line at a call site: histogram buckets chosen from the
// measured figures, feed_build_info, and each cluster's sync state.
import { readFileSync } from "node:fs";
import type { Metrics } from "./metrics.js";

// Buckets from bench/feed/README.md's figures. A delta render of one change takes ~0.25 ms (p99
// 12-48 ms); a first full compute at 100k pods 2-4 s; the snapshot path's render 48 ms at 1k
// pods, 0.3 s at 10k, 3.5 s at 100k.
export const RENDER_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
// A check of one change in the filter shadows: 1-45 ms; a full load (first version, JSON at
// 100k pods): seconds.
export const CHECK_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// An ECDS file write (22.7 MB at 100k pods) or a WasmPlugin server-side apply (an API round trip,
// the admission webhooks, etcd).
export const PUSH_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
// Watch event → publication: the delta debounce plus a render (the target is p99 < 1 s, so 1 s is
// a boundary); the snapshot path took 0.2-8.6 s from 1k to 100k pods.
export const PROPAGATION_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 30, 60, 120];

// Set by the image's bundler (feed/image/bundle.mjs); absent when the feed runs from source.
declare const FEED_BUILD_VERSION: string | undefined;
declare const FEED_BUILD_REVISION: string | undefined;

function sourceVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: string }).version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** feed_build_info{version,revision,nodejs} 1: which build a feed runs (join it onto other series). */
export function declareBuildInfo(m: Metrics): void {
  const version = typeof FEED_BUILD_VERSION === "string" ? FEED_BUILD_VERSION : sourceVersion();
  const revision = typeof FEED_BUILD_REVISION === "string" ? FEED_BUILD_REVISION : "unknown";
  m.declare("feed_build_info", "gauge", "the feed's build: release version, source revision (git, when built as an image), Node.js version; always 1");
  m.set("feed_build_info", { version, revision, nodejs: process.versions.node }, 1);
}

/**
 * Each cluster's sync state. A cluster is synced (feed_cluster_synced 1) once its initial lists
 * are in and while none of its watches is failing; a watch that fails (API server unreachable,
 * credentials refused) makes it 0 until that watch is established again. The objects last seen
 * stay in force meanwhile (watch.ts), so 0 means "what the feed serves for this cluster may be
 * old", not "gone".
 */
export class ClusterSyncMetrics {
  private readonly listedClusters = new Set<string>();
  /** cluster → kinds whose watch failed and is not established again. */
  private readonly failing = new Map<string, Set<string>>();

  constructor(
    private readonly m: Metrics,
    clusterIds: string[],
  ) {
    m.declare("feed_cluster_synced", "gauge", "1 when the cluster's initial lists are in and none of its watches is failing; 0 otherwise (the objects last seen stay in force)");
    m.declare("feed_cluster_last_event_timestamp_seconds", "gauge", "when the last watch event of the cluster arrived (Unix seconds)");
    m.declare("feed_cluster_watch_errors_total", "counter", "failed lists or watches, by cluster and kind (each is retried after a back-off)");
    for (const id of clusterIds) this.update(id);
  }

  /** The cluster's initial lists are in. */
  listed(clusterId: string): void {
    this.listedClusters.add(clusterId);
    this.update(clusterId);
  }

  /** A cluster joined at run time (not synced until its lists are in). */
  added(clusterId: string): void {
    this.update(clusterId);
  }

  /** A watch event of the cluster arrived. */
  event(clusterId: string): void {
    this.m.set("feed_cluster_last_event_timestamp_seconds", { cluster: clusterId }, Date.now() / 1000);
  }

  watchFailed(clusterId: string, kind: string): void {
    this.m.add("feed_cluster_watch_errors_total", { cluster: clusterId, kind });
    let kinds = this.failing.get(clusterId);
    if (!kinds) this.failing.set(clusterId, (kinds = new Set()));
    kinds.add(kind);
    this.update(clusterId);
  }

  watchRecovered(clusterId: string, kind: string): void {
    const kinds = this.failing.get(clusterId);
    if (!kinds?.delete(kind)) return;
    if (kinds.size === 0) this.failing.delete(clusterId);
    this.update(clusterId);
  }

  /** The cluster is no longer read (removed at run time): its series go. */
  forget(clusterId: string): void {
    this.listedClusters.delete(clusterId);
    this.failing.delete(clusterId);
    for (const name of ["feed_cluster_synced", "feed_cluster_last_event_timestamp_seconds", "feed_cluster_watch_errors_total"]) this.m.remove(name, { cluster: clusterId });
  }

  /** Kinds of the cluster whose list or watch is failing now. */
  failingKinds(clusterId: string): number {
    return this.failing.get(clusterId)?.size ?? 0;
  }

  synced(clusterId: string): boolean {
    return this.listedClusters.has(clusterId) && !this.failing.has(clusterId);
  }

  private update(clusterId: string): void {
    this.m.set("feed_cluster_synced", { cluster: clusterId }, this.synced(clusterId) ? 1 : 0);
  }
}

/** The feed's own metrics (the controller's, its channels' and deliveries'): names, types, help and buckets in one place. */
export function declareFeedMetrics(m: Metrics): void {
  m.declare("feed_objects", "gauge", "objects the feed holds, by cluster and kind");
  m.declare("feed_events_total", "counter", "watch events received, by cluster");
  m.declare("feed_file_refused_total", "counter", "files (or documents) a file source refused, by cluster and reason; a refused file's previous objects stay");
  m.declare("feed_snapshot_version", "gauge", "sequence number of the target's published snapshot (the n of <epoch>-<n>)");
  m.declare("feed_snapshot_bytes", "gauge", "size of the target's published plugin configuration");
  m.declare("feed_snapshot_workloads", "gauge", "workloads in the target's published snapshot");
  m.declare("feed_snapshot_services", "gauge", "services in the target's published snapshot");
  m.declare("feed_render_seconds", "histogram", "duration of the snapshot path's renders (compute, views, JSON, check, delivery)", RENDER_BUCKETS);
  m.declare("feed_check_seconds", "histogram", "time the compiled filters took to check a new model, by path (delta: a version in the network's filter shadows; snapshot: a target's JSON)", CHECK_BUCKETS);
  m.declare("feed_push_seconds", "histogram", "duration of one delivery of a target's snapshot, by target and delivery (ecds, wasmplugin)", PUSH_BUCKETS);
  m.declare("feed_propagation_seconds", "histogram", "from the arrival of the oldest watch event a publication carries to that publication, by target and path (delta: version published on the channel; snapshot: delivered)", PROPAGATION_BUCKETS);
  m.declare("feed_delta_published_timestamp_seconds", "gauge", "when the target's current delta version was published (Unix seconds)");
  m.declare("feed_snapshot_delivered_timestamp_seconds", "gauge", "when the target's current snapshot was last delivered in full (ECDS file written, WasmPlugin applied; Unix seconds), for targets with a delivery");
  m.declare("feed_render_errors_total", "counter", "snapshots the filter refused (not published; the previous one stays), by target");
  m.declare("feed_model_gaps", "gauge", "objects carrying something the model cannot express, by reason");
  m.declare("feed_view_dropped", "gauge", "workloads, addresses and VIPs left out of a target's view, by reason");
  m.declare("feed_delta_version", "gauge", "the target's current delta version (in epoch feed_delta_epoch)");
  m.declare("feed_delta_epoch", "gauge", "the feed's epoch (its start time in ms): a client of another epoch gets a full message");
  m.declare("feed_delta_render_seconds", "histogram", "duration of the delta path's renders (incremental compute, views, diff, check)", RENDER_BUCKETS);
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
  m.declare("feed_channel_serving", "gauge", "1 while this replica serves the channel; 0 while it answers 503 (with leaderElection: cut off from the API server holding the Lease for renewDeadlineMs, or resyncing after it)");
  m.set("feed_channel_serving", {}, 1);
  m.declare("feed_channel_unavailable_total", "counter", "channel requests answered 503 because this replica does not serve, by reason (cut_off, resyncing)");
  m.declare("feed_delta_held_total", "counter", "long polls that were held (answered on a change or when their wait ran out)");
}

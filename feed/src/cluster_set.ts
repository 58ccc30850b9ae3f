// The clusters the feed reads, at run time: each one's objects (ClusterObjects) and what fills
// them (a ClusterWatch of an API server, or a FileSource). Clusters come from the configuration
// file (`clusters`, reloaded by config_reload.ts) and from Istio's remote secrets
// (remote_secrets.ts); both add, change and remove them here. What istiod does for the same
// events (pkg/kube/multicluster) is followed:
//   - add: the cluster's informers start; its objects join the model once its initial lists are
//     in. Until then it does not hold the feed back for longer than the sync timeout (istiod's
//     PILOT_REMOTE_CLUSTER_TIMEOUT): after it, the feed publishes from the clusters it has,
//     reports this one not synced, and keeps listing it; when its lists come in, its objects
//     arrive as a delta. The first configured cluster (the feed's own, istiod's config cluster)
//     is waited for without a limit.
//   - change (rotated token or certificates): new informers with the new credentials fill a new
//     set of objects while the old ones keep serving; once the new lists are in, the new set
//     replaces the old (one full recompute, published as the difference) and the old informers
//     stop. A change to an identical kubeconfig does nothing.
//   - remove: the informers stop and the cluster's objects leave the model (a delta).
import type { KubeConfig } from "@kubernetes/client-node";
import { ClusterObjects } from "./cluster_objects.js";
import type { Logger } from "./controller.js";
import { FileSource } from "./file_source.js";
import type { Metrics } from "./metrics.js";
import { ClusterWatch } from "./watch.js";

/** Where a cluster's objects come from; `fingerprint` tells a change from a repeat. */
export type ClusterSource = { kind: "kube"; kubeConfig: KubeConfig; fingerprint: string } | { kind: "files"; path: string; fingerprint: string };

/** What the set needs from the controller (FeedController implements it). */
export interface ClusterHost {
  readonly metrics: Metrics;
  addCluster(objects: ClusterObjects): void;
  replaceCluster(objects: ClusterObjects): void;
  removeCluster(clusterId: string): void;
  markSynced(clusterId: string): void;
  clusterTimedOut(clusterId: string): void;
  changed(clusterId?: string): void;
  sourceRefused(clusterId: string, reason: string): void;
  /** A watch of the cluster's current informers failed / works again (feed_cluster_synced). */
  watchFailed(clusterId: string, kind: string): void;
  watchRecovered(clusterId: string, kind: string): void;
}

interface Running {
  objects: ClusterObjects;
  watch: { start(): Promise<void>; stop(): Promise<void> };
  fingerprint: string;
  synced: boolean;
  /** Stopped (removed, or replaced): no late hook of it acts. */
  retired: boolean;
  timer?: NodeJS.Timeout;
}

interface Member {
  id: string;
  /** "config" or "secret <namespace>/<name>". */
  origin: string;
  current: Running;
  /** New credentials being listed; replaces `current` once synced. */
  next?: Running;
}

const TIMEOUTS = "feed_cluster_sync_timeouts_total";
const CHANGES = "feed_cluster_changes_total";

export class ClusterSet {
  private readonly members = new Map<string, Member>();
  private stopped = false;
  /** Start failures of the clusters present at start (startFeed fails with the first). */
  private readonly startErrors: Error[] = [];
  private afterStart = false;

  constructor(
    private readonly host: ClusterHost,
    private readonly log: Logger,
    /** Seconds a cluster may take to list before the feed stops waiting for it; 0: for ever. */
    public timeoutSeconds: number,
    /** The cluster waited for without a limit (the first configured one). */
    public waitForever: string | undefined,
  ) {
    const m = host.metrics;
    m.declare(TIMEOUTS, "counter", "clusters whose initial lists were not in within clusterSyncTimeoutSeconds (the feed served without them), by cluster");
    m.declare(CHANGES, "counter", "clusters added, updated (new credentials) and removed at run time, by origin (config, secret) and event");
  }

  ids(): string[] {
    return [...this.members.keys()];
  }

  originOf(id: string): string | undefined {
    return this.members.get(id)?.origin;
  }

  fingerprintOf(id: string): string | undefined {
    const m = this.members.get(id);
    return m?.next?.fingerprint ?? m?.current.fingerprint;
  }

  /** Each cluster: where it comes from, whether its objects are in the model, whether new credentials are being listed. */
  describe(): Array<{ id: string; origin: string; synced: boolean; rotating: boolean }> {
    return [...this.members.values()].map((m) => ({ id: m.id, origin: m.origin, synced: m.current.synced, rotating: m.next !== undefined }));
  }

  /** Adds a cluster; false if the id is taken (the caller reports it). */
  add(id: string, origin: string, source: ClusterSource): boolean {
    if (this.stopped || this.members.has(id)) return false;
    const current = this.launch(id, source);
    const member: Member = { id, origin, current };
    this.members.set(id, member);
    this.host.metrics.add(CHANGES, { origin: kindOf(origin), event: "added" });
    this.log("info", `cluster ${id} (${origin}): added; listing its objects`);
    this.host.addCluster(current.objects);
    this.run(member, current);
    return true;
  }

  /** New credentials or files for a cluster (nothing if identical). */
  update(id: string, source: ClusterSource): void {
    const member = this.members.get(id);
    if (!member || this.stopped) return;
    if (source.fingerprint === (member.next?.fingerprint ?? member.current.fingerprint)) return;
    this.host.metrics.add(CHANGES, { origin: kindOf(member.origin), event: "updated" });
    if (member.next) this.retire(member.next);
    member.next = undefined;
    if (!member.current.synced) {
      // Nothing of it is in the model yet: start over with the new source (and a new timeout).
      this.log("info", `cluster ${id} (${member.origin}): changed before its first lists were in; listing again with the new source`);
      this.retire(member.current);
      this.host.removeCluster(id);
      member.current = this.launch(id, source);
      this.host.addCluster(member.current.objects);
      this.run(member, member.current);
      return;
    }
    this.log("info", `cluster ${id} (${member.origin}): changed; listing with the new source while the previous one keeps serving`);
    member.next = this.launch(id, source);
    this.run(member, member.next);
  }

  /** Stops a cluster's informers; its objects leave the model. */
  remove(id: string): void {
    const member = this.members.get(id);
    if (!member) return;
    this.members.delete(id);
    if (member.next) this.retire(member.next);
    this.retire(member.current);
    this.host.removeCluster(id);
    this.host.metrics.add(CHANGES, { origin: kindOf(member.origin), event: "removed" });
    this.log("info", `cluster ${id} (${member.origin}): removed; its objects leave the model`);
  }

  /** Resolves once every cluster present now is synced or timed out; rejects with a start failure. */
  async started(): Promise<void> {
    for (;;) {
      if (this.startErrors.length > 0) throw this.startErrors[0];
      if (this.stopped || [...this.members.values()].every((m) => m.current.synced || this.gaveUp.has(m.current))) {
        this.afterStart = true;
        return;
      }
      await new Promise((done) => setTimeout(done, 50));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const all = [...this.members.values()].flatMap((m) => (m.next ? [m.current, m.next] : [m.current]));
    this.members.clear();
    await Promise.all(all.map((r) => this.retire(r)));
  }

  // ------------------------------------------------------------------ internals

  private readonly gaveUp = new WeakSet<Running>();

  private launch(id: string, source: ClusterSource): Running {
    const objects = new ClusterObjects(id);
    let running: Running;
    const hooks = {
      // A replacement's objects are not in the model yet: its changes count once it is swapped in.
      changed: (clusterId: string) => {
        if (this.members.get(id)?.current === running) this.host.changed(clusterId);
      },
      synced: () => this.synced(id, running),
      refused: (clusterId: string, reason: string) => this.host.sourceRefused(clusterId, reason),
      // feed_cluster_synced says whether the objects in the model are current: a replacement's
      // failures count once it is swapped in (the previous informers keep serving until then).
      watchFailed: (clusterId: string, kind: string) => {
        if (this.members.get(id)?.current === running) this.host.watchFailed(clusterId, kind);
      },
      watchRecovered: (clusterId: string, kind: string) => {
        if (this.members.get(id)?.current === running) this.host.watchRecovered(clusterId, kind);
      },
      log: this.log,
    };
    const watch = source.kind === "kube" ? new ClusterWatch(objects, source.kubeConfig, hooks) : new FileSource(objects, source.path, hooks);
    running = { objects, watch, fingerprint: source.fingerprint, synced: false, retired: false };
    return running;
  }

  private run(member: Member, running: Running): void {
    const seconds = this.timeoutSeconds;
    if (seconds > 0 && member.id !== this.waitForever) {
      running.timer = setTimeout(() => this.timedOut(member.id, running, seconds), seconds * 1000);
      running.timer.unref();
    }
    running.watch.start().catch((error: Error) => {
      if (this.members.get(member.id) !== member || running.retired) return;
      if (!this.afterStart) this.startErrors.push(error);
      this.log("error", `cluster ${member.id} (${member.origin}): cannot start: ${error.message}`);
    });
  }

  private timedOut(id: string, running: Running, seconds: number): void {
    const member = this.members.get(id);
    if (!member || running.synced || running.retired) return;
    this.host.metrics.add(TIMEOUTS, { cluster: id });
    if (member.current === running) {
      this.gaveUp.add(running);
      this.log("warn", `cluster ${id} (${member.origin}): initial lists not in after ${seconds} s; the feed serves without its objects and keeps trying`);
      this.host.clusterTimedOut(id);
    } else {
      this.log("warn", `cluster ${id} (${member.origin}): the new source's lists not in after ${seconds} s; the previous one keeps serving, still trying`);
    }
  }

  private synced(id: string, running: Running): void {
    const member = this.members.get(id);
    if (!member || running.synced || running.retired) return;
    running.synced = true;
    if (running.timer) clearTimeout(running.timer);
    if (member.next === running) {
      const old = member.current;
      member.current = running;
      member.next = undefined;
      this.host.replaceCluster(running.objects);
      void this.retire(old);
      this.log("info", `cluster ${id} (${member.origin}): now read with the new source; the previous informers stopped`);
    } else if (member.current === running) {
      this.host.markSynced(id);
    }
  }

  private retire(running: Running): Promise<void> {
    if (running.timer) clearTimeout(running.timer);
    running.retired = true;
    return running.watch.stop().catch(() => undefined);
  }
}

function kindOf(origin: string): string {
  return origin.startsWith("secret") ? "secret" : "config";
}

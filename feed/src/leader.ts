// Leader election over a coordination.k8s.io/v1 Lease, so that of several feed replicas exactly
// one writes (WasmPlugins, ECDS files) while all serve the channel. @kubernetes/client-node 1.4.0
// has no leader election of its own (client-go's tools/leaderelection has no JavaScript port in
// it), so this follows client-go's algorithm, which istiod runs, over the official client's
// CoordinationV1Api:
//   - every retryPeriod (jittered by up to 1.2x while not leading) read the Lease; take it when it
//     has no holder, or when its record has not changed for leaseDuration by *this* process's
//     clock (never the holder's timestamps: clocks differ between nodes); write with the read
//     resourceVersion, so that of two candidates only one wins (the other gets 409);
//   - the holder renews every retryPeriod; when it could not renew for renewDeadline it stops
//     writing (the writers ask `leading()`, which checks the last renewal's age itself, so a
//     renewal that hangs or an event loop that stalls cannot stretch it);
//   - on stop the holder releases the Lease (istiod's ReleaseOnCancel): the next one takes over
//     at its next try instead of waiting out the lease.
// Safety margin: the holder stops at renewDeadline after its last renewal; the others wait at
// least leaseDuration after they last saw the record change, which is after that renewal.
//
// Every replica's Lease loop is also its probe of the API server (`contactAgeMs`: since the last
// answer): a replica that has had none for renewDeadline stops serving the channel and turns
// unready (serving_gate.ts), since the model it holds can no longer follow the cluster.
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import type { LeaderElectionConfig } from "./config_ha.js";
import type { Logger } from "./controller.js";
import type { Metrics } from "./metrics.js";

export interface LeaderCallbacks {
  /** This replica now holds the Lease: start writing. */
  started(): void;
  /** This replica no longer holds it (lost, expired or released): stop writing now. */
  stopped(): void;
}

/** The Lease's record as this process last saw it. */
interface Observed {
  holder: string;
  resourceVersion: string;
  /** This process's clock when the record last changed (client-go's observedTime). */
  at: number;
  transitions: number;
  acquireTime?: Date;
}

const JITTER = 1.2;

export class LeaseElector {
  private readonly api: CoordinationV1Api;
  private observed: Observed | undefined;
  private leader = false;
  /** This process's clock at its last successful renewal (or acquisition). */
  private renewedAt = 0;
  /** Last time any request to the API server about the Lease succeeded. */
  private contactAt = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(
    kubeConfig: KubeConfig,
    readonly config: LeaderElectionConfig,
    private readonly callbacks: LeaderCallbacks,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {
    this.api = kubeConfig.makeApiClient(CoordinationV1Api);
    metrics.declare("feed_leader", "gauge", "1 while this replica holds the writers' Lease (it alone writes WasmPlugins and ECDS files), else 0");
    metrics.declare("feed_leader_transitions_total", "counter", "times this replica started or stopped leading, by change (started, stopped)");
    metrics.declare("feed_lease_transitions", "gauge", "the Lease's own count of holder changes (spec.leaseTransitions), as last read");
    metrics.set("feed_leader", { lease: this.leaseName }, 0);
  }

  private get leaseName(): string {
    return `${this.config.namespace}/${this.config.name}`;
  }

  start(): void {
    this.schedule(0);
  }

  /** True while this replica may write: it holds the Lease and renewed it within renewDeadline. */
  leading(): boolean {
    return this.leader && Date.now() - this.renewedAt < this.config.renewDeadlineMs;
  }

  /** The holder as last read ("" when none or not read yet). */
  holder(): string {
    return this.observed?.holder ?? "";
  }

  /** Time since the API server last answered a Lease request (any HTTP status counts as an answer). */
  contactAgeMs(): number {
    return Date.now() - this.contactAt;
  }

  /** Stops trying; a holder releases the Lease so that another replica takes over at its next try. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    const wasLeading = this.leading();
    this.lose("this replica is stopping");
    if (wasLeading) await this.release();
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => (this.running = undefined));
    }, ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const ok = await this.withTimeout(this.tryAcquireOrRenew());
    if (this.stopped) return;
    const period = this.config.retryPeriodMs;
    if (ok) {
      this.renewedAt = Date.now();
      if (!this.leader) this.gain();
      this.armDeadline();
    } else if (this.leader && !this.leading()) {
      this.lose(`could not renew the Lease for ${this.config.renewDeadlineMs} ms`);
    }
    this.schedule(this.leader ? period : period * (1 + Math.random() * (JITTER - 1)));
  }

  /** A request that hangs counts as failed after renewDeadline (the loop goes on; its late answer is ignored). */
  private withTimeout(attempt: Promise<boolean>): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((done) => (timer = setTimeout(() => done(false), this.config.renewDeadlineMs)));
    return Promise.race([attempt, late]).finally(() => clearTimeout(timer));
  }

  /** Drops the leadership at renewDeadline after the last renewal, whether or not the loop runs then. */
  private armDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = setTimeout(() => {
      if (this.leader && !this.leading()) this.lose(`could not renew the Lease for ${this.config.renewDeadlineMs} ms`);
    }, this.config.renewDeadlineMs + 1);
    this.deadline.unref();
  }

  private gain(): void {
    this.leader = true;
    this.metrics.set("feed_leader", { lease: this.leaseName }, 1);
    this.metrics.add("feed_leader_transitions_total", { lease: this.leaseName, change: "started" });
    this.log("info", `lease ${this.leaseName}: ${this.config.identity} is the leader; it writes the targets' deliveries`);
    this.callbacks.started();
  }

  private lose(why: string): void {
    if (!this.leader) return;
    this.leader = false;
    if (this.deadline) clearTimeout(this.deadline);
    this.metrics.set("feed_leader", { lease: this.leaseName }, 0);
    this.metrics.add("feed_leader_transitions_total", { lease: this.leaseName, change: "stopped" });
    this.log("warn", `lease ${this.leaseName}: ${this.config.identity} stopped leading (${why}); it stops writing`);
    this.callbacks.stopped();
  }

  private record(acquireTime: Date, transitions: number, holder = this.config.identity, seconds = this.config.leaseDurationMs / 1000): V1Lease["spec"] {
    return {
      holderIdentity: holder,
      leaseDurationSeconds: seconds,
      acquireTime: new V1MicroTime(acquireTime.getTime()),
      renewTime: new V1MicroTime(Date.now()),
      leaseTransitions: transitions,
    };
  }

  /** One round of client-go's tryAcquireOrRenew; true when this replica holds the Lease after it. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.config;
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
      this.contactAt = Date.now();
    } catch (error) {
      if ((error as { code?: number }).code !== 404) return this.failed("read", error);
      this.contactAt = Date.now();
      try {
        const created = await this.api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec: this.record(new Date(), 0) } });
        this.see(created);
        return true;
      } catch (e) {
        return this.failed("create", e);
      }
    }
    this.see(lease);
    const o = this.observed!;
    const mine = o.holder === identity;
    if (o.holder !== "" && !mine && Date.now() - o.at < this.config.leaseDurationMs) return false;
    const body: V1Lease = {
      metadata: { name, namespace, resourceVersion: o.resourceVersion },
      spec: this.record(mine && o.acquireTime ? o.acquireTime : new Date(), mine ? o.transitions : o.transitions + 1),
    };
    try {
      this.see(await this.api.replaceNamespacedLease({ name, namespace, body }));
      this.contactAt = Date.now();
      return true;
    } catch (error) {
      // 409: another replica wrote first (it won this round).
      return this.failed("update", error);
    }
  }

  private see(lease: V1Lease): void {
    const rv = lease.metadata?.resourceVersion ?? "";
    const spec = lease.spec ?? {};
    this.metrics.set("feed_lease_transitions", { lease: this.leaseName }, spec.leaseTransitions ?? 0);
    if (this.observed?.resourceVersion === rv) return;
    const acquire = spec.acquireTime ? new Date(spec.acquireTime as unknown as string) : undefined;
    this.observed = { holder: spec.holderIdentity ?? "", resourceVersion: rv, at: Date.now(), transitions: spec.leaseTransitions ?? 0, ...(acquire && { acquireTime: acquire }) };
  }

  private failed(what: string, error: unknown): false {
    const code = (error as { code?: number }).code;
    // An HTTP status is an answer (a 403 or a 409 says the API server is there); a refused or
    // dropped connection is not.
    if (typeof code === "number" && code >= 100) this.contactAt = Date.now();
    if (code !== 409 && this.leader) this.log("warn", `lease ${this.leaseName}: ${what} failed: ${code ?? ""} ${(error as Error).message?.split("\n")[0] ?? error}`);
    return false;
  }

  /** Gives the Lease up (no holder, a 1 s lease), as client-go's release does. */
  private async release(): Promise<void> {
    const o = this.observed;
    if (!o) return;
    const { namespace, name } = this.config;
    try {
      const now = new Date();
      await this.withTimeout(
        this.api
          .replaceNamespacedLease({ name, namespace, body: { metadata: { name, namespace, resourceVersion: o.resourceVersion }, spec: this.record(now, o.transitions, "", 1) } })
          .then(() => true),
      );
    } catch (error) {
      this.log("warn", `lease ${this.leaseName}: release failed (the others take over after ${this.config.leaseDurationMs} ms): ${(error as Error).message}`);
    }
  }
}

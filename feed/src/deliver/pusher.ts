// Deliveries that converge: each target's delivery (ECDS file, WasmPlugin) is driven towards the
// target's latest published snapshot until it lands, not tried once. A failed push is retried
// with exponential backoff (doubling from push.retryInitialMs to push.retryMaxMs, each wait
// drawn between half and all of it, so that replicas and targets do not retry in step) until it
// lands or a newer snapshot replaces it (which is pushed at once, the backoff reset).
//
// Only the writer pushes (leader.ts: the replica holding the Lease; every replica when there is
// no leader election). The check comes right before each write, so a replica that lost the
// Lease during a retry's wait or a render does not write. When a replica becomes the writer it
// first reads what each delivery holds (the WasmPlugin's digest annotation, the ECDS file's
// configuration) and writes only what differs: a new leader converges what the old one left
// without writing again what already landed.
//
// Behind: a target whose published snapshot has not landed is behind since the moment the first
// such snapshot was published; `feed_target_behind_seconds{target,delivery}` says for how long
// (0: landed), and readiness fails once it passes push.unreadyAfterMs (controller.ts).
import type { PushConfig } from "../config_ha.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";

export interface PushSnapshot {
  version: string;
  text: string;
  bytes: number;
  /** sha256 of text: what the delivery records, and what it is compared by. */
  digest: string;
}

/** One way a target is delivered. */
export interface Delivery {
  /** "ecds" or "wasmplugin": the metrics' delivery label. */
  readonly kind: string;
  /** The operator's name of the place, for log lines. */
  readonly where: string;
  /** The digest of the configuration the place holds now (undefined: none, or not the feed's). */
  landed(): Promise<string | undefined>;
  push(snapshot: PushSnapshot): Promise<void>;
}

interface PushState {
  target: string;
  delivery: Delivery;
  wanted?: PushSnapshot;
  /** Digest known to be at the place; `known` false: not read since this replica became the writer. */
  landed?: string;
  known: boolean;
  /** When the oldest snapshot not landed was published (0: not behind). */
  behindSince: number;
  failures: number;
  lastError?: string;
  timer?: NodeJS.Timeout;
  running?: Promise<void>;
  /** A newer snapshot (or the writer role) arrived while a push ran: go round again. */
  again: boolean;
}

export interface Behind {
  target: string;
  delivery: string;
  since: number;
  error?: string;
}

export class Pusher {
  private readonly states: PushState[] = [];
  private writer: () => boolean = () => true;
  private stopped = false;

  constructor(
    private readonly config: PushConfig,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {
    metrics.declare("feed_target_behind_seconds", "gauge", "how long the target's published snapshot has not landed in its delivery (0: landed; only the writer pushes), by target and delivery");
    metrics.declare("feed_push_errors_total", "counter", "deliveries that failed (each is retried with backoff), by target and delivery");
    metrics.declare("feed_pushes_total", "counter", "deliveries written, by target and delivery");
  }

  add(target: string, delivery: Delivery): void {
    this.states.push({ target, delivery, known: false, behindSince: 0, failures: 0, again: false });
    this.metrics.set("feed_target_behind_seconds", { target, delivery: delivery.kind }, 0);
  }

  /** Who may write now (leader.ts `leading`); every replica when there is no election. */
  gate(writer: () => boolean): void {
    this.writer = writer;
  }

  /** A target's new snapshot; resolves when the first attempt to deliver it is over (landed or not). */
  async want(target: string, snapshot: PushSnapshot, publishedAt: number): Promise<void> {
    const runs: Promise<void>[] = [];
    for (const s of this.states) {
      if (s.target !== target) continue;
      s.wanted = snapshot;
      // Behind is the writer's account: a follower is never behind (resume() starts its clock).
      if (this.writer() && s.behindSince === 0 && s.landed !== snapshot.digest) s.behindSince = publishedAt;
      s.failures = 0;
      this.cancelRetry(s);
      runs.push(this.run(s));
    }
    await Promise.all(runs);
  }

  /** This replica became the writer: read each place, then write what differs. */
  resume(): void {
    for (const s of this.states) {
      s.known = false;
      s.failures = 0;
      if (s.wanted && s.behindSince === 0) s.behindSince = Date.now();
      this.cancelRetry(s);
      void this.run(s);
    }
  }

  /** This replica is no longer the writer: no retries, nothing behind on its account. */
  pause(): void {
    for (const s of this.states) {
      this.cancelRetry(s);
      s.behindSince = 0;
      s.known = false;
      this.metrics.set("feed_target_behind_seconds", { target: s.target, delivery: s.delivery.kind }, 0);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const s of this.states) this.cancelRetry(s);
  }

  /** Deliveries behind now, oldest first (readiness, metrics). */
  behind(): Behind[] {
    if (!this.writer()) return [];
    return this.states
      .filter((s) => s.behindSince > 0)
      .sort((a, b) => a.behindSince - b.behindSince)
      .map((s) => ({ target: s.target, delivery: s.delivery.kind, since: s.behindSince, ...(s.lastError && { error: s.lastError }) }));
  }

  /** Brings feed_target_behind_seconds to now (called before /metrics is served). */
  refreshMetrics(): void {
    const now = Date.now();
    const writer = this.writer();
    for (const s of this.states) this.metrics.set("feed_target_behind_seconds", { target: s.target, delivery: s.delivery.kind }, writer && s.behindSince > 0 ? (now - s.behindSince) / 1000 : 0);
  }

  private cancelRetry(s: PushState): void {
    if (s.timer) clearTimeout(s.timer);
    s.timer = undefined;
  }

  private run(s: PushState): Promise<void> {
    if (s.running) {
      s.again = true;
      return s.running;
    }
    s.running = this.attempt(s).finally(() => (s.running = undefined));
    return s.running;
  }

  private async attempt(s: PushState): Promise<void> {
    do {
      s.again = false;
      const wanted = s.wanted;
      if (!wanted || this.stopped || !this.writer()) return;
      const labels = { target: s.target, delivery: s.delivery.kind };
      try {
        if (!s.known) {
          // A place that cannot be read (e.g. RBAC without `get`) is written: unknown is not landed.
          s.landed = await this.bounded(s.delivery.landed(), "reading").catch(() => undefined);
          s.known = true;
        }
        if (s.landed !== wanted.digest) {
          // The fence: the Lease may have gone while the place was read or a render ran.
          if (!this.writer()) return;
          await this.bounded(s.delivery.push(wanted), "writing");
          s.landed = wanted.digest;
          this.metrics.add("feed_pushes_total", labels);
        }
        if (s.wanted === wanted) {
          if (s.lastError) this.log("info", `target ${s.target}: ${s.delivery.where} now holds ${wanted.version} after ${s.failures} failed attempt(s)`);
          s.behindSince = 0;
          s.failures = 0;
          s.lastError = undefined;
          this.metrics.set("feed_target_behind_seconds", labels, 0);
        }
      } catch (error) {
        s.known = false;
        s.failures++;
        this.metrics.add("feed_push_errors_total", labels);
        const message = errorText(error);
        const wait = this.backoff(s.failures);
        if (message !== s.lastError) this.log("error", `target ${s.target}: ${s.delivery.where} not written (${message}); ${wanted.version} is retried in ${(wait / 1000).toFixed(1)} s, with backoff, until it lands`);
        s.lastError = message;
        if (!s.again) {
          s.timer = setTimeout(() => {
            s.timer = undefined;
            void this.run(s);
          }, wait);
          s.timer.unref();
        }
      }
    } while (s.again);
  }

  /**
   * A request that never answers fails after timeoutMs (and is retried): a hung connection must
   * not hold the target, nor the render that awaits its first attempt, for ever.
   */
  private bounded<T>(attempt: Promise<T>, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, fail) => {
      timer = setTimeout(() => fail(new Error(`${what} took over ${this.config.timeoutMs} ms`)), this.config.timeoutMs);
    });
    return Promise.race([attempt, late]).finally(() => clearTimeout(timer));
  }

  /** The wait after the n-th failure in a row: doubling, capped, drawn from its upper half. */
  private backoff(failures: number): number {
    const full = Math.min(this.config.retryMaxMs, this.config.retryInitialMs * 2 ** Math.min(failures - 1, 30));
    return full / 2 + Math.random() * (full / 2);
  }
}

/** One line: the API server's own message where there is one (client-node puts it in the body), else the error's first line. */
export function errorText(error: unknown): string {
  const e = error as { code?: number; body?: unknown; message?: string };
  let text = e.message?.split("\n")[0] ?? String(error);
  if (e.body !== undefined) {
    try {
      const body = typeof e.body === "string" ? (JSON.parse(e.body) as { message?: string }) : (e.body as { message?: string });
      if (body?.message) text = `${e.code ?? ""} ${body.message}`.trim();
    } catch {
      // not JSON: the first line stays
    }
  }
  return text.replace(/\s+/g, " ").slice(0, 300);
}

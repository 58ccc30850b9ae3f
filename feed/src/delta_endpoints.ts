// The channel's side of the feed's deltas: which network a target reads, its current version,
// holding a long poll until the next version, and answering one (counted). The controller
// builds and publishes the versions (controller.ts renderDeltas); this file only reads them.
import { answerParts, type DeltaChannel, type ClientState, type DeltaAnswer } from "./delta/channel.js";
import type { FilterShadow } from "./delta/filter_shadow.js";
import type { NetworkView } from "./delta/network_view.js";
import type { Labels, Metrics } from "./metrics.js";

/** One network's delta state: its incremental view and channel (shared by its targets). */
export interface NetworkDelta {
  view: NetworkView;
  channel: DeltaChannel;
  /** The filters checking its versions (their `ms` adds up the time spent checking). */
  shadows: FilterShadow[];
  lastError?: string;
  /** Long polls waiting for the next version. */
  waiters: Set<() => void>;
}

const KIND_LABELS = ["", "full", "delta", "no_change", "repair", "ask_buckets"];
/** Frozen: Metrics finds the series of a frozen label object without building a key (metrics.ts). */
const NO_LABELS: Labels = Object.freeze({});
/** Longest the channel answers polls before the loop's I/O and timers run (DeltaEndpoints.answerInTurn). */
const ANSWER_SLICE_MS = 4;

export class DeltaEndpoints {
  /** `networkOf(target)`: the network a configured target reads (undefined: no such target). */
  constructor(
    private readonly networkOf: (target: string) => string | undefined,
    private readonly networks: Map<string, NetworkDelta>,
    private readonly metrics: Metrics,
  ) {}

  /** The target's channel, or undefined for an unknown target. */
  private channelOf(target: string): NetworkDelta | undefined {
    const network = this.networkOf(target);
    return network === undefined ? undefined : this.networks.get(network);
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

  /**
   * Answers waiting their turn, oldest first: the polls a version woke and the polls that came in
   * behind the current version. They are answered a slice at a time (ANSWER_SLICE_MS), with the
   * loop's I/O and timers between slices, so that a burst of thousands of answers does not hold
   * back the next version (its watch events and its publication wait for no more than a slice),
   * and every answer carries the version current when its turn comes. One queue for both kinds
   * keeps it fair: a poller answered early in a burst and back at once waits behind the rest of
   * the burst instead of going round again ahead of it.
   */
  private queue: Array<(() => void) | undefined> = [];
  private head = 0;
  /** The turn that answers the next slice (undefined: nothing queued). */
  private turn: NodeJS.Immediate | undefined;

  /**
   * Calls `woken` once, on the target's next version or after `ms`, in its turn (answerInTurn),
   * so never within the publication that woke it; returns a cancel function, which wakes it too.
   * A callback, not a Promise: thousands are held at once.
   */
  waitForDelta(target: string, ms: number, woken: () => void): () => void {
    const n = this.channelOf(target);
    if (!n) {
      this.answerInTurn(woken);
      return () => undefined;
    }
    let done = false;
    const wake = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      n.waiters.delete(wake);
      this.answerInTurn(woken);
    };
    const timer = setTimeout(wake, ms);
    n.waiters.add(wake);
    return wake;
  }

  /** Runs `answer` after every answer queued before it, in a later turn of the loop. */
  answerInTurn(answer: () => void): void {
    this.queue.push(answer);
    this.turn ??= setImmediate(this.drain);
  }

  /**
   * Answers everything queued now, in order: a stopping feed answers every held poll before its
   * channel closes (controller.ts stop), as it did when all were answered in one go.
   */
  answerAllNow(): void {
    clearImmediate(this.turn);
    this.turn = undefined;
    this.drainFor(Infinity);
  }

  private readonly drain = (): void => {
    this.turn = undefined;
    this.drainFor(ANSWER_SLICE_MS);
  };

  private drainFor(sliceMs: number): void {
    if (this.head >= this.queue.length) return;
    const until = performance.now() + sliceMs;
    const q = this.queue;
    do {
      const answer = q[this.head];
      q[this.head++] = undefined;
      try {
        answer?.();
      } catch (error) {
        // Raised on its own, as a rejected hold would have been; the other polls are answered.
        queueMicrotask(() => {
          throw error;
        });
      }
    } while (this.head < q.length && performance.now() < until);
    if (this.head === q.length) {
      this.queue = [];
      this.head = 0;
      return;
    }
    // The answered front is dropped once it is most of the array (amortised O(1) per answer).
    if (this.head > 1024 && this.head * 2 > q.length) {
      this.queue = q.slice(this.head);
      this.head = 0;
    }
    this.turn ??= setImmediate(this.drain);
  }

  /** One frozen {target, kind} per pair, written on every answer. */
  private readonly answerLabels = new Map<string, Map<string, Labels>>();

  private labelsOf(target: string, kind: string): Labels {
    let byKind = this.answerLabels.get(target);
    if (!byKind) {
      byKind = new Map();
      this.answerLabels.set(target, byKind);
    }
    let labels = byKind.get(kind);
    if (!labels) {
      labels = Object.freeze({ target, kind });
      byKind.set(kind, labels);
    }
    return labels;
  }

  deltaAnswer(target: string, epoch: number, version: number, client?: ClientState): DeltaAnswer | undefined {
    const n = this.channelOf(target);
    if (!n || n.channel.version === 0) return undefined;
    const a = n.channel.answer(epoch, version, client);
    const labels = this.labelsOf(target, a.rebased ? "rebased" : (KIND_LABELS[a.kind] ?? "?"));
    this.metrics.add("feed_delta_requests_total", labels);
    this.metrics.add("feed_delta_bytes_total", labels, answerParts(a).bytes);
    if (a.reason) {
      this.metrics.add("feed_delta_full_total", { target, reason: a.reason });
      this.metrics.set("feed_delta_full_builds", { target }, n.channel.fullBuilds);
    }
    return a;
  }

  /** Long polls held now (metrics). */
  heldChanged(delta: number): void {
    this.metrics.add("feed_delta_held", NO_LABELS, delta);
    if (delta > 0) this.metrics.add("feed_delta_held_total", NO_LABELS);
  }
}

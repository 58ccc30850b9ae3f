// Whether a replica serves the filters' channel, when several run (leaderElection). A replica cut
// off from the API server keeps running and keeps its callers' connections, but the mesh it
// holds can no longer follow the cluster: a change the others publish never reaches it. If it
// went on answering, a VM whose polls land on it would keep that model (a held poll ends in a
// no-change that says "current") for as long as the partition lasts. So it stops serving:
//   serving   the API server answered the Lease loop (leader.ts: every retryPeriodMs, each
//             request bounded by renewDeadlineMs) within the last renewDeadlineMs
//   cut_off   it has not for renewDeadlineMs: every channel request, and every held poll at
//             once, is answered 503 with a one-line reason (feed_channel_unavailable_total);
//             /readyz fails with the same reason, so Kubernetes takes the pod out of the
//             Service where its kubelet can still say so. The same deadline stops a leader's
//             writes (leader.ts), so one signal, one bound: renewDeadlineMs (istiod's 15 s).
//   resyncing the API server answers again; still 503 until every watch of the Lease's cluster
//             has been established again for SETTLE_MS (a broken watch resumes from the last
//             resourceVersion, or relists when that is too old: the missed events arrive just
//             after it is established, as does the backlog of a stream that survived a partition
//             that dropped packets), the API server has answered for SETTLE_MS, and the delta
//             path has nothing pending: the first answer carries the content the other
//             replicas serve (the same content digest: no VM gets a full message).
// A filter treats a 503 as "unavailable": it keeps its model, waits its first backoff (<= 1 s)
// and polls again, which its cluster's load balancer sends to another replica.
import type { Metrics } from "./metrics.js";
import type { Logger } from "./logger.js";

export type GateState = "serving" | "cut_off" | "resyncing";

export interface GateInputs {
  /** Time since the API server last answered the Lease loop (leader.ts). */
  contactAgeMs(): number;
  /** Kinds of the Lease's cluster whose list or watch is failing now. */
  failingWatches(): number;
  /** Changes seen that the delta path has not published yet. */
  deltaPending(): boolean;
}

/** How often the state is looked at without a request: held polls are released within this of the deadline. */
const CHECK_MS = 100;
/** How long the watches and the API server must have been back before the replica serves again. */
export const SETTLE_MS = 1000;

export class ServingGate {
  private state: GateState = "serving";
  private since = Date.now();
  private timer: NodeJS.Timeout | undefined;
  /** The last time a watch of the Lease's cluster was seen failing. */
  private failingAt = 0;

  constructor(
    private readonly cutOffAfterMs: number,
    private readonly inputs: GateInputs,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    /** Called on entering cut_off: release the held polls (they are then answered 503). */
    private readonly cutOff: () => void,
  ) {
    metrics.set("feed_channel_serving", {}, 1);
  }

  start(): void {
    this.timer = setInterval(() => this.check(), CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Why this replica does not serve the channel now; undefined while it serves. `answered`: a 503 is sent with it (counted). */
  refusal(answered = false): string | undefined {
    const why = this.check();
    if (why !== undefined && answered) this.metrics.add("feed_channel_unavailable_total", { reason: this.state === "resyncing" ? "resyncing" : "cut_off" });
    return why;
  }

  private check(): string | undefined {
    const now = Date.now();
    const failing = this.inputs.failingWatches();
    if (failing > 0) this.failingAt = now;
    const age = this.inputs.contactAgeMs();
    if (age >= this.cutOffAfterMs) {
      if (this.state !== "cut_off") this.enter("cut_off", `the API server holding the writers' Lease has not answered for ${age} ms`);
      return `the API server holding the writers' Lease has not answered for ${Math.round(age / 1000)} s: this replica cannot tell whether its model is current`;
    }
    if (this.state === "cut_off") this.enter("resyncing", "the API server answers again");
    if (this.state !== "resyncing") return undefined;
    const settled = now - this.failingAt >= SETTLE_MS && now - this.since >= SETTLE_MS;
    if (settled && !this.inputs.deltaPending()) {
      this.enter("serving", "its watches are established again and their changes published");
      return undefined;
    }
    return `resyncing after the API server was out of reach (${failing > 0 ? `${failing} watches not established again` : settled ? "changes not published yet" : "watches settling"})`;
  }

  private enter(state: GateState, why: string): void {
    const was = this.state;
    const ms = Date.now() - this.since;
    this.state = state;
    this.since = Date.now();
    this.metrics.set("feed_channel_serving", {}, state === "serving" ? 1 : 0);
    const what = state === "serving" ? "serves the channel again" : state === "cut_off" ? "stops serving the channel (503) and turns unready" : "resyncs before it serves again";
    this.log(state === "cut_off" ? "warn" : "info", `channel: ${why}; this replica ${what} (${ms} ms ${was.replace("_", " ")})`);
    if (state === "cut_off") this.cutOff();
  }
}

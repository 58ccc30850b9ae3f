// Whether a mesh filter may decide with what it has. A filter configured for the mesh feed never
// decides from nothing: until it has a model (a non-empty snapshot in its configuration, or a
// model adopted from the feed) new connections wait, bounded in time (meshFeed.startupWaitMs from
// the configuration) and in number (meshFeed.maxWaitingConnections), and are then decided by the
// model if one came, else by meshFeed.noModelPolicy (close by default, or plain passthrough). A
// model that lacks this proxy's own network is no licence to pass everything through either: its
// connections follow the same policy. Each is counted: `<name>.waited_for_model`,
// `<name>.no_model`, `<name>.no_network`. A filter without meshFeed is always open (its snapshot
// is the operator's whole truth).
//
// States:
//   Open       decide with the model in force;
//   Waiting    no model yet, within startupWaitMs of the configuration: hold the connection;
//   NoModel    no model, and the wait is over: the policy, at once;
//   NoNetwork  a model without this proxy's network: the policy, at once.
import { FeedConfig } from "./feed_config";
import { HeldConnections } from "./held";
import { logInfo, logWarn } from "./log";
import { Counter } from "./metrics";

export enum Gate {
  Open = 0,
  Waiting = 1,
  NoModel = 2,
  NoNetwork = 3,
}

export class ModelGate {
  state: Gate = Gate.Open;
  /** A model to decide with: a non-empty snapshot, or one adopted from the feed. */
  hasModel: bool = false;
  /** noModelPolicy passthrough (false: close). */
  passthrough: bool = false;
  /** The network's name, for log lines. */
  network: string = "";
  held: HeldConnections = new HeldConnections(0);
  private waitUntil: u64 = 0;
  private waitMs: u32 = 0;
  private gated: bool = false;
  readonly waited: Counter;
  readonly noModel: Counter;
  readonly noNetwork: Counter;

  constructor(name: string) {
    this.waited = new Counter(name + ".waited_for_model");
    this.noModel = new Counter(name + ".no_model");
    this.noNetwork = new Counter(name + ".no_network");
  }

  /** At configure: `feed` null leaves the gate open for good. */
  start(feed: FeedConfig | null, snapshotHasModel: bool, now: u64): void {
    this.held.retire();
    if (feed === null) {
      this.gated = false;
      this.state = Gate.Open;
      this.held = new HeldConnections(0);
      return;
    }
    this.gated = true;
    this.hasModel = snapshotHasModel;
    this.passthrough = feed.noModelPassthrough;
    this.waitMs = feed.startupWaitMs;
    this.waitUntil = now + <u64>feed.startupWaitMs;
    this.held = new HeldConnections(<i32>feed.maxWaitingConnections);
    this.state = Gate.Open;
  }

  /** After configure and after each model from the feed; `lacksNetwork` is about the model in force. */
  update(lacksNetwork: bool, now: u64): void {
    if (!this.gated) return;
    let next: Gate;
    if (!this.hasModel) next = now < this.waitUntil ? Gate.Waiting : Gate.NoModel;
    else next = lacksNetwork ? Gate.NoNetwork : Gate.Open;
    if (next != this.state) this.announce(next);
    this.state = next;
  }

  /** From the root's tick: the wait ends at its deadline. */
  expire(now: u64): void {
    if (this.state == Gate.Waiting && now >= this.waitUntil) {
      this.announce(Gate.NoModel);
      this.state = Gate.NoModel;
    }
  }

  private policy(): string {
    return this.passthrough ? "passed through plain (noModelPolicy passthrough)" : "closed (noModelPolicy close)";
  }

  /** One line per change of state: never one per connection. */
  private announce(next: Gate): void {
    if (next == Gate.Waiting) {
      logInfo("no mesh model yet: new connections wait up to " + this.waitMs.toString() + " ms for the mesh feed's first model");
    } else if (next == Gate.NoModel) {
      logWarn("no mesh model " + this.waitMs.toString() + " ms after configuration: " + this.held.count.toString() + " waiting and all new connections are " + this.policy() + " until the mesh feed sends one");
    } else if (next == Gate.NoNetwork) {
      logWarn("the mesh model in force has no network \"" + this.network + "\" (this proxy's): connections are " + this.policy() + " until a model has it");
    } else if (this.state != Gate.Open) {
      logInfo("mesh model in force: deciding connections" + (this.held.count > 0 ? " (" + this.held.count.toString() + " waiting)" : ""));
    }
  }
}

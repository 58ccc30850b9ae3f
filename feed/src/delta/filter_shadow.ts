// "Never publish what a filter would refuse", for deltas: a shadow of one target's filter — the
// compiled module (build/<filter>.wasm) in the project's proxy-wasm host, configured as the
// target's Envoy VMs are but with `meshFeed` naming a cluster only this file answers — held at
// the channel's current version. Each candidate version is handed to it as the answer to its
// held long poll, so it goes through exactly the path a real VM takes (the feed client's header
// checks, the sink, assembly/mesh applyMeshMessage); the filter's own counters say whether it
// took it, and its one warning line says why not.
//
// This is the feed's only check of a version's content: the rules live in one place, the
// filters' decoder (assembly/mesh), and the refusal the feed reports is the filter's own line.
//
// A refused message leaves the filter's model untouched (the decoder applies nothing unless the
// whole message is valid); its feed client then waits out a backoff and asks for a full model.
// The shadow skips the VM's clock past the backoff and answers that poll with a no-change
// message at the published version, which the client takes only if it still holds exactly that
// version, so the next candidate is checked without a full load (a bad object that stays in the
// mesh is refused at every change: at 100k pods a full load each time would cost ~1 s). Should
// the VM not be where the channel is, it is resynced from the published full message instead.
import { ProxyWasmHost } from "../../../host/index.js";
import { httpResponse } from "../../../host/http_call.js";
import { renderPluginConfig, type FilterName } from "../render.js";
import { HEADER, HEADER_BYTES, KIND_DELTA, KIND_FULL, KIND_NO_CHANGE } from "./wire.js";

const SHADOW_CLUSTER = "feed_shadow";
const CONTENT_TYPE = "application/x-mesh-delta";

export interface ShadowTarget {
  name: string;
  filter: FilterName;
  network: string;
  /** The filter's own fields, as the target renders them. */
  config: Record<string, unknown>;
}

/** What the shadow needs from its channel: the full and no-change messages of the version it holds now. */
export interface ShadowSource {
  readonly version: number;
  full(): Buffer;
  noChange(): Buffer;
}

/** A filter that judges each candidate version before it is published (delta/channel.ts). */
export interface MessageCheck {
  /** "" when the filter takes `message` (a delta from `source`'s version), else its one-line refusal. */
  check(message: Buffer, source: ShadowSource): string;
  /** Forgets what it holds (a version it took was not published after all). */
  reset(): void;
}

export class FilterShadow implements MessageCheck {
  private host: ProxyWasmHost | undefined;
  /** Milliseconds spent in the compiled filter (configure, loads, applies). */
  ms = 0;
  rebuilds = 0;
  /** Full resyncs after a refusal (the VM was not at the published version: not expected). */
  resyncs = 0;
  /** Recoveries after a refusal by a no-change message (the VM kept its model and version). */
  recoveries = 0;
  private resync = false;
  /** Added to the VM's clock: lets the feed client's backoff pass without waiting. */
  private skipMs = 0;

  constructor(
    private readonly target: ShadowTarget,
    private readonly wasm: () => Uint8Array,
    private readonly startMesh?: () => { workloads: unknown[]; services: unknown[] },
  ) {}

  /** "" when the filter takes `message` (a delta from `source`'s version), else its one-line reason. */
  check(message: Buffer, source: ShadowSource): string {
    const started = performance.now();
    try {
      if (!this.host) {
        const error = this.build(source);
        if (error) return error;
      }
      if (this.resync) {
        const error = this.recover(source);
        if (error) {
          this.drop();
          return error;
        }
      }
      const error = this.offer(message, KIND_DELTA);
      if (error) this.resync = true;
      return error;
    } catch (error) {
      this.drop();
      return `${this.target.filter} shadow: ${(error as Error).message}`;
    } finally {
      this.ms += performance.now() - started;
    }
  }

  /**
   * After a refusal the feed client waits out its backoff, then asks for a full model: skip its
   * clock past the backoff, tick, and answer with a no-change at the published version (taken
   * only when the VM still holds it; the client then polls again a tick later), else with the
   * published full message.
   */
  private recover(source: ShadowSource): string {
    this.pollAgain();
    // At version 0 the VM has no epoch to match a no-change against: the full (empty) model is as cheap.
    if (source.version > 0 && this.offer(source.noChange(), KIND_NO_CHANGE) === "") {
      this.pollAgain();
      this.recoveries++;
    } else {
      this.pollAgain();
      const error = this.offer(source.full(), KIND_FULL);
      if (error) return `${this.target.filter} shadow: the published full message at version ${source.version} is refused: ${error}`;
      this.resyncs++;
    }
    this.resync = false;
    return "";
  }

  /** A client that is waiting (a backoff, or a tick after a quick no-change) polls now. */
  private pollAgain(): void {
    if (this.host!.pendingHttpCalls.length > 0) return;
    this.skipMs += 60_000;
    this.host!.tick();
  }

  /** Forgets the VM (another filter refused the version this one took): rebuilt at the next check. */
  reset(): void {
    this.drop();
  }

  private drop(): void {
    this.host?.dispose();
    this.host = undefined;
    this.resync = false;
  }

  private metric(name: string): number {
    return this.host?.metrics().get(`${this.target.filter}.feed.${name}`) ?? 0;
  }

  /**
   * How the shadow was configured before its first message: with the target's own fields and an
   * empty mesh, or — when the filter refuses that because its own fields need the mesh (e.g.
   * tunnel_port's server role: `localWorkload` must be a service endpoint) — with the JSON
   * snapshot of the feed's current mesh (`startMesh`, a full render: only at a rebuild); the
   * feed's messages replace either model.
   */
  configuredWith: "empty mesh" | "the JSON snapshot" | "" = "";

  private start(mesh: { workloads: unknown[]; services: unknown[] }): { host: ProxyWasmHost; ok: boolean } {
    const meshFeed = { cluster: SHADOW_CLUSTER, target: this.target.name, waitSeconds: 60 };
    const configuration = renderPluginConfig(this.target.filter, this.target.network, { ...this.target.config, meshFeed }, mesh as never).text;
    const host = ProxyWasmHost.fromBytes(this.wasm(), {
      rootId: this.target.filter,
      vmId: this.target.filter,
      pluginConfiguration: configuration,
      logLevel: "warn",
      canary: false,
      clusters: { [SHADOW_CLUSTER]: {} },
      clock: () => BigInt(Date.now() + this.skipMs) * 1_000_000n,
    });
    return { host, ok: host.start() };
  }

  /** A fresh VM at the channel's current version (version 0: the empty model, nothing to load). */
  private build(source: ShadowSource): string {
    this.rebuilds++;
    let { host, ok } = this.start({ workloads: [], services: [] });
    this.configuredWith = "empty mesh";
    if (!ok && this.startMesh) {
      host.dispose();
      ({ host, ok } = this.start(this.startMesh()));
      this.configuredWith = "the JSON snapshot";
    }
    this.host = host;
    if (!ok) {
      const line = host.logs().find((l) => l.level === "error" || l.level === "critical")?.message;
      this.drop();
      return `${this.target.filter} shadow: configuration refused: ${line ?? host.startFailure ?? "?"}`;
    }
    host.tick(); // the feed client's first poll goes out on the first tick
    if (source.version === 0) {
      this.pendingFullFromEmpty = true;
      return "";
    }
    const error = this.offer(source.full(), KIND_FULL);
    if (error) {
      this.drop();
      return `${this.target.filter} shadow: the published full message at version ${source.version} is refused: ${error}`;
    }
    return "";
  }

  /**
   * At version 0 the VM has no epoch yet, so a delta from 0 (the first version) would be refused
   * as "from another epoch": the same records are offered as a full message instead (a delta from
   * the empty model and a full message of its result are the same records).
   */
  private pendingFullFromEmpty = false;

  /** Answers the VM's held poll with `message`; "" when it applied it. */
  private offer(message: Buffer, kind: number): string {
    const host = this.host!;
    let body: Uint8Array = message;
    let counter = kind === KIND_FULL ? "applied_full" : kind === KIND_NO_CHANGE ? "no_change" : "applied_delta";
    if (this.pendingFullFromEmpty && kind === KIND_DELTA) {
      // A full message has tables after the header: empty ones here (its workload records
      // are the delta's own v1 records, which a full message may carry too).
      const copy = Buffer.alloc(message.length + 8);
      message.copy(copy, 0, 0, HEADER_BYTES);
      message.copy(copy, HEADER_BYTES + 8, HEADER_BYTES);
      copy.writeUInt16LE(KIND_FULL, HEADER.kind);
      copy.fill(0, HEADER.base, HEADER.base + 8);
      // The body grows by the tables; a format-3 trailer (the buckets the records touch: every
      // non-empty one, from an empty model) still follows it.
      copy.writeUInt32LE(message.readUInt32LE(HEADER.bodyLength) + 8, HEADER.bodyLength);
      body = copy;
      counter = "applied_full";
    }
    const pending = host.pendingHttpCalls;
    if (pending.length !== 1) return `${this.target.filter} shadow: expected one held poll, found ${pending.length}`;
    const applied = this.metric(counter);
    const refused = this.metric("refused");
    host.clearLogs();
    host.respondHttpCall(pending[0].token, httpResponse(200, { "content-type": CONTENT_TYPE }, body));
    if (this.metric(counter) === applied + 1) {
      this.pendingFullFromEmpty = false;
      return "";
    }
    const warn = host.logs().find((l) => l.level === "warn" || l.level === "error")?.message ?? "";
    const reason = warn.match(/refused a message: (.*); keeping the model in force/)?.[1] ?? (warn || `not applied (refused counter ${refused} → ${this.metric("refused")})`);
    return `${this.target.filter} refuses it: ${reason}`;
  }
}

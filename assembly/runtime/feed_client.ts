// The mesh feed client of one root context: an HTTP long poll with a version, from every VM's
// root to the feed (runtime README, "Live updates"). Nothing here runs per connection.
//
// States (one call in flight at most):
//   Starting  configured; the first tick (START_TICK_MS later) sends the first poll. Not from
//             proxy_on_configure itself: Envoy's configuration-check VM runs configure too and
//             is thrown away, and at Envoy start-up the cluster may not exist yet.
//   Polling   a GET /delta/<target>?epoch=E&version=V&wait=W&format=3[&digest=D] is in flight
//             (timeout W + 5 s); D: the content digest of the model, once a format-3 message set it.
//   Waiting   the last attempt failed, or the feed said it is stopping: the next one is sent by
//             a tick after the wait (feed_retry.ts, the one source of these numbers): unavailable
//             (not reached, reset, timeout, 5xx) 500 ms doubling to 5 s, full jitter (uniform in
//             [0, backoff], Envoy's rule); refused (a bad message, a 4xx) 1 s doubling to 30 s,
//             equal jitter (uniform in [backoff/2, backoff]); an answer marked stopping
//             (x-feed-stopping) uniform in [0, 1 s], on a new connection (doubling to 5 s for
//             marked answers in a row). Jittered (jitter.ts) so
//             that VMs that failed together do not retry together; ticks come every 100 ms in
//             the last second before a retry is due, so the wait is kept to 100 ms.
// A response: 200 + application/x-mesh-delta + a valid header, then
//   full      → the sink applies it (the model becomes exactly that), epoch/version adopted;
//   delta     → only when its epoch and base version are this VM's; the sink applies it;
//   no change → same epoch and version as this VM's, or (format 3) another epoch or version with
//               this VM's content digest: the model is what the feed serves (a feed restart,
//               another replica); the sink adopts that epoch and version;
//   ask for buckets (format 3: the feed cannot send a delta from this VM's version, e.g. it
//             restarted with changes this VM missed) → the next poll is a POST of the model's
//             bucket digests (feed_buckets.ts), or, without them, asks for a full model;
//   repair    (the answer to that POST) → the sink applies it: the listed buckets become
//             exactly its records, the rest of the model stays;
//   and the next poll goes out at once. Anything else is a failure and the model in force stays:
//   unavailable (refused call, status ≠ 200, reset, timeout) or refused (bad content type,
//   header or body, a delta for another base, the sink refusing it: the next request then asks
//   for a full resync with epoch=0&version=0). One log line per change of condition, never one
//   per retry; every failure counts. Connections never wait for any of this (before a filter has
//   a first model, the mesh root's model gate holds them: model_gate.ts).
import { Counter, Gauge } from "./metrics";
import { FeedConfig } from "./feed_config";
import { CONTENT_TYPE, FeedHeader, hex16, isMessageContentType, KIND_ASK_BUCKETS, KIND_DELTA, KIND_FULL, KIND_NO_CHANGE, KIND_REPAIR, MESSAGE_FORMAT, readFeedHeader } from "./feed_message";
import { FeedBuckets } from "./feed_buckets";
import {
  HeaderPairs,
  httpCall,
  httpCallResponseBody,
  httpCallResponseHeader,
  httpCallResponseStatus,
  lastCallStatus,
  lastHttpCallToken,
} from "./http_call";
import { logDebug, logEnabled, logInfo, logWarn } from "./log";
import { Jitter } from "./jitter";
import * as Retry from "./feed_retry";
import { nowMilliseconds, setTickPeriod } from "./timer";
import { LogLevel, WasmResult } from "./types";

/**
 * Where the feed's messages go: the filter's model. `apply` gets a whole message whose header
 * was checked (full, or a delta from this VM's version) and returns "" when applied, or a
 * one-line reason when refused, in which case the model in force must be unchanged.
 */
export class MeshSink {
  apply(message: ArrayBuffer, header: FeedHeader): string {
    return "no model accepts feed messages here";
  }
}

export const START_TICK_MS: u32 = 20;
export const TICK_MS: u32 = <u32>Retry.TICK_MS;
const RETRY_TICK_MS: u32 = <u32>Retry.RETRY_TICK_MS;
/** On top of the call's own timeout (wait + 5 s): Envoy always calls back, this only guards a lost call. */
const WATCHDOG_MS: u64 = 10000;
const CALL_MARGIN_MS: u32 = <u32>Retry.CALL_MARGIN_MS;
/** A no-change answer sooner than this after the request was not held (see onResponse). */
const MIN_HOLD_MS: u64 = <u64>Retry.MIN_HOLD_MS;
/** The part of an error body a log line quotes. */
const QUOTED_BODY: u32 = 120;

export enum FeedState {
  Starting = 0,
  Polling = 1,
  Waiting = 2,
}

/** What the feed looks like from here, for one log line per change. */
enum Condition {
  Unknown = 0,
  Healthy = 1,
  Unavailable = 2,
  Refused = 3,
}

export class FeedCounters {
  readonly appliedFull: Counter;
  readonly appliedDelta: Counter;
  /** Repairs applied: after a feed restart or a replica switch, only the buckets that differed. */
  readonly appliedRepair: Counter;
  readonly noChange: Counter;
  readonly refused: Counter;
  readonly unavailable: Counter;
  /** The version this VM decides with (a gauge is one stat for all of Envoy's VMs: the last write). */
  readonly version: Gauge;
  /**
   * Seconds since the model last changed or the feed last confirmed it (a no-change answer), or
   * since configuration before the feed first answered; written every tick by each VM.
   */
  readonly modelAge: Gauge;

  constructor(prefix: string) {
    this.appliedFull = new Counter(prefix + ".feed.applied_full");
    this.appliedDelta = new Counter(prefix + ".feed.applied_delta");
    this.appliedRepair = new Counter(prefix + ".feed.applied_repair");
    this.noChange = new Counter(prefix + ".feed.no_change");
    this.refused = new Counter(prefix + ".feed.refused");
    this.unavailable = new Counter(prefix + ".feed.unavailable");
    this.version = new Gauge(prefix + ".feed.version");
    this.modelAge = new Gauge(prefix + ".feed.model_age_seconds");
  }
}

export class FeedClient {
  state: FeedState = FeedState.Starting;
  /** The feed's epoch and version of the model in force (0/0: nothing from the feed yet). */
  epoch: u64 = 0;
  version: u64 = 0;
  /** The content digest of the model in force, when the last full or delta message was format 3. */
  digest: u64 = 0;
  digestKnown: bool = false;
  /** The token of the call in flight (0 when none). */
  token: u32 = 0;
  /** Failed attempts since the feed last answered well. */
  failures: u32 = 0;
  /** The nominal backoff (feed_retry.ts); the wait itself is jittered below it. */
  backoffMs: u32 = 0;
  /** The wait before the next attempt: in [0, backoffMs] (unavailable) or [backoffMs / 2, backoffMs] (refused). */
  retryDelayMs: u32 = 0;
  /** The last answer was marked stopping (x-feed-stopping): the wait is the stopping spread. */
  stoppingSeen: bool = false;
  /** The spread after marked answers in a row: 1 s, doubling to 5 s (0 after any other answer). */
  stoppingSpreadMs: u32 = 0;
  /** The tick period this client last asked for. */
  private tickMs: u32 = 0;
  private sentAt: u64 = 0;
  private retryAt: u64 = 0;
  /** When the model in force last changed or was confirmed by the feed (configuration: start). */
  private confirmedAt: u64 = 0;
  /** After a refused message: ask for a full model (epoch=0&version=0) next time. */
  private resync: bool = false;
  /** The feed asked for the bucket digests: the next poll sends them (or asks for a full model without them). */
  private sendBuckets: bool = false;
  private askFull: bool = false;
  /** The last poll sent the bucket digests: a repair is expected. */
  private sentBuckets: bool = false;
  /** The failure being handled is a 4xx answer: the feed refused the request itself. */
  private feedRefusedRequest: bool = false;
  readonly buckets: FeedBuckets = new FeedBuckets();
  private condition: Condition = Condition.Unknown;
  private readonly header: FeedHeader = new FeedHeader();
  private readonly cluster: ArrayBuffer;
  private readonly timeoutMs: u32;
  private readonly jitter: Jitter;
  readonly counters: FeedCounters;

  /** `salt` tells this client's jitter apart from other VMs' (the root context id). */
  constructor(readonly config: FeedConfig, readonly sink: MeshSink, readonly prefix: string, salt: u32 = 0) {
    this.jitter = new Jitter(<u64>salt);
    this.cluster = String.UTF8.encode(config.cluster);
    this.timeoutMs = config.waitSeconds * 1000 + CALL_MARGIN_MS;
    this.counters = new FeedCounters(prefix);
  }

  /** From the root's configure: the first tick sends the first poll. */
  start(): void {
    this.state = FeedState.Starting;
    this.confirmedAt = nowMilliseconds();
    this.counters.modelAge.set(0);
    this.tickMs = START_TICK_MS;
    setTickPeriod(START_TICK_MS);
  }

  /** Seconds since the model in force last changed or was confirmed (the gauge's value). */
  modelAgeSeconds(now: u64): u64 {
    return now > this.confirmedAt ? (now - this.confirmedAt) / 1000 : 0;
  }

  /** From the root's proxy_on_tick. */
  onTick(): void {
    const now = nowMilliseconds();
    this.counters.modelAge.set(this.modelAgeSeconds(now));
    if (this.state == FeedState.Starting) {
      this.poll(now);
    } else if (this.state == FeedState.Waiting) {
      if (now >= this.retryAt) this.poll(now);
    } else if (now > this.sentAt + <u64>this.timeoutMs + WATCHDOG_MS) {
      // Envoy answers every call (a timeout is a local 504); this only guards a call lost anyway.
      this.token = 0;
      this.fail(Condition.Unavailable, "no answer " + (now - this.sentAt).toString() + " ms after the request", now);
    }
    // From a tick the period may also lengthen again (the mesh root re-asserts its own fast
    // ticks after this, while connections wait for a first model: mesh_root.ts).
    this.retune(now, true);
  }

  /**
   * Ticks every RETRY_TICK_MS within the last TICK_MS before a retry is due, else every TICK_MS:
   * a retry goes out within 100 ms of its time without a fast tick the rest of the time. Outside
   * a tick only shortened (never slowing a period the mesh root set).
   */
  private retune(now: u64, lengthen: bool): void {
    const want = this.state == FeedState.Waiting && this.retryAt <= now + <u64>TICK_MS ? RETRY_TICK_MS : TICK_MS;
    if (want == this.tickMs || (want > this.tickMs && !lengthen)) return;
    this.tickMs = want;
    setTickPeriod(want);
  }

  /**
   * From the root's proxy_on_http_call_response. Returns false when the token is not this
   * client's call (another caller of the same root, or a call it gave up on).
   */
  onResponse(token: u32, headers: u32, bodySize: u32): bool {
    if (token == 0 || token != this.token) return false;
    this.token = 0;
    const now = nowMilliseconds();
    if (headers == 0) {
      this.fail(Condition.Unavailable, "the request was reset (" + lastCallStatus().message + ")", now);
      this.retune(now, false);
      return true;
    }
    const status = httpCallResponseStatus();
    if (status != 200) {
      this.feedRefusedRequest = status >= 400 && status < 500;
      this.fail(Condition.Unavailable, this.describeStatus(status, bodySize), now);
      this.retune(now, false);
      return true;
    }
    const type = httpCallResponseHeader("content-type");
    if (type === null || !isMessageContentType(type)) {
      this.fail(Condition.Refused, "content-type " + (type === null ? "missing" : "\"" + type + "\"") + ", expected " + CONTENT_TYPE, now);
      this.retune(now, false);
      return true;
    }
    const body = httpCallResponseBody(bodySize);
    if (body === null) {
      this.fail(Condition.Unavailable, "the response body could not be read", now);
      this.retune(now, false);
      return true;
    }
    const error = this.take(body);
    if (error.length > 0) {
      this.fail(Condition.Refused, error, now);
      this.retune(now, false);
      return true;
    }
    this.recovered();
    // A feed that is stopping (a restart, a replica leaving) answered this poll and says so, as
    // istiod's GOAWAY does: poll again soon, spread, on a new connection (the answer closed it).
    const stopping = httpCallResponseHeader(Retry.STOPPING_HEADER);
    this.stoppingSeen = stopping !== null;
    if (stopping === null) this.stoppingSpreadMs = 0;
    else this.stoppingSpreadMs = this.stoppingSpreadMs == 0 ? <u32>Retry.STOPPING_SPREAD_MS : min(this.stoppingSpreadMs * 2, <u32>Retry.UNAVAILABLE_MAX_MS);
    if (stopping !== null) {
      this.retryDelayMs = this.jitter.full(this.stoppingSpreadMs);
      this.retryAt = now + <u64>this.retryDelayMs;
      this.state = FeedState.Waiting;
      if (logEnabled(LogLevel.Debug)) logDebug("mesh feed " + this.config.target + ": the feed is stopping, polling again in " + this.retryDelayMs.toString() + " ms");
    } else if (this.header.kind == KIND_NO_CHANGE && now < this.sentAt + MIN_HOLD_MS) {
      // A feed that answers "no change" without holding the request would make this a busy
      // loop: the next poll waits a tick instead (not a failure: no count, no backoff).
      this.retryAt = now + <u64>TICK_MS;
      this.state = FeedState.Waiting;
    } else {
      this.poll(now);
    }
    this.retune(now, false);
    return true;
  }

  /** Applies one well-formed 200 response; "" when taken, else why it was refused. */
  private take(body: ArrayBuffer): string {
    const header = readFeedHeader(body, this.header);
    if (header.error.length > 0) return header.error;
    if (header.kind == KIND_NO_CHANGE) {
      if (header.epoch != this.epoch || header.version != this.version) {
        if (!this.sameContent(header)) {
          return "no-change message for epoch " + header.epoch.toString() + " version " + header.version.toString() + ", but this VM is at " + this.position();
        }
        // Another feed process (a restart, a replica) serves the content this model holds.
        const refused = this.sink.apply(body, header);
        if (refused.length > 0) return refused;
        this.epoch = header.epoch;
        this.version = header.version;
        this.counters.version.set(this.version);
        if (logEnabled(LogLevel.Debug)) logDebug("mesh feed " + this.config.target + ": the model is current (same content digest), now at " + this.position());
      }
      this.counters.noChange.inc();
      this.confirmed();
      return "";
    }
    if (header.kind == KIND_ASK_BUCKETS) {
      // Asked again in answer to the digests themselves: a full model rather than a loop.
      if (this.epoch != 0 && this.buckets.known && !this.sentBuckets) this.sendBuckets = true;
      else this.askFull = true;
      return "";
    }
    if (header.kind == KIND_REPAIR && !this.sentBuckets) return "a repair message, but this VM sent no bucket digests";
    if (header.kind == KIND_DELTA && (header.epoch != this.epoch || header.base != this.version)) {
      return "delta from epoch " + header.epoch.toString() + " version " + header.base.toString() + ", but this VM is at " + this.position();
    }
    const full = header.kind == KIND_FULL;
    // Format 3 from this project's feed always has the trailer; without one (a hand-made
    // message) the model is taken and the bucket table forgotten: no repair, a full model then.
    const trailer = header.format >= MESSAGE_FORMAT && header.bodyEnd < body.byteLength;
    if (header.kind == KIND_REPAIR && !trailer) return "trailer: missing (a repair states its buckets)";
    if (trailer) {
      const bad = this.buckets.check(body, header.bodyEnd, body.byteLength, full, header.digest);
      if (bad.length > 0) return bad;
    }
    const refused = this.sink.apply(body, header);
    if (refused.length > 0) return refused;
    if (trailer) this.buckets.commit(body, header.bodyEnd, full, header.digest);
    else this.buckets.forget();
    if (full) this.counters.appliedFull.inc();
    else if (header.kind == KIND_REPAIR) this.counters.appliedRepair.inc();
    else this.counters.appliedDelta.inc();
    this.confirmed();
    const first = this.epoch == 0;
    this.epoch = header.epoch;
    this.version = header.version;
    this.digestKnown = header.format >= MESSAGE_FORMAT;
    this.digest = this.digestKnown ? header.digest : 0;
    this.counters.version.set(this.version);
    if (first) logInfo("mesh feed " + this.config.target + ": full model applied at " + this.position());
    else if (logEnabled(LogLevel.Debug)) logDebug("mesh feed " + this.config.target + ": " + (full ? "full model" : header.kind == KIND_REPAIR ? "repair" : "delta") + " applied, now at " + this.position());
    return "";
  }

  /** A format-3 no-change naming the content digest of this VM's model. */
  private sameContent(header: FeedHeader): bool {
    return header.format >= MESSAGE_FORMAT && this.epoch != 0 && this.digestKnown && header.digest == this.digest;
  }

  private confirmed(): void {
    this.confirmedAt = nowMilliseconds();
    this.counters.modelAge.set(0);
  }

  private position(): string {
    return "epoch " + this.epoch.toString() + " version " + this.version.toString();
  }

  private describeStatus(status: i32, bodySize: u32): string {
    // Only built for a log line (a change of condition): Envoy's local replies say why.
    if (this.condition == Condition.Unavailable) return "";
    const text = status == 0 ? "no valid :status" : "HTTP " + status.toString();
    const body = httpCallResponseBody(bodySize < QUOTED_BODY ? bodySize : QUOTED_BODY);
    if (body === null || body.byteLength == 0) return text;
    return text + " (" + String.UTF8.decode(body).replaceAll("\n", " ").replaceAll("\r", " ") + ")";
  }

  private poll(now: u64): void {
    const full = this.resync || this.askFull;
    const repair = !full && this.sendBuckets && this.buckets.known;
    this.askFull = false;
    this.sendBuckets = false;
    this.sentBuckets = repair;
    const epoch = full ? 0 : this.epoch;
    const version = full ? 0 : this.version;
    let path = this.config.path + "?epoch=" + epoch.toString() + "&version=" + version.toString() + "&wait=" + this.config.waitSeconds.toString() + "&format=" + MESSAGE_FORMAT.toString();
    if (!full && this.digestKnown) path += "&digest=" + hex16(this.digest);
    if (repair) path += "&repair=1";
    const headers = new HeaderPairs()
      .add(":method", repair ? "POST" : "GET")
      .add(":path", path)
      .add(":authority", this.config.authority)
      .add("accept", CONTENT_TYPE);
    if (repair) headers.add("content-type", "application/octet-stream");
    const status = httpCall(this.cluster, headers.encode(), this.timeoutMs, repair ? this.buckets.body() : null);
    if (status != WasmResult.Ok) {
      const why = status == WasmResult.BadArgument ? " (no such cluster in Envoy?)" : "";
      this.fail(Condition.Unavailable, "Envoy refused the call to cluster " + this.config.cluster + ": status " + status.toString() + why, now);
      this.retune(now, false);
      return;
    }
    this.token = lastHttpCallToken();
    this.sentAt = now;
    this.state = FeedState.Polling;
  }

  private fail(condition: Condition, reason: string, now: u64): void {
    if (condition == Condition.Refused) {
      this.counters.refused.inc();
      this.resync = true;
    } else {
      this.counters.unavailable.inc();
      // The digests' POST reached no feed (a replica gone, a reset, a 5xx): the next attempt
      // sends them again. Starting over with a GET could loop for ever behind a round robin
      // over two replicas with one dead: the live one asks for the digests, the POST after the
      // ask goes to the dead one. Any replica can answer the POST: a repair is computed from
      // the digests alone. A 4xx (a body the feed refused) starts over with a GET.
      if (this.sentBuckets && !this.feedRefusedRequest) this.sendBuckets = true;
    }
    // Reached and refused (a bad message, a 4xx): each retry may cost a full model, so the long
    // backoff; not reached (or 5xx): the short one (feed_retry.ts).
    const refused = condition == Condition.Refused || this.feedRefusedRequest;
    this.feedRefusedRequest = false;
    this.stoppingSeen = false;
    this.failures++;
    const first = <u32>(refused ? Retry.REFUSED_FIRST_MS : Retry.UNAVAILABLE_FIRST_MS);
    const cap = <u32>(refused ? Retry.REFUSED_MAX_MS : Retry.UNAVAILABLE_MAX_MS);
    this.backoffMs = this.backoffMs == 0 ? first : min(max(this.backoffMs * 2, first), cap);
    this.retryDelayMs = refused ? this.jitter.equal(this.backoffMs) : this.jitter.full(this.backoffMs);
    this.retryAt = now + <u64>this.retryDelayMs;
    this.state = FeedState.Waiting;
    if (condition != this.condition) {
      const what = condition == Condition.Refused ? "refused a message" : "unavailable";
      logWarn(
        "mesh feed " + this.config.target + " " + what + ": " + reason + "; keeping the model in force (" +
        (this.epoch == 0 ? "the configuration's snapshot" : this.position()) + "), retrying with backoff up to " + (cap / 1000).toString() + " s",
      );
      this.condition = condition;
    }
  }

  private recovered(): void {
    if (this.condition == Condition.Unavailable || this.condition == Condition.Refused) {
      logInfo("mesh feed " + this.config.target + " answered again after " + this.failures.toString() + " failed attempts: at " + this.position());
    }
    this.condition = Condition.Healthy;
    this.failures = 0;
    this.backoffMs = 0;
    this.resync = false;
  }
}

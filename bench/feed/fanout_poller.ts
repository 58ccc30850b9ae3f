// One fan-out poller: a filter VM's feed client without the filter. It polls the feed's channel
// as assembly/runtime/feed_client.ts does (one call in flight on its own kept-alive mutual-TLS
// connection, the next poll at once after an answer, a failure retried after the client's
// backoff (assembly/runtime/feed_retry.ts, the one source of its numbers: unavailable 500 ms
// doubling to 5 s with full jitter, refused 1 s doubling to 30 s with equal jitter, an answer
// marked stopping followed by a poll within 1 s on a new connection), a no-change answered
// sooner than 500 ms waited out for a tick, a refused answer followed by a full resync), speaks wire format 3
// (its content digest in every poll, a rebased no-change adopted, an ask-buckets answered with a
// POST of its bucket digests), reads only the header and the bucket trailer of each answer
// (fanout_protocol.ts) and counts the rest. Every answer taken is kept as
// (time, epoch, version) so the bench can say, after the fact, when this poller first held a
// given version.
import type { SecureContext } from "node:tls";
import { KeptAliveTls, type ExchangeHandlers, type ResponseHead } from "./fanout_http.js";
import * as Retry from "../../assembly/runtime/feed_retry.js";
import { BucketTable, CONTENT_TYPE, digestHex, FORMAT, HEADER_BYTES, holds, MAX_TRAILER_BYTES, NOTHING, pollPath, readHeader, rebases, take, type Position } from "./fanout_protocol.js";

const { TICK_MS, RETRY_TICK_MS, CALL_MARGIN_MS, MIN_HOLD_MS } = Retry;
const GET_HEADERS: Record<string, string> = { accept: CONTENT_TYPE };
const POST_HEADERS: Record<string, string> = { accept: CONTENT_TYPE, "content-type": "application/octet-stream" };

/** The spread after one more answer marked stopping in a row (0: none before). */
export function nextStoppingSpread(spreadMs: number): number {
  return spreadMs === 0 ? Retry.STOPPING_SPREAD_MS : Math.min(spreadMs * 2, Retry.UNAVAILABLE_MAX_MS);
}

/**
 * The client's wait after a failure (feed_client.ts `fail`): the next nominal backoff after
 * `backoffMs` (0: none yet) and the wait drawn under it with `random` in [0, 1).
 */
export function nextRetry(backoffMs: number, refused: boolean, random: number): { backoffMs: number; waitMs: number } {
  const first = refused ? Retry.REFUSED_FIRST_MS : Retry.UNAVAILABLE_FIRST_MS;
  const cap = refused ? Retry.REFUSED_MAX_MS : Retry.UNAVAILABLE_MAX_MS;
  const b = backoffMs === 0 ? first : Math.min(Math.max(backoffMs * 2, first), cap);
  // Refused: equal jitter (half fixed); unavailable: full jitter (jitter.ts).
  return { backoffMs: b, waitMs: refused ? b / 2 + random * (b / 2) : random * b };
}

/** Wall-clock milliseconds comparable between processes (the driver's writes, the workers' answers). */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

export interface PollerTls {
  secureContext: SecureContext;
  checkServerIdentity: (host: string, cert: { subjectaltname?: string }) => Error | undefined;
}

export interface PollerCounters {
  full: number;
  delta: number;
  noChange: number;
  /** No-changes at another epoch or version naming the poller's content digest (adopted). */
  rebased: number;
  askBuckets: number;
  repair: number;
  refused: number;
  unavailable: number;
  /** Answer bytes (bodies of 200 answers) received. */
  bytes: number;
  /** Bytes of full messages among them. */
  fullBytes: number;
  /** Bytes of repairs among them. */
  repairBytes: number;
  /** Bucket digests POSTed (64 KiB each). */
  postedBytes: number;
  /** Requests sent; less every answer and failure, the requests in flight (see inFlight). */
  polls: number;
}

export function zeroCounters(): PollerCounters {
  return { full: 0, delta: 0, noChange: 0, rebased: 0, askBuckets: 0, repair: 0, refused: 0, unavailable: 0, bytes: 0, fullBytes: 0, repairBytes: 0, postedBytes: 0, polls: 0 };
}

/** Requests sent and not yet settled (an answer of any kind or a failure) when `c` was read. */
export function inFlight(c: PollerCounters): number {
  return c.polls - (c.full + c.delta + c.noChange + c.rebased + c.askBuckets + c.repair + c.refused + c.unavailable);
}

export class Poller implements ExchangeHandlers {
  at: Position = NOTHING;
  readonly counters = zeroCounters();
  /** Answers taken, flat (time, epoch, version) triples in time order. */
  private answers = new Float64Array(3 * 64);
  /** When the request of each answer was sent (the same index). */
  private sentAts = new Float64Array(64);
  private answerCount = 0;
  private resync = false;
  /** The feed asked for the bucket digests: the next poll POSTs them (without them: asks for a full model). */
  private sendBuckets = false;
  private askFull = false;
  /** The last poll POSTed the bucket digests: a repair may come. */
  private sentBuckets = false;
  private readonly buckets = new BucketTable();
  private backoffMs = 0;
  private stoppingSpreadMs = 0;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly connection: KeptAliveTls;
  /** Each VM's retry ticks on their own phase. */
  private readonly tickPhase = Math.random() * RETRY_TICK_MS;

  constructor(
    private readonly url: URL,
    private readonly target: string,
    private readonly waitSeconds: number,
    tls: PollerTls,
  ) {
    this.connection = new KeptAliveTls(url.hostname, Number(url.port), tls);
  }

  /** The first poll after `delayMs` (pollers of one sidecar start together, sidecars do not). */
  start(delayMs: number): void {
    this.timer = setTimeout(() => this.poll(), delayMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.connection.destroy();
  }

  /** The first time at or after `after` this poller held (epoch, version), or undefined. */
  firstHolding(epoch: number, version: number, after: number): number | undefined {
    return this.firstHoldingAnswer(epoch, version, after)?.t;
  }

  /** The same, with when that answer's request was sent. */
  firstHoldingAnswer(epoch: number, version: number, after: number): { t: number; sentAt: number } | undefined {
    const a = this.answers;
    for (let i = 0; i < this.answerCount; i++) {
      const t = a[3 * i];
      if (t >= after && holds({ epoch: a[3 * i + 1], version: a[3 * i + 2] }, epoch, version)) return { t, sentAt: this.sentAts[i] };
    }
    return undefined;
  }

  /** Whether this poller held a model of `epoch` at `t` (an answer of that epoch taken by then). */
  heldEpochBy(epoch: number, t: number): boolean {
    for (let i = 0; i < this.answerCount && this.answers[3 * i] <= t; i++) if (this.answers[3 * i + 1] === epoch) return true;
    return false;
  }

  /**
   * For ascending `versions` of one epoch: the first time at or after `after` this poller held
   * each (undefined where it never did). One pass: within an epoch versions only grow.
   */
  firstHoldingEach(epoch: number, versions: number[], after: number): Array<number | undefined> {
    const out: Array<number | undefined> = new Array(versions.length).fill(undefined);
    const a = this.answers;
    let v = 0;
    for (let i = 0; i < this.answerCount && v < versions.length; i++) {
      const t = a[3 * i];
      if (t < after) continue;
      const at = { epoch: a[3 * i + 1], version: a[3 * i + 2] };
      while (v < versions.length && holds(at, epoch, versions[v])) out[v++] = t;
    }
    return out;
  }

  private record(t: number, sentAt: number): void {
    if (3 * (this.answerCount + 1) > this.answers.length) {
      const grown = new Float64Array(this.answers.length * 2);
      grown.set(this.answers);
      this.answers = grown;
      const sent = new Float64Array(this.sentAts.length * 2);
      sent.set(this.sentAts);
      this.sentAts = sent;
    }
    this.sentAts[this.answerCount] = sentAt;
    this.answers.set([t, this.at.epoch, this.at.version], 3 * this.answerCount++);
  }

  /*
   * The exchange in progress (a poller has one at a time): kept in fields and read by the
   * handler methods below, not in closures made per poll (thousands a second, each named by
   * tsx's helper as it is made, cost the pollers more than reading the answer).
   */
  private sentAt = 0;
  private posted: Buffer | undefined;
  private settled = false;
  private status = 0;
  private ok = false;
  private stopping = false;
  /** The answer's fixed header, as its bytes arrive. */
  private readonly header = Buffer.alloc(HEADER_BYTES);
  private headerFill = 0;
  private length = 0;
  /** Where the body ends: the trailer (format 3) follows it; Infinity until the header says. */
  private bodyEnd = Infinity;
  private trailer: Buffer[] = [];
  private trailerBytes = 0;
  /** The digest of the position last polled from, and its hex, built once per version. */
  private pathDigest: bigint | undefined;
  private pathDigestHex = "";

  private poll(): void {
    if (this.stopped) return;
    this.counters.polls++;
    this.sentAt = now();
    const full = this.resync || this.askFull;
    const repair = !full && this.sendBuckets && this.buckets.known;
    this.askFull = false;
    this.sendBuckets = false;
    this.sentBuckets = repair;
    const from = full ? NOTHING : this.at;
    if (from.digest !== this.pathDigest) {
      this.pathDigest = from.digest;
      this.pathDigestHex = from.digest === undefined ? "" : digestHex(from.digest);
    }
    const path = pollPath(this.target, from, this.waitSeconds, repair, this.pathDigestHex);
    const posted = repair ? this.buckets.body() : undefined;
    this.posted = posted;
    this.settled = false;
    this.status = 0;
    this.ok = false;
    this.stopping = false;
    this.headerFill = 0;
    this.length = 0;
    this.bodyEnd = Infinity;
    this.trailer.length = 0;
    this.trailerBytes = 0;
    this.connection.send(posted ? "POST" : "GET", path, posted ? POST_HEADERS : GET_HEADERS, posted, this.waitSeconds * 1000 + CALL_MARGIN_MS, this);
  }

  private fail(refused: boolean, longBackoff = refused): void {
    if (this.settled) return;
    this.settled = true;
    this.failed(refused, longBackoff);
  }

  /** The answer's status and headers (ExchangeHandlers). */
  response(code: number, h: ResponseHead): void {
    this.status = code;
    this.ok = code === 200 && (h.get("content-type") ?? "").toLowerCase().startsWith(CONTENT_TYPE);
    this.stopping = h.get(Retry.STOPPING_HEADER) !== undefined;
  }

  /** Body bytes (ExchangeHandlers): the header and the trailer kept, the records only counted. */
  data(chunk: Buffer): void {
    const from = this.length;
    this.length += chunk.length;
    if (this.headerFill < HEADER_BYTES) {
      this.headerFill += chunk.copy(this.header, this.headerFill, 0, HEADER_BYTES - this.headerFill);
      if (this.headerFill === HEADER_BYTES && this.header.readUInt16LE(4) === FORMAT) this.bodyEnd = HEADER_BYTES + this.header.readUInt32LE(44);
    }
    if (this.length > this.bodyEnd && this.trailerBytes <= MAX_TRAILER_BYTES) {
      const part = chunk.subarray(Math.max(0, this.bodyEnd - from));
      this.trailer.push(part);
      this.trailerBytes += part.length;
    }
  }

  /** Not reached, reset, the feed gone in the middle of an answer (a restart), or a timeout: as Envoy reports them (ExchangeHandlers). */
  error(): void {
    this.fail(false);
  }

  /** The whole answer is in (ExchangeHandlers). */
  end(): void {
    if (this.settled) return;
    if (!this.ok) {
      // A 200 of another type is a bad message (a resync); a 4xx, a request the feed refused.
      return this.fail(this.status === 200, this.status === 200 || (this.status >= 400 && this.status < 500));
    }
    const header = readHeader(this.header.subarray(0, this.headerFill), this.length);
    if (typeof header === "string") return this.fail(true);
    if (header.kind === "ask-buckets") {
      this.settled = true;
      this.counters.askBuckets++;
      this.counters.bytes += this.length;
      // Asked again in answer to the digests themselves: a full model rather than a loop.
      if (this.at.epoch !== 0 && this.buckets.known && !this.sentBuckets) this.sendBuckets = true;
      else this.askFull = true;
      this.answered();
      return this.next(this.stopping, now());
    }
    const next = take(this.at, header, this.sentBuckets);
    if (typeof next === "string") return this.fail(true);
    const rebased = rebases(this.at, header);
    if (header.kind !== "no-change") {
      const hasTrailer = header.format === FORMAT && this.length > header.bodyEnd;
      if (header.kind === "repair" && !hasTrailer) return this.fail(true);
      if (hasTrailer) {
        const t = this.trailer.length === 1 ? this.trailer[0] : Buffer.concat(this.trailer, this.trailerBytes);
        const full = header.kind === "full";
        if (this.buckets.check(t, full, header.digest) !== "") return this.fail(true);
        this.buckets.commit(t, full, header.digest);
      } else this.buckets.forget();
    }
    this.settled = true;
    if (this.posted) this.counters.postedBytes += this.posted.length;
    this.counters.bytes += this.length;
    if (header.kind === "full") {
      this.counters.full++;
      this.counters.fullBytes += this.length;
    } else if (header.kind === "repair") {
      this.counters.repair++;
      this.counters.repairBytes += this.length;
    } else if (header.kind === "delta") this.counters.delta++;
    else if (rebased) this.counters.rebased++;
    else this.counters.noChange++;
    this.at = next;
    this.answered();
    const t = now();
    this.record(t, this.sentAt);
    // A stopping feed (x-feed-stopping, its connection closing): again within a second, spread
    // (doubling to 5 s for marked answers in a row).
    this.next(this.stopping, t, header.kind === "no-change" && t < this.sentAt + MIN_HOLD_MS);
  }

  /**
   * The next poll after an answer taken at `t`: within the stopping spread when the feed marked
   * it stopping (doubling for marks in a row), a tick later after a no-change that was not held
   * (no busy loop), else at once.
   */
  private next(stopping: boolean, t: number, notHeld = false): void {
    this.stoppingSpreadMs = stopping ? nextStoppingSpread(this.stoppingSpreadMs) : 0;
    if (stopping) this.later(t + Math.random() * this.stoppingSpreadMs);
    else if (notHeld) this.later(t + TICK_MS);
    else this.poll();
  }

  /** An answer taken: the feed is healthy again. */
  private answered(): void {
    this.resync = false;
    this.backoffMs = 0;
  }

  /** `refused`: a bad message (counted refused, a full resync next); `longBackoff`: refused or a 4xx. */
  private failed(refused: boolean, longBackoff = refused): void {
    if (refused) {
      this.counters.refused++;
      this.resync = true;
      this.buckets.forget();
    } else this.counters.unavailable++;
    const next = nextRetry(this.backoffMs, longBackoff, Math.random());
    this.backoffMs = next.backoffMs;
    this.later(now() + next.waitMs);
  }

  /** The next poll on the first retry tick at or after `at` (the client ticks every 100 ms before a retry). */
  private later(at: number): void {
    if (this.stopped) return;
    const tick = Math.ceil((at - this.tickPhase) / RETRY_TICK_MS) * RETRY_TICK_MS + this.tickPhase;
    this.timer = setTimeout(() => this.poll(), Math.max(0, tick - now()));
  }
}

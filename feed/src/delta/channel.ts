// One network's delta channel: the ids, the current record of every workload and service (its
// encoded bytes: what the filters hold), the journal of versions, and the answers to
// `GET /delta/<target>` (feed/docs/deltas.md):
//   - a format-3 client whose content digest is the channel's → no-change at once (whatever
//     epoch and version it names: a feed restart, another replica), which it adopts
//   - epoch differs (a feed restart, or a client with nothing: epoch 0) → full
//   - version newer than the feed's (a version gap: the client saw another feed) → full
//   - version older than the journal keeps → full
//   - version == current → no-change (after the long poll's wait, http.ts)
//   - otherwise a delta from that version, coalesced per object (journal.ts), unless it would
//     be larger than the full message (then the full).
// A version is published only after the compiled filters of the network's targets took it
// (filter_shadow.ts: each held at the current version in the project's proxy-wasm host, so the
// filters' own decoder is the only judge); a refused version changes nothing (ids, records,
// journal), and the objects it touched are diffed again at the next publish.
import type { ComputedMesh } from "../mesh_model.js";
import type { DeltaConfig } from "../config.js";
import type { MessageCheck } from "./filter_shadow.js";
import { CanonicalIds, type IdMoves } from "./ids.js";
import { BUCKET_COUNT, BUCKETS, bucketOf, ContentDigest, idsOfBucket, recordHash, MASK } from "./digest.js";
import { Journal } from "./journal.js";
import type { NetworkView } from "./network_view.js";
import { membershipOf, wireService, wireWorkload } from "./records.js";
import { FullAssembler } from "./wire_full.js";
import {
  assemble,
  HEADER_BYTES,
  KIND_DELTA,
  KIND_FULL,
  KIND_ASK_BUCKETS,
  KIND_NO_CHANGE,
  KIND_REPAIR,
  RECORD_SERVICE_REMOVE,
  RECORD_SERVICE_UPSERT,
  RECORD_WORKLOAD_REMOVE,
  previousFormatParts,
  type PreviousFormatParts,
  withBuckets,
  bucketTrailer,
  FORMAT_VERSION,
  PREVIOUS_FORMAT,
  WireWriter,
  type WireFormat,
  writeRemove,
  writeServiceUpsert,
  writeWorkloadUpsert,
  type WireMembership,
} from "./wire.js";

export type FullReason = "epoch" | "future" | "behind" | "smaller";

export interface DeltaAnswer {
  kind: typeof KIND_FULL | typeof KIND_DELTA | typeof KIND_NO_CHANGE | typeof KIND_REPAIR | typeof KIND_ASK_BUCKETS;
  /**
   * The message. A full message in the previous format is `parts` (no copy of its records):
   * its `body` is then joined on first read, for tests and tools; the channel's server writes
   * the parts (answerParts) and never reads it.
   */
  body: Buffer;
  parts?: PreviousFormatParts;
  version: number;
  /** Why a full message was sent. */
  reason?: FullReason;
  /** A no-change to a client at another epoch or version whose content digest is the channel's. */
  rebased?: boolean;
  records: number;
}

/** What a client says about itself beyond (epoch, version): the format it reads, its content digest. */
export interface ClientState {
  format: WireFormat;
  /** Format 3 only: the content digest of the model it holds. */
  digest?: bigint;
  /** Format 3, a POST after KIND_ASK_BUCKETS: the digest of each of its buckets (digest.ts). */
  buckets?: BigUint64Array;
}

/** A filter that declares no format: the previous one (filters built before format 3). */
export const PREVIOUS_CLIENT: ClientState = { format: PREVIOUS_FORMAT };

export type PublishOutcome = { published: true; version: number; records: number; bytes: number } | { published: false; error?: string };

/** Load of the id tables (ids.ts): a service's id moving re-sends its members, so services are kept sparser. */
const WORKLOAD_LOAD = 0.8;
const SERVICE_LOAD = 0.5;

/** One record's change at commit: the id's new bytes (null: removed) and their hash. */
interface RecordChange {
  service: boolean;
  id: number;
  bytes: Buffer | null;
  hash: bigint;
}

export class DeltaChannel {
  private current = 0;
  private readonly workloadIds = new CanonicalIds(WORKLOAD_LOAD);
  private readonly serviceIds = new CanonicalIds(SERVICE_LOAD);
  /** What the filters hold: each id's record bytes. */
  private readonly workloadRecords = new Map<number, Buffer>();
  private readonly serviceRecords = new Map<number, Buffer>();
  /** Each id's record hash (0 when the id holds none). */
  private readonly hashes = { workloads: new IdHashes(), services: new IdHashes() };
  readonly digest = new ContentDigest();
  /** The largest id limits published in this process: a delta may remove ids above the current ones. */
  private workloadLimit = 0;
  private serviceLimit = 0;
  private recordBytes = 0;
  private readonly journal: Journal;
  /** Objects changed since the last published version (kept when a version is refused). */
  private readonly pendingWorkloads = new Set<string>();
  private readonly pendingServices = new Set<string>();
  private fullCache: BuiltFull | undefined;
  /** The last full message built, kept past its version for servedFull (rate of full builds). */
  private lastFull: BuiltFull | undefined;
  /** Full builds servedFull may still start now (a bucket of delta.fullBuildBurst, one more per minFullIntervalMs). */
  private buildTokens: number;
  private tokensAt = Date.now();
  private builds = 0;
  /** The last full message's size over its records' v1 bytes (the tables compact them). */
  private fullRatio = 1;
  /** Full messages of this epoch: its tables and compact records carry over between versions. */
  private readonly assembler = new FullAssembler();
  /**
   * Answers built for the current version, by format and base: every filter VM polls, and after
   * a change they all ask for the same delta (thousands of VMs at one version get one body).
   * Keyed by base × 4 + format: a number, no key string built per poll.
   */
  private answers = new Map<number, DeltaAnswer>();
  private answersVersion = -1;
  private readonly scratch = new WireWriter(1 << 16);

  constructor(
    readonly epoch: number,
    private readonly config: DeltaConfig,
    /**
     * The compiled filters of this network's targets, each held at the current version
     * (filter_shadow.ts): a version any of them refuses is not published. The feed always has
     * one per filter its targets run; without any (the encoder's own tests and benchmarks)
     * nothing but the id limits is checked.
     */
    private readonly filters: readonly MessageCheck[],
  ) {
    this.journal = new Journal(0, config.journal);
    this.buildTokens = config.fullBuildBurst;
  }

  /** Full messages built: one per version at most, whoever asks and however often. */
  get fullBuilds(): number {
    return this.builds;
  }

  get version(): number {
    return this.current;
  }

  /** The content digest of the current version (the same in every feed process with the same mesh). */
  get contentDigest(): bigint {
    return this.digest.total;
  }

  /** Drops the shadow VMs (the feed is stopping). */
  close(): void {
    for (const f of this.filters) f.reset();
  }

  get stats(): { workloads: number; services: number; journalRecords: number; journalBytes: number; journalVersions: number; oldestBase: number; fullBytes: number; workloadIdLimit: number; serviceIdLimit: number } {
    return {
      workloads: this.workloadRecords.size,
      services: this.serviceRecords.size,
      journalRecords: this.journal.recordCount,
      journalBytes: this.journal.byteCount,
      journalVersions: this.journal.versionCount,
      oldestBase: this.journal.oldest,
      fullBytes: HEADER_BYTES + this.recordBytes,
      workloadIdLimit: this.workloadLimit,
      serviceIdLimit: this.serviceLimit,
    };
  }

  /** The id of a workload (by uid) or service (by hostname) now, for tests and tools. */
  idOf(service: boolean, key: string): number | undefined {
    return (service ? this.serviceIds : this.workloadIds).get(key);
  }

  /** Diffs the changed objects of `view` against what was published; publishes one version. */
  publish(view: NetworkView, mesh: ComputedMesh, changed: { workloads: Iterable<string>; services: Iterable<string> }): PublishOutcome {
    for (const uid of changed.workloads) this.pendingWorkloads.add(uid);
    for (const h of changed.services) this.pendingServices.add(h);
    // The key sets first: ids follow from them (ids.ts), and a key whose id moved is re-sent.
    const serviceSet = setChanges(this.pendingServices, (h) => view.services.has(h), this.serviceIds);
    let workloadSet: { removed: string[]; added: string[] } = { removed: [], added: [] };
    let serviceMoves: IdMoves = new Map();
    let workloadMoves: IdMoves = new Map();
    let laidOut = 0;
    const undo = () => {
      if (laidOut > 1) this.workloadIds.change(workloadSet.added, workloadSet.removed);
      if (laidOut > 0) this.serviceIds.change(serviceSet.added, serviceSet.removed);
    };
    const w = this.scratch;
    try {
      serviceMoves = this.serviceIds.change(serviceSet.removed, serviceSet.added);
      laidOut = 1;
      const movedServices = new Set<string>();
      for (const [h, m] of serviceMoves) if (m.before >= 0 && m.after >= 0) movedServices.add(h);
      if (movedServices.size > 0) {
        // Its members name it by id: their records change too (services move rarely: ids.ts).
        for (const uid of mesh.memberships.uids()) for (const [h] of mesh.memberships.of(uid)) if (movedServices.has(h)) {
          this.pendingWorkloads.add(uid);
          break;
        }
      }
      workloadSet = setChanges(this.pendingWorkloads, (uid) => view.workloads.has(uid), this.workloadIds);
      workloadMoves = this.workloadIds.change(workloadSet.removed, workloadSet.added);
      laidOut = 2;
      const changes: RecordChange[] = [];
      const workloadRemoves: Buffer[] = [];
      const serviceRemoves: Buffer[] = [];
      const serviceUpserts: Buffer[] = [];
      const workloadUpserts: Buffer[] = [];
      for (const id of affected(this.pendingServices, serviceMoves, this.serviceIds)) {
        const hostname = this.serviceIds.keyAt(id);
        const old = this.serviceRecords.get(id);
        if (hostname === undefined) {
          if (!old) continue;
          w.reset();
          writeRemove(w, RECORD_SERVICE_REMOVE, id);
          serviceRemoves.push(w.copyFrom(0));
          changes.push({ service: true, id, bytes: null, hash: 0n });
          continue;
        }
        w.reset();
        writeServiceUpsert(w, wireService(id, view.services.get(hostname)!));
        if (old && old.equals(w.view())) continue;
        const bytes = w.copyFrom(0);
        serviceUpserts.push(bytes);
        changes.push({ service: true, id, bytes, hash: recordHash(bytes) });
      }
      for (const id of affected(this.pendingWorkloads, workloadMoves, this.workloadIds)) {
        const uid = this.workloadIds.keyAt(id);
        const old = this.workloadRecords.get(id);
        if (uid === undefined) {
          if (!old) continue;
          w.reset();
          writeRemove(w, RECORD_WORKLOAD_REMOVE, id);
          workloadRemoves.push(w.copyFrom(0));
          changes.push({ service: false, id, bytes: null, hash: 0n });
          continue;
        }
        const memberships: WireMembership[] = [];
        for (const [hostname, ports] of mesh.memberships.of(uid)) {
          const sid = this.serviceIds.get(hostname);
          if (sid === undefined) throw new Error(`workload ${uid}: member of ${hostname}, which has no id (bug)`);
          memberships.push(membershipOf(sid, { ports }));
        }
        memberships.sort((a, b) => a.service - b.service);
        w.reset();
        writeWorkloadUpsert(w, wireWorkload(id, view.workloads.get(uid)!, memberships));
        if (old && old.equals(w.view())) continue;
        const bytes = w.copyFrom(0);
        workloadUpserts.push(bytes);
        changes.push({ service: false, id, bytes, hash: recordHash(bytes) });
      }
      const records = [...workloadRemoves, ...serviceRemoves, ...serviceUpserts, ...workloadUpserts];
      if (records.length === 0) {
        this.pendingWorkloads.clear();
        this.pendingServices.clear();
        return { published: false };
      }
      const limitError =
        this.workloadIds.limit > this.config.maxWorkloads
          ? `workload id limit: ${this.workloadIds.limit} ids needed, the filters take at most ${this.config.maxWorkloads} (delta.maxWorkloads)`
          : this.serviceIds.limit > this.config.maxServices
            ? `service id limit: ${this.serviceIds.limit} ids needed, the filters take at most ${this.config.maxServices} (delta.maxServices)`
            : "";
      let digest = this.digest.total;
      const touched = new Map<number, bigint>();
      for (const c of changes) {
        const b = bucketOf(c.service, c.id);
        const before = touched.get(b) ?? this.digest.buckets[b];
        touched.set(b, (before - this.hashOf(c.service, c.id) + c.hash) & MASK);
        digest = (digest - this.hashOf(c.service, c.id) + c.hash) & MASK;
      }
      const version = this.current + 1;
      const message = withBuckets(assemble({ kind: KIND_DELTA, epoch: this.epoch, base: this.current, version, ...this.limits(), digest }, records), touched);
      let refusal = limitError;
      for (let i = 0; !refusal && i < this.filters.length; i++) {
        refusal = this.filters[i].check(message, this);
        if (refusal) for (let j = 0; j < i; j++) this.filters[j].reset(); // they took a version that is not published
      }
      if (refusal) {
        undo();
        return { published: false, error: refusal };
      }
      for (const c of changes) this.setRecord(c);
      this.workloadLimit = Math.max(this.workloadLimit, this.workloadIds.limit);
      this.serviceLimit = Math.max(this.serviceLimit, this.serviceIds.limit);
      this.journal.append(version, records);
      this.journal.setFullBytes(HEADER_BYTES + this.recordBytes);
      this.current = version;
      this.fullCache = undefined;
      this.pendingWorkloads.clear();
      this.pendingServices.clear();
      return { published: true, version, records: records.length, bytes: message.length };
    } catch (error) {
      undo();
      throw error;
    }
  }

  /** The header's id limits: every id published in this process (a delta may remove any of them). */
  private limits(): { workloadIdLimit: number; serviceIdLimit: number } {
    return {
      workloadIdLimit: Math.max(this.workloadLimit, this.workloadIds.limit),
      serviceIdLimit: Math.max(this.serviceLimit, this.serviceIds.limit),
    };
  }

  private hashOf(service: boolean, id: number): bigint {
    return (service ? this.hashes.services : this.hashes.workloads).get(id);
  }

  private setRecord(c: RecordChange): void {
    const records = c.service ? this.serviceRecords : this.workloadRecords;
    const hashes = c.service ? this.hashes.services : this.hashes.workloads;
    const old = records.get(c.id);
    if (old) {
      this.recordBytes -= old.length;
      this.digest.applyHash(c.service, c.id, hashes.get(c.id), -1);
    }
    if (c.bytes) {
      records.set(c.id, c.bytes);
      hashes.set(c.id, c.hash);
      this.recordBytes += c.bytes.length;
      this.digest.applyHash(c.service, c.id, c.hash, 1);
    } else {
      records.delete(c.id);
      hashes.set(c.id, 0n);
    }
  }

  /** The full message of the current version (services first, so memberships name live ones). */
  full(): Buffer {
    return this.built().body;
  }

  /** The current version's full message, built on first demand and kept for that version. */
  private built(): BuiltFull {
    if (this.fullCache?.version !== this.current) {
      this.builds++;
      const buckets = new Map<number, bigint>();
      this.digest.buckets.forEach((d, b) => {
        if (d !== 0n) buckets.set(b, d);
      });
      // The records are this channel's own Buffers: gathered and copied once, trailer included.
      const body = this.assembler.build(
        { epoch: this.epoch, base: 0, version: this.current, ...this.limits(), digest: this.digest.total },
        [this.serviceRecords.values(), this.workloadRecords.values()],
        { stableRecords: true, trailer: bucketTrailer(buckets) },
      );
      this.fullCache = { version: this.current, body };
      this.lastFull = this.fullCache;
      this.fullRatio = this.fullCache.body.length / (HEADER_BYTES + this.recordBytes);
    }
    return this.fullCache;
  }

  /**
   * The full message a client is answered with. A build for the current version takes a token
   * from a bucket of `delta.fullBuildBurst` that gains one per `delta.minFullIntervalMs`: a few
   * builds in a row stay fresh, a flood of `epoch=0` polls while versions move runs the bucket
   * dry and then costs one build per interval. Without a token the caller gets the last one
   * built, with its own version, while the journal still holds every version after it (its
   * next poll gets the delta from there at once); every caller of that interval shares (and a
   * slow reader pins) that one body.
   */
  private servedFull(format: WireFormat, reason: FullReason): DeltaAnswer {
    const records = this.serviceRecords.size + this.workloadRecords.size;
    const last = this.lastFull;
    if (last && last.version !== this.current && last.version > 0 && this.config.minFullIntervalMs > 0) {
      const now = Date.now();
      this.buildTokens = Math.min(this.config.fullBuildBurst, this.buildTokens + (now - this.tokensAt) / this.config.minFullIntervalMs);
      this.tokensAt = now;
      if (this.buildTokens >= 1) this.buildTokens -= 1;
      else if (this.journal.covers(last.version)) return fullAnswer(last, format, reason, records);
    }
    return fullAnswer(this.built(), format, reason, records);
  }

  /**
   * The full message's size now without building it: the built one's when it is current, else
   * the records' bytes scaled by how much the last full message compacted them (tables).
   */
  private fullEstimate(): number {
    if (this.fullCache?.version === this.current) return this.fullCache.body.length;
    return Math.round((HEADER_BYTES + this.recordBytes) * this.fullRatio);
  }

  noChange(format: WireFormat = FORMAT_VERSION): Buffer {
    return assemble({ kind: KIND_NO_CHANGE, epoch: this.epoch, base: 0, version: this.current, ...this.limits(), format, digest: this.digest.total }, []);
  }

  /** Whether a client at (epoch, version) is up to date (a long poll waits). */
  upToDate(epoch: number, version: number): boolean {
    return epoch === this.epoch && version === this.current;
  }

  /**
   * The answer for a client at (epoch, version), now. A format-3 client whose digest is the
   * channel's holds exactly the current records (ids are content-derived): a no-change, which
   * it adopts with this epoch and version, whatever process it heard from before.
   */
  answer(epoch: number, version: number, client: ClientState = PREVIOUS_CLIENT): DeltaAnswer {
    const format = client.format;
    if (epoch === this.epoch && version === this.current) return { kind: KIND_NO_CHANGE, body: this.noChange(format), version, records: 0 };
    const newest = format >= FORMAT_VERSION && epoch !== 0 && client.digest !== undefined;
    if (newest && client.digest === this.digest.total) {
      return { kind: KIND_NO_CHANGE, body: this.noChange(format), version: this.current, records: 0, rebased: true };
    }
    if (newest && client.buckets) return this.repair(client.buckets);
    // A client with a model this channel cannot delta from: its bucket digests first (then a repair).
    if (epoch !== this.epoch) return newest ? this.askBuckets() : this.servedFull(format, "epoch");
    if (version > this.current) return newest ? this.askBuckets() : this.servedFull(format, "future");
    if (this.answersVersion !== this.current) {
      this.answers = new Map();
      this.answersVersion = this.current;
    }
    // Formats are below 4 (wire.ts), versions far below 2^51: one number per pair.
    const key = version * 4 + format;
    const cached = this.answers.get(key);
    if (cached) return cached;
    const answer = this.deltaFrom(version, format, newest);
    if (this.answers.size >= 64) this.answers.clear();
    this.answers.set(key, answer);
    return answer;
  }

  /** "Send your bucket digests": a client with a model this channel cannot send a delta to. */
  private askBuckets(): DeltaAnswer {
    const body = assemble({ kind: KIND_ASK_BUCKETS, epoch: this.epoch, base: 0, version: this.current, ...this.limits(), digest: this.digest.total }, []);
    return { kind: KIND_ASK_BUCKETS, body, version: this.current, records: 0 };
  }

  /**
   * The answer to a client's bucket digests: the records of every bucket whose digest differs
   * ("bucket b is exactly these"), or the full message when that would not be smaller. Cost:
   * the buckets compared, plus the ids of the differing ones (digest.ts idsOfBucket).
   */
  repair(buckets: BigUint64Array): DeltaAnswer {
    const differing = new Map<number, bigint>();
    for (let b = 0; b < BUCKET_COUNT; b++) if (buckets[b] !== this.digest.buckets[b]) differing.set(b, this.digest.buckets[b]);
    const services: Buffer[] = [];
    const workloads: Buffer[] = [];
    let bytes = 0;
    for (const b of differing.keys()) {
      const service = b >= BUCKETS;
      const records = service ? this.serviceRecords : this.workloadRecords;
      const limit = service ? this.serviceIds.limit : this.workloadIds.limit;
      for (const id of idsOfBucket(service ? b - BUCKETS : b, limit)) {
        const r = records.get(id);
        if (!r) continue;
        (service ? services : workloads).push(r);
        bytes += r.length;
      }
    }
    const repairBytes = HEADER_BYTES + bytes + 4 + 12 * differing.size;
    // Close to the estimate: the full message itself decides (built once per version, shared).
    const fullBytes = repairBytes * 2 >= this.fullEstimate() ? this.full().length : this.fullEstimate();
    if (differing.size === 0 || repairBytes >= fullBytes) {
      // (No bucket differs, yet the digest did: the client's table disagrees with its model.)
      return { kind: KIND_FULL, body: this.full(), version: this.current, reason: differing.size === 0 ? "epoch" : "smaller", records: this.serviceRecords.size + this.workloadRecords.size };
    }
    const body = withBuckets(
      assemble({ kind: KIND_REPAIR, epoch: this.epoch, base: 0, version: this.current, ...this.limits(), digest: this.digest.total }, [...services, ...workloads]),
      differing,
    );
    return { kind: KIND_REPAIR, body, version: this.current, records: services.length + workloads.length };
  }

  private deltaFrom(version: number, format: WireFormat, canRepair: boolean): DeltaAnswer {
    const full = (reason: FullReason): DeltaAnswer =>
      canRepair ? this.askBuckets() : this.servedFull(format, reason);
    const range = this.journal.range(version);
    if (!range) return full("behind");
    let bytes = HEADER_BYTES;
    for (const r of range) bytes += r.bytes.length;
    if (bytes > HEADER_BYTES + this.recordBytes) return full("smaller");
    let body = assemble(
      { kind: KIND_DELTA, epoch: this.epoch, base: version, version: this.current, ...this.limits(), format, digest: this.digest.total },
      range.map((r) => r.bytes),
    );
    if (format >= FORMAT_VERSION) {
      const touched = new Map<number, bigint>();
      for (const r of range) {
        const service = r.type === RECORD_SERVICE_UPSERT || r.type === RECORD_SERVICE_REMOVE;
        const b = bucketOf(service, r.id);
        touched.set(b, this.digest.buckets[b]);
      }
      body = withBuckets(body, touched);
    }
    return { kind: KIND_DELTA, body, version: this.current, records: range.length };
  }
}

/**
 * Record hashes by id, in one typed array: ids are dense (ids.ts keeps them below the table
 * size), and a Map of BigInts was ~60 bytes per record at 100k pods, this is 8.
 */
class IdHashes {
  private values = new BigUint64Array(64);

  get(id: number): bigint {
    return id < this.values.length ? this.values[id] : 0n;
  }

  set(id: number, hash: bigint): void {
    if (id >= this.values.length) {
      if (hash === 0n) return;
      const grown = new BigUint64Array(Math.max(id + 1, this.values.length * 2));
      grown.set(this.values);
      this.values = grown;
    }
    this.values[id] = hash;
  }
}

/** The keys of `pending` to remove from / add to `ids` (live: whether the key is in the view). */
function setChanges(pending: Iterable<string>, live: (key: string) => boolean, ids: CanonicalIds): { removed: string[]; added: string[] } {
  const removed: string[] = [];
  const added: string[] = [];
  for (const k of pending) {
    const present = live(k);
    if (present && !ids.has(k)) added.push(k);
    else if (!present && ids.has(k)) removed.push(k);
  }
  return { removed, added };
}

/** The ids whose record may have changed: the ids, before and after, of the pending and moved keys. */
function affected(pending: Iterable<string>, moves: IdMoves, ids: CanonicalIds): Set<number> {
  const out = new Set<number>();
  const add = (k: string) => {
    const now = ids.get(k);
    if (now !== undefined) out.add(now);
    const m = moves.get(k);
    if (m && m.before >= 0) out.add(m.before);
  };
  for (const k of pending) add(k);
  for (const k of moves.keys()) add(k);
  return out;
}

/** A full message built, and its previous-format parts once a caller of that format asked. */
interface BuiltFull {
  version: number;
  body: Buffer;
  previous?: PreviousFormatParts;
}

function fullAnswer(built: BuiltFull, format: WireFormat, reason: FullReason, records: number): DeltaAnswer {
  if (format === FORMAT_VERSION) return { kind: KIND_FULL, body: built.body, version: built.version, reason, records };
  const parts = (built.previous ??= previousFormatParts(built.body));
  let whole: Buffer | undefined;
  return {
    kind: KIND_FULL,
    parts,
    get body() {
      return (whole ??= Buffer.concat([parts.head, parts.records]));
    },
    version: built.version,
    reason,
    records,
  };
}

/** What the server writes for an answer: an optional head, then the shared body (one per version and format). */
export function answerParts(a: DeltaAnswer): { head?: Buffer; shared: Buffer; bytes: number } {
  if (a.parts) return { head: a.parts.head, shared: a.parts.records, bytes: a.parts.head.length + a.parts.records.length };
  return { shared: a.body, bytes: a.body.length };
}

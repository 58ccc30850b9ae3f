// One network's delta channel: the ids, the current record of every workload and service (its
// encoded bytes: what the filters hold), the journal of versions, and the answers to
// `GET /delta/<target>` (feed/docs/deltas.md):
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
import { IdAllocator } from "./ids.js";
import { Journal } from "./journal.js";
import type { NetworkView } from "./network_view.js";
import { membershipOf, wireService, wireWorkload } from "./records.js";
import { FullAssembler } from "./wire_full.js";
import {
  assemble,
  HEADER_BYTES,
  KIND_DELTA,
  KIND_FULL,
  KIND_NO_CHANGE,
  RECORD_SERVICE_REMOVE,
  RECORD_WORKLOAD_REMOVE,
  WireWriter,
  writeRemove,
  writeServiceUpsert,
  writeWorkloadUpsert,
  type WireMembership,
} from "./wire.js";

export type FullReason = "epoch" | "future" | "behind" | "smaller";

export interface DeltaAnswer {
  kind: typeof KIND_FULL | typeof KIND_DELTA | typeof KIND_NO_CHANGE;
  body: Buffer;
  version: number;
  /** Why a full message was sent. */
  reason?: FullReason;
  records: number;
}

export type PublishOutcome = { published: true; version: number; records: number; bytes: number } | { published: false; error?: string };

export class DeltaChannel {
  private current = 0;
  private readonly workloadIds = new IdAllocator();
  private readonly serviceIds = new IdAllocator();
  private readonly workloadRecords = new Map<string, Buffer>();
  private readonly serviceRecords = new Map<string, Buffer>();
  private recordBytes = 0;
  private readonly journal: Journal;
  /** Objects changed since the last published version (kept when a version is refused). */
  private readonly pendingWorkloads = new Set<string>();
  private readonly pendingServices = new Set<string>();
  private fullCache: { version: number; body: Buffer } | undefined;
  private builds = 0;
  /** Full messages of this epoch: its tables and compact records carry over between versions. */
  private readonly assembler = new FullAssembler();
  /**
   * Answers built for the current version, by base: every filter VM polls, and after a change
   * they all ask for the same delta (thousands of VMs at one version get one assembled body).
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
  }

  /** Full messages built: one per version at most, whoever asks and however often. */
  get fullBuilds(): number {
    return this.builds;
  }

  get version(): number {
    return this.current;
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
      workloadIdLimit: this.workloadIds.limit,
      serviceIdLimit: this.serviceIds.limit,
    };
  }

  /** Diffs the changed objects of `view` against what was published; publishes one version. */
  publish(view: NetworkView, mesh: ComputedMesh, changed: { workloads: Iterable<string>; services: Iterable<string> }): PublishOutcome {
    for (const uid of changed.workloads) this.pendingWorkloads.add(uid);
    for (const h of changed.services) this.pendingServices.add(h);
    const acquired: Array<{ ids: IdAllocator; key: string; id: number }> = [];
    const workloadRemoves: Buffer[] = [];
    const serviceRemoves: Buffer[] = [];
    const serviceUpserts: Buffer[] = [];
    const workloadUpserts: Buffer[] = [];
    const nextServices = new Map<string, Buffer | null>();
    const nextWorkloads = new Map<string, Buffer | null>();
    const w = this.scratch;
    try {
      for (const hostname of this.pendingServices) {
        const s = view.services.get(hostname);
        if (!s) {
          const id = this.serviceIds.get(hostname);
          if (id !== undefined && this.serviceRecords.has(hostname)) {
            w.reset();
            writeRemove(w, RECORD_SERVICE_REMOVE, id);
            serviceRemoves.push(w.copyFrom(0));
            nextServices.set(hostname, null);
          }
          continue;
        }
        const { id, fresh } = this.serviceIds.acquire(hostname);
        if (fresh) acquired.push({ ids: this.serviceIds, key: hostname, id });
        w.reset();
        writeServiceUpsert(w, wireService(id, s));
        const old = this.serviceRecords.get(hostname);
        if (old && old.equals(w.view())) continue;
        const bytes = w.copyFrom(0);
        serviceUpserts.push(bytes);
        nextServices.set(hostname, bytes);
      }
      for (const uid of this.pendingWorkloads) {
        const v = view.workloads.get(uid);
        if (!v) {
          const id = this.workloadIds.get(uid);
          if (id !== undefined && this.workloadRecords.has(uid)) {
            w.reset();
            writeRemove(w, RECORD_WORKLOAD_REMOVE, id);
            workloadRemoves.push(w.copyFrom(0));
            nextWorkloads.set(uid, null);
          }
          continue;
        }
        const memberships: WireMembership[] = [];
        for (const [hostname, ports] of mesh.memberships.get(uid) ?? []) {
          const sid = this.serviceIds.get(hostname);
          if (sid === undefined || nextServices.get(hostname) === null) throw new Error(`workload ${uid}: member of ${hostname}, which has no id (bug)`);
          memberships.push(membershipOf(sid, { ports }));
        }
        memberships.sort((a, b) => a.service - b.service);
        const { id, fresh } = this.workloadIds.acquire(uid);
        if (fresh) acquired.push({ ids: this.workloadIds, key: uid, id });
        w.reset();
        writeWorkloadUpsert(w, wireWorkload(id, v, memberships));
        const old = this.workloadRecords.get(uid);
        if (old && old.equals(w.view())) continue;
        const bytes = w.copyFrom(0);
        workloadUpserts.push(bytes);
        nextWorkloads.set(uid, bytes);
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
      const version = this.current + 1;
      const message = assemble({ kind: KIND_DELTA, epoch: this.epoch, base: this.current, version, workloadIdLimit: this.workloadIds.limit, serviceIdLimit: this.serviceIds.limit }, records);
      let refusal = limitError;
      for (let i = 0; !refusal && i < this.filters.length; i++) {
        refusal = this.filters[i].check(message, this);
        if (refusal) for (let j = 0; j < i; j++) this.filters[j].reset(); // they took a version that is not published
      }
      if (refusal) {
        this.rollback(acquired);
        return { published: false, error: refusal };
      }
      for (const [hostname, bytes] of nextServices) this.setRecord(this.serviceRecords, this.serviceIds, hostname, bytes);
      for (const [uid, bytes] of nextWorkloads) this.setRecord(this.workloadRecords, this.workloadIds, uid, bytes);
      this.journal.append(version, records);
      this.journal.setFullBytes(HEADER_BYTES + this.recordBytes);
      this.current = version;
      this.fullCache = undefined;
      this.pendingWorkloads.clear();
      this.pendingServices.clear();
      return { published: true, version, records: records.length, bytes: message.length };
    } catch (error) {
      this.rollback(acquired);
      throw error;
    }
  }

  private rollback(acquired: Array<{ ids: IdAllocator; key: string; id: number }>): void {
    for (let i = acquired.length - 1; i >= 0; i--) acquired[i].ids.unacquire(acquired[i].key, acquired[i].id);
  }

  private setRecord(records: Map<string, Buffer>, ids: IdAllocator, key: string, bytes: Buffer | null): void {
    const old = records.get(key);
    if (old) this.recordBytes -= old.length;
    if (bytes) {
      records.set(key, bytes);
      this.recordBytes += bytes.length;
    } else {
      records.delete(key);
      ids.release(key);
    }
  }

  /** The full message of the current version (services first, so memberships name live ones). */
  full(): Buffer {
    if (this.fullCache?.version === this.current) return this.fullCache.body;
    this.builds++;
    const body = this.assembler.build(
      { epoch: this.epoch, base: 0, version: this.current, workloadIdLimit: this.workloadIds.limit, serviceIdLimit: this.serviceIds.limit },
      [this.serviceRecords.values(), this.workloadRecords.values()],
    );
    this.fullCache = { version: this.current, body };
    return body;
  }

  noChange(): Buffer {
    return assemble({ kind: KIND_NO_CHANGE, epoch: this.epoch, base: 0, version: this.current, workloadIdLimit: this.workloadIds.limit, serviceIdLimit: this.serviceIds.limit }, []);
  }

  /** Whether a client at (epoch, version) is up to date (a long poll waits). */
  upToDate(epoch: number, version: number): boolean {
    return epoch === this.epoch && version === this.current;
  }

  /** The answer for a client at (epoch, version), now. */
  answer(epoch: number, version: number): DeltaAnswer {
    const full = (reason: FullReason): DeltaAnswer => ({ kind: KIND_FULL, body: this.full(), version: this.current, reason, records: this.serviceRecords.size + this.workloadRecords.size });
    if (epoch !== this.epoch) return full("epoch");
    if (version > this.current) return full("future");
    if (version === this.current) return { kind: KIND_NO_CHANGE, body: this.noChange(), version, records: 0 };
    if (this.answersVersion !== this.current) {
      this.answers = new Map();
      this.answersVersion = this.current;
    }
    const cached = this.answers.get(version);
    if (cached) return cached;
    const answer = this.deltaFrom(version);
    if (this.answers.size >= 64) this.answers.clear();
    this.answers.set(version, answer);
    return answer;
  }

  private deltaFrom(version: number): DeltaAnswer {
    const full = (reason: FullReason): DeltaAnswer => ({ kind: KIND_FULL, body: this.full(), version: this.current, reason, records: this.serviceRecords.size + this.workloadRecords.size });
    const range = this.journal.range(version);
    if (!range) return full("behind");
    let bytes = HEADER_BYTES;
    for (const r of range) bytes += r.bytes.length;
    if (bytes > HEADER_BYTES + this.recordBytes) return full("smaller");
    const body = assemble(
      { kind: KIND_DELTA, epoch: this.epoch, base: version, version: this.current, workloadIdLimit: this.workloadIds.limit, serviceIdLimit: this.serviceIds.limit },
      range.map((r) => r.bytes),
    );
    return { kind: KIND_DELTA, body, version: this.current, records: range.length };
  }
}

// The changes of one delta channel, version by version, so a client at version V gets only
// what changed since V. Each version keeps its records encoded (one Buffer per version plus
// record offsets: memory is the records' bytes, not an object per record).
//
// Bounds: the oldest versions are dropped while the journal holds more than `maxRecords`
// records or more than `maxBytes` bytes, or more than `maxVersions` versions. A client whose
// version is older than what is kept gets a full message instead, which is also the right
// answer on cost: a delta carrying more bytes than the full state is worse than the full.
// So `maxBytes` follows the size of a full message (`fullBytes`, updated by the channel),
// between `minBytes` and `maxBytes` (defaults 1 MiB and 64 MiB: at 100k pods a full message
// is ~11 MB, so a client can be ~11 MB of changes, tens of thousands of pod changes, behind
// and still get a delta; memory stays below 64 MiB + 16 bytes per record per channel).
import { RECORD_SERVICE_REMOVE, RECORD_SERVICE_UPSERT, RECORD_WORKLOAD_REMOVE, RECORD_WORKLOAD_UPSERT } from "./wire.js";

export interface JournalLimits {
  maxRecords: number;
  maxBytes: number;
  minBytes: number;
  maxVersions: number;
}

export const DEFAULT_JOURNAL_LIMITS: JournalLimits = { maxRecords: 1_000_000, maxBytes: 64 << 20, minBytes: 1 << 20, maxVersions: 100_000 };

interface Entry {
  version: number;
  data: Buffer;
  /** Start offset of each record in data (a record runs to the next one's start). */
  starts: Uint32Array;
}

/** One record of a coalesced range: its type, id and encoded bytes (type byte included). */
export interface RangeRecord {
  type: number;
  id: number;
  bytes: Buffer;
}

export class Journal {
  private entries: Entry[] = [];
  private head = 0;
  private records = 0;
  private bytes = 0;
  /** A client at a version >= this (and <= current) can be served a delta. */
  private oldestBase: number;
  private fullBytes = 0;

  constructor(
    private current: number,
    private readonly limits: JournalLimits = DEFAULT_JOURNAL_LIMITS,
  ) {
    this.oldestBase = current;
  }

  get version(): number {
    return this.current;
  }

  get oldest(): number {
    return this.oldestBase;
  }

  get recordCount(): number {
    return this.records;
  }

  get byteCount(): number {
    return this.bytes;
  }

  get versionCount(): number {
    return this.entries.length - this.head;
  }

  /** The size of a full message now: the byte bound follows it. */
  setFullBytes(n: number): void {
    this.fullBytes = n;
    this.trim();
  }

  private byteBound(): number {
    return Math.min(this.limits.maxBytes, Math.max(this.limits.minBytes, this.fullBytes));
  }

  /** Appends version `version` (> current) made of `records` (each one encoded record). */
  append(version: number, records: Buffer[]): void {
    if (!(version > this.current)) throw new Error(`journal: version ${version} does not follow ${this.current}`);
    let total = 0;
    for (const r of records) total += r.length;
    const data = Buffer.allocUnsafe(total);
    const starts = new Uint32Array(records.length);
    let pos = 0;
    records.forEach((r, i) => {
      starts[i] = pos;
      r.copy(data, pos);
      pos += r.length;
    });
    this.entries.push({ version, data, starts });
    this.records += records.length;
    this.bytes += total;
    this.current = version;
    this.trim();
  }

  private trim(): void {
    const bound = this.byteBound();
    while (this.head < this.entries.length && (this.records > this.limits.maxRecords || this.bytes > bound || this.entries.length - this.head > this.limits.maxVersions)) {
      const e = this.entries[this.head];
      this.entries[this.head] = undefined as unknown as Entry;
      this.head++;
      this.records -= e.starts.length;
      this.bytes -= e.data.length;
      this.oldestBase = e.version;
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  /** Whether a delta from `base` can be served (base within the kept range). */
  covers(base: number): boolean {
    return base >= this.oldestBase && base <= this.current;
  }

  /**
   * The changes from `base` to the current version, coalesced per object: only the last
   * record of each workload id and each service id (an upsert after a removal of the same id
   * is the upsert; a removal after an upsert is the removal). Ordered: workload removals,
   * service removals, service upserts, workload upserts, so addresses and VIPs are freed
   * before they are claimed again and services exist before memberships name them.
   * Undefined when `base` is outside the kept range.
   */
  range(base: number): RangeRecord[] | undefined {
    if (!this.covers(base)) return undefined;
    const workloads = new Map<number, RangeRecord>();
    const services = new Map<number, RangeRecord>();
    // Versions are increasing: find the first entry after base by binary search.
    let lo = this.head;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.entries[mid].version <= base) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.entries.length; i++) {
      const e = this.entries[i];
      for (let k = 0; k < e.starts.length; k++) {
        const start = e.starts[k];
        const end = k + 1 < e.starts.length ? e.starts[k + 1] : e.data.length;
        const type = e.data[start];
        const id = e.data.readUInt32LE(start + 1);
        const rec = { type, id, bytes: e.data.subarray(start, end) };
        if (type === RECORD_WORKLOAD_UPSERT || type === RECORD_WORKLOAD_REMOVE) workloads.set(id, rec);
        else services.set(id, rec);
      }
    }
    const out: RangeRecord[] = [];
    for (const r of workloads.values()) if (r.type === RECORD_WORKLOAD_REMOVE) out.push(r);
    for (const r of services.values()) if (r.type === RECORD_SERVICE_REMOVE) out.push(r);
    for (const r of services.values()) if (r.type === RECORD_SERVICE_UPSERT) out.push(r);
    for (const r of workloads.values()) if (r.type === RECORD_WORKLOAD_UPSERT) out.push(r);
    return out;
  }
}

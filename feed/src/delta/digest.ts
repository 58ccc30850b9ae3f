// The content version of a delta channel: a 64-bit digest of the records a filter holds, the
// same in every feed process that holds the same mesh (ids are content-derived too: ids.ts), so
// a client can say "I hold digest D" to any replica, or to this one after a restart.
//
// Each record (its encoded bytes, type and id included: what the filter stores) hashes to 64
// bits (the first 8 bytes of its SHA-256); a bucket's digest is the sum mod 2^64 of its records'
// hashes and the channel's digest the sum of every record's. A sum is kept incrementally (a
// change subtracts the old record's hash and adds the new one's) and does not depend on order.
// Buckets: ranges of RANGE consecutive ids, range mod BUCKETS (workloads), and BUCKETS + the same
// for services. Ranges, not single ids: adding or removing an object moves the keys after it in
// its run of consecutive ids by one (ids.ts), and a run then stays within one or two buckets
// instead of touching one bucket per moved key. A client that missed
// changes sends the digests of its buckets and gets the records of those that differ
// (feed/docs/deltas.md, "Repair").
import { hash } from "node:crypto";

export const BUCKETS = 4096;
/** Consecutive ids per range (a power of two: bucket = (id >> RANGE_SHIFT) mod BUCKETS). */
export const RANGE_SHIFT = 2;
export const RANGE = 1 << RANGE_SHIFT;
/** Workload buckets first, then service buckets. */
export const BUCKET_COUNT = 2 * BUCKETS;
export const MASK = (1n << 64n) - 1n;

export function recordHash(record: Uint8Array): bigint {
  return (hash("sha256", record, "buffer") as unknown as Buffer).readBigUInt64LE(0);
}

export function bucketOf(service: boolean, id: number): number {
  return (service ? BUCKETS : 0) + ((id >>> RANGE_SHIFT) % BUCKETS);
}

/** The ids below `limit` in kind-relative bucket c (0 <= c < BUCKETS), in order. */
export function* idsOfBucket(c: number, limit: number): Generator<number> {
  for (let r = c; r * RANGE < limit; r += BUCKETS) {
    const end = Math.min(limit, (r + 1) * RANGE);
    for (let id = r * RANGE; id < end; id++) yield id;
  }
}

export class ContentDigest {
  total = 0n;
  readonly buckets = new BigUint64Array(BUCKET_COUNT);

  /** Adds (sign 1) or takes away (sign -1) one record of the given kind and id. */
  apply(service: boolean, id: number, record: Uint8Array, sign: 1 | -1): void {
    this.applyHash(service, id, recordHash(record), sign);
  }

  applyHash(service: boolean, id: number, h: bigint, sign: 1 | -1): void {
    const b = bucketOf(service, id);
    if (sign > 0) {
      this.buckets[b] = (this.buckets[b] + h) & MASK;
      this.total = (this.total + h) & MASK;
    } else {
      this.buckets[b] = (this.buckets[b] - h) & MASK;
      this.total = (this.total - h) & MASK;
    }
  }
}

/** A digest as the poll's `digest` parameter carries it: 16 lowercase hex digits. */
export function digestHex(d: bigint): string {
  return d.toString(16).padStart(16, "0");
}

/**
 * Digests parsed lately: after a version, thousands of polls name the same few, and each used to
 * build a string and a BigInt of its own. Bounded (cleared when full); only valid text is kept.
 */
const parsedDigests = new Map<string, bigint>();
const DIGESTS_KEPT = 64;

/** Parses a `digest` parameter; undefined when malformed. */
export function parseDigest(text: string): bigint | undefined {
  const known = parsedDigests.get(text);
  if (known !== undefined) return known;
  if (!/^[0-9a-f]{16}$/.test(text)) return undefined;
  const digest = BigInt("0x" + text);
  if (parsedDigests.size >= DIGESTS_KEPT) parsedDigests.clear();
  parsedDigests.set(text, digest);
  return digest;
}

// The journal (feed/src/delta/journal.ts): coalescing per object over a range, the order of a
// coalesced delta, and its bounds (records, bytes following the full size, versions).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Journal } from "../../feed/src/delta/journal.js";
import { RECORD_SERVICE_REMOVE, RECORD_SERVICE_UPSERT, RECORD_WORKLOAD_REMOVE, RECORD_WORKLOAD_UPSERT } from "../../feed/src/delta/wire.js";

/** A stand-in record: type, id, then a tag byte so versions of one object differ. */
function r(type: number, id: number, tag = 0, pad = 0): Buffer {
  const b = Buffer.alloc(6 + pad);
  b[0] = type;
  b.writeUInt32LE(id, 1);
  b[5] = tag;
  return b;
}

const W = RECORD_WORKLOAD_UPSERT;
const WR = RECORD_WORKLOAD_REMOVE;
const S = RECORD_SERVICE_UPSERT;
const SR = RECORD_SERVICE_REMOVE;

const limits = { maxRecords: 1000, maxBytes: 1 << 20, minBytes: 1 << 20, maxVersions: 1000 };

function summary(j: Journal, base: number): string[] | undefined {
  return j.range(base)?.map((x) => `${x.type}:${x.id}:${x.bytes[5]}`);
}

describe("feed delta: journal", () => {
  it("coalesces per object: the last state of each, removals before upserts, services before workloads", () => {
    const j = new Journal(10, limits);
    j.append(11, [r(W, 1, 1), r(W, 2, 1), r(S, 0, 1)]);
    j.append(12, [r(W, 1, 2), r(WR, 2), r(S, 5, 1)]);
    j.append(13, [r(W, 2, 3), r(WR, 1), r(SR, 5)]);
    // From 10: workload 1 upserted then removed → removed; workload 2 upserted, removed, upserted (id reused) → upserted;
    // service 5 upserted then removed → removed; service 0 upserted.
    assert.deepEqual(summary(j, 10), [`${WR}:1:0`, `${SR}:5:0`, `${S}:0:1`, `${W}:2:3`]);
    // From 12: only what version 13 did.
    assert.deepEqual(summary(j, 12), [`${WR}:1:0`, `${SR}:5:0`, `${W}:2:3`]);
    assert.deepEqual(summary(j, 11), [`${WR}:1:0`, `${SR}:5:0`, `${W}:2:3`]);
    assert.deepEqual(summary(j, 13), []);
    assert.equal(j.range(9), undefined, "before the first kept base");
    assert.equal(j.range(14), undefined, "from the future");
  });

  it("drops the oldest versions past the record bound; a client behind them is not served a delta", () => {
    const j = new Journal(0, { ...limits, maxRecords: 5 });
    j.append(1, [r(W, 1), r(W, 2)]);
    j.append(2, [r(W, 3), r(W, 4)]);
    assert.equal(j.oldest, 0);
    j.append(3, [r(W, 5), r(W, 6)]);
    assert.equal(j.recordCount, 4);
    assert.equal(j.oldest, 1, "version 1 dropped: deltas start from 1 at the earliest");
    assert.equal(j.range(0), undefined);
    assert.deepEqual(summary(j, 1), [`${W}:3:0`, `${W}:4:0`, `${W}:5:0`, `${W}:6:0`]);
  });

  it("keeps at most max(minBytes, the full message's size) bytes, capped at maxBytes", () => {
    const j = new Journal(0, { maxRecords: 1000, maxBytes: 400, minBytes: 100, maxVersions: 1000 });
    for (let v = 1; v <= 10; v++) j.append(v, [r(W, v, 0, 44)]); // 50 bytes each
    assert.equal(j.byteCount, 100, "minBytes while the full size is unknown");
    j.setFullBytes(300);
    for (let v = 11; v <= 20; v++) j.append(v, [r(W, v, 0, 44)]);
    assert.equal(j.byteCount, 300, "follows the full size");
    j.setFullBytes(10_000);
    for (let v = 21; v <= 40; v++) j.append(v, [r(W, v, 0, 44)]);
    assert.equal(j.byteCount, 400, "never past maxBytes");
    assert.equal(j.oldest, 32);
    j.setFullBytes(120);
    assert.equal(j.byteCount, 100, "a smaller full message trims at once");
  });

  it("bounds the number of versions, and refuses a version that does not move forward", () => {
    const j = new Journal(0, { ...limits, maxVersions: 3 });
    for (let v = 1; v <= 5; v++) j.append(v, [r(S, v)]);
    assert.equal(j.versionCount, 3);
    assert.equal(j.oldest, 2);
    assert.throws(() => j.append(5, [r(S, 1)]), /does not follow/);
  });
});

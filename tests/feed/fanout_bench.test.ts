// The fan-out bench (bench/feed/fanout.ts) runs and its figures are well formed: a small case
// (1,000 pods from files, 50 pollers, 5 s of churn at 40 writes/s through the real API server,
// then a feed restart) run as `npm run bench` runs it, its JSON lines read back. No figure is
// checked against a speed target here (those are the bench's to print); what is checked is
// that every poller was counted, every write was traced, and each figure's numbers agree with
// each other. Plus the poller's protocol rules (bench/feed/fanout_protocol.ts) on crafted headers.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { BucketTable, HEADER_BYTES, holds, pollPath, readHeader, take, type Header } from "../../bench/feed/fanout_protocol.js";
import { REPO_ROOT } from "../support/paths.js";

function header(kind: number, epoch: number, base: number, version: number, body = 0, format = 2, digest = 0n): Buffer {
  const b = Buffer.alloc(HEADER_BYTES);
  b.writeUInt32LE(0x3148534d, 0);
  b.writeUInt16LE(format, 4);
  b.writeBigUInt64LE(digest, 48);
  b.writeUInt16LE(kind, 6);
  b.writeUInt32LE(epoch, 8);
  b.writeUInt32LE(base, 16);
  b.writeUInt32LE(version, 24);
  b.writeUInt32LE(body, 44);
  return b;
}

describe("fan-out poller protocol", () => {
  it("takes a full message whole, a delta only from its own version, a no-change only at it", () => {
    const at = { epoch: 7, version: 3 };
    const full = readHeader(header(1, 9, 0, 1, 100), HEADER_BYTES + 100);
    assert.deepEqual(take(at, full as never), { epoch: 9, version: 1 });
    assert.deepEqual(take(at, readHeader(header(2, 7, 3, 5), HEADER_BYTES) as never), { epoch: 7, version: 5 });
    assert.match(take(at, readHeader(header(2, 7, 2, 5), HEADER_BYTES) as never) as string, /delta from 7\/2/);
    assert.match(take(at, readHeader(header(2, 8, 3, 5), HEADER_BYTES) as never) as string, /delta from 8\/3/);
    assert.deepEqual(take(at, readHeader(header(3, 7, 0, 3), HEADER_BYTES) as never), at);
    assert.match(take(at, readHeader(header(3, 7, 0, 4), HEADER_BYTES) as never) as string, /no-change at 7\/4/);
  });

  it("refuses a header that does not describe the answer", () => {
    assert.match(readHeader(Buffer.alloc(10), 10) as string, /shorter than the 56-byte header/);
    assert.match(readHeader(header(1, 1, 0, 1, 5), HEADER_BYTES + 4) as string, /bodyLength/);
    assert.match(readHeader(header(4, 1, 0, 1), HEADER_BYTES) as string, /header.kind: 4/);
    const bad = header(1, 1, 0, 1);
    bad.writeUInt32LE(0, 0);
    assert.match(readHeader(bad, HEADER_BYTES) as string, /magic/);
  });

  it("speaks format 3: states its digest, adopts a no-change of another epoch only for its own content, takes a repair only when it asked", () => {
    const h = (kind: number, epoch: number, base: number, version: number, digest: bigint, body = 0) => readHeader(header(kind, epoch, base, version, body, 3, digest), HEADER_BYTES + body) as Header;
    const at = { epoch: 7, version: 3, digest: 0xabcn };
    assert.match(pollPath("mesh", at, 25), /\?epoch=7&version=3&wait=25&format=3&digest=0000000000000abc$/);
    assert.match(pollPath("mesh", { epoch: 0, version: 0 }, 25, false), /&format=3$/, "nothing held: no digest");
    assert.match(pollPath("mesh", at, 25, true), /&repair=1$/);
    assert.deepEqual(take(at, h(3, 9, 0, 1, 0xabcn)), { epoch: 9, version: 1, digest: 0xabcn }, "rebased");
    assert.match(take(at, h(3, 9, 0, 1, 0xabdn)) as string, /no-change at 9\/1/, "another content");
    assert.match(take({ epoch: 7, version: 3 }, h(3, 9, 0, 1, 0n)) as string, /no-change/, "no digest held (format 2 model)");
    assert.deepEqual(take(at, h(5, 9, 0, 1, 0n)), at, "an ask-buckets moves nothing");
    assert.match(take(at, h(4, 9, 0, 2, 5n, 8)) as string, /repair/, "a repair not asked for");
    assert.deepEqual(take(at, h(4, 9, 0, 2, 5n, 8), true), { epoch: 9, version: 2, digest: 5n });
    assert.deepEqual(take(at, h(2, 7, 3, 4, 6n, 8)), { epoch: 7, version: 4, digest: 6n });
    assert.equal((h(2, 7, 3, 4, 6n, 8) as Header).bodyEnd, HEADER_BYTES + 8);
    assert.match(readHeader(header(5, 1, 0, 1, 0, 2), HEADER_BYTES) as string, /header.kind: 5/, "format 2 has no ask-buckets");
    assert.match(readHeader(header(1, 1, 0, 1, 0, 2, 1n), HEADER_BYTES) as string, /reserved/);
    assert.match(readHeader(header(1, 1, 0, 1, 9, 3), HEADER_BYTES + 4) as string, /bodyLength/);
  });

  it("keeps bucket digests from trailers that add up to the header's digest, and refuses others", () => {
    const trailer = (entries: Array<[number, bigint]>) => {
      const t = Buffer.alloc(4 + 12 * entries.length);
      t.writeUInt32LE(entries.length, 0);
      entries.forEach(([b, d], i) => {
        t.writeUInt32LE(b, 4 + 12 * i);
        t.writeBigUInt64LE(d, 8 + 12 * i);
      });
      return t;
    };
    const table = new BucketTable();
    assert.match(table.check(trailer([[1, 5n]]), false, 5n), /no bucket digests/);
    const full = trailer([[1, 5n], [8191, (1n << 64n) - 2n]]);
    assert.equal(table.check(full, true, 3n), "", "sums wrap at 64 bits");
    assert.match(table.check(full, true, 4n), /do not add up/);
    assert.match(table.check(trailer([[2, 1n], [1, 1n]]), true, 2n), /buckets\[1\]/, "buckets strictly increasing");
    table.commit(full, true, 3n);
    assert.equal(table.check(trailer([[1, 7n]]), false, 5n), "", "a delta replaces its buckets");
    table.commit(trailer([[1, 7n]]), false, 5n);
    assert.equal(table.check(trailer([[8191, 1n]]), false, 8n), "", "a digest above 2^32 replaced: the sum borrows across the halves");
    assert.match(table.check(trailer([[8191, 1n]]), false, 8n + (1n << 32n)), /do not add up/);
    const body = table.body();
    assert.equal(body.length, 65536);
    assert.equal(body.readBigUInt64LE(8), 7n);
    assert.equal(body.readBigUInt64LE(8191 * 8), (1n << 64n) - 2n);
  });

  it("holds a version only in its epoch and from it on", () => {
    assert.equal(holds({ epoch: 7, version: 5 }, 7, 5), true);
    assert.equal(holds({ epoch: 7, version: 6 }, 7, 5), true);
    assert.equal(holds({ epoch: 7, version: 4 }, 7, 5), false);
    assert.equal(holds({ epoch: 8, version: 9 }, 7, 5), false);
  });
});

describe("fan-out bench", () => {
  it("runs a small case and prints well-formed figures", { timeout: 240_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), "fanout-bench-"));
    const results = join(dir, "results.jsonl");
    const dump = join(dir, "writes.jsonl");
    const run = spawnSync(process.execPath, ["--import", "tsx", "bench/feed/fanout.ts", "--pods=1000", "--pollers=50", "--seconds=5", "--rate=40", "--churn-pods=100", "--base=files"], {
      cwd: REPO_ROOT,
      env: { ...process.env, BENCH_RESULTS: results, FANOUT_DUMP: dump },
      encoding: "utf8",
      timeout: 230_000,
    });
    assert.equal(run.status, 0, run.stderr);
    const figures = readFileSync(results, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const one = (name: string) => {
      const f = figures.filter((x) => x.figure === name);
      assert.equal(f.length, 1, `one ${name} figure`);
      assert.equal(f[0].pods, 1000);
      assert.equal(f[0].pollers, 50);
      assert.equal(typeof f[0].load1, "number");
      return f[0] as Record<string, number & string>;
    };
    const cold = one("fanout_cold");
    assert.equal(cold.feedRuntime, "chart", "the feed runs as its image does unless asked otherwise");
    assert.equal(cold.holding, 50);
    assert.ok(cold.fullMessages >= 50, "every poller's first answer is a full message");
    assert.ok(cold.fullMessageBytes > 1000 * 50, `a full message of 1,000 pods: ${cold.fullMessageBytes} bytes`);

    const p = one("fanout_propagation");
    assert.equal(p.writes, 200);
    assert.equal(p.writeErrors, 0);
    assert.equal(p.notCarried, 0, "every write was seen in a delta");
    assert.equal(p.notEveryPoller, 0, "every poller got every write");
    assert.equal(p.churnPods, 100);
    assert.ok(p.versions >= 1 && p.versions <= 200);
    assert.ok(p.superseded >= 0 && p.superseded <= 100, "only a pod's first write can be overwritten before it is published");
    assert.ok(0 < p.p50Ms && p.p50Ms <= p.p99Ms && p.p99Ms <= p.maxMs, JSON.stringify(p));
    assert.ok(p.firstPollerP50Ms > 0 && p.firstPollerP50Ms <= p.firstPollerP99Ms);
    // Eight observers name each write's version; the first alone names the same or a later one.
    assert.equal(p.observers, 8);
    assert.ok(p.p50Ms <= p.oneObserverP50Ms && p.p99Ms <= p.oneObserverP99Ms, JSON.stringify(p));
    assert.ok(p.feedPublishedOver250Ms >= 0 && p.feedPublishedOver250Ms <= p.feedPublishedOver100Ms, JSON.stringify(p));
    assert.ok(0 < p.apiWriteP50Ms && p.apiWriteP50Ms <= p.apiWriteP99Ms);
    assert.ok(p.fromAckP99Ms <= p.p99Ms, "from the write's answer is never longer than from its start");
    assert.equal(p.modelledPollers, 50, "every poller held the model when the churn began");
    assert.equal(p.modelledP99Ms, p.p99Ms, "over all pollers and over those with a model: the same pollers, the same figure");
    assert.ok(p.bytesPerSecond > 0 && p.answersPerSecond > 0 && p.feedCores > 0);
    // The churn's first second and the rest, apart; the API server's and etcd's own CPU.
    assert.ok(Math.max(p.firstSecondMaxMs, p.afterFirstSecondP99Ms) <= p.maxMs, JSON.stringify(p));
    assert.ok(p.apiserverCores > 0 && p.etcdCores >= 0, JSON.stringify(p));
    // The feed's event-loop delay over the writes and its collections over the phase.
    assert.ok(0 < p.feedLoopDelayP99Ms && p.feedLoopDelayP99Ms <= p.feedLoopDelayMaxMs, JSON.stringify(p));
    assert.ok(p.feedGcShare > 0 && p.feedGcShare < 1 && p.feedGcMajor >= 0 && p.feedGcPausesOver100Ms >= 0, JSON.stringify(p));
    // FANOUT_DUMP: a line per write, from which the figures above come.
    const rows = readFileSync(dump, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { at: number; every: number });
    assert.equal(rows.length, 200);
    const slowest = (among: typeof rows) => Math.max(...among.map((r) => r.every));
    assert.ok(Math.abs(slowest(rows) - p.maxMs) <= 0.1, `the slowest write is the figure's max: ${slowest(rows)} ${p.maxMs}`);
    assert.ok(Math.abs(slowest(rows.filter((r) => r.at < 1000)) - p.firstSecondMaxMs) <= 0.1, "the first second's slowest write");
    assert.equal(p.target, `p99 < 1000 ms: ${p.p99Ms < 1000 ? "met" : "missed"}`);

    const r = one("fanout_restart");
    assert.equal(r.holding, 50);
    assert.ok(r.stopToReadySeconds > 0);
    assert.ok(Math.abs(r.stopToEveryPollerSeconds - r.stopToReadySeconds - r.readyToEveryPollerSeconds) < 0.05, JSON.stringify(r));
    assert.ok(r.inFlightAtStop >= 1 && r.inFlightAtStop <= 50, JSON.stringify(r));
    // A stopping feed answers its held polls with a no-change, then closes; a poll sent after
    // that is refused. Either way, each poller with a request out saw the stop.
    assert.ok(r.failures + r.noChange >= r.inFlightAtStop, `every poller with a request out saw the feed stop: ${JSON.stringify(r)}`);
    assert.ok(r.bytesSent > 0 && r.bytesPerPoller === Math.round(r.bytesSent / 50));
    assert.ok(r.failuresAfterReady >= 0 && r.failuresAfterReady <= r.failures, JSON.stringify(r));
    assert.ok(r.readyToPollerP50Seconds <= r.readyToPollerP90Seconds && r.readyToPollerP90Seconds <= r.readyToEveryPollerSeconds + 0.01, JSON.stringify(r));
    // The same mesh after the restart: a poller's model is current, so it is told so (format 3).
    assert.ok(r.rebased >= 1, `a current model is rebased, not resent: ${JSON.stringify(r)}`);
    assert.equal(r.feedRebased >= r.rebased, true, "the feed counted the rebased no-changes the pollers took");
    assert.ok(r.fullMessages + r.rebased + r.repairs >= 50, "every poller moved to the new epoch");
    for (const f of [cold, r]) assert.ok(f.clientsDropped >= 0 && f.handshakesFailed >= 0, "the feed's own counts were read");
    assert.equal(r.target, `ready → every poller < 10 s: ${r.readyToEveryPollerSeconds < 10 ? "met" : "missed"}`);
  });
});

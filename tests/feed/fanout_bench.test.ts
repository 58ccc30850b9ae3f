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
import { HEADER_BYTES, holds, readHeader, take } from "../../bench/feed/fanout_protocol.js";
import { REPO_ROOT } from "../support/paths.js";

function header(kind: number, epoch: number, base: number, version: number, body = 0): Buffer {
  const b = Buffer.alloc(HEADER_BYTES);
  b.writeUInt32LE(0x3148534d, 0);
  b.writeUInt16LE(2, 4);
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

  it("holds a version only in its epoch and from it on", () => {
    assert.equal(holds({ epoch: 7, version: 5 }, 7, 5), true);
    assert.equal(holds({ epoch: 7, version: 6 }, 7, 5), true);
    assert.equal(holds({ epoch: 7, version: 4 }, 7, 5), false);
    assert.equal(holds({ epoch: 8, version: 9 }, 7, 5), false);
  });
});

describe("fan-out bench", () => {
  it("runs a small case and prints well-formed figures", { timeout: 240_000 }, () => {
    const results = join(mkdtempSync(join(tmpdir(), "fanout-bench-")), "results.jsonl");
    const run = spawnSync(process.execPath, ["--import", "tsx", "bench/feed/fanout.ts", "--pods=1000", "--pollers=50", "--seconds=5", "--rate=40", "--churn-pods=100", "--base=files"], {
      cwd: REPO_ROOT,
      env: { ...process.env, BENCH_RESULTS: results },
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
    assert.ok(0 < p.apiWriteP50Ms && p.apiWriteP50Ms <= p.apiWriteP99Ms);
    assert.ok(p.fromAckP99Ms <= p.p99Ms, "from the write's answer is never longer than from its start");
    assert.equal(p.modelledPollers, 50, "every poller held the model when the churn began");
    assert.equal(p.modelledP99Ms, p.p99Ms, "over all pollers and over those with a model: the same pollers, the same figure");
    assert.ok(p.bytesPerSecond > 0 && p.answersPerSecond > 0 && p.feedCores > 0);
    assert.equal(p.target, `p99 < 1000 ms: ${p.p99Ms < 1000 ? "met" : "missed"}`);

    const r = one("fanout_restart");
    assert.equal(r.holding, 50);
    assert.ok(r.stopToReadySeconds > 0);
    assert.ok(Math.abs(r.stopToEveryPollerSeconds - r.stopToReadySeconds - r.readyToEveryPollerSeconds) < 0.05, JSON.stringify(r));
    assert.ok(r.failures >= 50, "every poller lost its held poll when the feed stopped");
    assert.ok(r.bytesSent > 0 && r.bytesPerPoller === Math.round(r.bytesSent / 50));
    for (const f of [cold, r]) assert.ok(f.clientsDropped >= 0 && f.handshakesFailed >= 0, "the feed's own counts were read");
    assert.equal(r.target, `ready → every poller < 10 s: ${r.readyToEveryPollerSeconds < 10 ? "met" : "missed"}`);
  });
});

// The stall timeout under pressure (feed/src/server_guard.ts scaledStallMs): the whole
// stallTimeoutMs while few large bodies are being written, shorter in proportion past
// STALL_SCALE_FROM of them, never under STALL_FLOOR_MS (nor above the configured value).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { scaledStallMs, STALL_FLOOR_MS, STALL_SCALE_FROM } from "../../feed/src/server_guard.js";

describe("the stall timeout shrinks past STALL_SCALE_FROM large bodies at once", () => {
  it("is the configured value up to STALL_SCALE_FROM bodies", () => {
    for (const n of [0, 1, STALL_SCALE_FROM - 1, STALL_SCALE_FROM]) assert.equal(scaledStallMs(5000, n), 5000, `${n} bodies`);
  });

  it("past it, stallTimeoutMs × STALL_SCALE_FROM / bodies", () => {
    assert.equal(scaledStallMs(5000, 2 * STALL_SCALE_FROM), 2500);
    assert.equal(scaledStallMs(5000, 4 * STALL_SCALE_FROM), 1250);
    assert.ok(scaledStallMs(5000, STALL_SCALE_FROM + 1) < 5000);
  });

  it("never under the floor, and never above a configured value below the floor", () => {
    assert.equal(scaledStallMs(5000, 1000), STALL_FLOOR_MS);
    assert.equal(scaledStallMs(5000, 1_000_000), STALL_FLOOR_MS);
    assert.equal(scaledStallMs(500, 1000), 500);
    assert.equal(scaledStallMs(500, 10), 500);
  });

  it("only shrinks as bodies are added", () => {
    let previous = Infinity;
    for (let n = 1; n < 2000; n++) {
      const ms = scaledStallMs(5000, n);
      assert.ok(ms <= previous, `${n} bodies: ${ms} ms after ${previous} ms`);
      previous = ms;
    }
  });
});

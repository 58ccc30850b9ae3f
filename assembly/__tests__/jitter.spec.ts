// The feed client's jitter (assembly/runtime/jitter.ts) over many draws: `full` stays in
// [0, ms] and `equal` in [ms/2, ms] (the bounds feed_retry.ts promises), both reach close to each
// end of their range, and `full`'s mean is the middle. The host clock answers nothing here (no
// Envoy): the seed is given, so the draws are SplitMix64's alone.
import { Jitter } from "../runtime/jitter";

const DRAWS = 20000;

describe("Jitter", () => {
  it("full(ms): uniform over [0, ms]", () => {
    const j = new Jitter(7, 123456789);
    const ms: u32 = 5000;
    let lo: u32 = u32.MAX_VALUE;
    let hi: u32 = 0;
    let sum: f64 = 0;
    for (let i = 0; i < DRAWS; i++) {
      const d = j.full(ms);
      expect(d <= ms).toBe(true);
      if (d < lo) lo = d;
      if (d > hi) hi = d;
      sum += <f64>d;
    }
    expect(lo < 50).toBe(true);
    expect(hi > ms - 50).toBe(true);
    // The mean of 20,000 uniform draws: within 1% of ms/2 (the standard error is 0.2%).
    const mean = sum / <f64>DRAWS;
    expect(mean > 0.49 * <f64>ms && mean < 0.51 * <f64>ms).toBe(true);
  });

  it("equal(ms): uniform over [ms/2, ms]", () => {
    const j = new Jitter(7, 987654321);
    const ms: u32 = 30000;
    let lo: u32 = u32.MAX_VALUE;
    let hi: u32 = 0;
    for (let i = 0; i < DRAWS; i++) {
      const d = j.equal(ms);
      expect(d >= ms / 2 && d <= ms).toBe(true);
      if (d < lo) lo = d;
      if (d > hi) hi = d;
    }
    expect(lo < ms / 2 + 100).toBe(true);
    expect(hi > ms - 100).toBe(true);
  });

  it("full(0) is 0", () => {
    expect(new Jitter(1, 2).full(0)).toBe(0);
  });
});

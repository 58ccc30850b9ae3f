// Spread for retry delays, so that the VMs of every sidecar that lost the feed at the same moment
// do not all come back at the same moment (a thundering herd on a feed that just restarted).
//
// proxy-wasm gives a VM no random source (no proxy_get_random, no WASI random_get in Envoy's
// network filters), so the randomness is built from what differs between VMs: the host's wall
// clock in nanoseconds when the client starts (each worker's VM and each sidecar configures at
// its own instant; the low bits are noise), the root context's id, and the clock again at each
// draw (a failure is seen by each VM at its own nanosecond). They are mixed by SplitMix64, whose
// output passes statistical tests for any seed. Not for secrets: an observer who knows the start
// instant to the nanosecond could predict it; for spreading retries that does not matter.
import { nowNanoseconds } from "./timer";

const GOLDEN: u64 = 0x9e3779b97f4a7c15;

/** One step of SplitMix64 over `z` (Steele, Lea, Flood 2014). */
function mix(z: u64): u64 {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

export class Jitter {
  private state: u64;

  /** `salt` tells apart VMs that might read the same clock (the root context id, say). */
  constructor(salt: u64, seed: u64 = nowNanoseconds()) {
    this.state = mix(seed ^ mix(salt + GOLDEN));
  }

  /** 64 random bits; the clock is folded in again, so two VMs with one seed still part ways. */
  next(): u64 {
    this.state += GOLDEN;
    return mix(this.state ^ (nowNanoseconds() * GOLDEN));
  }

  /**
   * "Equal jitter": half of `ms` fixed, the other half uniform in [0, ms/2]. Unlike full jitter
   * (uniform in [0, ms], Envoy's retry back-off) a retry never comes right after a failure, and
   * the spread is still half the delay: at the 30 s cap, retries land anywhere in [15 s, 30 s].
   */
  equal(ms: u32): u32 {
    const half = ms >> 1;
    const span = <u64>(ms - half) + 1;
    return half + <u32>(this.next() % span);
  }

  /**
   * "Full jitter": uniform in [0, ms], Envoy's own retry back-off (its xDS client's too): the
   * widest spread, so a herd that failed together reaches a feed that comes back at half the
   * rate equal jitter would. For "unavailable", where a retry costs the feed nothing.
   */
  full(ms: u32): u32 {
    return <u32>(this.next() % (<u64>ms + 1));
  }
}

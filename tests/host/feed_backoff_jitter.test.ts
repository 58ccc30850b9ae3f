// The feed client's retry backoff when the feed is unavailable is fully jittered
// (assembly/runtime/jitter.ts, the numbers from feed_retry.ts): VMs that lose the feed
// at the same moment must not retry at the same moments. Each VM here is its own compiled
// feed_probe instance whose calls Envoy refuses at once (an unknown cluster), all failing at the
// same wall-clock millisecond; the clock has nanosecond resolution, as Envoy's
// proxy_get_current_time_nanoseconds has. The test steps each VM's clock and records when each
// retry goes out.
// Run: node --import tsx --test tests/host/feed_backoff_jitter.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ProxyWasmHost } from "../../host/index.js";
import { ensureBuilt } from "./helpers.js";
import { UNAVAILABLE_FIRST_MS, UNAVAILABLE_MAX_MS } from "../../assembly/runtime/feed_retry.js";

const VMS = 16;
const STEP_MS = 50;
/** The nominal backoffs: 500 ms doubling to the 5 s cap (written out: the doubling is what is checked). */
const BACKOFFS = [500, 1000, 2000, 4000, 5000, 5000];

interface Vm {
  host: ProxyWasmHost;
  skippedMs: bigint;
}

async function startVm(): Promise<Vm> {
  const vm = { skippedMs: 0n } as Vm;
  // Wall time to the nanosecond plus what the test skips ahead.
  const clock = () => (BigInt(Date.now()) + vm.skippedMs) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
  vm.host = await ProxyWasmHost.fromFile(ensureBuilt("feed_probe"), {
    rootId: "feed_probe",
    pluginConfiguration: JSON.stringify({ meshFeed: { cluster: "no_such_cluster", target: "node-a", waitSeconds: 1 } }),
    clock,
  });
  assert.ok(vm.host.start(), vm.host.startFailure);
  return vm;
}

const failures = (vm: Vm) => vm.host.metrics().get("feed_probe.feed.unavailable") ?? 0;

/** Steps the VM's clock by STEP_MS until the next attempt fails; returns how long that took. */
function waitForRetry(vm: Vm, limitMs: number): number {
  const before = failures(vm);
  let waited = 0;
  while (failures(vm) === before) {
    assert.ok(waited <= limitMs, `no retry within ${limitMs} ms`);
    vm.skippedMs += BigInt(STEP_MS);
    waited += STEP_MS;
    vm.host.tick();
  }
  return waited;
}

describe("feed client backoff when unavailable: full jitter", () => {
  it("spreads the retries of VMs that failed together over [0, backoff] at every step", async () => {
    assert.deepEqual([BACKOFFS[0], BACKOFFS.at(-1)], [UNAVAILABLE_FIRST_MS, UNAVAILABLE_MAX_MS]);
    const vms: Vm[] = [];
    for (let i = 0; i < VMS; i++) vms.push(await startVm());
    try {
      // The first poll of every VM fails at once (Envoy refuses a call to an unknown cluster).
      for (const vm of vms) {
        vm.host.tick();
        assert.equal(failures(vm), 1);
      }
      for (const backoff of BACKOFFS) {
        const delays = vms.map((vm) => waitForRetry(vm, backoff + STEP_MS));
        for (const delay of delays) {
          // Measured in STEP_MS steps (and wall time adds a few ms): within one step of the range.
          assert.ok(delay >= STEP_MS && delay <= backoff + STEP_MS, `backoff ${backoff}: a retry after ${delay} ms`);
        }
        const distinct = new Set(delays).size;
        const range = Math.max(...delays) - Math.min(...delays);
        const mean = delays.reduce((a, b) => a + b, 0) / delays.length;
        if (backoff >= 2000) {
          // 16 draws uniform over the backoff (≥ 40 steps of 50 ms): all within a sixth of it has
          // a probability below 1e-10; the mean (plus half a step for the rounding up to a step)
          // stays within 4 standard deviations (0.072 × backoff) of 1/2.
          assert.ok(distinct >= VMS / 2, `backoff ${backoff}: only ${distinct} distinct retry times of ${VMS}: ${delays}`);
          assert.ok(range >= backoff / 6, `backoff ${backoff}: retries within ${range} ms of each other: ${delays}`);
          assert.ok(mean >= 0.21 * backoff && mean <= 0.79 * backoff + STEP_MS, `backoff ${backoff}: mean retry ${mean} ms: ${delays}`);
        } else {
          assert.ok(distinct >= 2, `backoff ${backoff}: every VM retried at the same moment: ${delays}`);
        }
      }
    } finally {
      for (const vm of vms) vm.host.dispose();
    }
  });
});

// Per-connection cost of the runtime itself: a no-op network filter run through the proxy-wasm
// host (Node's V8, the engine Envoy embeds) with 0 and with 10,000 other connections open, for
// this suite's runtime and for the stock @solo-io/proxy-runtime 0.1.8 (patched only to compile).
// The ratio is taken against a second, idle VM timed in turns (see below); costs are lower
// quartiles of batch times (scale/vm.ts: lowQuartile).
// One connection = context create, on_new_connection (when exported), close callbacks, done,
// log, delete: everything Envoy calls for a connection that sends no data.
import { ProxyWasmHost } from "../host/index.js";
import { emit } from "./emit.js";
import { lowQuartile } from "./scale/vm.js";

const OPEN_RATIO_TARGET = 1.5;

interface Subject {
  runtime: string;
  wasm: string;
  /** The stock runtime rewrites memory at the configuration's length when it is empty (measured
   *  defect), so both get the same small non-empty configuration. */
  configuration: string;
}

const SUBJECTS: Subject[] = [
  { runtime: "this_runtime", wasm: "build/noop.wasm", configuration: "{}" },
  { runtime: "stock_proxy_runtime_0.1.8", wasm: "build/bench/stock_noop.wasm", configuration: "{}" },
];

interface Sample {
  /** Time inside the wasm VM (guest code and the host calls it makes), per connection. */
  vm: number;
  /** The same plus the host emulator's own bookkeeping, per connection. */
  total: number;
}

function microsPerConnection(host: ProxyWasmHost, count: number): Sample {
  const guestBefore = host.guestTimeNs;
  const started = process.hrtime.bigint();
  for (let i = 0; i < count; i++) host.connect({ destination: "10.0.0.1:80" }).end();
  const total = Number(process.hrtime.bigint() - started) / 1000 / count;
  return { vm: Number(host.guestTimeNs - guestBefore) / 1000 / count, total };
}

function lowSample(samples: Sample[]): Sample {
  return { vm: lowQuartile(samples.map((s) => s.vm)), total: lowQuartile(samples.map((s) => s.total)) };
}

export async function runtimeOverhead(quick: boolean): Promise<void> {
  const openTarget = 10_000;
  for (const subject of SUBJECTS) {
    // Two VMs: `loaded` gets the open connections, `idle` never holds any. Their batches are
    // taken in turns and the ratio is formed per round, so machine-load drift between the
    // 0-open and the 10k-open measurements cancels (the machine is shared).
    const [loaded, idle] = await Promise.all([start(subject), start(subject)]);
    const ours = subject.runtime === "this_runtime";
    // The stock runtime gets slower with every open context; fewer samples keep the run short.
    const slow = subject.runtime.startsWith("stock");
    // Small batches (~0.5 ms of guest time for this runtime), many rounds: see scale/index.ts.
    const batch = slow ? (quick ? 50 : 100) : 500;
    const rounds = slow ? 7 : quick ? 20 : 30;
    microsPerConnection(loaded, batch * 2); // warm-up: JIT tiers, allocator growth
    microsPerConnection(idle, batch * 2);
    const paired = (): { samples: Sample[]; ratio: number } => {
      const samples: Sample[] = [];
      const theirs: number[] = [];
      for (let r = 0; r < rounds; r++) {
        samples.push(microsPerConnection(loaded, batch));
        theirs.push(microsPerConnection(idle, batch).vm);
      }
      return { samples, ratio: lowQuartile(samples.map((s) => s.vm)) / lowQuartile(theirs) };
    };
    const before = paired();
    const held = [];
    for (let i = 0; i < openTarget; i++) held.push(loaded.connect({ destination: "10.0.0.1:80" }));
    const after = paired();
    for (const connection of held) connection.end();
    for (const [open, sample] of [[0, lowSample(before.samples)], [openTarget, lowSample(after.samples)]] as const) {
      emit({ figure: "vm_us_per_connection", runtime: subject.runtime, open_connections: open, value: round(sample.vm), unit: "us" });
      emit({ figure: "host_total_us_per_connection", runtime: subject.runtime, open_connections: open, value: round(sample.total), unit: "us" });
    }
    const ratio = after.ratio / before.ratio;
    emit({
      figure: "vm_cost_ratio_open_vs_idle",
      runtime: subject.runtime,
      open_connections: openTarget,
      value: round(ratio),
      // The target is this runtime's; the stock runtime is the comparison, not held to it.
      target: ours ? OPEN_RATIO_TARGET : undefined,
      met: ours ? ratio <= OPEN_RATIO_TARGET : undefined,
    });
    for (const host of [loaded, idle]) if (host.failed) throw new Error(`${subject.wasm} trapped: ${host.trapMessage}`);
  }
}

async function start(subject: Subject): Promise<ProxyWasmHost> {
  const host = await ProxyWasmHost.fromFile(subject.wasm, {
    rootId: "noop",
    pluginConfiguration: subject.configuration,
    measureGuestTime: true,
  });
  if (!host.start()) throw new Error(`${subject.wasm}: plugin refused: ${host.startFailure}`);
  return host;
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}

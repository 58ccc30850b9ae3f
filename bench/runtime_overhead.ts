// Per-connection cost of the runtime itself: a no-op network filter run through the proxy-wasm
// host (Node's V8, the engine Envoy embeds) with 0 and with 10,000 other connections open, for
// this suite's runtime and for the stock @solo-io/proxy-runtime 0.1.8 (patched only to compile).
// One connection = context create, on_new_connection (when exported), close callbacks, done,
// log, delete: everything Envoy calls for a connection that sends no data.
import { ProxyWasmHost } from "../host/index.js";
import { emit } from "./emit.js";

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

function medianSample(samples: Sample[]): Sample {
  return { vm: median(samples.map((s) => s.vm)), total: median(samples.map((s) => s.total)) };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export async function runtimeOverhead(quick: boolean): Promise<void> {
  const openTarget = 10_000;
  for (const subject of SUBJECTS) {
    const host = await ProxyWasmHost.fromFile(subject.wasm, {
      rootId: "noop",
      pluginConfiguration: subject.configuration,
      measureGuestTime: true,
    });
    const ours = subject.runtime === "this_runtime";
    if (!host.start()) throw new Error(`${subject.wasm}: plugin refused: ${host.startFailure}`);
    // The stock runtime gets slower with every open context; fewer samples keep the run short.
    const slow = subject.runtime.startsWith("stock");
    const batch = slow ? (quick ? 100 : 400) : quick ? 2_000 : 10_000;
    microsPerConnection(host, batch); // warm-up: JIT tiers, allocator growth
    const idle = medianSample([1, 2, 3, 4, 5].map(() => microsPerConnection(host, batch)));
    const held = [];
    for (let i = 0; i < openTarget; i++) held.push(host.connect({ destination: "10.0.0.1:80" }));
    const busy = medianSample([1, 2, 3, 4, 5].map(() => microsPerConnection(host, batch)));
    for (const connection of held) connection.end();
    for (const [open, sample] of [[0, idle], [openTarget, busy]] as const) {
      emit({ figure: "vm_us_per_connection", runtime: subject.runtime, open_connections: open, value: round(sample.vm), unit: "us" });
      emit({ figure: "host_total_us_per_connection", runtime: subject.runtime, open_connections: open, value: round(sample.total), unit: "us" });
    }
    emit({
      figure: "vm_cost_ratio_open_vs_idle",
      runtime: subject.runtime,
      open_connections: openTarget,
      value: round(busy.vm / idle.vm),
      // The target is this runtime's; the stock runtime is the comparison, not held to it.
      target: ours ? OPEN_RATIO_TARGET : undefined,
      met: ours ? busy.vm / idle.vm <= OPEN_RATIO_TARGET : undefined,
    });
    if (host.failed) throw new Error(`${subject.wasm} trapped: ${host.trapMessage}`);
  }
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}

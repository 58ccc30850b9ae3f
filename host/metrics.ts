// Plugin metrics (proxy_define_metric & co.) with Envoy's semantics (Context::defineMetric etc.).
//
// Envoy keeps the stat in its stats store keyed by name, and hands out a *new* id on every
// define: ids carry the type in their low 2 bits (counters 4, 8, ...; gauges 5, 9, ...;
// histograms 6, 10, ...). Defining a name twice gives two ids that address the same stat.
import { MetricType, WasmResult } from "./abi.js";

export type MetricKind = "counter" | "gauge" | "histogram";
const KINDS: readonly MetricKind[] = ["counter", "gauge", "histogram"];
const TYPE_MASK = 0x3;
const ID_INCREMENT = 4;
const U64 = (1n << 64n) - 1n;

interface Stat {
  readonly name: string;
  readonly kind: MetricKind;
  value: bigint;
  readonly samples: bigint[];
}

/** The stats store: one stat per (kind, name), shared by every VM of the plugin (and the canary). */
export class MetricStore {
  private readonly stats = new Map<string, Stat>();

  stat(kind: MetricKind, name: string): Stat {
    const key = `${kind}:${name}`;
    let stat = this.stats.get(key);
    if (stat === undefined) {
      stat = { name, kind, value: 0n, samples: [] };
      this.stats.set(key, stat);
    }
    return stat;
  }

  /** name → value for counters and gauges; histograms give their sample count. */
  values(): Map<string, number> {
    const out = new Map<string, number>();
    for (const stat of this.stats.values()) {
      out.set(stat.name, Number(stat.kind === "histogram" ? BigInt(stat.samples.length) : stat.value));
    }
    return out;
  }

  histogram(name: string): number[] | undefined {
    const stat = this.stats.get(`histogram:${name}`);
    return stat?.samples.map(Number);
  }
}

/** One VM's metric ids (Wasm::counters_ / gauges_ / histograms_ and next id per type). */
export class MetricIds {
  private readonly byId = new Map<number, Stat>();
  private readonly next = [MetricType.Counter, MetricType.Gauge, MetricType.Histogram].map(Number);

  constructor(private readonly store: MetricStore) {}

  define(type: number, name: string): { status: number; id?: number } {
    const kind = KINDS[type];
    if (kind === undefined) return { status: WasmResult.BadArgument };
    this.next[type]! += ID_INCREMENT;
    const id = this.next[type]!;
    this.byId.set(id, this.store.stat(kind, name));
    return { status: WasmResult.Ok, id };
  }

  increment(id: number, offset: bigint): number {
    const kind = KINDS[id & TYPE_MASK];
    if (kind !== "counter" && kind !== "gauge") return WasmResult.BadArgument;
    const stat = this.byId.get(id);
    if (stat === undefined) return WasmResult.NotFound;
    if (kind === "counter" && offset <= 0n) return WasmResult.BadArgument;
    // Gauges are uint64 in Envoy: going below zero wraps.
    stat.value = (stat.value + offset) & U64;
    return WasmResult.Ok;
  }

  record(id: number, value: bigint): number {
    const stat = this.byId.get(id);
    if (stat === undefined || KINDS[id & TYPE_MASK] === undefined) return WasmResult.NotFound;
    if (stat.kind === "counter") stat.value = (stat.value + value) & U64;
    else if (stat.kind === "gauge") stat.value = value & U64;
    else stat.samples.push(value & U64);
    return WasmResult.Ok;
  }

  get(id: number): { status: number; value?: bigint } {
    const kind = KINDS[id & TYPE_MASK];
    if (kind !== "counter" && kind !== "gauge") return { status: WasmResult.BadArgument };
    const stat = this.byId.get(id);
    if (stat === undefined) return { status: WasmResult.NotFound };
    return { status: WasmResult.Ok, value: stat.value };
  }
}

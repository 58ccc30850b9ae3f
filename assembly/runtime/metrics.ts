// Counters and gauges. Define each once per root context (as fields, or in onConfigure). Envoy
// hands out a new id for every definition but keeps one value per name, shown in /stats.
// Envoy refuses an increment of 0 or less for a counter (BAD_ARGUMENT), so inc() skips those.
import {
  proxy_define_metric,
  proxy_get_metric,
  proxy_increment_metric,
  proxy_record_metric,
} from "./abi";
import { MetricType, WasmResult } from "./types";

const idSlot: usize = heap.alloc(8);

function defineMetric(type: MetricType, name: string): u32 {
  const bytes = String.UTF8.encode(name);
  store<u64>(idSlot, 0);
  const status = proxy_define_metric(
    <i32>type,
    changetype<usize>(bytes),
    <usize>bytes.byteLength,
    idSlot,
  );
  // 0 marks "not defined": increments on it are dropped by the host with NOT_FOUND.
  return status == WasmResult.Ok ? load<u32>(idSlot) : 0;
}

function readMetric(id: u32): u64 {
  store<u64>(idSlot, 0);
  if (proxy_get_metric(id, idSlot) != WasmResult.Ok) return 0;
  return load<u64>(idSlot);
}

export class Counter {
  readonly id: u32;
  constructor(readonly name: string) {
    this.id = defineMetric(MetricType.Counter, name);
  }
  inc(delta: i64 = 1): void {
    if (delta > 0) proxy_increment_metric(this.id, delta);
  }
  value(): u64 {
    return readMetric(this.id);
  }
}

export class Gauge {
  readonly id: u32;
  constructor(readonly name: string) {
    this.id = defineMetric(MetricType.Gauge, name);
  }
  set(value: u64): void {
    proxy_record_metric(this.id, value);
  }
  add(delta: i64): void {
    proxy_increment_metric(this.id, delta);
  }
  value(): u64 {
    return readMetric(this.id);
  }
}

// The root context's timer and clock. proxy_set_tick_period_milliseconds arms a repeating timer
// for the calling root context in this VM only (each worker's VM has its own; 0 stops it);
// Envoy then calls proxy_on_tick(root) every period on that VM's thread. The clock is the
// host's wall clock (proxy_get_current_time_nanoseconds).
import { proxy_get_current_time_nanoseconds, proxy_set_tick_period_milliseconds } from "./abi";
import { WasmResult } from "./types";

/** Asks for proxy_on_tick every `milliseconds` (0 stops it). Returns the host status. */
export function setTickPeriod(milliseconds: u32): u32 {
  return proxy_set_tick_period_milliseconds(milliseconds);
}

const clockSlot: usize = heap.alloc(8);

/** The host's wall clock in milliseconds (0 if the host refuses). */
export function nowMilliseconds(): u64 {
  store<u64>(clockSlot, 0);
  if (proxy_get_current_time_nanoseconds(clockSlot) != WasmResult.Ok) return 0;
  return load<u64>(clockSlot) / 1_000_000;
}

/** The host's wall clock in nanoseconds (0 if the host refuses): the low bits differ between VMs. */
export function nowNanoseconds(): u64 {
  store<u64>(clockSlot, 0);
  if (proxy_get_current_time_nanoseconds(clockSlot) != WasmResult.Ok) return 0;
  return load<u64>(clockSlot);
}

// One configured filter VM in the proxy-wasm host (Node's V8, the engine Envoy embeds) and the
// ways the scale benchmark drives it: batches of whole connections (context create →
// on_new_connection → close → done/log/delete), timed inside the VM (host.guestTimeNs, which
// includes the host's emulation of the host calls the guest makes) and as guest code alone (the
// same minus the time in host functions, lib/host_call_timer.ts), and a check that each route
// is really taken (its counter moves) before anything is timed.
// The canary VM is off: Envoy configures twice (canary, then the real VM), so Envoy's configure
// time is ~2x the figure measured here.
import type { ConnectOptions } from "../../host/index.js";
import { ProxyWasmHost } from "../../host/index.js";
import { hostCallTimer, withHostCallTiming } from "../lib/host_call_timer.js";
import type { Snapshot } from "../lib/mesh_snapshot.js";
import { drawConnections, type Subject } from "./subjects.js";

export interface Vm {
  readonly subject: Subject;
  readonly pods: number;
  readonly host: ProxyWasmHost;
  /** The mixed stream this VM is timed with. */
  readonly mixed: readonly ConnectOptions[];
  /** Connections made so far (also the next offset into `mixed`). */
  made: number;
}

export interface Configured {
  readonly vm?: Vm;
  /** Wall time of start() (instantiate + on_vm_start + on_configure). */
  readonly ms: number;
  readonly error?: string;
}

const MIXED_LENGTH = 20_000;

export function configureVm(wasm: Uint8Array, subject: Subject, snapshot: Snapshot): Configured {
  const host = ProxyWasmHost.fromBytes(wasm, {
    rootId: subject.rootId,
    pluginConfiguration: snapshot.config,
    measureGuestTime: true,
    canary: false,
    logLevel: "warn",
  });
  const started = performance.now();
  let ok = false;
  let error: string | undefined;
  try {
    ok = withHostCallTiming(() => host.start());
    if (!ok) error = host.startFailure;
  } catch (e) {
    error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
  const ms = performance.now() - started;
  if (!ok) {
    const detail = [error, ...host.logLines("error"), ...host.logLines("critical")].filter((x) => x).slice(-3).join(" | ");
    return { ms, error: detail || "configure failed" };
  }
  const mixed = drawConnections(subject, snapshot, MIXED_LENGTH);
  return { ms, vm: { subject, pods: snapshot.pods, host, mixed, made: 0 } };
}

/** µs per connection inside the VM over one batch of the mixed stream. */
export function vmBatch(vm: Vm, count: number): number {
  const { host, mixed } = vm;
  const before = host.guestTimeNs;
  for (let i = 0; i < count; i++) host.connect(mixed[(vm.made + i) % mixed.length]).end();
  vm.made += count;
  return Number(host.guestTimeNs - before) / 1000 / count;
}

/** µs per connection inside the VM over `connections` (one batch, not the mixed stream). */
export function listBatch(vm: Vm, connections: readonly ConnectOptions[]): number {
  const { host } = vm;
  const before = host.guestTimeNs;
  for (const options of connections) host.connect(options).end();
  vm.made += connections.length;
  return Number(host.guestTimeNs - before) / 1000 / connections.length;
}

/** The same batch with host functions timed: µs per connection of guest code alone. */
export function guestBatch(vm: Vm, count: number): number {
  const { host, mixed } = vm;
  const guestBefore = host.guestTimeNs;
  const hostBefore = hostCallTimer.ns;
  hostCallTimer.enabled = true;
  try {
    for (let i = 0; i < count; i++) host.connect(mixed[(vm.made + i) % mixed.length]).end();
  } finally {
    hostCallTimer.enabled = false;
  }
  vm.made += count;
  return Number(host.guestTimeNs - guestBefore - (hostCallTimer.ns - hostBefore)) / 1000 / count;
}

/**
 * Every route's connections must bump that route's counter once each (the filter really takes
 * it); returns what went wrong, or undefined.
 */
export function checkRoutes(vm: Vm, snapshot: Snapshot, count = 200): string | undefined {
  const { host, subject } = vm;
  for (const route of subject.routes) {
    const counter = `${subject.rootId}.${route.counter}`;
    const before = new Map(host.metrics());
    for (const options of drawConnections(subject, snapshot, count, route, 11)) host.connect(options).end();
    vm.made += count;
    const after = host.metrics();
    const counted = (after.get(counter) ?? 0) - (before.get(counter) ?? 0);
    if (counted !== count) {
      const moved = [...after]
        .filter(([name, value]) => value !== (before.get(name) ?? 0))
        .map(([name, value]) => `${name} +${value - (before.get(name) ?? 0)}`);
      return `route ${route.name}: ${counted} of ${count} connections counted on ${counter} (${moved.join(", ")})`;
    }
  }
  if (host.failed) return `the VM trapped: ${host.trapMessage}`;
  return undefined;
}

/**
 * The lower quartile of per-batch times: what a batch costs when nothing else runs. On a shared
 * machine another process can only slow a batch down (a preemption inside a 1 ms batch doubles
 * it), never speed it up, and with 2 cores and a load of 10 more than half of the batches may be
 * hit, which moves the median but not the lower quartile.
 */
export function lowQuartile(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 4)] ?? NaN;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

export function round(value: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function log(message: string): void {
  process.stderr.write(`[scale] ${message}\n`);
}

// One instantiated module (Envoy's WasmBase/WasmVm): guest calls, the current context, traps,
// deferred "after VM call" actions and guest memory allocation.
import type { AbiVersion } from "./abi.js";
import type { HostContext } from "./context.js";
import { VmContext } from "./context.js";
import { GuestMemory, HostStatus } from "./memory.js";
import { WasmResult } from "./abi.js";
import type { MetricIds } from "./metrics.js";

export interface GuestCall {
  readonly vm: "main" | "canary";
  readonly fn: string;
  readonly args: readonly number[];
  /** Return value (undefined for void callbacks, or when the call trapped). */
  readonly result: number | undefined;
  readonly trapped?: boolean;
}

/** Host calls allowed while `_initialize`/`main` run (cpp-host WasmBase::startVm). */
const ALLOWED_DURING_START = new Set([
  "env.proxy_log",
  ...["wasi_unstable", "wasi_snapshot_preview1"].flatMap((m) =>
    [
      "fd_write",
      "args_sizes_get",
      "args_get",
      "environ_sizes_get",
      "environ_get",
      "fd_prestat_get",
      "fd_prestat_dir_name",
      "clock_time_get",
      "random_get",
    ].map((f) => `${m}.${f}`),
  ),
]);

/** Thrown by host functions to trap the guest (e.g. proc_exit, a restricted call). */
export class GuestTrap extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GuestTrap";
  }
}

export interface VmEvents {
  /** The VM just failed for good (first trap). */
  onFailure(vm: WasmVm, message: string): void;
  /** Every completed guest call when call recording is on. */
  onCall?(call: GuestCall): void;
}

export class WasmVm {
  readonly vmContext = new VmContext();
  memory!: GuestMemory;
  instance!: WebAssembly.Instance;
  failed = false;
  failure: string | undefined;
  /** Host functions invoked in this VM, all contexts together. */
  hostCalls = 0;
  /** Bytes allocated through the guest's malloc on the host's behalf (never freed by the host). */
  allocatedBytes = 0;
  allocations = 0;
  /** True while `_initialize`/`main` run: most host calls trap then (Envoy's restricted mode). */
  restricted = false;
  /** When set, wall time spent in outermost guest calls (host functions they call included). */
  measureTime = false;
  guestNanos = 0n;

  private current: HostContext | null = null;
  private effective: HostContext | null = null;
  private depth = 0;
  private readonly afterCall: Array<() => void> = [];
  private exportsByName: Record<string, WebAssembly.ExportValue> = {};

  constructor(
    readonly kind: "main" | "canary",
    readonly abiVersion: AbiVersion,
    readonly metricIds: MetricIds,
    private readonly events: VmEvents,
    private readonly lookupContext: (id: number) => HostContext | undefined,
  ) {}

  /** Instantiates `module` with `imports` (built by imports.ts against this VM). */
  instantiate(module: WebAssembly.Module, imports: WebAssembly.Imports): void {
    this.instance = new WebAssembly.Instance(module, imports);
    this.exportsByName = this.instance.exports;
    this.memory = new GuestMemory(this.exportsByName["memory"] as WebAssembly.Memory);
  }

  has(name: string): boolean {
    return typeof this.exportsByName[name] === "function";
  }

  /** The context host functions act for: the effective context if the guest set one. */
  context(): HostContext {
    return this.effective ?? this.current ?? this.vmContext;
  }

  setEffectiveContext(id: number): number {
    const target = this.lookupContext(id);
    if (target === undefined) return WasmResult.BadArgument;
    this.effective = target;
    return WasmResult.Ok;
  }

  /** Queues work to run when the outermost guest call returns (Envoy's addAfterVmCallAction). */
  defer(action: () => void): void {
    this.afterCall.push(action);
  }

  /**
   * Calls an export as the outermost guest call for `context`. Returns the result (unsigned), or
   * undefined when the export is missing, the VM has failed, or the call trapped (then the VM is
   * failed for good and `failure` says why).
   */
  call(context: HostContext, name: string, ...args: number[]): number | undefined {
    if (this.failed) return undefined;
    const fn = this.exportsByName[name];
    if (typeof fn !== "function") return undefined;
    const outer = this.depth === 0;
    const savedCurrent = this.current;
    const savedEffective = this.effective;
    this.current = context;
    this.effective = null;
    this.depth++;
    let result: number | undefined;
    let trapped = false;
    const started = outer && this.measureTime ? process.hrtime.bigint() : 0n;
    try {
      const value = (fn as (...a: number[]) => unknown)(...args);
      result = typeof value === "number" ? value >>> 0 : undefined;
    } catch (error) {
      trapped = true;
      this.fail(name, error);
    } finally {
      if (started !== 0n) this.guestNanos += process.hrtime.bigint() - started;
      this.depth--;
      this.current = savedCurrent;
      this.effective = savedEffective;
    }
    this.events.onCall?.({ vm: this.kind, fn: name, args, result, ...(trapped ? { trapped } : {}) });
    if (outer) this.runDeferred();
    return result;
  }

  private runDeferred(): void {
    while (this.afterCall.length > 0) this.afterCall.shift()!();
  }

  private fail(name: string, error: unknown): void {
    const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    this.failed = true;
    this.failure = `Function: ${name} failed: ${detail}`;
    this.events.onFailure(this, this.failure);
  }

  /**
   * Envoy's allocMemory: the guest's `malloc` (or `proxy_on_memory_allocate`) with exactly the
   * value's size. Called from inside host functions, so a trap propagates to the outer call.
   */
  allocate(size: number): number {
    const malloc = (this.exportsByName["malloc"] ?? this.exportsByName["proxy_on_memory_allocate"]) as (
      size: number,
    ) => number;
    const ptr = malloc(size) >>> 0;
    if (ptr === 0) throw new HostStatus(WasmResult.InvalidMemoryAccess);
    this.allocations++;
    this.allocatedBytes += size;
    return ptr;
  }

  /**
   * Returns a value through a pointer/size out-param pair: one allocation of exactly its size, or
   * no allocation and 0/0 for an empty value.
   */
  copyOut(bytes: Uint8Array, ptrPtr: number, sizePtr: number): void {
    let ptr = 0;
    if (bytes.length > 0) {
      ptr = this.allocate(bytes.length);
      this.memory.write(ptr, bytes);
    }
    this.memory.writeU32(ptrPtr, ptr);
    this.memory.writeU32(sizePtr, bytes.length);
  }

  /** Wraps a host function: counts it, enforces restricted mode, maps HostStatus to a return. */
  hostFunction<A extends unknown[]>(
    qualifiedName: string,
    impl: (...args: A) => number | void,
  ): (...args: A) => number | void {
    return (...args: A) => {
      this.hostCalls++;
      this.context().hostCalls++;
      if (this.restricted && !ALLOWED_DURING_START.has(qualifiedName)) {
        throw new GuestTrap(`restricted_callback: ${qualifiedName} called during VM start`);
      }
      try {
        return impl(...args);
      } catch (error) {
        if (error instanceof HostStatus) return error.status;
        throw error;
      }
    };
  }
}

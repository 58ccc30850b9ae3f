// Never publish what a filter would refuse: every rendered configuration is first configured in
// the compiled filter itself, run by the project's proxy-wasm host (host/, the same code path
// `npm run explain` uses). A refusal comes back as the filter's own one-line error.
import { readFileSync } from "node:fs";
import { ProxyWasmHost } from "../../host/index.js";
import type { FilterName } from "./render.js";

export interface Verdict {
  ok: boolean;
  /** The filter's error line (or the host's reason) when refused. */
  error?: string;
  ms: number;
}

export class FilterValidator {
  private readonly modules = new Map<FilterName, Uint8Array>();

  /** `wasmFor(filter)` is the compiled module's path (build/<filter>.wasm in this repository). */
  constructor(private readonly wasmFor: (filter: FilterName) => string) {}

  /** The compiled module's bytes (read once). */
  bytes(filter: FilterName): Uint8Array {
    let b = this.modules.get(filter);
    if (!b) {
      b = new Uint8Array(readFileSync(this.wasmFor(filter)));
      this.modules.set(filter, b);
    }
    return b;
  }

  /** Configures one VM with `configuration` (no canary: one configure is the check). */
  check(filter: FilterName, configuration: string): Verdict {
    const started = performance.now();
    let host: ProxyWasmHost;
    try {
      host = ProxyWasmHost.fromBytes(this.bytes(filter), { rootId: filter, vmId: filter, pluginConfiguration: configuration, logLevel: "error", canary: false });
    } catch (error) {
      return { ok: false, error: `cannot load ${this.wasmFor(filter)}: ${(error as Error).message}`, ms: performance.now() - started };
    }
    const ok = host.start();
    const ms = performance.now() - started;
    if (ok) return { ok, ms };
    const line = host.logs().find((l) => l.level === "error" || l.level === "critical")?.message;
    return { ok, error: line ?? host.startFailure ?? "configuration refused", ms };
  }
}

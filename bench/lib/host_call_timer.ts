// Time spent inside host functions (the host's emulation of proxy_get_property,
// set_envoy_filter_state, ...), so that a benchmark can separate the guest's own code from it:
// guest-only = host.guestTimeNs − time in host functions. The host does not expose this, so the
// VMs created inside `withHostCallTiming` get their host functions wrapped (WasmVm.hostFunction
// is the one place every import goes through). The wrapper costs one boolean test while
// `hostCallTimer.enabled` is false; while true it adds two hrtime reads per host call, so
// batches measured with it on should not also be used for the plain VM/total figures.
// Host calls nested in a guest call that the host itself makes (malloc from inside
// proxy_get_property) count as host time.
import { WasmVm } from "../../host/vm.js";

export const hostCallTimer = { enabled: false, ns: 0n };

type HostFunction = (...args: unknown[]) => number | void;

export function withHostCallTiming<T>(create: () => T): T {
  const prototype = WasmVm.prototype as unknown as {
    hostFunction: (this: WasmVm, name: string, impl: HostFunction) => HostFunction;
  };
  const original = prototype.hostFunction;
  prototype.hostFunction = function (this: WasmVm, name: string, impl: HostFunction): HostFunction {
    const timed: HostFunction = (...args) => {
      if (!hostCallTimer.enabled) return impl(...args);
      const started = process.hrtime.bigint();
      try {
        return impl(...args);
      } finally {
        hostCallTimer.ns += process.hrtime.bigint() - started;
      }
    };
    return original.call(this, name, timed);
  };
  try {
    return create();
  } finally {
    prototype.hostFunction = original;
  }
}

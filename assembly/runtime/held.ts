// Connections a root holds (on_new_connection answered StopIteration) until it can decide them:
// the mesh filters hold new connections until their first model (mesh_root.ts, model_gate.ts).
// Envoy keeps such a connection's socket read-disabled while tcp_proxy has not run (tcp_proxy
// read-disables it at filter creation unless `max_early_data_bytes` is set), so no data reaches
// the filter before the decision; the root later acts for each connection
// (proxy_set_effective_context) and resumes it (proxy_continue_stream, which Envoy runs as
// continueReading after the VM call) or closes it.
//
// Held ids are kept per root in a fixed array (the cap is the configuration's), and a
// connection that goes away while held (the client gave up) is forgotten from proxy_on_delete.
// The VM-wide count makes that check free while nothing is held: one load per deleted context.
import { proxy_set_effective_context } from "./abi";
import { WasmResult } from "./types";

/** Connections held by every root of this VM. */
let heldInVm: i32 = 0;
const registry = new Array<HeldConnections>();

export class HeldConnections {
  private ids: StaticArray<u32>;
  count: i32 = 0;

  constructor(readonly capacity: i32) {
    this.ids = new StaticArray<u32>(capacity > 0 ? capacity : 0);
    registry.push(this);
  }

  /** False when full: the connection is decided at once instead. */
  hold(id: u32): bool {
    if (this.count >= this.capacity) return false;
    unchecked((this.ids[this.count] = id));
    this.count++;
    heldInVm++;
    return true;
  }

  /** Removes `id`; true when it was held here. */
  forget(id: u32): bool {
    const n = this.count;
    for (let i = 0; i < n; i++) {
      if (unchecked(this.ids[i]) == id) {
        unchecked((this.ids[i] = this.ids[n - 1]));
        this.count = n - 1;
        heldInVm--;
        return true;
      }
    }
    return false;
  }

  /** Takes the held ids out (the caller decides each): returns them in holding order. */
  drain(): StaticArray<u32> {
    const out = new StaticArray<u32>(this.count);
    for (let i = 0; i < this.count; i++) unchecked((out[i] = this.ids[i]));
    heldInVm -= this.count;
    this.count = 0;
    return out;
  }

  /** The root is gone: its connections are no longer looked up here. */
  retire(): void {
    heldInVm -= this.count;
    this.count = 0;
    const at = registry.indexOf(this);
    if (at >= 0) registry.splice(at, 1);
  }
}

/** From proxy_on_delete of a connection: forget it wherever it is held (nothing to do when none is). */
export function forgetHeld(id: u32): void {
  if (heldInVm <= 0) return;
  for (let i = 0; i < registry.length; i++) {
    if (unchecked(registry[i]).forget(id)) return;
  }
}

/** Makes the host act for context `id` (a connection, or the root itself again); false if it is gone. */
export function actFor(id: u32): bool {
  return <u32>proxy_set_effective_context(id) == <u32>WasmResult.Ok;
}

// The callbacks Envoy calls, for a filter whose connections keep no state: it decides in
// proxy_on_new_connection and needs nothing afterwards (its root returns true from
// reusesConnections(), i.e. a connection context holds only its id and root). Re-export this
// module instead of ./exports. Envoy enters the VM only for callbacks a module exports, so it
// enters this one three times per connection instead of seven:
//   proxy_on_context_create   tells which root (plugin) the new connection belongs to; the only
//                             callback that says so (several plugins can share one VM);
//   proxy_on_new_connection   the decision, made by the root's one shared context;
//   proxy_on_delete           needed for roots: Envoy deletes an old plugin's root after an
//                             update, and without it every update would leave the old
//                             configuration in linear memory (for connections: nothing to do).
// Not exported, so Envoy skips them (proxy-wasm-cpp-host treats a missing proxy_on_done as
// "done"): proxy_on_downstream_connection_close, proxy_on_upstream_connection_close,
// proxy_on_done, proxy_on_log, and the data callbacks. Measured in the real Envoy:
// bench/envoy/callgrind.ts, docs/envoy-cpu-profile.md.
// A root whose connections do keep state (reusesConnections() false) is refused at
// configuration with one log line: its close/done/log/delete callbacks would never run.
import "./abort";
import { ConnectionContext, RootContext } from "./context";
import { forgetHeld } from "./held";
import { logError } from "./log";
import { configureRoot, createRoot, httpCallResponseRoot, roots, startRoot, tickRoot } from "./roots";
import { FilterStatus } from "./types";

export { malloc } from "./host_value";

export function proxy_abi_version_0_2_1(): void {}

// Envoy calls proxy_on_context_create(connection, root) and then, right away and on the same
// thread, proxy_on_new_connection(connection): one slot carries the root between the two.
let pendingConnection: u32 = 0;
let pendingRoot: u32 = 0;

export function proxy_on_context_create(contextId: u32, rootContextId: u32): void {
  if (rootContextId == 0) {
    createRoot(contextId);
    return;
  }
  pendingConnection = contextId;
  pendingRoot = rootContextId;
}

export function proxy_on_vm_start(rootContextId: u32, vmConfigurationSize: u32): u32 {
  return startRoot(rootContextId, vmConfigurationSize);
}

export function proxy_on_configure(rootContextId: u32, configurationSize: u32): u32 {
  if (roots.has(rootContextId) && !roots.get(rootContextId).reusesConnections()) {
    logError("this filter keeps per-connection state (reusesConnections() is false): re-export assembly/runtime/exports, not exports_stateless");
    return 0;
  }
  return configureRoot(rootContextId, configurationSize);
}

export function proxy_on_tick(rootContextId: u32): void {
  tickRoot(rootContextId);
}

/** The response to a root's proxy_http_call (the mesh feed's long poll): never per connection. */
export function proxy_on_http_call_response(contextId: u32, token: u32, headers: u32, bodySize: u32, trailers: u32): void {
  httpCallResponseRoot(contextId, token, headers, bodySize, trailers);
}

/** The root's one context, given this connection's id (it holds nothing else). */
function sharedContext(root: RootContext, id: u32): ConnectionContext {
  const pool = root.pool;
  if (pool.length == 0) {
    const context = root.newConnection(id);
    context.owner = root;
    pool.push(context);
  }
  const context = unchecked(pool[0]);
  context.id = id;
  return context;
}

export function proxy_on_new_connection(contextId: u32): FilterStatus {
  if (contextId != pendingConnection || !roots.has(pendingRoot)) return FilterStatus.Continue;
  return sharedContext(roots.get(pendingRoot), contextId).onNewConnection();
}

export function proxy_on_delete(contextId: u32): void {
  if (!roots.has(contextId)) {
    forgetHeld(contextId); // a connection that went away while its root held it
    return;
  }
  roots.get(contextId).onDelete();
  roots.delete(contextId);
}

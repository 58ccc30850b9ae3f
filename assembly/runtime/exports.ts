// The callbacks Envoy calls. A filter's entry file re-exports this module (or, when its
// connections keep no state, ./exports_stateless, which Envoy enters fewer times per
// connection); one that reads or changes connection bytes also re-exports ./exports_data. Envoy calls into
// the VM only for callbacks the module exports, so a filter that decides in on_new_connection
// and exports no data callback is out of the data path once it has decided.
//
// Lookups are O(1) maps keyed by context id, so the cost of a callback does not depend on how
// many connections are open. An id the module does not know (its root failed to build, say)
// gets the neutral answer instead of a trap.
// Imported for its side effect: the abort override (asconfig `use abort=`) must be compiled in.
import "./abort";
import { ConnectionContext } from "./context";
import { connections } from "./connections";
import { forgetHeld } from "./held";
import { configureRoot, createRoot, httpCallResponseRoot, roots, startRoot, tickRoot } from "./roots";
import { FilterStatus, PeerType } from "./types";

export { malloc } from "./host_value";

export function proxy_abi_version_0_2_1(): void {}

function createConnection(id: u32, rootContextId: u32): void {
  if (!roots.has(rootContextId)) return;
  const root = roots.get(rootContextId);
  const pool = root.pool;
  let context: ConnectionContext;
  if (pool.length > 0) {
    context = pool.pop();
    context.id = id;
  } else {
    context = root.newConnection(id);
    context.owner = root;
  }
  connections.set(id, context);
}

export function proxy_on_context_create(contextId: u32, rootContextId: u32): void {
  if (rootContextId == 0) createRoot(contextId);
  else createConnection(contextId, rootContextId);
}

export function proxy_on_vm_start(rootContextId: u32, vmConfigurationSize: u32): u32 {
  return startRoot(rootContextId, vmConfigurationSize);
}

export function proxy_on_configure(rootContextId: u32, configurationSize: u32): u32 {
  return configureRoot(rootContextId, configurationSize);
}

export function proxy_on_tick(rootContextId: u32): void {
  tickRoot(rootContextId);
}

/** The response to a root's proxy_http_call (the mesh feed's long poll): never per connection. */
export function proxy_on_http_call_response(contextId: u32, token: u32, headers: u32, bodySize: u32, trailers: u32): void {
  httpCallResponseRoot(contextId, token, headers, bodySize, trailers);
}

export function proxy_on_new_connection(contextId: u32): FilterStatus {
  const context = connections.get(contextId);
  return context === null ? FilterStatus.Continue : context.onNewConnection();
}

export function proxy_on_downstream_connection_close(contextId: u32, peer: u32): void {
  const context = connections.get(contextId);
  if (context !== null) context.onDownstreamClose(<PeerType>peer);
}

export function proxy_on_upstream_connection_close(contextId: u32, peer: u32): void {
  const context = connections.get(contextId);
  if (context !== null) context.onUpstreamClose(<PeerType>peer);
}

export function proxy_on_done(contextId: u32): u32 {
  const context = connections.get(contextId);
  if (context !== null) return context.onDone() ? 1 : 0;
  if (roots.has(contextId)) return roots.get(contextId).onDone() ? 1 : 0;
  return 1;
}

export function proxy_on_log(contextId: u32): void {
  const context = connections.get(contextId);
  if (context !== null) context.onLog();
}

export function proxy_on_delete(contextId: u32): void {
  const context = connections.delete(contextId);
  if (context !== null) {
    forgetHeld(contextId); // a connection that went away while its root held it
    context.onDelete();
    // A reusable context waits for the next connection of its root (at most as many wait as
    // were ever open at once).
    const owner = context.owner;
    if (owner !== null && owner.reusesConnections()) owner.pool.push(context);
    return;
  }
  if (roots.has(contextId)) {
    roots.get(contextId).onDelete();
    roots.delete(contextId);
  }
}

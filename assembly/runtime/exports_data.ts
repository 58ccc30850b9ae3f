// The data callbacks, for filters that read or change connection bytes: re-export this module
// next to ./exports. Filters that only decide in on_new_connection leave it out, so Envoy never
// enters the VM for a data chunk of theirs (it checks which callbacks a module exports and
// answers Continue itself for the missing ones).
import { connections } from "./connections";
import { FilterStatus } from "./types";

export function proxy_on_downstream_data(contextId: u32, size: u32, endOfStream: u32): FilterStatus {
  const context = connections.get(contextId);
  return context === null ? FilterStatus.Continue : context.onDownstreamData(size, endOfStream != 0);
}

export function proxy_on_upstream_data(contextId: u32, size: u32, endOfStream: u32): FilterStatus {
  const context = connections.get(contextId);
  return context === null ? FilterStatus.Continue : context.onUpstreamData(size, endOfStream != 0);
}

// Contexts: one root context per plugin (configuration, counters, shared lookup tables) and one
// small context per connection. Filters subclass both and register a factory under their root_id.
import { ByteSource } from "../json/source";
import { readWhole } from "./config_source";
import { FilterStatus, PeerType } from "./types";

/** Per-connection state. Keep it small: one is allocated for every connection. */
export class ConnectionContext {
  /** The root that made it (set by the runtime), so a deleted context can go back to its pool. */
  owner: RootContext | null = null;
  /** Mutable only so a reusable context can take a new connection's id (see reusesConnections). */
  constructor(public id: u32) {}
  /** Decide here: tcp_proxy picks its upstream right after this returns. */
  onNewConnection(): FilterStatus {
    return FilterStatus.Continue;
  }
  /**
   * A connection its root held (on_new_connection answered StopIteration) is decided now; the
   * root acts for it. Continue resumes it; a filter that closes it returns StopIteration.
   */
  onResume(): FilterStatus {
    return FilterStatus.Continue;
  }
  onDownstreamData(size: usize, endOfStream: bool): FilterStatus {
    return FilterStatus.Continue;
  }
  onUpstreamData(size: usize, endOfStream: bool): FilterStatus {
    return FilterStatus.Continue;
  }
  onDownstreamClose(peer: PeerType): void {}
  onUpstreamClose(peer: PeerType): void {}
  onDone(): bool {
    return true;
  }
  onLog(): void {}
  onDelete(): void {}
}

/** Per-plugin state, created once per plugin instance in each VM. */
export class RootContext {
  constructor(readonly id: u32) {}
  /** VM start; `vmConfiguration` is empty when none was given. */
  onStart(vmConfiguration: ArrayBuffer): bool {
    return true;
  }
  /**
   * Plugin configuration (empty buffer when none was given). Returning false makes Envoy refuse
   * the plugin, and with it the listener update: log one line naming the bad field first.
   */
  onConfigure(configuration: ArrayBuffer): bool {
    return true;
  }
  /**
   * What proxy_on_configure calls: the plugin configuration as a source the filter can read in
   * windows (see assembly/json JsonStream.windowed), so a large one is never whole in linear
   * memory. By default it is read whole and handed to onConfigure.
   */
  onConfigureSource(configuration: ByteSource): bool {
    return this.onConfigure(readWhole(configuration));
  }
  /** Called for each new connection; return the connection's context. */
  newConnection(id: u32): ConnectionContext {
    return new ConnectionContext(id);
  }
  /**
   * True when this filter's connection contexts hold nothing but their id and root: the runtime
   * then keeps deleted ones and hands them to later connections (with the new id) instead of
   * calling newConnection, so connections allocate nothing. Off by default.
   */
  reusesConnections(): bool {
    return false;
  }
  /** Deleted contexts waiting for reuse (reusesConnections only). */
  readonly pool: Array<ConnectionContext> = new Array<ConnectionContext>();
  onTick(): void {}
  /**
   * The response to a proxy_http_call this root made (http_call.ts): `headers` response headers
   * (0 for a reset: see lastCallStatus), a body of `bodySize` bytes, `trailers` trailers. The
   * headers and body are readable only during this call.
   */
  onHttpCallResponse(token: u32, headers: u32, bodySize: u32, trailers: u32): void {}
  onDone(): bool {
    return true;
  }
  onDelete(): void {}
}

export type RootFactory = (id: u32) => RootContext;

class Registration {
  constructor(readonly rootId: string, readonly factory: RootFactory) {}
}

const registrations = new Array<Registration>();

/**
 * Registers a filter under its root_id (the `root_id` of the plugin in Envoy's config). When
 * the host's root_id matches no registration, the first one registered serves, so a plugin
 * config without root_id still works for a single-filter module.
 */
export function registerRootContext(rootId: string, factory: RootFactory): void {
  registrations.push(new Registration(rootId, factory));
}

/** The factory for `rootId`, the first registered as fallback, or null when none. */
export function factoryFor(rootId: string): RootFactory | null {
  for (let i = 0; i < registrations.length; i++) {
    const registration = unchecked(registrations[i]);
    if (registration.rootId == rootId) return registration.factory;
  }
  return registrations.length > 0 ? unchecked(registrations[0]).factory : null;
}

// A root context whose configuration is parsed once per configure into a filter's own type:
// the configure flow every filter here repeated (parse; on failure one line and a refusal, the
// configuration in force kept; else put it in force) in one place, so a filter's entry file keeps
// only its parser and its policy. FeedRootContext (feed_root.ts) adds the mesh feed to it, and
// MeshRootContext (mesh_root.ts) the mesh model; probe uses it as it is.
import { ByteSource } from "../json/source";
import { ConnectionContext, RootContext } from "./context";
import { logError } from "./log";
import { FilterStatus } from "./types";

/** A parsed configuration, or (config null) the one line that says which field is wrong and why. */
export class ConfigResult<C> {
  constructor(readonly config: C | null, readonly error: string) {}
}

/** The refusal of a configuration, `error` naming the field. */
export function refuseConfig<C>(error: string): ConfigResult<C> {
  return new ConfigResult<C>(null, error);
}

/** A configuration taken. */
export function acceptConfig<C>(config: C): ConfigResult<C> {
  return new ConfigResult<C>(config, "");
}

/**
 * The root of a filter configured with a `C`. A filter overrides `parse` (and `use` when it
 * derives more from a configuration than the reference in `config`); connections read `config`.
 */
export class ConfiguredRoot<C> extends RootContext {
  /** The configuration in force; null only before the first one (Envoy sends no connection then). */
  config: C | null = null;

  /**
   * Envoy's configure: a configuration that does not parse is refused with one error line
   * ("invalid plugin configuration: <field>: <why>") and `false`, which makes Envoy refuse the
   * plugin (and with it the listener or extension update); the configuration in force
   * stays. A good one is put in force (`use`) after `configured` has said what it is.
   */
  onConfigureSource(source: ByteSource): bool {
    const result = this.parse(source);
    const config = result.config;
    if (config === null) {
      logError("invalid plugin configuration: " + result.error);
      return false;
    }
    this.configured(config);
    this.use(config);
    this.started(config);
    return true;
  }

  /** The filter's parser. The default refuses: a filter that does not override it cannot be configured. */
  protected parse(source: ByteSource): ConfigResult<C> {
    return refuseConfig<C>("this filter has no configuration parser");
  }

  /** Lines that say what a configuration just taken is (once per configure; not for feed models). */
  protected configured(config: C): void {}

  /** Puts `config` in force; a filter that derives state from it overrides this and calls super. */
  use(config: C): void {
    this.config = config;
  }

  /** What starts once a configuration is in force (a feed, say: see mesh_root.ts). */
  protected started(config: C): void {}

  /**
   * The filters built on this keep nothing per connection but their root, so the runtime reuses
   * their contexts (no allocation per connection). A filter whose connections keep state must
   * override this with false (the lean exports refuse such a root at configure).
   */
  reusesConnections(): bool {
    return true;
  }
}

/**
 * A connection of such a filter: it keeps nothing but its root (`R`, the filter's root class,
 * whose `config` is the `C` in force) and decides in `onConnection` with that configuration.
 */
export class RootConnection<R, C> extends ConnectionContext {
  constructor(id: u32, readonly root: R) {
    super(id);
  }

  onNewConnection(): FilterStatus {
    const config = this.root.config;
    // Unreachable: Envoy sends no connection to a plugin whose configuration was refused.
    if (config === null) return FilterStatus.Continue;
    return this.onConnection(config);
  }

  /** The filter's decision for this connection, made with the configuration in force. */
  onConnection(config: C): FilterStatus {
    return FilterStatus.Continue;
  }
}

// A no-op filter on the STOCK @solo-io/proxy-runtime 0.1.8 "context runtime", written the way
// the package README shows: re-export the runtime's proxy ABI, subclass RootContext and Context,
// register a factory for the root context. Nothing is overridden beyond `createContext` (which
// the runtime requires: the base one logs an error and builds a bare Context).
//
// It is compiled by bench/stock-runtime/build.mjs against the patched copy of the runtime in
// build/stock-runtime/ (generated; run the build first).

// Imported for its side effect: the abort override (`--use abort=...`) must be compiled in.
import "./abort";
// "export * from '@solo-io/proxy-runtime/proxy'" in the README: malloc, free and every proxy_on_*
// callback plus the proxy_abi_version_0_2_0 marker.
export * from "../../build/stock-runtime/proxy";
import { Context, registerRootContext, RootContext } from "../../build/stock-runtime/index";

class NoopRoot extends RootContext {
  createContext(context_id: u32): Context {
    return new NoopContext(context_id, this);
  }
}

class NoopContext extends Context {
  constructor(context_id: u32, root_context: NoopRoot) {
    super(context_id, root_context);
  }
}

// The stock runtime looks the factory up by the plugin's root_id (property "plugin_root_id")
// and throws "Missing root context factory" when it finds none; unlike our runtime it has no
// fallback. Register the same factory under:
//   "noop" - the root_id our own no-op filter (filters/noop) is registered under, and
//   ""     - the root_id Envoy reports when the plugin config sets none (and what a stub host
//            that writes nothing back yields).
// The lookup happens once per root context, so the second entry costs nothing per connection.
registerRootContext((context_id: u32) => { return new NoopRoot(context_id); }, "noop");
registerRootContext((context_id: u32) => { return new NoopRoot(context_id); }, "");

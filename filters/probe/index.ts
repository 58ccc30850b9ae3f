// probe: the foundation's demonstration filter. In on_new_connection it reads the connection's
// destination address and writes Envoy filter state `envoy.tcp_proxy.cluster`, which tcp_proxy
// honours when it picks its upstream right after this callback. See README.md.
import {
  ConnectionContext,
  Counter,
  DESTINATION_ADDRESS,
  FilterStatus,
  getPropertyString,
  logDebug,
  logEnabled,
  LogLevel,
  propertyPath,
  readWhole,
  registerRootContext,
  RootContext,
  setEnvoyFilterStateBytes,
  TCP_PROXY_CLUSTER,
  WasmResult,
} from "../../assembly/runtime";
import { hostOfAddress } from "./address";
import { parseProbeConfig, ProbeConfig } from "./config";
import { ByteSource } from "../../assembly/json";
import { ConfigResult, ConfiguredRoot, RootConnection } from "../../assembly/runtime/config_root";
export * from "../../assembly/runtime/exports";


class ProbeRoot extends ConfiguredRoot<ProbeConfig> {
  // Counters are defined once per root; every connection bumps exactly one outcome.
  readonly routed: Counter = new Counter("probe.routed");
  readonly defaulted: Counter = new Counter("probe.defaulted");
  readonly unmatched: Counter = new Counter("probe.unmatched");
  readonly noDestination: Counter = new Counter("probe.no_destination");
  readonly refused: Counter = new Counter("probe.filter_state_refused");

  /** A small configuration: read whole. */
  protected parse(configuration: ByteSource): ConfigResult<ProbeConfig> {
    return parseProbeConfig(readWhole(configuration));
  }

  newConnection(id: u32): ConnectionContext {
    return new ProbeConnection(id, this);
  }
}

class ProbeConnection extends RootConnection<ProbeRoot, ProbeConfig> {
  onConnection(config: ProbeConfig): FilterStatus {
    const root = this.root;
    const address = getPropertyString(DESTINATION_ADDRESS);
    if (address === null) {
      root.noDestination.inc();
      return FilterStatus.Continue;
    }
    const host = hostOfAddress(address);
    const routes = config.routes;
    let cluster: ArrayBuffer | null = null;
    if (routes.has(host)) {
      cluster = routes.get(host);
      root.routed.inc();
    } else {
      cluster = config.defaultCluster;
      if (cluster === null) {
        root.unmatched.inc();
        if (logEnabled(LogLevel.Debug)) logDebug("no route for " + address + ", tcp_proxy keeps its cluster");
        return FilterStatus.Continue;
      }
      root.defaulted.inc();
    }
    const status = setEnvoyFilterStateBytes(TCP_PROXY_CLUSTER, cluster);
    if (status != WasmResult.Ok) root.refused.inc();
    if (logEnabled(LogLevel.Debug)) {
      logDebug(address + " -> cluster " + String.UTF8.decode(cluster) + " (status " + status.toString() + ")");
    }
    return FilterStatus.Continue;
  }
}

registerRootContext("probe", (id: u32): RootContext => new ProbeRoot(id));

// waypoint_route: sends service traffic to its waypoint, on this network over HBONE or on a
// remote network through that network's east-west gateway over double HBONE, keeping the
// original service port; without a waypoint, to an endpoint the same way. Decided in
// on_new_connection; every error closes the connection with a counter and a log line naming the
// rule. See README.md.
import { Address, destinationText, formatAddress, Mesh, NetworkSource, readDestination, writeAddress } from "../../assembly/mesh";
import { ByteText, closeDownstream, ConnectionContext, Counter, DISABLE_TUNNELING, FilterStatus, logDebug, logEnabled, logInfo, LogLevel, logWarn } from "../../assembly/runtime";
import { ORIGINAL_DST_ADDRESS, propertyPath, registerRootContext, RootContext, setEnvoyFilterStateBytes, setEnvoyFilterStateText } from "../../assembly/runtime";
import { setPropertyText, TCP_PROXY_CLUSTER, TRUE_VALUE, UPSTREAM_SUBJECT_ALT_NAMES, WasmResult } from "../../assembly/runtime";
import { MeshConnection, MeshRootContext } from "../../assembly/runtime/mesh_root";
import { adoptWaypointMesh, parseWaypointConfigFrom, WaypointConfig } from "./config";
import { Decision, decide, Outcome, OUTCOME_NAMES, outcomeName, Scratch } from "./decide";
// Decides in on_new_connection and keeps nothing per connection: the lean export set.
export * from "../../assembly/runtime/exports_stateless";

// Properties (%FILTER_STATE(wasm.<name>:PLAIN)%). `authority` is the CONNECT this listener's
// tcp_proxy opens (the only one for HBONE, the inner one for double HBONE). The outer layer's
// values go to the internal listener that opens the outer CONNECT through a set_filter_state
// relay in the shipped config (wasm-written state is not shared with upstream).
const AUTHORITY = propertyPath(["authority"]);
const OUTER_AUTHORITY = propertyPath(["outer_authority"]);
const OUTER_ADDRESS = propertyPath(["outer_address"]);
const OUTER_SANS = propertyPath(["outer_sans"]);

class WaypointRoot extends MeshRootContext<WaypointConfig> {
  readonly destination: Address = new Address();
  readonly decision: Decision = new Decision();
  readonly scratch: Scratch = new Scratch();
  /** The next hop's `IP:PORT`, formatted in place for every connection. */
  readonly nextHop: ByteText = new ByteText();
  /** One counter per outcome, in Outcome order: `waypoint_route.<outcome>`. */
  readonly outcomes: Counter[] = [];
  readonly unknownRefused: Counter = new Counter("waypoint_route.unknown_refused");
  // `rejected` (waypoint_route.rejected) is MeshRootContext's: Envoy refused a write, closed.

  constructor(id: u32) {
    super(id, "waypoint_route", parseWaypointConfigFrom);
    for (let i = 0; i < OUTCOME_NAMES.length; i++) this.outcomes.push(new Counter("waypoint_route." + unchecked(OUTCOME_NAMES[i])));
  }

  count(outcome: Outcome): void {
    const i = <i32>outcome;
    if (i >= 0 && i < this.outcomes.length) unchecked(this.outcomes[i]).inc();
  }

  protected configured(config: WaypointConfig): void {
    if (config.localNetwork.source == NetworkSource.NodeMetadata) logInfo("local network " + config.localNetwork.describe());
  }

  /** Every valid model is taken (a delta is applied in place already): see adoptWaypointMesh. */
  adoptModel(config: WaypointConfig, mesh: Mesh): string {
    const next = adoptWaypointMesh(config, mesh);
    if (next !== config) this.use(next);
    return "";
  }

  /** Puts `config` in force (the configuration's, or one derived from a model the feed sent). */
  use(config: WaypointConfig): void {
    super.use(config);
    // Size the candidate buffer for the largest service now, so no connection grows it (a full
    // model, O(services) like its load; after a delta a service that grew past it grows the
    // buffer on its next connection, by doubling).
    let most = 1;
    for (let s = 0, n = config.mesh.serviceCount(); s < n; s++) most = max(most, config.mesh.endpointCount(s));
    this.scratch.ensure(most);
  }

  /** The source workload's network when the model has it, else the configured one. */
  ownNetwork(config: WaypointConfig): string {
    return config.source >= 0 ? config.mesh.networkName(config.network) : config.localNetwork.name;
  }

  /** noModelPolicy passthrough: plain TCP as dialled (tcp_proxy would tunnel its own cluster). */
  passWithoutModel(config: WaypointConfig): FilterStatus {
    if (setEnvoyFilterStateBytes(DISABLE_TUNNELING, TRUE_VALUE) != WasmResult.Ok) return this.reject();
    return FilterStatus.Continue;
  }

  newConnection(id: u32): ConnectionContext {
    return new WaypointConnection(id, this);
  }
}

class WaypointConnection extends MeshConnection<WaypointRoot, WaypointConfig> {
  onConnection(config: WaypointConfig): FilterStatus {
    const root = this.root;
    const dst = root.destination;
    // Port 0 is a destination like any other: a VIP dialled on it falls under the unlisted-port
    // rule (its waypoint, else refused), never the plain "no destination" passthrough.
    const found = readDestination(dst);
    const d = root.decision;
    if (found) decide(config, dst, root.scratch, d);
    else d.reset(); // Outcome.Unknown, rule 0
    root.count(d.outcome);
    switch (d.outcome) {
      case Outcome.HboneWaypoint:
      case Outcome.HboneEndpoint:
      case Outcome.HbonePod:
      case Outcome.HbonePodWaypoint:
        return this.single(config, dst, d);
      case Outcome.PlaintextEndpoint:
        return this.plainEndpoint(config, dst, d);
      case Outcome.DoubleHboneWaypoint:
      case Outcome.DoubleHboneEndpoint:
        return this.double(config, dst, d);
      case Outcome.Unknown:
      case Outcome.PlaintextPod:
        return this.plain(config, found, dst, d);
      default:
        return this.error(dst, d);
    }
  }

  private single(config: WaypointConfig, dst: Address, d: Decision): FilterStatus {
    const ok =
      setEnvoyFilterStateText(UPSTREAM_SUBJECT_ALT_NAMES, d.sans) == WasmResult.Ok &&
      setEnvoyFilterStateText(ORIGINAL_DST_ADDRESS, writeAddress(d.nextHop, this.root.nextHop.clear())) == WasmResult.Ok &&
      setPropertyText(AUTHORITY, d.authority) == WasmResult.Ok &&
      setEnvoyFilterStateBytes(TCP_PROXY_CLUSTER, config.hboneCluster) == WasmResult.Ok;
    if (!ok) return this.root.reject();
    if (logEnabled(LogLevel.Debug)) this.trace(config, dst, d, "hbone");
    return FilterStatus.Continue;
  }

  /**
   * Double HBONE: this listener's tcp_proxy opens the INNER CONNECT (inner mTLS to the waypoint or
   * target, whose identity is pinned here) over the double-HBONE cluster, whose endpoint is an
   * internal listener that opens the OUTER CONNECT to the gateway with the relayed values.
   */
  private double(config: WaypointConfig, dst: Address, d: Decision): FilterStatus {
    const authority = d.authority;
    const ok =
      setEnvoyFilterStateText(UPSTREAM_SUBJECT_ALT_NAMES, d.sans) == WasmResult.Ok &&
      setPropertyText(AUTHORITY, authority) == WasmResult.Ok &&
      setPropertyText(OUTER_AUTHORITY, authority) == WasmResult.Ok &&
      setPropertyText(OUTER_ADDRESS, writeAddress(d.nextHop, this.root.nextHop.clear())) == WasmResult.Ok &&
      setPropertyText(OUTER_SANS, d.gatewaySans) == WasmResult.Ok &&
      setEnvoyFilterStateBytes(TCP_PROXY_CLUSTER, config.doubleHboneCluster) == WasmResult.Ok;
    if (!ok) return this.root.reject();
    if (logEnabled(LogLevel.Debug)) this.trace(config, dst, d, "double_hbone");
    return FilterStatus.Continue;
  }

  /**
   * Rule 7: a local endpoint without HBONE, plain TCP to podIP:T over the plain ORIGINAL_DST
   * cluster (a known mesh endpoint: it must not depend on the catch-all's own cluster, which is
   * Istio's BlackHoleCluster under REGISTRY_ONLY).
   */
  private plainEndpoint(config: WaypointConfig, dst: Address, d: Decision): FilterStatus {
    const ok =
      setEnvoyFilterStateText(ORIGINAL_DST_ADDRESS, writeAddress(d.nextHop, this.root.nextHop.clear())) == WasmResult.Ok &&
      setEnvoyFilterStateBytes(DISABLE_TUNNELING, TRUE_VALUE) == WasmResult.Ok &&
      setEnvoyFilterStateBytes(TCP_PROXY_CLUSTER, config.plainCluster) == WasmResult.Ok;
    if (!ok) return this.root.reject();
    if (logEnabled(LogLevel.Debug)) this.trace(config, dst, d, "plain");
    return FilterStatus.Continue;
  }

  private plain(config: WaypointConfig, found: bool, dst: Address, d: Decision): FilterStatus {
    if (d.outcome == Outcome.Unknown && config.refuseUnknown) {
      this.root.unknownRefused.inc();
      if (logEnabled(LogLevel.Warn)) logWarn(destinationText(found, dst) + " is unknown to the mesh configuration: closed (unknownDestination: refuse)");
      closeDownstream();
      return FilterStatus.StopIteration;
    }
    if (setEnvoyFilterStateBytes(DISABLE_TUNNELING, TRUE_VALUE) != WasmResult.Ok) return this.root.reject();
    if (logEnabled(LogLevel.Debug)) {
      const rule = d.rule > 0 ? "rule " + d.rule.toString() + ", " : "";
      logDebug(destinationText(found, dst) + " -> " + outcomeName(d.outcome) + " (" + rule + (found ? d.reason : "no original destination") + "): plain TCP as dialled");
    }
    return FilterStatus.Continue;
  }

  private error(dst: Address, d: Decision): FilterStatus {
    const config = this.root.config;
    if (logEnabled(LogLevel.Warn)) {
      let detail = "";
      if (config !== null && d.service >= 0) detail = " (service " + config.mesh.serviceHostname(d.service) + ")";
      logWarn("closing connection to " + formatAddress(dst) + detail + ": " + outcomeName(d.outcome) + " (rule " + d.rule.toString() + ": " + d.reason + ")");
    }
    closeDownstream();
    return FilterStatus.StopIteration;
  }

  private trace(config: WaypointConfig, dst: Address, d: Decision, protocol: string): void {
    const mesh = config.mesh;
    let line = formatAddress(dst) + " -> " + outcomeName(d.outcome) + " (rule " + d.rule.toString() + ", " + d.reason + "): " +
      protocol + " next hop " + formatAddress(d.nextHop);
    const sans = d.sans.toString();
    if (protocol == "double_hbone") line += ", :authority " + d.authority.toString() + " (outer and inner), gateway identity " + d.gatewaySans.toString() + ", inner identity " + sans;
    else if (protocol == "hbone") line += ", :authority " + d.authority.toString() + ", identity " + sans;
    if (d.instance >= 0) line += ", instance network " + mesh.networkName(mesh.workloadNetwork(d.instance)) + " locality " + mesh.workloadLocality(d.instance);
    logDebug(line);
  }
}

registerRootContext("waypoint_route", (id: u32): RootContext => new WaypointRoot(id));

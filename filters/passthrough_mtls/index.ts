// passthrough_mtls: mTLS for connections made straight to a mesh pod's IP, with plain
// passthrough as the fallback, headless services without per-pod listeners, and the endpoint
// selection value envoy.lb.address. Everything is decided in on_new_connection, because
// tcp_proxy picks its upstream right after it. See README.md.
import { Address, formatAddress, Mesh, readDestination, writeAddress } from "../../assembly/mesh";
import { ByteText, ConnectionContext, Counter, FilterStatus, logDebug, logEnabled, logError, logInfo, LogLevel, logWarn } from "../../assembly/runtime";
import { ORIGINAL_DST_ADDRESS, propertyPath, registerRootContext, RootContext, setEnvoyFilterStateBytes, setEnvoyFilterStateText } from "../../assembly/runtime";
import { setPropertyBytes, setPropertyText, TCP_PROXY_CLUSTER, UPSTREAM_SUBJECT_ALT_NAMES, WasmResult } from "../../assembly/runtime";
import { MeshConnection, MeshRootContext } from "../../assembly/runtime/mesh_root";
import { adoptMesh, parsePassthroughConfigFrom, PassthroughConfig } from "./config";
import { Decision, decide, Route } from "./decision";
// Decides in on_new_connection and keeps nothing per connection: the lean export set.
export * from "../../assembly/runtime/exports_stateless";

// Envoy filter-state keys (registered object factories) and our own properties, encoded once.
/** `%FILTER_STATE(wasm.lb_address:PLAIN)%`: the envoy.lb.address value, IP:PORT. */
const LB_ADDRESS_PROPERTY = propertyPath(["lb_address"]);
/** `%FILTER_STATE(wasm.upstream_sans:PLAIN)%`: the pod identity, for the subset mode relay. */
const UPSTREAM_SANS_PROPERTY = propertyPath(["upstream_sans"]);

const LOCAL_WON = " (local network wins over another network's pod with this IP)";

/** True when some workload lives on this proxy's network (configure time, one scan). */
function hasWorkloadOn(config: PassthroughConfig): bool {
  const mesh = config.mesh;
  for (let w = 0, n = mesh.workloadCount(); w < n; w++) {
    if (mesh.workloadNetwork(w) == config.localNetwork) return true;
  }
  return false;
}

class PassthroughRoot extends MeshRootContext<PassthroughConfig> {
  /** Reused for every connection of this root: decisions allocate nothing. */
  readonly destination: Address = new Address();
  readonly decision: Decision = new Decision();
  /** The destination's `IP:PORT`, formatted in place for every connection. */
  readonly lbAddress: ByteText = new ByteText();
  // One counter per outcome; every connection bumps exactly one of these four, `rejected`, or
  // (with meshFeed, before a model or with one that lacks this network) `no_model` / `no_network`.
  readonly mtls: Counter = new Counter("passthrough_mtls.mtls");
  readonly headless: Counter = new Counter("passthrough_mtls.headless");
  readonly passthrough: Counter = new Counter("passthrough_mtls.passthrough");
  readonly noDestination: Counter = new Counter("passthrough_mtls.no_destination");
  // Extra detail, counted on top of the outcome.
  readonly localNetworkWins: Counter = new Counter("passthrough_mtls.local_network_wins");
  readonly plaintextPod: Counter = new Counter("passthrough_mtls.plaintext_pod");
  // `rejected` (passthrough_mtls.rejected) is MeshRootContext's: Envoy refused a write, closed;
  // so are `waited_for_model`, `no_model` and `no_network` (the model gate, model_gate.ts).

  constructor(id: u32) {
    super(id, "passthrough_mtls", parsePassthroughConfigFrom);
  }

  protected configured(config: PassthroughConfig): void {
    if (config.mesh.workloadCount() > 0 && !hasWorkloadOn(config)) {
      logWarn("localNetwork " + config.network.describe() + " has no workloads: every connection will pass through");
    }
    logInfo(
      "configured: " + config.mesh.workloadCount().toString() + " workloads, " +
      config.mesh.serviceCount().toString() + " services, mode " + (config.subsetMode ? "subset" : "direct") +
      ", local network " + config.network.describe(),
    );
  }

  /** A model from the feed: only the network's interned id is derived from it. */
  adoptModel(config: PassthroughConfig, mesh: Mesh): string {
    return adoptMesh(config, mesh);
  }

  ownNetwork(config: PassthroughConfig): string {
    return config.localNetworkName;
  }

  newConnection(id: u32): ConnectionContext {
    return new PassthroughConnection(id, this);
  }
}

class PassthroughConnection extends MeshConnection<PassthroughRoot, PassthroughConfig> {
  onConnection(config: PassthroughConfig): FilterStatus {
    const root = this.root;
    const dst = root.destination;
    if (!readDestination(dst)) {
      root.noDestination.inc();
      if (logEnabled(LogLevel.Debug)) logDebug("no usable destination.address -> passthrough");
      return FilterStatus.Continue; // tcp_proxy's own cluster: the plain passthrough
    }
    const decision = root.decision;
    decide(config.mesh, config.localNetwork, dst, decision);
    if (decision.localWon) root.localNetworkWins.inc();
    if (decision.route == Route.NotAPod) {
      root.passthrough.inc();
      if (logEnabled(LogLevel.Debug)) logDebug(formatAddress(dst) + " -> passthrough: not a mesh pod on this network");
      return FilterStatus.Continue;
    }
    // The endpoint-selection value (envoy.lb.address) for every mesh pod, whatever the route,
    // when the configuration uses it (subset mode, or lbAddress: true): each property Envoy
    // stores costs it thousands of instructions per connection, and direct mode reads none.
    const lbAddress = writeAddress(dst, root.lbAddress.clear());
    let ok = !config.writeLbAddress || setPropertyText(LB_ADDRESS_PROPERTY, lbAddress) == WasmResult.Ok;
    if (decision.route == Route.PlaintextPod) {
      ok = ok && (!config.subsetMode || this.pick(config.subsetCluster));
      if (!ok) return this.reject(dst);
      root.passthrough.inc();
      root.plaintextPod.inc();
      if (logEnabled(LogLevel.Debug)) {
        logDebug(formatAddress(dst) + " -> plaintext: mesh pod with tlsMode disabled" + (decision.localWon ? LOCAL_WON : ""));
      }
      return FilterStatus.Continue;
    }
    ok = ok && this.pinIdentity(config, decision.workload, config.subsetMode);
    if (decision.route == Route.HeadlessMember) {
      const cluster = config.mesh.portSlotCluster(decision.service, decision.slot);
      ok = ok && cluster !== null && this.pinAddress(lbAddress) && this.pick(cluster);
      if (!ok) return this.reject(dst);
      root.headless.inc();
    } else if (config.subsetMode) {
      if (!(ok && this.pick(config.subsetCluster))) return this.reject(dst);
      root.mtls.inc();
    } else {
      if (!(ok && this.pinAddress(lbAddress) && this.pick(config.mtlsCluster))) return this.reject(dst);
      root.mtls.inc();
    }
    if (logEnabled(LogLevel.Debug)) this.logDecision(config, dst, decision);
    return FilterStatus.Continue;
  }

  /** The upstream TLS session must present this pod's own identity, not just any mesh cert. */
  private pinIdentity(config: PassthroughConfig, workload: i32, relayForSubset: bool): bool {
    const identity = config.mesh.workloadIdentityUtf8(workload);
    if (setEnvoyFilterStateBytes(UPSTREAM_SUBJECT_ALT_NAMES, identity) != WasmResult.Ok) return false;
    // Subset mode: the TLS handshake to a pod happens behind an internal listener, which only
    // sees filter state shared with upstream; a native set_filter_state relays this value there.
    // It runs for every connection of the chain, so headless members need it too (otherwise
    // the relay would overwrite the identity with an empty value).
    return !relayForSubset || setPropertyBytes(UPSTREAM_SANS_PROPERTY, identity) == WasmResult.Ok;
  }

  /** Exactly that IP:port, whatever the cluster's own address choice would be. */
  private pinAddress(address: ByteText): bool {
    return setEnvoyFilterStateText(ORIGINAL_DST_ADDRESS, address) == WasmResult.Ok;
  }

  private pick(cluster: ArrayBuffer): bool {
    return setEnvoyFilterStateBytes(TCP_PROXY_CLUSTER, cluster) == WasmResult.Ok;
  }

  /**
   * Envoy refused a write, so the connection cannot be pinned to the pod and its identity:
   * close it rather than let it reach a mesh pod unverified (or in clear).
   */
  private reject(dst: Address): FilterStatus {
    if (logEnabled(LogLevel.Error)) logError("closing connection to " + formatAddress(dst) + ": Envoy refused the filter state that pins the pod and its identity");
    return this.root.closeRejected();
  }

  private logDecision(config: PassthroughConfig, dst: Address, decision: Decision): void {
    const mesh = config.mesh;
    const identity = mesh.workloadIdentity(decision.workload);
    let route = decision.route == Route.HeadlessMember
      ? "headless service " + mesh.serviceHostname(decision.service)
      : config.subsetMode ? "mtls via subset" : "mtls";
    if (decision.localWon) route += LOCAL_WON;
    logDebug(formatAddress(dst) + " -> " + route + ", verifying " + identity);
  }
}

registerRootContext("passthrough_mtls", (id: u32): RootContext => new PassthroughRoot(id));

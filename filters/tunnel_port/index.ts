// tunnel_port: carries a connection's original service port and target port across the HBONE
// tunnel (port 15008) inside mTLS, with no metadata exchange. One module, two roles:
//   client - on the client sidecar's outbound: picks the endpoint and ITS target port, and sets
//            up tcp_proxy's CONNECT (:authority = podIP:targetPort, service port in a header);
//   server - behind the server sidecar's CONNECT termination: checks both ports and the peer
//            against what this workload serves, and refuses anything else.
// Everything is decided in on_new_connection; nothing waits for client bytes. See README.md.
import { Address, destinationText, formatAddress, Mesh, NetworkSource, readDestination, writeAddress } from "../../assembly/mesh";
import { ByteText, closeDownstream, ConnectionContext, Counter, FilterStatus, logDebug, logEnabled, logInfo, LogLevel, logWarn } from "../../assembly/runtime";
import { DISABLE_TUNNELING, fetchProperty, hostValuePtr, hostValueSize, releaseHostValue, ORIGINAL_DST_ADDRESS, propertyPath } from "../../assembly/runtime";
import { registerRootContext, RootContext, setEnvoyFilterStateBytes, setEnvoyFilterStateText, setPropertyText } from "../../assembly/runtime";
import { TCP_PROXY_CLUSTER, TRUE_VALUE, UPSTREAM_SUBJECT_ALT_NAMES, WasmResult } from "../../assembly/runtime";
import { MeshConnection, MeshRootContext } from "../../assembly/runtime/mesh_root";
import { ClientDecision, ClientOutcome, Cursors, decideClient, preferServicePort } from "./client";
import { adoptMesh, parseTunnelConfigFrom, TunnelConfig } from "./config";
import { AuthorityText, checkServer, parseCanonicalPort, PORT_ABSENT, sameBytes, ServerVerdict } from "./server";
// Decides in on_new_connection and keeps nothing per connection: the lean export set.
export * from "../../assembly/runtime/exports_stateless";

/** Shared by the server's CONNECT termination (HTTP set_filter_state, shared with upstream). */
export const SERVICE_PORT_STATE = "io.tunnel_port.service_port";
export const PEER_STATE = "io.tunnel_port.peer_principal";
/** The CONNECT's :authority text, to check it is the canonical spelling of the restored destination. */
export const AUTHORITY_STATE = "io.tunnel_port.authority";
const AUTHORITY_PATH = propertyPath(["filter_state", AUTHORITY_STATE]);
const SERVICE_PORT_PATH = propertyPath(["filter_state", SERVICE_PORT_STATE]);
/**
 * Client, behind an HTTP route (internal listener): the service port of the route's cluster,
 * passed through as dynamic metadata (cluster metadata tunnel_port.service_port).
 */
const ROUTE_SERVICE_PORT_PATH = propertyPath(["metadata", "filter_metadata", "tunnel_port", "service_port"]);
const PEER_PATH = propertyPath(["filter_state", PEER_STATE]);

/** %FILTER_STATE(wasm.service_port:PLAIN)%, %FILTER_STATE(wasm.target_port:PLAIN)% */
const SERVICE_PORT_PROPERTY = propertyPath(["service_port"]);
const TARGET_PORT_PROPERTY = propertyPath(["target_port"]);

class TunnelRoot extends MeshRootContext<TunnelConfig> {
  cursors: Cursors = new Cursors(0);
  readonly destination: Address = new Address();
  readonly endpoint: Address = new Address();
  readonly decision: ClientDecision = new ClientDecision();
  // Texts written to the host, formatted in place for every connection (no allocation).
  readonly authority: ByteText = new ByteText();
  readonly servicePortText: ByteText = new ByteText(16);
  readonly targetPortText: ByteText = new ByteText(16);
  // client outcomes
  readonly tunneled: Counter = new Counter("tunnel_port.client.tunneled");
  readonly panic: Counter = new Counter("tunnel_port.client.panic_routing");
  readonly unknownPassthrough: Counter = new Counter("tunnel_port.client.unknown_passthrough");
  readonly unknownRefused: Counter = new Counter("tunnel_port.client.unknown_refused");
  readonly noEndpoint: Counter = new Counter("tunnel_port.client.no_endpoint");
  // server outcomes
  readonly accepted: Counter = new Counter("tunnel_port.server.accepted");
  readonly refusedNoPeer: Counter = new Counter("tunnel_port.server.refused_no_peer");
  readonly refusedMissingPort: Counter = new Counter("tunnel_port.server.refused_missing_port");
  readonly refusedMalformedPort: Counter = new Counter("tunnel_port.server.refused_malformed_port");
  readonly refusedMalformedAuthority: Counter = new Counter("tunnel_port.server.refused_malformed_authority");
  readonly refusedNoLocalWorkload: Counter = new Counter("tunnel_port.server.refused_no_local_workload");
  readonly refusedForeignAuthority: Counter = new Counter("tunnel_port.server.refused_foreign_authority");
  readonly refusedUnservedPort: Counter = new Counter("tunnel_port.server.refused_unserved_port");
  readonly refusedPortMismatch: Counter = new Counter("tunnel_port.server.refused_port_mismatch");
  // both roles: `rejected` (tunnel_port.rejected) is MeshRootContext's: Envoy refused a write, closed

  constructor(id: u32) {
    super(id, "tunnel_port", parseTunnelConfigFrom);
  }

  protected configured(config: TunnelConfig): void {
    if (config.network.source == NetworkSource.NodeMetadata) logInfo("local network " + config.network.describe());
  }

  use(config: TunnelConfig): void {
    super.use(config);
    this.cursors = new Cursors(config.mesh.serviceCount());
  }

  /** Every valid model is taken (a delta is applied in place already): see adoptMesh. */
  adoptModel(config: TunnelConfig, mesh: Mesh): string {
    adoptMesh(config, mesh);
    this.cursors.ensure(mesh.serviceCount());
    return "";
  }

  ownNetwork(config: TunnelConfig): string {
    return config.network.name;
  }

  /** noModelPolicy passthrough: the client's tcp_proxy would tunnel its own cluster, so tunnelling is turned off. */
  passWithoutModel(config: TunnelConfig): FilterStatus {
    if (config.client && setEnvoyFilterStateBytes(DISABLE_TUNNELING, TRUE_VALUE) != WasmResult.Ok) return this.reject();
    return FilterStatus.Continue;
  }

  newConnection(id: u32): ConnectionContext {
    return new TunnelConnection(id, this);
  }
}

class TunnelConnection extends MeshConnection<TunnelRoot, TunnelConfig> {
  onConnection(config: TunnelConfig): FilterStatus {
    const dst = this.root.destination;
    // Port 0 is a destination: the client treats it as any port its service does not list (unknown,
    // refused under unknownDestination: refuse); the server refuses it as a port it does not serve.
    const found = readDestination(dst);
    return config.client ? this.client(config, found, dst) : this.server(config, found && dst.port > 0, dst);
  }

  private client(config: TunnelConfig, found: bool, dst: Address): FilterStatus {
    const root = this.root;
    const decision = root.decision;
    if (found) decideClient(config, root.cursors, dst, decision);
    else decision.outcome = ClientOutcome.Unknown;
    if (decision.outcome == ClientOutcome.Tunnel && decision.service < 0) {
      // A pod IP: an HTTP route in front may have said which service port this request used.
      if (fetchProperty(ROUTE_SERVICE_PORT_PATH) == WasmResult.Ok) {
        preferServicePort(config, decision, readPort(hostValuePtr(), <i32>hostValueSize()));
      }
      releaseHostValue();
    }
    if (decision.outcome == ClientOutcome.NoEndpoint) {
      root.noEndpoint.inc();
      if (logEnabled(LogLevel.Warn)) logWarn("no endpoint of " + formatAddress(dst) + " can take a tunnel");
      return this.close();
    }
    if (decision.outcome == ClientOutcome.Unknown) {
      if (config.refuseUnknown) {
        root.unknownRefused.inc();
        if (logEnabled(LogLevel.Warn)) logWarn(destinationText(found, dst) + " is unknown to the mesh configuration");
        return this.close();
      }
      // tcp_proxy would tunnel its own cluster too: plain TCP for what the mesh does not know.
      if (setEnvoyFilterStateBytes(DISABLE_TUNNELING, TRUE_VALUE) != WasmResult.Ok) return this.root.reject();
      root.unknownPassthrough.inc();
      if (logEnabled(LogLevel.Debug)) logDebug((found ? formatAddress(dst) : "no destination") + " -> unknown, plain passthrough");
      return FilterStatus.Continue;
    }
    const mesh = config.mesh;
    const pod = root.endpoint;
    // A pod dialled by IP keeps the address family the client used; a service endpoint uses its
    // first address (IPv4 first).
    if (decision.service < 0) pod.copyFrom(dst);
    else mesh.workloadAddress(decision.workload, 0, pod);
    // podIP:targetPort is one value with two uses: the CONNECT's :authority (the config formats
    // it from this filter state) and, with the tunnel cluster's upstream_port_override (the
    // pods' tunnel port, 15008), where the tunnel goes. One write instead of an address and an
    // authority: each value Envoy stores costs it thousands of instructions per connection.
    pod.port = decision.targetPort;
    const authority = writeAddress(pod, root.authority.clear());
    const ok =
      setEnvoyFilterStateBytes(UPSTREAM_SUBJECT_ALT_NAMES, mesh.workloadIdentityUtf8(decision.workload)) == WasmResult.Ok &&
      setEnvoyFilterStateText(ORIGINAL_DST_ADDRESS, authority) == WasmResult.Ok &&
      setPropertyText(SERVICE_PORT_PROPERTY, portText(root.servicePortText, decision.servicePort)) == WasmResult.Ok &&
      setEnvoyFilterStateBytes(TCP_PROXY_CLUSTER, config.tunnelCluster) == WasmResult.Ok;
    if (!ok) return this.root.reject();
    root.tunneled.inc();
    if (decision.panic) root.panic.inc();
    if (logEnabled(LogLevel.Debug)) {
      logDebug(
        formatAddress(dst) + " -> tunnel to " + authority.toString() + " (:authority; the tunnel cluster's port)" +
        ", service port " + decision.servicePort.toString() +
        ", verifying " + mesh.workloadIdentity(decision.workload) + (decision.panic ? " (no healthy endpoint: panic routing)" : ""),
      );
    }
    return FilterStatus.Continue;
  }

  private server(config: TunnelConfig, found: bool, dst: Address): FilterStatus {
    const root = this.root;
    let servicePort = PORT_ABSENT;
    if (fetchProperty(SERVICE_PORT_PATH) == WasmResult.Ok) servicePort = readPort(hostValuePtr(), <i32>hostValueSize());
    releaseHostValue();
    let peerLength = 0;
    if (fetchProperty(PEER_PATH) == WasmResult.Ok) peerLength = peerIdentityLength(hostValuePtr(), <i32>hostValueSize());
    releaseHostValue();
    if (!found) dst.port = -1;
    let authority = AuthorityText.Absent;
    if (found && fetchProperty(AUTHORITY_PATH) == WasmResult.Ok) authority = authorityText(hostValuePtr(), <i32>hostValueSize(), writeAddress(dst, root.authority.clear()));
    releaseHostValue();
    const verdict = checkServer(config, dst, servicePort, peerLength, authority);
    if (verdict != ServerVerdict.Accept) return this.refuse(verdict, dst, servicePort);
    const ok =
      setPropertyText(SERVICE_PORT_PROPERTY, portText(root.servicePortText, servicePort)) == WasmResult.Ok &&
      setPropertyText(TARGET_PORT_PROPERTY, portText(root.targetPortText, dst.port)) == WasmResult.Ok &&
      setEnvoyFilterStateBytes(TCP_PROXY_CLUSTER, config.appCluster) == WasmResult.Ok;
    if (!ok) return this.root.reject();
    root.accepted.inc();
    if (logEnabled(LogLevel.Debug)) {
      logDebug("accepted tunnel to " + formatAddress(dst) + ": service port " + servicePort.toString() + ", target port " + dst.port.toString());
    }
    return FilterStatus.Continue;
  }

  private refuse(verdict: ServerVerdict, dst: Address, servicePort: i32): FilterStatus {
    const reason = this.countRefusal(verdict);
    // A client can send refused CONNECTs at will: the line is built only when it is logged.
    if (logEnabled(LogLevel.Warn)) {
      const port = verdict == ServerVerdict.PortMismatch ? "service port " + servicePort.toString() + " " : "";
      logWarn("refused tunnel to " + (dst.port > 0 ? formatAddress(dst) : "?") + ": " + port + reason);
    }
    return this.close();
  }

  /** Counts a refusal by its rule; returns the rule's reason (a constant: nothing is built). */
  private countRefusal(verdict: ServerVerdict): string {
    const root = this.root;
    switch (verdict) {
      case ServerVerdict.NoPeer:
        root.refusedNoPeer.inc();
        return "no authenticated mTLS peer";
      case ServerVerdict.MissingPort:
        root.refusedMissingPort.inc();
        return "no service port, no authority text or no destination";
      case ServerVerdict.MalformedPort:
        root.refusedMalformedPort.inc();
        return "the service port is not exactly one canonical decimal 1-65535";
      case ServerVerdict.MalformedAuthority:
        root.refusedMalformedAuthority.inc();
        return "the :authority is not the canonical spelling of that address";
      case ServerVerdict.NoLocalWorkload:
        root.refusedNoLocalWorkload.inc();
        return "the mesh model in force has no workload at this server's localWorkload";
      case ServerVerdict.ForeignAuthority:
        root.refusedForeignAuthority.inc();
        return "the authority names another workload";
      case ServerVerdict.UnservedPort:
        root.refusedUnservedPort.inc();
        return "this workload does not serve that target port";
      default:
        root.refusedPortMismatch.inc();
        return "does not map to that target port here";
    }
  }

  private close(): FilterStatus {
    closeDownstream();
    return FilterStatus.StopIteration;
  }
}

/** `port` in decimal, in the reused `out` (ports are 1..65535 by the time they are written). */
function portText(out: ByteText, port: i32): ByteText {
  return out.clear().decimal(<u32>port);
}

/**
 * A filter-state string as Envoy's property API returns it: the raw bytes, or serialized as a
 * google.protobuf.StringValue ({1: string}) for objects that serialize as protos. Returns the
 * payload's start, and its length in `payloadLength`; -1 when empty.
 */
let payloadLength: i32 = 0;
function stringPayload(ptr: usize, len: i32): i64 {
  payloadLength = 0;
  if (ptr == 0 || len <= 0) return -1;
  if (len >= 2 && load<u8>(ptr) == 0x0a) {
    // field 1, length-delimited: a varint length (one or two bytes cover every sane value).
    const b0 = <i32>load<u8>(ptr + 1);
    let length = b0 & 0x7f;
    let header = 2;
    if (b0 >= 0x80 && len >= 3) {
      length |= (<i32>load<u8>(ptr + 2) & 0x7f) << 7;
      header = 3;
    }
    if (header + length == len) {
      payloadLength = length;
      return <i64>(ptr + <usize>header);
    }
  }
  payloadLength = len;
  return <i64>ptr;
}

/** parseCanonicalPort over a string filter-state / metadata value (raw or StringValue). */
function readPort(ptr: usize, len: i32): i32 {
  const start = stringPayload(ptr, len);
  if (start < 0 || payloadLength <= 0) return PORT_ABSENT;
  return parseCanonicalPort(<usize>start, payloadLength);
}

/** The shared :authority text against `canonical` (the restored destination, formatted). */
function authorityText(ptr: usize, len: i32, canonical: ByteText): AuthorityText {
  const start = stringPayload(ptr, len);
  if (start < 0 || payloadLength <= 0) return AuthorityText.Absent;
  return sameBytes(<usize>start, payloadLength, canonical.ptr, canonical.length) ? AuthorityText.Canonical : AuthorityText.Other;
}

/** Length of a SPIFFE peer identity ("spiffe://..."), 0 when absent or anything else ("-"). */
function peerIdentityLength(ptr: usize, len: i32): i32 {
  const start = stringPayload(ptr, len);
  if (start < 0 || payloadLength < 10) return 0;
  const p = <usize>start;
  // "spiffe:/" as a little-endian u64, then the second '/'.
  if (load<u64>(p) != 0x2f3a656666697073 || load<u8>(p + 8) != 0x2f) return 0;
  return payloadLength;
}

registerRootContext("tunnel_port", (id: u32): RootContext => new TunnelRoot(id));

// One downstream connection through the filter, driven the way Envoy's network filter manager
// and tcp_proxy drive a wasm network filter (Envoy's Context::onNewConnection/onData/onWrite/
// onEvent and proxy-wasm-cpp-host's ContextBase callbacks).
import { BufferType, PeerType, StreamType, WasmResult } from "./abi.js";
import { parseIpPort } from "./address.js";
import { ConstBuffer, DataBuffer, type HostBuffer } from "./buffers.js";
import type { HostContext, PropertyResult } from "./context.js";
import { FilterStateStore, type FilterStateWrite } from "./filter_state.js";
import {
  buildPropertyTree,
  bool,
  lookupProperty,
  int64,
  mergePropertyTrees,
  string,
  uint64,
  type PropertyInputTree,
  type PropertyMap,
} from "./properties.js";
import type { PluginRoot } from "./root.js";
import type { WasmVm } from "./vm.js";

export type FilterStatusName = "Continue" | "StopIteration";

/**
 * Outcome of delivering bytes:
 * - Continue / StopIteration: what the filter returned (StopIteration keeps the bytes buffered);
 * - ReadDisabled: not delivered; the chain is paused in on_new_connection, and tcp_proxy keeps
 *   the socket read-disabled until it runs (bytes are queued and delivered on resume);
 * - Closed: the connection is closed; nothing is delivered.
 */
export type DataStatus = FilterStatusName | "ReadDisabled" | "Closed";

export interface DataResult {
  readonly status: DataStatus;
  /** Bytes passed on during this call (to upstream for downstream data, to the client otherwise). */
  readonly forwarded: Uint8Array;
  /** The connection is closed after this call. */
  readonly closed: boolean;
}

export interface UpstreamOptions {
  /** Upstream host address `IP:PORT` (property upstream.address / upstream.port). */
  readonly address?: string;
  /** Cluster tcp_proxy picked (property xds.cluster_name). */
  readonly cluster?: string;
  /** More properties that appear with the upstream (e.g. { upstream: { tls_version: "TLSv1.3" } }). */
  readonly properties?: PropertyInputTree;
}

export interface ConnectOptions {
  /** Downstream peer `IP:PORT` (source.address / source.port). */
  readonly source?: string;
  /** Local (original destination) address `IP:PORT` (destination.address / destination.port). */
  readonly destination?: string;
  /** connection.mtls (default false). */
  readonly mtls?: boolean;
  /** connection.requested_server_name (default ""). */
  readonly requestedServerName?: string;
  /** connection.id / connection_id (default: the host's next connection number). */
  readonly connectionId?: number | bigint;
  /** Extra properties for this connection, nested by path segment; they override defaults. */
  readonly properties?: PropertyInputTree;
  /** What tcp_proxy connects to; its properties exist only after on_new_connection continues. */
  readonly upstream?: UpstreamOptions;
  /**
   * tcp_proxy `max_early_data_bytes` is set: data is read (and reaches the filter) even while
   * on_new_connection has paused the chain. Default false (Envoy's default read-disable).
   */
  readonly earlyData?: boolean;
  /**
   * Filter state that already exists when the filter runs: set by an earlier filter, or shared
   * from the hop before an internal listener (shared_with_upstream). Values are the bytes the
   * property API returns for `filter_state.<key>` (a string, or its serialized form).
   */
  readonly filterState?: Readonly<Record<string, string | Uint8Array>>;
}

/** Everything the connection needs from its host. */
export interface ConnectionHost {
  readonly vm: WasmVm;
  readonly failOpen: boolean;
  readonly vmConfiguration: Uint8Array;
  readonly pluginProperties: PropertyMap;
  unregister(connection: Connection): void;
  connectionEnded(root: PluginRoot): void;
}

export type CloseReason =
  | "downstream" // the client closed
  | "upstream" // the upstream closed and tcp_proxy closed the client
  | "end" // orderly close of both sides (end())
  | "filter" // the filter called proxy_close_stream
  | "vm_failed"; // the VM trapped and the failure policy is FAIL_CLOSED

const EMPTY = new Uint8Array(0);

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function endpointTree(address: string | undefined): PropertyMap | undefined {
  if (address === undefined) return undefined;
  const tree: PropertyMap = new Map([["address", string(address)]]);
  const parsed = parseIpPort(address);
  if (parsed) tree.set("port", int64(parsed.port));
  return tree;
}

export class Connection implements HostContext {
  readonly kind = "connection" as const;
  hostCalls = 0;
  /** What on_new_connection returned (Continue when the filter is bypassed or has no callback). */
  status: FilterStatusName = "Continue";
  closed = false;
  closeReason: CloseReason | undefined;
  /** FAIL_OPEN after a VM failure: the filter is not in the chain; bytes pass untouched. */
  readonly bypassed: boolean;
  /** The connection.id property value. */
  readonly connectionId: bigint;

  private readonly filterStateStore = new FilterStateStore();
  private readonly downstream = new DataBuffer();
  private readonly upstream = new DataBuffer();
  private readonly toUpstream: Uint8Array[] = [];
  private readonly toDownstream: Uint8Array[] = [];
  private readonly properties: PropertyMap;
  private readonly upstreamProperties: PropertyMap;
  private readonly earlyData: boolean;
  /** Held by StopIteration (or being delivered): the guest can read/modify it. */
  private downstreamExposed = false;
  private upstreamExposed = false;
  /** tcp_proxy has run (chain passed on_new_connection): upstream.* exist, upstream data can flow. */
  private upstreamReady = false;
  /** on_new_connection returned StopIteration and nothing resumed the chain yet. */
  private chainPaused = false;
  /** Bytes read while the chain was paused and reading disabled, with their end-of-stream flag. */
  private readonly socketQueue: Uint8Array[] = [];
  private socketEos = false;
  private inVmContextCreated = false;
  private tcpClosed = false;
  private downstreamEosSeen = false;
  private upstreamEosSeen = false;

  /** Completed by connect(); `id` 0 means the filter has no context (bypassed / failed VM). */
  constructor(
    readonly id: number,
    private readonly host: ConnectionHost,
    readonly root: PluginRoot | undefined,
    options: ConnectOptions,
    connectionId: bigint,
  ) {
    this.connectionId = connectionId;
    this.bypassed = id === 0 && host.failOpen;
    this.earlyData = options.earlyData ?? false;
    for (const [key, value] of Object.entries(options.filterState ?? {})) {
      this.filterStateStore.seed(key, typeof value === "string" ? new TextEncoder().encode(value) : value);
    }
    this.properties = new Map();
    const source = endpointTree(options.source);
    const destination = endpointTree(options.destination);
    if (source) this.properties.set("source", source);
    if (destination) this.properties.set("destination", destination);
    this.properties.set(
      "connection",
      new Map([
        ["id", uint64(connectionId)],
        ["mtls", bool(options.mtls ?? false)],
        ["requested_server_name", string(options.requestedServerName ?? "")],
      ]),
    );
    this.properties.set("connection_id", uint64(connectionId));
    mergePropertyTrees(this.properties, buildPropertyTree(options.properties));
    this.upstreamProperties = new Map();
    const up = options.upstream;
    if (up) {
      const upstream = endpointTree(up.address);
      if (upstream) this.upstreamProperties.set("upstream", upstream);
      if (up.cluster !== undefined) {
        this.upstreamProperties.set("xds", new Map([["cluster_name", string(up.cluster)]]));
      }
      mergePropertyTrees(this.upstreamProperties, buildPropertyTree(up.properties));
    }
  }

  // ---- public observations -------------------------------------------------------------------

  /** Every accepted filter-state write (set_envoy_filter_state and set_property), in order. */
  get filterStateWrites(): readonly FilterStateWrite[] {
    return this.filterStateStore.writes;
  }

  /** Latest filter state: key → value (set_property values appear under `wasm.<path>`). */
  get filterState(): Map<string, string> {
    return this.filterStateStore.snapshot();
  }

  /** set_property writes only: path as sent (NULs kept) → latest value bytes. */
  get propertyWrites(): Map<string, Uint8Array> {
    const out = new Map<string, Uint8Array>();
    for (const write of this.filterStateStore.writes) {
      if (write.source === "set_property") out.set(write.key.slice("wasm.".length), write.bytes);
    }
    return out;
  }

  /** All bytes forwarded to the upstream so far. */
  get upstreamBytes(): Uint8Array {
    return concat(this.toUpstream.length ? this.toUpstream : [EMPTY]);
  }

  /** All bytes forwarded to the client so far. */
  get downstreamBytes(): Uint8Array {
    return concat(this.toDownstream.length ? this.toDownstream : [EMPTY]);
  }

  /** Reading is disabled: on_new_connection paused the chain (and no early data is allowed). */
  get readDisabled(): boolean {
    return this.chainPaused && !this.earlyData;
  }

  // ---- HostContext ---------------------------------------------------------------------------

  getProperty(segments: readonly string[]): PropertyResult {
    const top = segments[0];
    if (top === undefined) return { status: WasmResult.NotFound };
    if (top === "filter_state") {
      const write = segments.length === 2 ? this.filterStateStore.get(segments[1]!) : undefined;
      return write ? { status: WasmResult.Ok, bytes: write.bytes } : { status: WasmResult.NotFound };
    }
    const layers = this.upstreamReady
      ? [this.properties, this.upstreamProperties, this.host.pluginProperties]
      : [this.properties, this.host.pluginProperties];
    for (const layer of layers) {
      const found = lookupProperty(layer, segments);
      if (found !== undefined) return found;
    }
    if (layers.some((layer) => layer.has(top))) return { status: WasmResult.NotFound };
    // Envoy falls back to filter state `wasm.<name>` for an unknown top-level name.
    const state = this.filterStateStore.get(`wasm.${top}`);
    if (state && segments.length === 1 && state.source === "set_property") {
      return { status: WasmResult.Ok, bytes: state.bytes };
    }
    return { status: WasmResult.NotFound };
  }

  setProperty(rawPath: string, value: Uint8Array): number {
    // Envoy keys the state "wasm." + the path exactly as sent: a multi-segment path keeps its NULs.
    this.filterStateStore.setWasmProperty(`wasm.${rawPath}`, value);
    return WasmResult.Ok;
  }

  setEnvoyFilterState(key: string, value: string, span: number): number {
    this.filterStateStore.setObject(key, value, span);
    return WasmResult.Ok;
  }

  buffer(type: number): HostBuffer | undefined {
    switch (type) {
      case BufferType.DownstreamData:
        return this.downstreamExposed ? this.downstream : new DataBuffer();
      case BufferType.UpstreamData:
        return this.upstreamExposed ? this.upstream : new DataBuffer();
      case BufferType.VmConfiguration:
        return new ConstBuffer(this.host.vmConfiguration);
      case BufferType.PluginConfiguration:
      case BufferType.HttpCallResponseBody:
        return undefined;
      default:
        return new DataBuffer();
    }
  }

  continueStream(type: number): number {
    if (type === StreamType.Upstream) return WasmResult.Unimplemented;
    if (type > StreamType.Upstream) return WasmResult.BadArgument;
    if (type === StreamType.Downstream) this.host.vm.defer(() => this.continueReading());
    return WasmResult.Ok;
  }

  closeStream(type: number): number {
    if (type > StreamType.Upstream) return WasmResult.BadArgument;
    // Both network stream types close the downstream connection (FlushWrite), after the call.
    if (type >= StreamType.Downstream) this.host.vm.defer(() => this.closeConnection(PeerType.Local, "filter"));
    return WasmResult.Ok;
  }

  // ---- driving the connection ----------------------------------------------------------------

  /** Runs context creation and on_new_connection (called once by the host). */
  open(): void {
    const vm = this.host.vm;
    if (this.bypassed) {
      this.upstreamReady = true;
      return;
    }
    if (this.id === 0 || vm.failed) {
      this.failStream();
      return;
    }
    vm.call(this, "proxy_on_context_create", this.id, this.root!.id);
    this.inVmContextCreated = true;
    if (this.checkFailed()) return;
    const result = vm.call(this, "proxy_on_new_connection", this.id);
    if (this.checkFailed()) return;
    this.status = result === undefined || result === 0 ? "Continue" : "StopIteration";
    if (this.closed) return;
    if (this.status === "Continue") this.upstreamReady = true;
    else this.chainPaused = true;
  }

  /** Bytes from the client. */
  downstreamData(bytes: Uint8Array | string, endOfStream = false): DataResult {
    const data = typeof bytes === "string" ? string(bytes) : bytes;
    if (this.closed) return { status: "Closed", forwarded: EMPTY, closed: true };
    if (this.bypassed) return this.pass(data, this.toUpstream);
    if (this.readDisabled) {
      this.socketQueue.push(data);
      this.socketEos ||= endOfStream;
      return { status: "ReadDisabled", forwarded: EMPTY, closed: false };
    }
    this.downstream.append(data);
    return this.deliverDownstream(endOfStream);
  }

  /** Bytes from the upstream. End of stream also runs on_upstream_connection_close(c, 0). */
  upstreamData(bytes: Uint8Array | string, endOfStream = false): DataResult {
    const data = typeof bytes === "string" ? string(bytes) : bytes;
    if (this.closed) return { status: "Closed", forwarded: EMPTY, closed: true };
    if (this.bypassed) return this.pass(data, this.toDownstream);
    if (!this.upstreamReady) {
      throw new Error(
        "upstreamData: no upstream yet (on_new_connection paused the chain, so tcp_proxy has not connected)",
      );
    }
    this.upstream.append(data);
    const vm = this.host.vm;
    const before = this.toDownstream.length;
    let status: FilterStatusName;
    if (vm.failed) {
      status = this.failedStatus();
    } else {
      this.upstreamExposed = true;
      const result = vm.call(this, "proxy_on_upstream_data", this.id, this.upstream.size, endOfStream ? 1 : 0);
      status = vm.failed ? this.failedStatus() : result === undefined || result === 0 ? "Continue" : "StopIteration";
    }
    if (status === "Continue" && !this.closed) {
      this.upstreamExposed = false;
      this.forward(this.upstream, this.toDownstream);
    }
    if (endOfStream && !this.upstreamEosSeen) {
      this.upstreamEosSeen = true;
      // Envoy synthesizes the upstream close from upstream end-of-stream (Context::onWrite).
      if (!this.tcpClosed && !vm.failed) {
        vm.call(this, "proxy_on_upstream_connection_close", this.id, PeerType.Unknown);
        this.checkFailed();
      }
    }
    return { status, forwarded: concat([EMPTY, ...this.toDownstream.slice(before)]), closed: this.closed };
  }

  /**
   * The client closes ("downstream", peer Remote) or the upstream resets and tcp_proxy closes the
   * client ("upstream", peer Local). Runs on_downstream_connection_close, then on_done, on_log,
   * on_delete. No upstream close callback: Envoy only synthesizes that from upstream end-of-stream.
   */
  close(side: "downstream" | "upstream" = "downstream"): void {
    this.closeConnection(side === "downstream" ? PeerType.Remote : PeerType.Local, side);
  }

  /**
   * Orderly end of both sides: client end-of-stream (on_downstream_data with 0 bytes, eos), upstream
   * end-of-stream (on_upstream_data with 0 bytes, eos → on_upstream_connection_close(c, 0)), then
   * tcp_proxy closes the client (on_downstream_connection_close(c, Local)) → done, log, delete.
   * Steps that already happened are skipped.
   */
  end(): void {
    if (this.closed) return;
    if (!this.downstreamEosSeen && !this.readDisabled) this.downstreamData(EMPTY, true);
    if (!this.closed && this.upstreamReady && !this.upstreamEosSeen) this.upstreamData(EMPTY, true);
    this.closeConnection(PeerType.Local, "end");
  }

  // ---- internals -----------------------------------------------------------------------------

  private pass(data: Uint8Array, sink: Uint8Array[]): DataResult {
    if (data.length > 0) sink.push(data);
    return { status: "Continue", forwarded: data, closed: false };
  }

  private deliverDownstream(endOfStream: boolean): DataResult {
    const vm = this.host.vm;
    const before = this.toUpstream.length;
    this.downstreamEosSeen ||= endOfStream;
    let status: FilterStatusName;
    if (vm.failed) {
      status = this.failedStatus();
    } else {
      this.downstreamExposed = true;
      const result = vm.call(this, "proxy_on_downstream_data", this.id, this.downstream.size, endOfStream ? 1 : 0);
      status = vm.failed ? this.failedStatus() : result === undefined || result === 0 ? "Continue" : "StopIteration";
    }
    if (status === "Continue" && !this.closed) {
      this.downstreamExposed = false;
      this.forward(this.downstream, this.toUpstream);
      if (!this.upstreamReady) this.resumeChain();
    }
    return { status, forwarded: concat([EMPTY, ...this.toUpstream.slice(before)]), closed: this.closed };
  }

  private forward(buffer: DataBuffer, sink: Uint8Array[]): void {
    const bytes = buffer.drainAll();
    if (bytes.length > 0) sink.push(bytes);
  }

  /** proxy_continue_stream(Downstream), run after the guest call (Envoy's continueReading). */
  private continueReading(): void {
    if (this.closed) return;
    this.downstreamExposed = false;
    this.forward(this.downstream, this.toUpstream);
    if (this.chainPaused) this.resumeChain();
  }

  /** The chain passes on_new_connection: tcp_proxy runs, then queued socket bytes are read. */
  private resumeChain(): void {
    this.chainPaused = false;
    this.upstreamReady = true;
    if (this.socketQueue.length > 0 || this.socketEos) {
      const queued = concat([EMPTY, ...this.socketQueue.splice(0)]);
      const eos = this.socketEos;
      this.socketEos = false;
      this.downstream.append(queued);
      this.deliverDownstream(eos);
    }
  }

  /** CHECK_FAIL after a guest call: true when the VM failed (the connection is then handled). */
  private checkFailed(): boolean {
    if (!this.host.vm.failed) return false;
    this.status = this.failedStatus();
    return true;
  }

  /** cpp-host CHECK_FAIL_NET: fail open → Continue; fail closed → close and StopIteration. */
  private failedStatus(): FilterStatusName {
    if (this.host.failOpen) {
      this.upstreamReady = true;
      this.chainPaused = false;
      return "Continue";
    }
    this.failStream();
    return "StopIteration";
  }

  private failStream(): void {
    this.status = "StopIteration";
    this.closeConnection(PeerType.Local, "vm_failed");
  }

  /** The downstream connection closes: close callback, then done/log/delete (onCloseTCP). */
  private closeConnection(peer: number, reason: CloseReason): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = reason;
    this.downstreamExposed = false;
    this.upstreamExposed = false;
    const vm = this.host.vm;
    if (this.inVmContextCreated && !vm.failed) {
      vm.call(this, "proxy_on_downstream_connection_close", this.id, peer);
    }
    this.closeTcp();
  }

  private closeTcp(): void {
    if (this.tcpClosed) return;
    this.tcpClosed = true;
    if (this.inVmContextCreated) {
      const vm = this.host.vm;
      vm.call(this, "proxy_on_done", this.id);
      vm.call(this, "proxy_on_log", this.id);
      vm.call(this, "proxy_on_delete", this.id);
    }
    this.host.unregister(this);
    if (this.root) this.host.connectionEnded(this.root);
  }
}

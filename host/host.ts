// ProxyWasmHost: loads a compiled network filter and runs it the way Envoy does (VM start, the
// configuration canary, root and connection contexts, failure policy), recording what a test
// needs to assert on: statuses, forwarded bytes, filter state, metrics and logs.
import { readFile } from "node:fs/promises";
import { LOG_LEVELS, type AbiVersion } from "./abi.js";
import { Connection, type ConnectOptions, type ConnectionHost } from "./connection.js";
import type { HostContext } from "./context.js";
import {
  HttpCalls,
  LOCAL_REPLIES,
  RESET,
  type HttpCallRequest,
  type HttpCallResponse,
  type HttpCluster,
} from "./http_call.js";
import { buildImports, type HostServices } from "./imports.js";
import { LogSink, type HostLogLevel, type LogEntry } from "./logs.js";
import { MetricIds, MetricStore } from "./metrics.js";
import { checkModule } from "./module_check.js";
import { encodeNode, type NodeInput } from "./node.js";
import { buildPropertyTree, mergePropertyTrees, string, type PropertyInputTree, type PropertyMap } from "./properties.js";
import { PluginRoot } from "./root.js";
import { SharedData } from "./shared_data.js";
import { WasmVm, type GuestCall } from "./vm.js";

export type FailurePolicy = "FAIL_CLOSED" | "FAIL_OPEN";

export interface HostOptions {
  /** Plugin root_id (property plugin_root_id; the runtime picks its filter by it). Default "". */
  readonly rootId?: string;
  /** Plugin name (property plugin_name). Default: rootId. */
  readonly name?: string;
  /** vm_id (property plugin_vm_id). Default "". */
  readonly vmId?: string;
  /** Plugin configuration bytes (`configuration` of the plugin). Default empty. */
  readonly pluginConfiguration?: string | Uint8Array;
  /** VM configuration bytes (`vm_config.configuration`). Default empty. */
  readonly vmConfiguration?: string | Uint8Array;
  /** Envoy's log level for the wasm logger. Default "info". */
  readonly logLevel?: HostLogLevel;
  /** What happens after the VM fails. Default FAIL_CLOSED. */
  readonly failurePolicy?: FailurePolicy;
  /** Properties every context sees (plugin-level), nested by path segment. */
  readonly properties?: PropertyInputTree;
  /** xds.node as serialized protobuf bytes (absent when not given). */
  readonly node?: Uint8Array;
  /**
   * xds.node built from fields (e.g. `{ metadata: { NETWORK: "west" } }`, what Istio sets);
   * sub-paths such as `xds.node.metadata.NETWORK` resolve as in Envoy. Ignored when `node` is given.
   */
  readonly nodeFields?: NodeInput;
  /** Run Envoy's throw-away configuration canary VM first. Default true. */
  readonly canary?: boolean;
  /** Wall clock in nanoseconds. Default: Date.now(). */
  readonly clock?: () => bigint;
  /** WASI environment variables. Default none. */
  readonly environment?: Readonly<Record<string, string>>;
  /** Record every guest call in `host.calls` (tests of callback order). Default false. */
  readonly recordCalls?: boolean;
  /** Accumulate the wall time spent inside guest calls (see guestTimeNs). Default false. */
  readonly measureGuestTime?: boolean;
  /** Also print captured log lines to stderr. Default false. */
  readonly echoLogs?: boolean;
  /**
   * After reconfigure() is refused in the main VM, shut the refused root down (on_done,
   * on_delete) instead of leaving it in the VM. For long runs of configurations in one VM
   * without the canary (the fuzzer): in Envoy the canary refuses them before the main VM sees
   * them, so refused roots never pile up there. Default false.
   */
  readonly deleteRefusedRoots?: boolean;
  /**
   * The Envoy clusters proxy_http_call may name. With an `address` (loopback `IP:PORT`) the host
   * sends real HTTP/1.1 requests and calls back asynchronously as Envoy does (host/http_call.ts);
   * without one, calls wait in `pendingHttpCalls` for respondHttpCall() and friends. Any other
   * name is BAD_ARGUMENT, as an unknown cluster is in Envoy. Default: none.
   */
  readonly clusters?: Readonly<Record<string, HttpCluster>>;
}

const encoder = new TextEncoder();
const toBytes = (value: string | Uint8Array | undefined): Uint8Array =>
  value === undefined ? new Uint8Array(0) : typeof value === "string" ? encoder.encode(value) : value;

export class ProxyWasmHost {
  /** Guest calls in order (only with recordCalls). */
  readonly calls: GuestCall[] = [];
  /** Calls to ABI functions the host does not emulate. */
  readonly notices: string[] = [];
  readonly abiVersion: AbiVersion;
  /** Why start()/reconfigure() last returned false. */
  startFailure: string | undefined;

  private readonly module: WebAssembly.Module;
  private readonly logSink: LogSink;
  private readonly metricStore = new MetricStore();
  private readonly sharedData = new SharedData();
  private readonly pluginProperties: PropertyMap;
  private readonly vmConfiguration: Uint8Array;
  private readonly failOpen: boolean;
  private readonly clock: () => bigint;
  private vm: WasmVm | undefined;
  private root: PluginRoot | undefined;
  private readonly contexts = new Map<number, HostContext>();
  private readonly roots = new Map<number, PluginRoot>();
  private nextContextId = 1;
  private nextConnectionNumber = 1n;
  private pluginConfiguration: Uint8Array;
  private readonly connectionHost: ConnectionHost;
  private httpCallsOfMain: HttpCalls | undefined;
  /** The last canary's calls: cancelled once it is discarded (Envoy destroys the canary VM). */
  private httpCallsOfCanary: HttpCalls | undefined;

  /** Loads (and checks) a module from a file. Throws ModuleRefusedError if Envoy would refuse it. */
  static async fromFile(path: string, options: HostOptions = {}): Promise<ProxyWasmHost> {
    return new ProxyWasmHost(new Uint8Array(await readFile(path)), options);
  }

  /** Loads (and checks) a module from bytes. Throws ModuleRefusedError if Envoy would refuse it. */
  static fromBytes(bytes: Uint8Array, options: HostOptions = {}): ProxyWasmHost {
    return new ProxyWasmHost(bytes, options);
  }

  private constructor(
    bytes: Uint8Array,
    private readonly options: HostOptions,
  ) {
    const checked = checkModule(bytes);
    this.module = checked.module;
    this.abiVersion = checked.abiVersion;
    this.logSink = new LogSink(options.logLevel ?? "info", options.echoLogs ?? false);
    this.vmConfiguration = toBytes(options.vmConfiguration);
    this.pluginConfiguration = toBytes(options.pluginConfiguration);
    this.failOpen = (options.failurePolicy ?? "FAIL_CLOSED") === "FAIL_OPEN";
    this.clock = options.clock ?? (() => BigInt(Date.now()) * 1_000_000n);
    const rootId = options.rootId ?? "";
    this.pluginProperties = mergePropertyTrees(
      new Map([
        ["plugin_name", string(options.name ?? rootId)],
        ["plugin_root_id", string(rootId)],
        ["plugin_vm_id", string(options.vmId ?? "")],
      ]),
      buildPropertyTree(options.properties),
    );
    const node = options.node ?? (options.nodeFields && encodeNode(options.nodeFields));
    if (node) mergePropertyTrees(this.pluginProperties, new Map([["xds", new Map([["node", node]])]]));
    const host = this;
    this.connectionHost = {
      get vm() {
        return host.vm!;
      },
      failOpen: this.failOpen,
      vmConfiguration: this.vmConfiguration,
      pluginProperties: this.pluginProperties,
      unregister: (connection) => this.contexts.delete(connection.id),
      connectionEnded: (root) => {
        root.openConnections--;
        if (root.retired && root.openConnections === 0) this.shutdownRoot(root);
      },
    };
  }

  // ---- lifecycle -----------------------------------------------------------------------------

  /**
   * Starts the plugin: the canary VM (unless disabled) then the real VM, each running
   * `_initialize`, proxy_on_context_create(root, 0), proxy_on_vm_start, proxy_on_configure.
   * Returns false when Envoy would reject the plugin (see startFailure).
   */
  start(): boolean {
    if (this.vm) throw new Error("start(): already started");
    this.startFailure = undefined;
    if (this.options.canary ?? true) {
      const canary = this.createVm("canary");
      const ok = canary !== undefined && this.startRoot(canary, 1, new Map(), "canary") !== undefined;
      this.httpCallsOfCanary?.cancelAll();
      // Envoy kills the canary without shutting it down: no on_done/on_delete.
      if (!ok) return false;
    }
    const vm = this.createVm("main");
    if (vm === undefined) return false;
    this.vm = vm;
    const root = this.startRoot(vm, this.allocateContextId(), this.contexts, "main");
    if (root === undefined) return false;
    this.root = root;
    return true;
  }

  /**
   * A plugin configuration change. Envoy builds a new plugin: a canary check, then a new root
   * context in the same VM (context_create → vm_start → configure). On success new connections
   * use it; the old root gets on_done/on_delete once its last connection ends. On refusal the
   * old configuration stays in service and false is returned.
   */
  reconfigure(pluginConfiguration: string | Uint8Array): boolean {
    const vm = this.requireStarted("reconfigure");
    this.startFailure = undefined;
    const previous = this.pluginConfiguration;
    this.pluginConfiguration = toBytes(pluginConfiguration);
    if (this.options.canary ?? true) {
      const canary = this.createVm("canary");
      const refused = canary === undefined || this.startRoot(canary, 1, new Map(), "canary") === undefined;
      this.httpCallsOfCanary?.cancelAll();
      if (refused) {
        this.pluginConfiguration = previous;
        return false;
      }
    }
    const id = this.allocateContextId();
    const root = this.startRoot(vm, id, this.contexts, "main");
    if (root === undefined) {
      this.pluginConfiguration = previous;
      const refused = this.roots.get(id);
      if (this.options.deleteRefusedRoots && refused && !vm.failed) this.shutdownRoot(refused);
      return false;
    }
    const old = this.root!;
    this.root = root;
    old.retired = true;
    if (old.openConnections === 0) this.shutdownRoot(old);
    return true;
  }

  /** A new downstream connection: context create + on_new_connection (or the failure policy). */
  connect(options: ConnectOptions = {}): Connection {
    const vm = this.requireStarted("connect");
    const connectionId = options.connectionId !== undefined ? BigInt(options.connectionId) : this.nextConnectionNumber++;
    let connection: Connection;
    if (vm.failed) {
      // FAIL_OPEN: the filter is not added to the chain; FAIL_CLOSED: an empty context closes it.
      connection = new Connection(0, this.connectionHost, undefined, options, connectionId);
    } else {
      const root = this.root!;
      connection = new Connection(this.allocateContextId(), this.connectionHost, root, options, connectionId);
      this.contexts.set(connection.id, connection);
      root.openConnections++;
    }
    connection.open();
    return connection;
  }

  /** Fires the timer: proxy_on_tick on the current root context (whatever period was asked). */
  tick(): void {
    const vm = this.requireStarted("tick");
    vm.call(this.root!, "proxy_on_tick", this.root!.id);
  }

  // ---- HTTP calls (proxy_http_call) ---------------------------------------------------------

  /** Every call the main VM made, in order (answered ones included). */
  get httpCalls(): readonly HttpCallRequest[] {
    return this.httpCallsOfMain?.made ?? [];
  }

  /** Calls to manual clusters (no address) waiting for an answer. */
  get pendingHttpCalls(): HttpCallRequest[] {
    return this.httpCallsOfMain?.pending ?? [];
  }

  /** Calls not answered yet, real and manual. */
  get httpCallsInFlight(): number {
    return this.httpCallsOfMain?.inFlightCount ?? 0;
  }

  /** Answers a pending call (see httpResponse() in host/http_call.ts); false if not pending. */
  respondHttpCall(token: number, response: HttpCallResponse): boolean {
    return this.httpCallsOfMain?.respond(token, response) ?? false;
  }

  /** The stream is reset after the response began: callback (0, 0, 0), proxy_get_status 11 "reset". */
  resetHttpCall(token: number): boolean {
    return this.httpCallsOfMain?.respond(token, RESET, true) ?? false;
  }

  /** The call's timeout fired: Envoy's local 504 "upstream request timeout". */
  timeoutHttpCall(token: number): boolean {
    return this.httpCallsOfMain?.respond(token, LOCAL_REPLIES.timeout()) ?? false;
  }

  /** The cluster refused the connection: Envoy's local 503 "... remote connection failure". */
  refuseHttpCall(token: number): boolean {
    return this.httpCallsOfMain?.respond(token, LOCAL_REPLIES.refused()) ?? false;
  }

  /** Cancels every call still in flight (real requests too), e.g. at the end of a test. */
  dispose(): void {
    this.httpCallsOfMain?.cancelAll();
    this.httpCallsOfCanary?.cancelAll();
  }

  // ---- observations --------------------------------------------------------------------------

  /** The VM trapped: every later callback is skipped (see failurePolicy). */
  get failed(): boolean {
    return this.vm?.failed ?? false;
  }

  /** Envoy-style description of the trap ("Function: proxy_on_... failed: RuntimeError: ..."). */
  get trapMessage(): string | undefined {
    return this.vm?.failure;
  }

  /** Current root context id (changes on reconfigure). */
  get rootContextId(): number | undefined {
    return this.root?.id;
  }

  /** Tick period the current root asked for with proxy_set_tick_period_milliseconds (0 = none). */
  get tickPeriodMs(): number {
    return this.root?.tickPeriodMs ?? 0;
  }

  /** Contexts alive in the main VM (roots and open connections). */
  get liveContexts(): number {
    return this.contexts.size;
  }

  /** Allocations the host made through the main VM's malloc (count and bytes; never freed by Envoy). */
  get guestAllocations(): { readonly count: number; readonly bytes: number } {
    return { count: this.vm?.allocations ?? 0, bytes: this.vm?.allocatedBytes ?? 0 };
  }

  /** The guest's linear memory size in bytes (it never shrinks). */
  get guestMemoryBytes(): number {
    return this.vm?.memory.size ?? 0;
  }

  /** Nanoseconds spent inside guest calls of the main VM since start (needs measureGuestTime). */
  get guestTimeNs(): bigint {
    return this.vm?.guestNanos ?? 0n;
  }

  /** Host functions invoked so far in the main VM. */
  get hostCalls(): number {
    return this.vm?.hostCalls ?? 0;
  }

  /** Metric name → value (counters, gauges; histograms: sample count). Shared with the canary. */
  metrics(): Map<string, number> {
    return this.metricStore.values();
  }

  histogram(name: string): number[] | undefined {
    return this.metricStore.histogram(name);
  }

  /** Captured log lines at or above the log level (including the canary's, marked vm "canary"). */
  logs(): readonly LogEntry[] {
    return this.logSink.entries;
  }

  /** Messages of the main VM's log lines, optionally of one level. */
  logLines(level?: HostLogLevel): string[] {
    return this.logSink.entries
      .filter((e) => e.vm === "main" && (level === undefined || e.level === level))
      .map((e) => e.message);
  }

  /** Forgets the captured log lines (long runs that read them case by case). */
  clearLogs(): void {
    this.logSink.entries.length = 0;
  }

  setLogLevel(level: HostLogLevel): void {
    if (level !== "off" && !LOG_LEVELS.includes(level)) throw new Error(`unknown log level ${level}`);
    this.logSink.setLevel(level);
  }

  // ---- internals -----------------------------------------------------------------------------

  private requireStarted(what: string): WasmVm {
    if (!this.vm || !this.root) throw new Error(`${what}(): the plugin is not started (start() returned false or was not called)`);
    return this.vm;
  }

  private shutdownRoot(root: PluginRoot): void {
    root.shutdown();
    if (root.deleted) {
      this.contexts.delete(root.id);
      this.roots.delete(root.id);
    }
  }

  private allocateContextId(): number {
    return this.nextContextId++;
  }

  /** Instantiates and initializes a VM (`_initialize` + `main`, or `_start`). */
  private createVm(kind: "main" | "canary"): WasmVm | undefined {
    const contexts = kind === "main" ? this.contexts : new Map<number, HostContext>();
    const vm = new WasmVm(
      kind,
      this.abiVersion,
      new MetricIds(this.metricStore),
      {
        onFailure: (_vm, message) => {
          this.logSink.add({ level: "error", message: `Plugin Crash: ${message}`, contextId: 0, vm: kind, source: "host" });
        },
        ...(this.options.recordCalls ? { onCall: (call: GuestCall) => this.calls.push(call) } : {}),
      },
      (id) => contexts.get(id),
    );
    vm.instantiate(this.module, buildImports(vm, this.services(kind, () => vm)));
    vm.restricted = true;
    if (vm.has("_initialize")) {
      vm.call(vm.vmContext, "_initialize");
      if (vm.has("main")) vm.call(vm.vmContext, "main", 0, 0);
    } else {
      vm.call(vm.vmContext, "_start");
    }
    vm.restricted = false;
    vm.measureTime = kind === "main" && this.options.measureGuestTime === true;
    if (vm.failed) {
      this.startFailure = `${kind} VM failed to start: ${vm.failure}`;
      return undefined;
    }
    return vm;
  }

  /** context_create(root, 0) → vm_start → configure, as Envoy's WasmBase::start + configure. */
  private startRoot(
    vm: WasmVm,
    id: number,
    contexts: Map<number, HostContext>,
    kind: "main" | "canary",
  ): PluginRoot | undefined {
    const root = new PluginRoot(id, vm, this.pluginConfiguration, this.vmConfiguration, this.pluginProperties);
    if (kind === "main") root.onDeleted = () => this.httpCallsOfMain?.cancelRoot(id);
    contexts.set(id, root);
    if (kind === "main") this.roots.set(id, root);
    vm.call(root, "proxy_on_context_create", id, 0);
    const started = vm.call(root, "proxy_on_vm_start", id, this.vmConfiguration.length);
    if (vm.failed || started === 0) {
      this.startFailure = `${kind}: ${vm.failed ? vm.failure : "proxy_on_vm_start returned false"}`;
      return undefined;
    }
    root.configuring = true;
    const configured = vm.call(root, "proxy_on_configure", id, this.pluginConfiguration.length);
    root.configuring = false;
    if (vm.failed || configured === 0) {
      this.startFailure = `${kind}: ${vm.failed ? vm.failure : "proxy_on_configure returned false (plugin rejected)"}`;
      return undefined;
    }
    return root;
  }

  private services(kind: "main" | "canary", vmOf: () => WasmVm | undefined): HostServices {
    const httpCalls = new HttpCalls(this.options.clusters ?? {}, (request, response, reset) => {
      // The canary is discarded right after configure: its calls never call back.
      const vm = vmOf();
      const root = kind === "main" ? this.roots.get(request.rootId) : undefined;
      if (vm === undefined || root === undefined || root.deleted || vm.failed) return;
      root.httpResponse = response;
      if (reset) root.callStatus = { code: 11, message: "reset" };
      vm.call(root, "proxy_on_http_call_response", root.id, request.token, response.headers.length, response.body.length, response.trailers.length);
      root.httpResponse = undefined;
      if (reset) root.callStatus = { code: 11, message: "" };
    });
    if (kind === "main") this.httpCallsOfMain = httpCalls;
    else this.httpCallsOfCanary = httpCalls;
    return {
      httpCalls,
      logs: this.logSink,
      sharedData: this.sharedData,
      clock: this.clock,
      environment: this.options.environment ?? {},
      setTickPeriod: (rootId, ms) => {
        const root = this.roots.get(rootId);
        if (root && kind === "main") root.tickPeriodMs = ms;
      },
      rootOf: (contextId) => {
        const context = this.contexts.get(contextId);
        return context instanceof Connection ? (context.root?.id ?? 0) : contextId;
      },
      rootDone: (contextId) => {
        const root = this.roots.get(contextId);
        if (kind !== "main" || !root || !root.pendingDone) return 1; // NOT_FOUND
        this.vm!.defer(() => {
          root.delete();
          this.contexts.delete(root.id);
          this.roots.delete(root.id);
        });
        return 0;
      },
      configurationFor: (contextId) => {
        const root = this.roots.get(contextId);
        return root?.configuring ? root.pluginConfiguration : this.vmConfiguration;
      },
      notice: (message) => this.notices.push(message),
    };
  }
}

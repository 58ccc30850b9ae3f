// The root (plugin) context: one per plugin configuration in a VM. It sees the VM and plugin
// configuration buffers and the plugin-level properties, but has no connection (no stream info):
// connection properties, set_property and filter state are NOT_FOUND there, as in Envoy.
import { BufferType, StreamType, WasmResult } from "./abi.js";
import { ConstBuffer, type HostBuffer } from "./buffers.js";
import type { HttpCallResponse } from "./http_call.js";
import type { HostContext, PropertyResult } from "./context.js";
import { lookupProperty, type PropertyMap } from "./properties.js";
import type { WasmVm } from "./vm.js";

export class PluginRoot implements HostContext {
  readonly kind = "root" as const;
  hostCalls = 0;
  /** Open connections created under this root (it is shut down after the last one when retired). */
  openConnections = 0;
  /** Tick period the guest asked for (0 = none). */
  tickPeriodMs = 0;
  /** Set by reconfigure(): new connections go to the newer root. */
  retired = false;
  /** on_done returned false: waiting for proxy_done. */
  pendingDone = false;
  deleted = false;
  /** True only during proxy_on_configure: the plugin configuration buffer exists only then. */
  configuring = false;
  /** The HTTP call response during proxy_on_http_call_response (headers, body, trailers). */
  httpResponse: HttpCallResponse | undefined = undefined;
  callStatus = { code: 0, message: "" };
  /** Run when the root is deleted (the host cancels its pending HTTP calls, as Envoy does). */
  onDeleted: (() => void) | undefined = undefined;

  constructor(
    readonly id: number,
    readonly vm: WasmVm,
    readonly pluginConfiguration: Uint8Array,
    private readonly vmConfiguration: Uint8Array,
    private readonly pluginProperties: PropertyMap,
  ) {}

  getProperty(segments: readonly string[]): PropertyResult {
    return (segments.length === 0 ? undefined : lookupProperty(this.pluginProperties, segments)) ?? { status: WasmResult.NotFound };
  }

  setProperty(): number {
    return WasmResult.NotFound;
  }

  setEnvoyFilterState(): number {
    return WasmResult.NotFound;
  }

  buffer(type: number): HostBuffer | undefined {
    if (type === BufferType.VmConfiguration) return new ConstBuffer(this.vmConfiguration);
    if (type === BufferType.PluginConfiguration && this.configuring) {
      return new ConstBuffer(this.pluginConfiguration);
    }
    if (type === BufferType.HttpCallResponseBody && this.httpResponse !== undefined) {
      return new ConstBuffer(this.httpResponse.body);
    }
    return undefined;
  }

  continueStream(type: number): number {
    if (type === StreamType.Upstream) return WasmResult.Unimplemented;
    return type <= StreamType.Downstream ? WasmResult.Ok : WasmResult.BadArgument;
  }

  closeStream(type: number): number {
    return type <= StreamType.Upstream ? WasmResult.Ok : WasmResult.BadArgument;
  }

  /** Envoy's startShutdown for this plugin: on_done, then on_delete unless the guest defers. */
  shutdown(): void {
    if (this.deleted || this.pendingDone) return;
    const done = this.vm.call(this, "proxy_on_done", this.id);
    if (done === 0 && !this.vm.failed) {
      this.pendingDone = true;
      return;
    }
    this.delete();
  }

  /** proxy_done (or on_done returning true): on_delete and forget. */
  delete(): void {
    if (this.deleted) return;
    this.deleted = true;
    this.pendingDone = false;
    this.vm.call(this, "proxy_on_delete", this.id);
    this.onDeleted?.();
  }
}

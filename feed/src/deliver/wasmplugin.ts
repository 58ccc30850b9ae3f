// Delivery (b): Istio's WasmPlugin resource, the plugin configuration in spec.pluginConfig,
// applied with server-side apply (field manager "mesh-feed") through the API server. istiod
// turns it into the ECDS resource its sidecars load (named `wasmplugin/<ns>.<name>` up to
// 1.29, `trafficextension/<ns>.<name>~istio-translated-wasmplugin` from 1.30).
//
// Size: a Kubernetes object is one etcd value, and etcd refuses a request larger than its
// --max-request-bytes, 1.5 MiB (1,572,864 bytes) by default; the apiserver adds metadata and
// managedFields and (for custom resources) stores JSON. The feed refuses to send an object whose
// JSON exceeds MAX_OBJECT_BYTES (the limit less 64 KiB of headroom for what the server adds),
// with one error line and a counted push error; the previous WasmPlugin stays in force. At the
// snapshot sizes the feed renders (~200-250 B per pod) that is reached at roughly 6,000 pods:
// past it use the ECDS files or the HTTP endpoint.
import { KubernetesObjectApi, PatchStrategy, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import type { TargetConfig } from "../config.js";
import type { WasmPluginApplier } from "../controller.js";

export const ETCD_MAX_REQUEST_BYTES = 1_572_864;
export const MAX_OBJECT_BYTES = ETCD_MAX_REQUEST_BYTES - 64 * 1024;
export const FIELD_MANAGER = "mesh-feed";

export class TooLargeError extends Error {}

export function wasmPluginObject(target: TargetConfig, version: string, pluginConfig: Record<string, unknown>): KubernetesObject & { spec: Record<string, unknown> } {
  const w = target.wasmPlugin!;
  return {
    apiVersion: "extensions.istio.io/v1alpha1",
    kind: "WasmPlugin",
    metadata: { namespace: w.namespace, name: w.name, annotations: { "mesh-feed/version": version }, labels: { "app.kubernetes.io/managed-by": FIELD_MANAGER } },
    spec: { ...w.spec, pluginConfig },
  };
}

export class WasmPluginDelivery implements WasmPluginApplier {
  private readonly clients = new Map<string, KubernetesObjectApi>();

  constructor(kubeConfigs: Map<string, KubeConfig>, private readonly maxBytes = MAX_OBJECT_BYTES) {
    for (const [id, kc] of kubeConfigs) this.clients.set(id, KubernetesObjectApi.makeApiClient(kc));
  }

  async apply(target: TargetConfig, version: string, pluginConfig: Record<string, unknown>): Promise<void> {
    const w = target.wasmPlugin!;
    const object = wasmPluginObject(target, version, pluginConfig);
    const bytes = Buffer.byteLength(JSON.stringify(object));
    if (bytes > this.maxBytes) {
      throw new TooLargeError(
        `the WasmPlugin would be ${bytes} bytes, over ${this.maxBytes} (etcd's request limit ${ETCD_MAX_REQUEST_BYTES} less 64 KiB); refused, the applied one stays: deliver this target by ECDS file or HTTP`,
      );
    }
    const client = this.clients.get(w.cluster);
    if (!client) throw new Error(`no API server for cluster ${w.cluster}`);
    await client.patch(object, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  }
}

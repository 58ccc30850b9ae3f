// Delivery (b): Istio's WasmPlugin resource, the plugin configuration in spec.pluginConfig,
// through the API server. istiod turns it into the ECDS resource its sidecars load (named
// `wasmplugin/<ns>.<name>` up to 1.29, `trafficextension/<ns>.<name>~istio-translated-wasmplugin`
// from 1.30).
//
// Ownership (server-side apply): the feed owns only its own fields and forces only those:
// spec.pluginConfig, its version annotation and its managed-by label (field manager
// "mesh-feed"). The rest of the spec from the feed's configuration (url, sha256, selector,
// phase...) is applied under a second manager ("mesh-feed-spec") without force, once per
// process: it creates the object, and where an operator has since set one of those fields to
// another value (e.g. pinned a sha256 or moved the url) the API server reports a conflict, the
// operator's value stays, and the feed says so in one line and goes on delivering.
// Digest: the annotation mesh-feed/digest carries the sha256 of the pluginConfig as rendered, so
// that a replica that becomes the leader reads it and writes only when it differs (the API
// server re-serializes pluginConfig, so the stored JSON cannot be compared byte for byte).
// RBAC (deploy/rbac.yaml): get, patch and create on the WasmPlugins named in the configuration only
// (resourceNames). A create with resourceNames is authorized for server-side apply, whose
// request names the object; a plain create (POST) of any name stays refused.
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
export const SPEC_FIELD_MANAGER = "mesh-feed-spec";

/** The sha256 of the pluginConfig's JSON as rendered: a new leader compares it before writing. */
export const DIGEST_ANNOTATION = "mesh-feed/digest";

export class TooLargeError extends Error {}

type WasmPlugin = KubernetesObject & { spec: Record<string, unknown> };

function meta(target: TargetConfig): { namespace: string; name: string } {
  const w = target.wasmPlugin!;
  return { namespace: w.namespace, name: w.name };
}

/** The object as stored: the configured spec, pluginConfig and the feed's metadata (its size is what etcd sees). */
export function wasmPluginObject(target: TargetConfig, version: string, pluginConfig: Record<string, unknown>, digest?: string): WasmPlugin {
  const own = ownFields(target, version, pluginConfig, digest);
  return { ...own, spec: { ...target.wasmPlugin!.spec, pluginConfig } };
}

/** What the feed owns and forces: the plugin configuration, its version, its label. */
export function ownFields(target: TargetConfig, version: string, pluginConfig: Record<string, unknown>, digest?: string): WasmPlugin {
  return {
    apiVersion: "extensions.istio.io/v1alpha1",
    kind: "WasmPlugin",
    metadata: { ...meta(target), annotations: { "mesh-feed/version": version, ...(digest && { [DIGEST_ANNOTATION]: digest }) }, labels: { "app.kubernetes.io/managed-by": FIELD_MANAGER } },
    spec: { pluginConfig },
  };
}

/** The configured rest of the spec, applied without force (an operator's value wins). */
export function specFields(target: TargetConfig): WasmPlugin {
  return { apiVersion: "extensions.istio.io/v1alpha1", kind: "WasmPlugin", metadata: meta(target), spec: { ...target.wasmPlugin!.spec } };
}

export class WasmPluginDelivery implements WasmPluginApplier {
  private readonly clients = new Map<string, KubernetesObjectApi>();
  /** Targets whose configured spec was applied (or found conflicting) in this process. */
  private readonly specDone = new Set<string>();

  constructor(
    kubeConfigs: Map<string, KubeConfig>,
    private readonly maxBytes = MAX_OBJECT_BYTES,
    private readonly log: (message: string) => void = () => {},
  ) {
    for (const [id, kc] of kubeConfigs) this.clients.set(id, KubernetesObjectApi.makeApiClient(kc));
  }

  /** The digest annotation of the stored WasmPlugin (undefined: absent, or none). */
  async landedDigest(target: TargetConfig): Promise<string | undefined> {
    const w = target.wasmPlugin!;
    const client = this.clients.get(w.cluster);
    if (!client) throw new Error(`no API server for cluster ${w.cluster}`);
    try {
      const stored = await client.read({ apiVersion: "extensions.istio.io/v1alpha1", kind: "WasmPlugin", metadata: meta(target) });
      return stored.metadata?.annotations?.[DIGEST_ANNOTATION];
    } catch (error) {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    }
  }

  async apply(target: TargetConfig, version: string, pluginConfig: Record<string, unknown>, _bytes?: number, digest?: string): Promise<void> {
    const w = target.wasmPlugin!;
    const bytes = Buffer.byteLength(JSON.stringify(wasmPluginObject(target, version, pluginConfig, digest)));
    if (bytes > this.maxBytes) {
      throw new TooLargeError(
        `the WasmPlugin would be ${bytes} bytes, over ${this.maxBytes} (etcd's request limit ${ETCD_MAX_REQUEST_BYTES} less 64 KiB); refused, the applied one stays: deliver this target by ECDS file or HTTP`,
      );
    }
    const client = this.clients.get(w.cluster);
    if (!client) throw new Error(`no API server for cluster ${w.cluster}`);
    // The configured spec first: it creates the object with its url before pluginConfig lands.
    const key = `${w.cluster}/${w.namespace}/${w.name}`;
    if (!this.specDone.has(key)) {
      try {
        await client.patch(specFields(target), undefined, undefined, SPEC_FIELD_MANAGER, false, PatchStrategy.ServerSideApply);
      } catch (error) {
        if ((error as { code?: number }).code !== 409) throw error;
        this.log(`target ${target.name}: WasmPlugin ${w.namespace}/${w.name}: a field of the configured spec was set to another value by someone else; theirs is kept (${conflictText(error)})`);
      }
      this.specDone.add(key);
    }
    await client.patch(ownFields(target, version, pluginConfig, digest), undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  }
}

/** The API server's conflict message (it names each field and its manager), on one line. */
function conflictText(error: unknown): string {
  const body = (error as { body?: unknown }).body;
  let text = typeof body === "string" ? body : JSON.stringify(body ?? (error as Error).message);
  try {
    text = (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {
    // not JSON: the text as it is
  }
  return text.replace(/\s+/g, " ").slice(0, 500);
}

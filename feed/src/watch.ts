// Reads one API server with @kubernetes/client-node's informers (list, then watch from the
// list's resourceVersion; relist on 410 Gone) for every kind the model needs, and keeps a
// ClusterObjects up to date. A watch that fails is restarted after a back-off; until then the
// objects last seen stay (istiod keeps its caches the same way). The Gateway API kinds are
// optional: a cluster without their CRDs has no Gateways (istiod also runs without them), and
// the feed keeps retrying so that installing them later is noticed.
import {
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  makeInformer,
  type Informer,
  type KubernetesListObject,
  type KubernetesObject,
} from "@kubernetes/client-node";
import type { ClusterObjects, Kind } from "./cluster_objects.js";
import type { Logger } from "./controller.js";

export interface WatchHooks {
  changed(clusterId: string): void;
  synced(clusterId: string): void;
  /** A list or watch of `kind` failed (metrics: the cluster is not synced until it is back). */
  watchFailed?(clusterId: string, kind: Kind): void;
  /** A watch of `kind` that failed is established again. */
  watchRecovered?(clusterId: string, kind: Kind): void;
  log: Logger;
}

interface KindSource {
  kind: Kind;
  path: string;
  list: () => Promise<KubernetesListObject<KubernetesObject>>;
  optional: boolean;
}

export function loadKubeConfig(path: string): KubeConfig {
  const kc = new KubeConfig();
  if (path === "in-cluster") kc.loadFromCluster();
  else kc.loadFromFile(path);
  return kc;
}

function sources(kc: KubeConfig): KindSource[] {
  const core = kc.makeApiClient(CoreV1Api);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const gatewayApi = (plural: string) => () =>
    custom.listClusterCustomObject({ group: "gateway.networking.k8s.io", version: "v1", plural }) as Promise<KubernetesListObject<KubernetesObject>>;
  return [
    { kind: "namespaces", path: "/api/v1/namespaces", list: () => core.listNamespace(), optional: false },
    { kind: "nodes", path: "/api/v1/nodes", list: () => core.listNode(), optional: false },
    { kind: "pods", path: "/api/v1/pods", list: () => core.listPodForAllNamespaces(), optional: false },
    { kind: "services", path: "/api/v1/services", list: () => core.listServiceForAllNamespaces(), optional: false },
    { kind: "endpointSlices", path: "/apis/discovery.k8s.io/v1/endpointslices", list: () => discovery.listEndpointSliceForAllNamespaces(), optional: false },
    { kind: "gatewayClasses", path: "/apis/gateway.networking.k8s.io/v1/gatewayclasses", list: gatewayApi("gatewayclasses"), optional: true },
    { kind: "gateways", path: "/apis/gateway.networking.k8s.io/v1/gateways", list: gatewayApi("gateways"), optional: true },
  ];
}

/**
 * Drops what the model never reads from an object the informer just delivered (the informer's
 * own cache holds the same object, and only compares resourceVersions): managedFields on every
 * kind, and a pod's containers, volumes and most of its status. Measured: a pod as listed costs
 * ~10 KB of heap; most of it is these fields.
 */
export function slim(kind: Kind, o: KubernetesObject): void {
  const meta = o.metadata as { managedFields?: unknown; ownerReferences?: unknown } | undefined;
  if (meta) {
    delete meta.managedFields;
    delete meta.ownerReferences;
  }
  if (kind !== "pods") return;
  const pod = o as { spec?: Record<string, unknown>; status?: Record<string, unknown> };
  if (pod.spec) pod.spec = { serviceAccountName: pod.spec.serviceAccountName, nodeName: pod.spec.nodeName, hostNetwork: pod.spec.hostNetwork };
  if (pod.status) {
    const conditions = (pod.status.conditions as Array<{ type?: string; status?: string }> | undefined)?.filter((c) => c.type === "Ready").map((c) => ({ type: c.type, status: c.status }));
    pod.status = { phase: pod.status.phase, podIP: pod.status.podIP, podIPs: pod.status.podIPs, conditions };
  }
}

function statusOf(error: unknown): number | undefined {
  const e = error as { code?: number; statusCode?: number };
  return e?.code ?? e?.statusCode;
}

export class ClusterWatch {
  private readonly informers: Array<Informer<KubernetesObject>> = [];
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    readonly objects: ClusterObjects,
    private readonly kc: KubeConfig,
    private readonly hooks: WatchHooks,
    private readonly retryMs = 1000,
  ) {}

  /** Lists every kind (the initial sync), then keeps watching. Resolves once all lists are in. */
  async start(): Promise<void> {
    const id = this.objects.clusterId;
    await Promise.all(sources(this.kc).map((s) => this.startKind(s)));
    // Stopped before its lists were in (removed, or replaced by new credentials): not synced.
    if (this.stopped) return;
    this.hooks.log("info", `cluster ${id}: initial lists in (${JSON.stringify(this.objects.count())})`);
    this.hooks.synced(id);
  }

  private async startKind(s: KindSource): Promise<void> {
    const id = this.objects.clusterId;
    const informer = makeInformer(this.kc, s.path, s.list);
    this.informers.push(informer);
    const changed = () => this.hooks.changed(id);
    informer.on("add", (o) => {
      slim(s.kind, o);
      this.objects.upsert(s.kind, o);
      changed();
    });
    informer.on("update", (o) => {
      slim(s.kind, o);
      this.objects.upsert(s.kind, o);
      changed();
    });
    informer.on("delete", (o) => {
      this.objects.remove(s.kind, o);
      changed();
    });
    // The informer reports a failed list or watch here and stops; it is restarted after a
    // back-off (a missing optional CRD quietly, and less often).
    let missing = false;
    // An unreachable cluster fails every retry: the same failure is logged once a minute, with
    // the number of repeats not logged, not once a second per kind.
    let last = { text: "", at: 0, repeats: 0 };
    let errors = 0;
    // The informer reports a failure synchronously, before start() resolves: a start() that
    // resolves with no new error has its watch established.
    const restart = () => {
      const before = errors;
      void informer.start().then(
        () => {
          if (errors === before && !this.stopped) this.hooks.watchRecovered?.(id, s.kind);
        },
        () => undefined,
      );
    };
    informer.on("error", (error) => {
      if (this.stopped) return;
      errors++;
      const code = statusOf(error);
      missing = s.optional && code === 404;
      const text = `watch of ${s.path} failed (${code ?? (error as Error)?.message ?? error})`;
      const now = Date.now();
      if (missing) {
        // a missing optional CRD: quiet
      } else if (text !== last.text || now - last.at >= 60_000) {
        const repeats = text === last.text && last.repeats > 0 ? ` (${last.repeats} more since the last line)` : "";
        this.hooks.log("warn", `cluster ${id}: ${text}${repeats}; retrying every ${this.retryMs} ms, last objects kept`);
        last = { text, at: now, repeats: 0 };
      } else last.repeats++;
      if (!missing) this.hooks.watchFailed?.(id, s.kind);
      this.later(restart, missing ? 10 * this.retryMs : this.retryMs);
    });
    await informer.start();
    // Synced once a list went through (it leaves a resourceVersion), or the kind does not exist.
    while (!this.stopped && (informer as unknown as { latestResourceVersion(): string }).latestResourceVersion() === "" && !missing) await new Promise((r) => setTimeout(r, 50));
  }

  private later(fn: () => void, ms = this.retryMs): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.stopped) fn();
    }, ms);
    this.timers.add(t);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    await Promise.all(this.informers.map((i) => i.stop().catch(() => undefined)));
  }
}

// Reads one API server with @kubernetes/client-node's informers (list, then watch from the
// list's resourceVersion; relist on 410 Gone) for every kind the model needs, and keeps a
// ClusterObjects up to date. Lists are read in pages and every object is stripped to what the
// model reads as it arrives (strip.ts), before the informer's cache or ClusterObjects keep it. A watch that fails is restarted after a back-off; until then the
// objects last seen stay (istiod keeps its caches the same way). The Gateway API kinds are
// optional: a cluster without their CRDs has no Gateways (istiod also runs without them), and
// the feed keeps retrying so that installing them later is noticed.
import {
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  ListWatch,
  Watch,
  type Informer,
  type KubernetesListObject,
  type KubernetesObject,
} from "@kubernetes/client-node";
import type { ClusterObjects, Kind } from "./cluster_objects.js";
import type { Logger } from "./controller.js";
import { stripObject } from "./strip.js";

/**
 * Objects per list request. The initial list is read in pages (as client-go's reflector does,
 * with the same size) so that only one page of full objects is ever in memory: at 100k pods one
 * unpaged list is hundreds of MB of JSON and more once parsed, a peak the process then keeps.
 */
export const LIST_PAGE = 500;

type Page = KubernetesListObject<KubernetesObject>;

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
  /** One page of the list: at most `limit` objects, from `cont` (a continue token) on. */
  page: (limit: number, cont: string | undefined) => Promise<Page>;
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
  const gatewayApi = (plural: string) => (limit: number, cont: string | undefined) =>
    custom.listClusterCustomObject({ group: "gateway.networking.k8s.io", version: "v1", plural, limit, _continue: cont }) as Promise<Page>;
  return [
    { kind: "namespaces", path: "/api/v1/namespaces", page: (limit, cont) => core.listNamespace({ limit, _continue: cont }), optional: false },
    { kind: "nodes", path: "/api/v1/nodes", page: (limit, cont) => core.listNode({ limit, _continue: cont }), optional: false },
    { kind: "pods", path: "/api/v1/pods", page: (limit, cont) => core.listPodForAllNamespaces({ limit, _continue: cont }), optional: false },
    { kind: "services", path: "/api/v1/services", page: (limit, cont) => core.listServiceForAllNamespaces({ limit, _continue: cont }), optional: false },
    { kind: "endpointSlices", path: "/apis/discovery.k8s.io/v1/endpointslices", page: (limit, cont) => discovery.listEndpointSliceForAllNamespaces({ limit, _continue: cont }), optional: false },
    { kind: "gatewayClasses", path: "/apis/gateway.networking.k8s.io/v1/gatewayclasses", page: gatewayApi("gatewayclasses"), optional: true },
    { kind: "gateways", path: "/apis/gateway.networking.k8s.io/v1/gateways", page: gatewayApi("gateways"), optional: true },
  ];
}

/**
 * The whole list, page by page, each object stripped (strip.ts) as its page arrives. Every page
 * of one list is read at the list's resourceVersion, so a watch from it misses nothing; an
 * expired continue token fails the list and the informer lists again from the start.
 */
export async function strippedList(kind: Kind, page: KindSource["page"], pageSize = LIST_PAGE): Promise<Page> {
  const items: KubernetesObject[] = [];
  let cont: string | undefined;
  let resourceVersion = "";
  do {
    const p = await page(pageSize, cont);
    for (const o of p.items ?? []) items.push(stripObject(kind, o) as KubernetesObject);
    resourceVersion = p.metadata?.resourceVersion ?? resourceVersion;
    cont = p.metadata?._continue || undefined;
  } while (cont);
  return { metadata: { resourceVersion }, items };
}

/**
 * The library's watch with every delivered object stripped before the informer sees it (a
 * transform, as client-go's SetTransform): the informer's own cache, which keeps each object to
 * compare resourceVersions and to diff a relist, then holds the same small object
 * ClusterObjects keeps.
 */
class StrippingWatch {
  constructor(
    private readonly inner: Watch,
    private readonly kind: Kind,
  ) {}

  watch(path: string, params: Record<string, string | number | boolean | undefined>, callback: (phase: string, object: unknown) => void, done: (error: unknown) => void): Promise<AbortController> {
    return this.inner.watch(path, params, (phase: string, object: unknown) => {
      const objectEvent = phase === "ADDED" || phase === "MODIFIED" || phase === "DELETED";
      callback(phase, objectEvent && object !== null && typeof object === "object" ? stripObject(this.kind, object) : object);
    }, done);
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
    const watch = new StrippingWatch(new Watch(this.kc), s.kind) as unknown as Watch;
    const informer: Informer<KubernetesObject> = new ListWatch(s.path, watch, () => strippedList(s.kind, s.page), false);
    this.informers.push(informer);
    const changed = () => this.hooks.changed(id);
    // Objects arrive stripped (strippedList, StrippingWatch).
    informer.on("add", (o) => {
      this.objects.upsert(s.kind, o);
      changed();
    });
    informer.on("update", (o) => {
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
      // A missing optional CRD is no failure (no Gateways, as at start), also when it went
      // missing after a failure of another kind (an API server out of reach, then back).
      if (!missing) this.hooks.watchFailed?.(id, s.kind);
      else this.hooks.watchRecovered?.(id, s.kind);
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

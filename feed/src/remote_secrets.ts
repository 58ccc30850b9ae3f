// Istio's remote secrets as clusters of the feed, at run time. `istioctl create-remote-secret`
// writes, in the namespace of the control plane that should read a remote cluster, a Secret
// labelled `istio/multiCluster: "true"` whose every data key is a cluster id and whose value is
// a kubeconfig for that cluster's API server (annotation `networking.istio.io/cluster` names the
// cluster too; istiod reads only the keys, and so does the feed). The feed watches such Secrets
// in one namespace (`remoteSecrets`) with the official client's informer and follows istiod's
// secret controller (pkg/kube/multicluster/secretcontroller.go):
//   - a key whose cluster id is one of the configuration's clusters is ignored (istiod ignores
//     its own config cluster: a secret must not replace the feed's own credentials);
//   - a cluster id already registered by another Secret is ignored (the first one keeps it);
//   - a kubeconfig that could make the feed read local files or run programs is refused, as
//     istiod's sanitizeKubeConfig does by default: `exec`, an `auth-provider` other than `oidc`,
//     `client-certificate`, `client-key`, `tokenFile` and `token-file` paths (the *-data fields
//     are fine); the client is built from the document as checked (remoteKubeConfig);
//   - a changed kubeconfig (a rotated token or certificate) restarts the cluster's informers
//     with the new credentials (cluster_set.ts: the old ones serve until the new lists are in);
//     an identical one changes nothing;
//   - a key removed from its Secret, or the Secret deleted, removes the cluster.
// A refused key is one line naming the Secret and the key, counted in
// feed_remote_secret_refused_total{reason}; what was in force for that cluster stays.
import { createHash } from "node:crypto";
import { CoreV1Api, KubeConfig, makeInformer, type Informer, type V1Secret } from "@kubernetes/client-node";
import { parse } from "yaml";
import type { ClusterSet } from "./cluster_set.js";
import type { Logger } from "./controller.js";
import type { Metrics } from "./metrics.js";

export const MULTICLUSTER_LABEL = "istio/multiCluster";
const REFUSED = "feed_remote_secret_refused_total";

/** Why a kubeconfig from a Secret may not be used, or "" (istiod's NewUntrustedRestConfig rules). */
export function kubeconfigProblem(text: string): string {
  if (text.trim() === "") return "kubeconfig is empty";
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (error) {
    return `kubeconfig cannot be loaded: ${(error as Error).message.split("\n")[0]}`;
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return "kubeconfig cannot be loaded: not a mapping";
  const d = doc as Record<string, unknown>;
  const named = (list: unknown, field: string) =>
    new Map((Array.isArray(list) ? list : []).flatMap((e) => (typeof e === "object" && e !== null && typeof (e as Record<string, unknown>).name === "string" ? [[(e as Record<string, string>).name, (e as Record<string, unknown>)[field]] as const] : [])));
  const users = named(d.users, "user");
  for (const [name, u] of users) {
    if (typeof u !== "object" || u === null) continue;
    const user = u as Record<string, unknown>;
    const provider = user["auth-provider"] as { name?: unknown } | undefined;
    if (provider && provider.name !== "oidc") return `user ${JSON.stringify(name)}: auth provider ${JSON.stringify(provider.name)} is not allowed`;
    if (user.exec !== undefined && user.exec !== null) return `user ${JSON.stringify(name)}: exec is not allowed`;
    // client-node reads `token-file` while it loads the kubeconfig, the others when it connects.
    for (const field of ["client-certificate", "client-key", "tokenFile", "token-file"]) {
      if (typeof user[field] === "string" && user[field] !== "") return `user ${JSON.stringify(name)}: ${field} is not allowed (a local file; use the -data field)`;
    }
  }
  const contexts = named(d.contexts, "context");
  const current = d["current-context"];
  if (typeof current !== "string" || current === "") return "kubeconfig is not valid: no current-context";
  const context = contexts.get(current) as { cluster?: unknown } | undefined;
  if (!context) return `kubeconfig is not valid: context ${JSON.stringify(current)} not found`;
  const cluster = named(d.clusters, "cluster").get(String(context.cluster)) as { server?: unknown } | undefined;
  if (!cluster || typeof cluster.server !== "string" || cluster.server === "") return `kubeconfig is not valid: context ${JSON.stringify(current)} names no cluster with a server`;
  return "";
}

/**
 * The client for a remote secret's kubeconfig, built from exactly what kubeconfigProblem
 * checked: the client library parses YAML with another parser (js-yaml, which applies `<<`
 * merge keys that the check's YAML 1.2 parser leaves as a plain key), so it is given the
 * checked document as JSON, which both read the same way. Throws the problem, if any.
 */
export function remoteKubeConfig(text: string): KubeConfig {
  const problem = kubeconfigProblem(text);
  if (problem) throw new Error(problem);
  const kc = new KubeConfig();
  kc.loadFromString(JSON.stringify(parse(text)));
  return kc;
}

export function fingerprint(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** The clusters one Secret names: data key → kubeconfig text. */
export function kubeconfigsOf(secret: V1Secret): Map<string, string> {
  return new Map(Object.entries(secret.data ?? {}).map(([key, value]) => [key, Buffer.from(value, "base64").toString("utf8")]));
}

export class RemoteSecretWatch {
  private readonly informer: Informer<V1Secret>;
  /** The cluster ids each Secret (namespace/name) registered. */
  private readonly bySecret = new Map<string, Set<string>>();
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    kc: KubeConfig,
    readonly namespace: string,
    private readonly clusters: ClusterSet,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly retryMs = 1000,
  ) {
    metrics.declare(REFUSED, "counter", "remote secret keys not used, by reason (config_cluster, duplicate, kubeconfig); what was in force for that cluster stays");
    const core = kc.makeApiClient(CoreV1Api);
    const path = `/api/v1/namespaces/${namespace}/secrets`;
    const selector = `${MULTICLUSTER_LABEL}=true`;
    this.informer = makeInformer(kc, path, () => core.listNamespacedSecret({ namespace, labelSelector: selector }), selector);
    this.informer.on("add", (s) => this.apply(s));
    this.informer.on("update", (s) => this.apply(s));
    this.informer.on("delete", (s) => this.forget(keyOf(s)));
    this.informer.on("error", (error) => {
      if (this.stopped) return;
      const e = error as { code?: number; statusCode?: number; message?: string };
      this.log("warn", `remote secrets in ${namespace}: watch failed (${e?.code ?? e?.statusCode ?? e?.message ?? error}); retrying in ${this.retryMs} ms, clusters kept`);
      this.timer = setTimeout(() => void this.informer.start().catch(() => undefined), this.retryMs);
      this.timer.unref();
    });
  }

  /** Lists the Secrets (their clusters are added), then follows them. Resolves after the first list. */
  async start(): Promise<void> {
    await this.informer.start();
    while (!this.stopped && (this.informer as unknown as { latestResourceVersion(): string }).latestResourceVersion() === "") await new Promise((r) => setTimeout(r, 50));
    this.log("info", `remote secrets in ${this.namespace}: ${this.bySecret.size} secret(s), clusters ${[...this.bySecret.values()].flatMap((s) => [...s]).join(", ") || "none"}`);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.informer.stop().catch(() => undefined);
  }

  private refuse(reason: string, message: string): void {
    this.metrics.add(REFUSED, { reason });
    this.log("error", message);
  }

  private apply(secret: V1Secret): void {
    if (this.stopped) return;
    const key = keyOf(secret);
    const origin = `secret ${key}`;
    const data = kubeconfigsOf(secret);
    const before = this.bySecret.get(key) ?? new Set<string>();
    const now = new Set<string>();
    for (const id of before) if (!data.has(id)) this.clusters.remove(id);
    for (const [id, text] of data) {
      const owner = this.clusters.originOf(id);
      if (owner === "config") {
        this.refuse("config_cluster", `remote secret ${key}: data.${id}: ignored: cluster ${id} is one of the configuration's clusters`);
        continue;
      }
      if (owner !== undefined && owner !== origin) {
        this.refuse("duplicate", `remote secret ${key}: data.${id}: ignored: cluster ${id} is already registered by ${owner}`);
        continue;
      }
      const kept = owner === origin ? "the cluster keeps its previous credentials" : "cluster not added";
      if (owner === origin) now.add(id);
      let kc: KubeConfig;
      try {
        kc = remoteKubeConfig(text);
      } catch (error) {
        this.refuse("kubeconfig", `remote secret ${key}: data.${id}: ${(error as Error).message}; ${kept}`);
        continue;
      }
      const source = { kind: "kube" as const, kubeConfig: kc, fingerprint: fingerprint(text) };
      if (owner === origin) this.clusters.update(id, source);
      else this.clusters.add(id, origin, source);
      now.add(id);
    }
    this.bySecret.set(key, now);
  }

  private forget(key: string): void {
    for (const id of this.bySecret.get(key) ?? []) if (this.clusters.originOf(id) === `secret ${key}`) this.clusters.remove(id);
    this.bySecret.delete(key);
  }
}

function keyOf(s: V1Secret): string {
  return `${s.metadata?.namespace ?? ""}/${s.metadata?.name ?? ""}`;
}

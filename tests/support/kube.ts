// A real Kubernetes control plane for tests: etcd + kube-apiserver (and, on request,
// kube-controller-manager with chosen controllers) on loopback, started per test file, with its
// own PKI, data directory and kubeconfig, always stopped (even if the test process dies: see
// tests/kube/harness/process.ts). Several clusters can run at once (multi-cluster tests).
// Binaries come from scripts/kube-setup.sh (`npm run setup:kube`); missing ones fail the test.
//
//   const cluster = await startKubeCluster({ name: "west" });
//   after(() => cluster.stop());
//   await cluster.createPod({ namespace: "default", name: "a", labels: { app: "a" } });
//   await cluster.setPodStatus("default", "a", { podIP: "10.1.0.5" });
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import {
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubernetesObject,
  type V1CustomResourceDefinition,
  type V1EndpointSlice,
  type V1Namespace,
  type V1Node,
  type V1Pod,
  type V1Service,
} from "@kubernetes/client-node";
import { parseAllDocuments, stringify } from "yaml";
import { RawApplyApi } from "../kube/harness/apply.js";
import { DEFAULT_CRDS, selectCrds } from "../kube/harness/crds.js";
import {
  endpointSliceObject,
  namespaceObject,
  nodeObject,
  podObject,
  podStatus,
  serviceObject,
  type EndpointSliceInput,
  type NamespaceInput,
  type NodeInput,
  type PodInput,
  type PodStatusInput,
  type ServiceInput,
} from "../kube/harness/objects.js";
import { createClusterPki, type ClientCredentials, type ClusterPki } from "../kube/harness/pki.js";
import { sleep, startApiserver, startControllerManager, startEtcd } from "../kube/harness/control_plane.js";
import type { GuardedProcess } from "../kube/harness/process.js";
import { REPO_ROOT } from "./paths.js";

export * from "../kube/harness/objects.js";
export { DEFAULT_CRDS } from "../kube/harness/crds.js";

export const KUBE_BIN_DIR = resolve(REPO_ROOT, ".cache/kube/bin");
export const KUBE_CRD_DIR = resolve(REPO_ROOT, ".cache/kube/crds");
/** The field manager of every write the harness makes. */
export const HARNESS_FIELD_MANAGER = "kube-harness";
export { SERVICE_CIDR } from "../kube/harness/control_plane.js";

export interface KubeBinaries {
  etcd: string;
  apiserver: string;
  controllerManager: string;
}

/** Paths of the cached binaries; throws (never skips) naming the setup step when one is missing. */
export function requireKubeBinaries(options: { controllerManager?: boolean; binDir?: string } = {}): KubeBinaries {
  const binDir = options.binDir ?? KUBE_BIN_DIR;
  const binaries = {
    etcd: join(binDir, "etcd"),
    apiserver: join(binDir, "kube-apiserver"),
    controllerManager: join(binDir, "kube-controller-manager"),
  };
  const needed = options.controllerManager ? Object.values(binaries) : [binaries.etcd, binaries.apiserver];
  const missing = needed.filter((path) => !existsSync(path));
  if (missing.length > 0) {
    throw new Error(`kube harness: missing ${missing.join(", ")}: run \`npm run setup:kube\` (npm test does it; cold build ~15 min)`);
  }
  return binaries;
}

/**
 * Whether `npm run setup:kube` has finished here: etcd, kube-apiserver and the versions stamp
 * scripts/kube-setup.sh writes last (for callers that run the API server only when it is built,
 * e.g. the demo; tests use requireKubeBinaries and fail instead).
 */
export function kubeBinariesReady(binDir = KUBE_BIN_DIR): boolean {
  return ["etcd", "kube-apiserver", "versions"].every((f) => existsSync(join(binDir, f)));
}

export interface KubeClusterOptions {
  /** Short name for the work directory, the kubeconfig context and messages. Default "kube". */
  name?: string;
  /** CRDs to install, by `<plural>.<group>`. Default DEFAULT_CRDS. */
  crds?: readonly string[];
  /**
   * kube-controller-manager controllers to run, e.g. ["endpointslice-controller",
   * "namespace-controller", "garbage-collector-controller"] (`kube-controller-manager --help`
   * lists them). Default none: no controller-manager at all.
   */
  controllers?: readonly string[];
  /** Extra kube-apiserver flags (e.g. "--max-requests-inflight=800"). */
  apiserverArgs?: readonly string[];
  /** etcd --max-request-bytes. Default etcd's own (1.5 MiB), the limit a real cluster has. */
  etcdMaxRequestBytes?: number;
  /** Default 90 s (the machine is shared and loaded; it is normally ready in 3-6 s). */
  readyTimeoutMs?: number;
}

export interface KubeconfigFile {
  path: string;
  kubeConfig: KubeConfig;
}

function kubeconfigYaml(context: string, server: string, ca: string, user: ClientCredentials | { token: string }): string {
  const userEntry =
    "token" in user
      ? { token: user.token }
      : { "client-certificate-data": Buffer.from(user.cert).toString("base64"), "client-key-data": Buffer.from(user.key).toString("base64") };
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: context, cluster: { server, "certificate-authority-data": Buffer.from(ca).toString("base64") } }],
    users: [{ name: context, user: userEntry }],
    contexts: [{ name: context, context: { cluster: context, user: context } }],
    "current-context": context,
  });
}

function loadKubeconfig(path: string, text: string): KubeconfigFile {
  writeFileSync(path, text, { mode: 0o600 });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(text);
  return { path, kubeConfig };
}

const OWNER_FILE = "owner.pid";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * A killed test process cannot remove its cluster directory (its processes die with it, see
 * harness/process.ts); the next start removes directories whose owner is gone, so etcd data does
 * not pile up in .tmp/. Directories of live owners (parallel test files) are left alone.
 */
function removeAbandonedDirs(base: string): void {
  for (const entry of readdirSync(base)) {
    if (!entry.startsWith("kube-")) continue;
    const dir = join(base, entry);
    let owner: number;
    try {
      owner = Number(readFileSync(join(dir, OWNER_FILE), "utf8"));
    } catch {
      continue;
    }
    if (Number.isInteger(owner) && owner > 0 && !alive(owner)) rmSync(dir, { recursive: true, force: true });
  }
}

export class KubeCluster {
  readonly core: CoreV1Api;
  readonly discovery: DiscoveryV1Api;
  readonly rbac: RbacAuthorizationV1Api;
  readonly custom: CustomObjectsApi;
  readonly objects: KubernetesObjectApi;
  private readonly rawApply: RawApplyApi;
  private stopped = false;

  private constructor(
    /** As given in the options; also the kubeconfig context name. */
    readonly name: string,
    /** Work directory under .tmp/ (PKI, etcd data, logs, kubeconfigs). */
    readonly dir: string,
    /** https://127.0.0.1:<port> */
    readonly server: string,
    /** cluster-admin (system:masters) kubeconfig file. */
    readonly kubeconfigPath: string,
    readonly kubeConfig: KubeConfig,
    private readonly pki: ClusterPki,
    private readonly processes: GuardedProcess[],
  ) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.discovery = kubeConfig.makeApiClient(DiscoveryV1Api);
    this.rbac = kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.objects = KubernetesObjectApi.makeApiClient(kubeConfig);
    this.rawApply = RawApplyApi.forConfig(kubeConfig);
  }

  static async start(options: KubeClusterOptions = {}): Promise<KubeCluster> {
    const binaries = requireKubeBinaries({ controllerManager: (options.controllers?.length ?? 0) > 0 });
    const name = options.name ?? "kube";
    if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`kube harness: cluster name '${name}' must be lowercase letters, digits and '-'`);
    const base = join(REPO_ROOT, ".tmp");
    mkdirSync(base, { recursive: true });
    removeAbandonedDirs(base);
    const dir = mkdtempSync(join(base, `kube-${name}-`));
    writeFileSync(join(dir, OWNER_FILE), String(process.pid));
    const pki = await createClusterPki(dir, name);
    const admin = await pki.client("kube-harness-admin", ["system:masters"]);
    const readyTimeoutMs = options.readyTimeoutMs ?? 90_000;
    const processes: GuardedProcess[] = [];
    const stopAll = async () => {
      for (const child of [...processes].reverse()) await child.stop();
    };
    try {
      const etcd = await startEtcd(binaries.etcd, dir, { maxRequestBytes: options.etcdMaxRequestBytes }, readyTimeoutMs);
      processes.push(etcd.process);
      const { process: apiserver, port } = await startApiserver(binaries.apiserver, dir, pki, admin, etcd.url, options.apiserverArgs ?? [], readyTimeoutMs);
      processes.push(apiserver);
      const server = `https://127.0.0.1:${port}`;
      const adminConfig = loadKubeconfig(join(dir, "admin.kubeconfig"), kubeconfigYaml(name, server, pki.ca, admin));
      const cluster = new KubeCluster(name, dir, server, adminConfig.path, adminConfig.kubeConfig, pki, processes);
      await cluster.installCrds(options.crds ?? DEFAULT_CRDS, readyTimeoutMs);
      if (options.controllers && options.controllers.length > 0) {
        processes.push(await startControllerManager(binaries.controllerManager, dir, adminConfig.path, pki, options.controllers, readyTimeoutMs));
      }
      return cluster;
    } catch (error) {
      await stopAll();
      throw error;
    }
  }

  /** Stops every process this cluster started and removes its directory (KUBE_HARNESS_KEEP=1 keeps it). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const child of [...this.processes].reverse()) await child.stop();
    if (process.env.KUBE_HARNESS_KEEP !== "1") rmSync(this.dir, { recursive: true, force: true });
  }

  /** Log file of "etcd", "kube-apiserver" or "kube-controller-manager". */
  logPath(component: string): string {
    return join(this.dir, `${component}.log`);
  }

  // ---- generic writes -------------------------------------------------------------------

  /**
   * Server-side apply (create or update) of any object, typed or custom, sent exactly as given
   * (see harness/apply.ts for why not objects.patch); returns what the server stored.
   */
  apply<T extends KubernetesObject>(object: T): Promise<T> {
    return this.rawApply.apply(object, HARNESS_FIELD_MANAGER);
  }

  /** Applies every document of a YAML text (e.g. a manifest file) in order. */
  async applyYaml(text: string): Promise<KubernetesObject[]> {
    const applied: KubernetesObject[] = [];
    for (const document of parseAllDocuments(text)) {
      const object = document.toJS() as KubernetesObject | null;
      if (object) applied.push(await this.apply(object));
    }
    return applied;
  }

  /** Deletes any object; a missing one is not an error. Default: immediately (grace period 0). */
  async delete(object: KubernetesObject, gracePeriodSeconds = 0): Promise<void> {
    try {
      await this.objects.delete(object, undefined, undefined, gracePeriodSeconds, undefined, "Background");
    } catch (error) {
      if ((error as { code?: number }).code !== 404) throw error;
    }
  }

  // ---- typed helpers --------------------------------------------------------------------

  createNamespace(input: NamespaceInput | string): Promise<V1Namespace> {
    return this.apply(namespaceObject(typeof input === "string" ? { name: input } : input));
  }

  /** A Node object with locality labels (and its InternalIP through the status subresource). */
  async createNode(input: NodeInput): Promise<V1Node> {
    const node = await this.apply(nodeObject(input));
    if (input.internalIP === undefined) return node;
    return this.core.patchNodeStatus(
      { name: input.name, body: { status: { addresses: [{ type: "InternalIP", address: input.internalIP }] } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  }

  /** A pod as the scheduler left it (Pending, no IP); give it a status with setPodStatus. */
  createPod(input: PodInput): Promise<V1Pod> {
    return this.apply(podObject(input));
  }

  /**
   * Writes the pod's status through the status subresource, as a kubelet would (default Running
   * and Ready). The whole status is replaced: conditions, IPs and phase.
   */
  setPodStatus(namespace: string, name: string, input: PodStatusInput): Promise<V1Pod> {
    return this.core.patchNamespacedPodStatus(
      { namespace, name, body: { status: podStatus(input) }, fieldManager: HARNESS_FIELD_MANAGER },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  }

  /**
   * Deletes a pod. Without a kubelet a graceful delete never finishes: the pod stays with a
   * deletionTimestamp (Terminating) until finishPodDeletion. Default: immediately.
   */
  async deletePod(namespace: string, name: string, options: { graceful?: boolean } = {}): Promise<void> {
    await this.delete({ apiVersion: "v1", kind: "Pod", metadata: { namespace, name } }, options.graceful ? 30 : 0);
  }

  /** The kubelet's half of a graceful delete: removes a Terminating pod. */
  finishPodDeletion(namespace: string, name: string): Promise<void> {
    return this.deletePod(namespace, name);
  }

  createService(input: ServiceInput): Promise<V1Service> {
    return this.apply(serviceObject(input));
  }

  /** An EndpointSlice as the endpointslice controller would write it (none runs unless asked for). */
  createEndpointSlice(input: EndpointSliceInput): Promise<V1EndpointSlice> {
    return this.apply(endpointSliceObject(input));
  }

  // ---- other identities -----------------------------------------------------------------

  /**
   * A kubeconfig that authenticates as ServiceAccount `namespace/name` with a real bound token
   * (TokenRequest; the ServiceAccount and namespace are created if missing). RBAC applies to it,
   * so a least-privilege ClusterRole can be tested exactly as deployed.
   */
  async serviceAccountKubeconfig(namespace: string, name: string, expirationSeconds = 3600): Promise<KubeconfigFile> {
    await this.createNamespace(namespace);
    await this.apply({ apiVersion: "v1", kind: "ServiceAccount", metadata: { namespace, name } });
    const response = await this.core.createNamespacedServiceAccountToken({
      namespace,
      name,
      body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences: [], expirationSeconds } },
    });
    const token = response.status?.token;
    if (!token) throw new Error(`kube harness: TokenRequest for ${namespace}/${name} returned no token`);
    return loadKubeconfig(join(this.dir, `sa-${namespace}-${name}.kubeconfig`), kubeconfigYaml(this.name, this.server, this.pki.ca, { token }));
  }

  /** A kubeconfig with a client certificate for `user` in `groups` (RBAC applies unless system:masters). */
  async userKubeconfig(user: string, groups: string[] = []): Promise<KubeconfigFile> {
    const credentials = await this.pki.client(user, groups);
    const file = user.replace(/[^A-Za-z0-9_.-]/g, "_");
    return loadKubeconfig(join(this.dir, `user-${file}.kubeconfig`), kubeconfigYaml(this.name, this.server, this.pki.ca, credentials));
  }

  // ---- CRDs -----------------------------------------------------------------------------

  /** Installs CRDs from the cached upstream YAML and waits until each is Established. */
  async installCrds(names: readonly string[], timeoutMs = 60_000): Promise<void> {
    const crds = selectCrds(KUBE_CRD_DIR, names);
    for (const crd of crds) await this.apply(crd);
    const deadline = Date.now() + timeoutMs;
    for (const crd of crds) {
      for (;;) {
        const stored = (await this.objects.read({ apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name: crd.metadata.name } })) as V1CustomResourceDefinition;
        if (stored.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
        if (Date.now() > deadline) throw new Error(`kube harness: CRD ${crd.metadata.name} not Established within ${timeoutMs} ms`);
        await sleep(100);
      }
    }
  }
}

/** Starts a cluster; see KubeClusterOptions. Call stop() (e.g. in `after`). */
export function startKubeCluster(options: KubeClusterOptions = {}): Promise<KubeCluster> {
  return KubeCluster.start(options);
}

/**
 * Starts several clusters at once (multi-cluster tests); if any fails, the others are stopped
 * before the first error is thrown.
 */
export async function startKubeClusters(options: readonly KubeClusterOptions[]): Promise<KubeCluster[]> {
  const results = await Promise.allSettled(options.map((one) => KubeCluster.start(one)));
  const failed = results.find((result): result is PromiseRejectedResult => result.status === "rejected");
  if (!failed) return results.map((result) => (result as PromiseFulfilledResult<KubeCluster>).value);
  await Promise.all(results.map((result) => (result.status === "fulfilled" ? result.value.stop() : undefined)));
  throw failed.reason;
}

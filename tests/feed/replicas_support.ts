// Several feed replicas as separate processes against one real API server (tests/support/kube.ts),
// the way the chart runs them: the shipped RBAC, each replica authenticated as the feed's
// ServiceAccount, the writers' Lease, one WasmPlugin target that every replica renders and only
// the leader writes (plus an ECDS file all replicas are configured with, as on a shared volume).
// Each replica reaches the API server through a TCP relay of its own, which a test can cut
// (a partition) and restore. Also: a recorder of every write the API server takes on the
// WasmPlugin (a watch) and of every ECDS file replacement (inotify), so that a test can show
// that nothing was written twice.
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readFileSync, watch, writeFileSync, type FSWatcher } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { basename, dirname, join } from "node:path";
import { Watch, type KubernetesObject } from "@kubernetes/client-node";
import { parse, parseDocument, stringify } from "yaml";
import { GuardedProcess } from "../kube/harness/process.js";
import type { KubeCluster } from "../support/kube.js";
import { channelGet, feedChannelFiles, SIDECAR_PRINCIPAL } from "../support/feed_tls.js";
import { freePort } from "../support/ports.js";
import { REPO_ROOT, scratchDir } from "../support/paths.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { decodeMessage, formatOf } from "./delta_wire_decode.js";
import { feedKubeconfig, sleep } from "./harness.js";

/** Short timings so that a failover fits a test; the chart uses istiod's 30 s / 15 s / 7.5 s. */
export const TIMING = { leaseDurationMs: 4000, renewDeadlineMs: 2500, retryPeriodMs: 500 };
export const PUSH = { retryInitialMs: 200, retryMaxMs: 1600, unreadyAfterMs: 2500, timeoutMs: 5000 };
/** A holder that stops renewing is replaced within this (client-go's bound: lease + one jittered try). */
export const CRASH_FAILOVER_MS = TIMING.leaseDurationMs + TIMING.retryPeriodMs * 1.2;
/** A holder that stops cleanly releases the Lease: the next try of another replica takes it. */
export const RELEASE_FAILOVER_MS = TIMING.retryPeriodMs * 1.2;

export const WASMPLUGIN = { apiVersion: "extensions.istio.io/v1alpha1", kind: "WasmPlugin", metadata: { namespace: "istio-system", name: "passthrough-mtls" } };
export const LEASE = { namespace: "mesh-feed", name: "mesh-feed" };
export const TARGET = "pm";

/** A TCP relay to the API server that can be cut (every connection dropped, no new ones) and restored. */
export class Relay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

  private constructor(
    readonly port: number,
    private readonly to: { host: string; port: number },
  ) {}

  static async start(to: { host: string; port: number }): Promise<Relay> {
    const relay = new Relay(await freePort(), to);
    await relay.restore();
    return relay;
  }

  restore(): Promise<void> {
    const server = createServer((inbound) => {
      const outbound = createConnection(this.to);
      for (const s of [inbound, outbound]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => s.destroy());
      }
      inbound.pipe(outbound).pipe(inbound);
      inbound.on("close", () => outbound.destroy());
      outbound.on("close", () => inbound.destroy());
    });
    this.server = server;
    return new Promise((done, fail) => {
      server.once("error", fail);
      server.listen(this.port, "127.0.0.1", () => done());
    });
  }

  /** The partition: connections refused, the open ones dropped. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((done) => server.close(() => done()));
  }
}

export interface Replica {
  identity: string;
  process: GuardedProcess;
  /** The feed's pid (SIGKILL to crash it). */
  pid: number;
  relay: Relay;
  base: string;
  channel: string;
}

/** The feed's kubeconfig with its server moved to the relay. */
function viaRelay(kubeconfigPath: string, relay: Relay, dir: string, identity: string): string {
  const kc = parse(readFileSync(kubeconfigPath, "utf8")) as { clusters: Array<{ cluster: { server: string } }> };
  for (const c of kc.clusters) c.cluster.server = c.cluster.server.replace(/:\/\/[^/]+/, `://127.0.0.1:${relay.port}`);
  const path = join(dir, `${identity}.kubeconfig`);
  writeFileSync(path, stringify(kc), { mode: 0o600 });
  return path;
}

export class ReplicaSet {
  readonly replicas = new Map<string, Replica>();
  readonly dir = scratchDir("feed-replicas-");
  readonly ecdsFile = join(this.dir, "shared", "passthrough_mtls.yaml");
  private kubeconfig = "";
  private serial = 0;

  constructor(private readonly cluster: KubeCluster) {}

  async setup(): Promise<void> {
    await writeDemoCerts();
    this.kubeconfig = await feedKubeconfig(this.cluster);
    mkdirSync(dirname(this.ecdsFile), { recursive: true });
    copyFileSync(join(REPO_ROOT, "envoy-configs/passthrough_mtls_plugin/passthrough_mtls.yaml"), join(this.dir, "template.yaml"));
  }

  /**
   * Starts a replica (a new process, a new identity); resolves once it listens (not once it is
   * ready). `channelPort`: the channel port of a replica it replaces (a pod restarted behind the
   * same endpoint, as a Service's sidecars keep reaching it); a free one otherwise.
   * `apiServerCut`: its relay starts cut (the API server out of reach until `relay.restore()`).
   */
  async start(channelPort?: number, options: { apiServerCut?: boolean } = {}): Promise<Replica> {
    const identity = `replica-${this.serial++}`;
    const server = new URL(this.cluster.kubeConfig.getCurrentCluster()?.server ?? "");
    const relay = await Relay.start({ host: server.hostname, port: Number(server.port) });
    if (options.apiServerCut) await relay.cut();
    const operatorPort = await freePort();
    channelPort ??= await freePort();
    const config = {
      trustDomain: "cluster.local",
      wasmDir: join(REPO_ROOT, "build"),
      operator: { address: "127.0.0.1", port: operatorPort },
      channel: { address: "127.0.0.1", port: channelPort, ...feedChannelFiles(), reloadMs: 1000 },
      debounce: { quietMs: 50, maxMs: 300 },
      clusters: [{ id: "cluster1", kubeconfig: viaRelay(this.kubeconfig, relay, this.dir, identity) }],
      targets: [
        {
          name: TARGET,
          filter: "passthrough_mtls",
          readers: [SIDECAR_PRINCIPAL],
          ecds: { file: this.ecdsFile, template: join(this.dir, "template.yaml") },
          wasmPlugin: { cluster: "cluster1", ...WASMPLUGIN.metadata, spec: { url: "oci://registry.example/pm:1", type: "NETWORK", phase: "AUTHN" } },
        },
      ],
      leaderElection: { ...LEASE, identity, ...TIMING },
      push: PUSH,
    };
    const configPath = join(this.dir, `${identity}.yaml`);
    writeFileSync(configPath, stringify(config));
    const pidFile = join(this.dir, `${identity}.pid`);
    // exec keeps the shell's pid for node: the pid file names the feed itself.
    const process = GuardedProcess.start(
      identity,
      "bash",
      ["-c", `echo $$ > ${pidFile}; exec node --import tsx feed/src/main.ts --config ${configPath}`],
      join(this.dir, `${identity}.log`),
      REPO_ROOT,
      10,
    );
    while (!existsSync(pidFile) || readFileSync(pidFile, "utf8").trim() === "") await sleep(20);
    const replica: Replica = { identity, process, pid: Number(readFileSync(pidFile, "utf8")), relay, base: `http://127.0.0.1:${operatorPort}`, channel: `https://127.0.0.1:${channelPort}` };
    this.replicas.set(identity, replica);
    return replica;
  }

  /** Waits until the replica answers /readyz 200 (synced, published, in touch with the API server). */
  async ready(r: Replica, timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    let last = "";
    while (Date.now() < until) {
      if (r.process.exited) throw new Error(`${r.identity} ${r.process.exitDescription}:\n${r.process.logTail()}`);
      const answer = await readyz(r);
      if (answer.status === 200) return;
      last = answer.text;
      await sleep(100);
    }
    throw new Error(`${r.identity} not ready within ${timeoutMs} ms (${last}):\n${r.process.logTail()}`);
  }

  /** SIGKILL: no release, no goodbye (a crash, a node lost). */
  async crash(r: Replica): Promise<void> {
    process.kill(r.pid, "SIGKILL");
    await r.process.waitExit();
    await r.relay.cut();
    this.replicas.delete(r.identity);
  }

  /** SIGTERM: what the kubelet sends in a rollout or a drain. */
  async stop(r: Replica): Promise<void> {
    await r.process.stop();
    await r.relay.cut();
    this.replicas.delete(r.identity);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.replicas.values()].map((r) => this.stop(r)));
  }

  /** Every live replica's view of who leads (feed_leader), by identity. */
  async leaders(): Promise<string[]> {
    const out: string[] = [];
    for (const r of this.replicas.values()) if ((await metric(r, "feed_leader")) === 1) out.push(r.identity);
    return out;
  }
}

export async function readyz(r: Replica): Promise<{ status: number; text: string }> {
  try {
    const res = await fetch(`${r.base}/readyz`, { signal: AbortSignal.timeout(5000) });
    return { status: res.status, text: (await res.text()).trim() };
  } catch (error) {
    return { status: 0, text: (error as Error).message };
  }
}

/** The sum of a metric's series whose labels include `labels` (undefined: no such series). */
export async function metric(r: Replica, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  let text: string;
  try {
    text = await (await fetch(`${r.base}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  } catch {
    return undefined;
  }
  let sum: number | undefined;
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    if (!Object.entries(labels).every(([k, v]) => (m[2] ?? "").includes(`${k}="${v}"`))) continue;
    sum = (sum ?? 0) + Number(m[3]);
  }
  return sum;
}

/** sha256 of the replica's published snapshot of the target (what its WasmPlugin carries). */
export async function snapshotDigest(r: Replica): Promise<string | undefined> {
  const res = await fetch(`${r.base}/snapshot/${TARGET}`, { signal: AbortSignal.timeout(5000) }).catch(() => undefined);
  if (!res || res.status !== 200) return undefined;
  return createHash("sha256").update(Buffer.from(await res.arrayBuffer())).digest("hex");
}

export interface Write {
  type: string;
  resourceVersion: string;
  digest?: string;
  version?: string;
}

/**
 * One object's changes as the API server took them, from a watch started before the feed. A
 * watch the server ends (or that fails, e.g. before the CRD is served) is resumed from the last
 * resourceVersion seen, so no change is missed and none is reported twice.
 */
abstract class ObjectWatch<O extends KubernetesObject> {
  readonly errors: string[] = [];
  private request: { abort(): void } | undefined;
  private stopped = false;
  private cluster: KubeCluster | undefined;

  /** `path`: the collection; `name`: the one object watched in it. */
  constructor(
    private readonly path: string,
    private readonly name: string,
  ) {}

  /** The resourceVersion of the last change taken (undefined: none yet). */
  protected abstract lastResourceVersion(): string | undefined;
  /** Takes one ADDED / MODIFIED / DELETED change. */
  protected abstract take(type: string, object: O): void;

  async start(cluster: KubeCluster): Promise<void> {
    this.cluster = cluster;
    await this.open();
  }

  stop(): void {
    this.stopped = true;
    this.request?.abort();
  }

  private async open(): Promise<void> {
    if (this.stopped || !this.cluster) return;
    const from = this.lastResourceVersion();
    const resume = () => {
      if (!this.stopped) setTimeout(() => void this.open().catch((e: Error) => this.errors.push(e.message)), 200);
    };
    try {
      this.request = await new Watch(this.cluster.kubeConfig).watch(
        this.path,
        { fieldSelector: `metadata.name=${this.name}`, ...(from && { resourceVersion: from }), allowWatchBookmarks: false },
        (type: string, object: O) => {
          if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") this.take(type, object);
        },
        (error: unknown) => {
          if (error) this.errors.push(String((error as Error).message ?? error));
          resume();
        },
      );
    } catch (error) {
      this.errors.push((error as Error).message);
      resume();
    }
  }
}

/** Every write the API server takes on the WasmPlugin (ObjectWatch). */
export class WasmPluginWrites extends ObjectWatch<KubernetesObject> {
  readonly writes: Write[] = [];

  constructor() {
    super("/apis/extensions.istio.io/v1alpha1/namespaces/istio-system/wasmplugins", WASMPLUGIN.metadata.name);
  }

  protected lastResourceVersion(): string | undefined {
    return this.writes.at(-1)?.resourceVersion;
  }

  protected take(type: string, object: KubernetesObject): void {
    const a = object.metadata?.annotations ?? {};
    this.writes.push({ type, resourceVersion: object.metadata?.resourceVersion ?? "", ...(a["mesh-feed/digest"] && { digest: a["mesh-feed/digest"] }), ...(a["mesh-feed/version"] && { version: a["mesh-feed/version"] }) });
  }

  /** The digest now held (the last write's). */
  get digest(): string | undefined {
    return this.writes.at(-1)?.digest;
  }

  /** Writes that carried the same configuration as the write before them: none may exist. */
  repeated(): Write[] {
    const out: Write[] = [];
    for (let i = 1; i < this.writes.length; i++) if (this.writes[i].digest && this.writes[i].digest === this.writes[i - 1].digest) out.push(this.writes[i]);
    return out;
  }

  /** The digests written, in order. */
  digests(): string[] {
    return this.writes.flatMap((w) => (w.digest ? [w.digest] : []));
  }
}

/**
 * Every change of the writers' Lease the API server took (holder, resourceVersion; ObjectWatch).
 * With the WasmPlugin's writes it shows one writer at a time: the API server's resourceVersions
 * are etcd's revisions (one order for every object), so the holder at a write is the last Lease
 * change before it.
 */
export class LeaseHistory extends ObjectWatch<KubernetesObject & { spec?: { holderIdentity?: string } }> {
  readonly changes: Array<{ resourceVersion: number; holder: string }> = [];

  constructor() {
    super(`/apis/coordination.k8s.io/v1/namespaces/${LEASE.namespace}/leases`, LEASE.name);
  }

  protected lastResourceVersion(): string | undefined {
    const last = this.changes.at(-1);
    return last ? String(last.resourceVersion) : undefined;
  }

  protected take(_type: string, object: KubernetesObject & { spec?: { holderIdentity?: string } }): void {
    this.changes.push({ resourceVersion: Number(object.metadata?.resourceVersion), holder: object.spec?.holderIdentity ?? "" });
  }

  /** Who held the Lease when the API server took the write at `resourceVersion` ("" : nobody). */
  holderAt(resourceVersion: number): string {
    let holder = "";
    for (const c of this.changes) if (c.resourceVersion < resourceVersion) holder = c.holder;
    return holder;
  }
}

/** Every replacement of the shared ECDS file (the feed renames a staged file over it), with the configuration it held. */
export class EcdsWrites {
  readonly digests: string[] = [];
  private watcher: FSWatcher | undefined;

  start(file: string): void {
    this.watcher = watch(dirname(file), (event, name) => {
      if (event !== "rename" || name !== basename(file) || !existsSync(file)) return;
      const value = parseDocument(readFileSync(file, "utf8")).getIn(["resources", 0, "typed_config", "config", "configuration", "value"]);
      this.digests.push(createHash("sha256").update(String(value)).digest("hex"));
    });
  }

  stop(): void {
    this.watcher?.close();
  }

  repeated(): string[] {
    return this.digests.filter((d, i) => i > 0 && d === this.digests[i - 1]);
  }
}

/** What a replica's channel serves now: its full message's epoch, version and content digest (a sidecar's GET with nothing held). */
export async function servedContent(r: Replica): Promise<{ status: number; epoch?: number; version?: number; digest?: string; text?: string }> {
  const answer = await channelGet(`${r.channel}/delta/${TARGET}?epoch=0&version=0&format=3`);
  if (answer.status !== 200) return { status: answer.status, text: answer.body.toString().trim() };
  const m = decodeMessage(answer.body);
  return { status: 200, epoch: m.epoch, version: m.version, digest: formatOf(answer.body).digest.toString(16) };
}

/**
 * A sidecar's long poll held by the replica: current at its epoch and version, waiting up to
 * `waitSeconds` for a change. Resolves once it is sent, with its answer to come (and when it came).
 */
export async function heldPoll(r: Replica, waitSeconds: number): Promise<{ answer: Promise<{ status: number; text: string; at: number }> }> {
  const now = await servedContent(r);
  if (now.status !== 200) throw new Error(`${r.identity} does not serve: ${now.status} ${now.text}`);
  const answer = channelGet(`${r.channel}/delta/${TARGET}?epoch=${now.epoch}&version=${now.version}&wait=${waitSeconds}&format=3`).then((a) => ({
    status: a.status,
    text: a.body.toString().trim(),
    at: Date.now(),
  }));
  return { answer };
}

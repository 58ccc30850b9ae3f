// Runs the feed against real API servers (tests/support/kube.ts) the way it is deployed: the
// shipped RBAC (feed/deploy/rbac.yaml) applied, the feed authenticated as its ServiceAccount
// with a real bound token, its configuration written to a file and loaded by startFeed. A
// cluster may instead be a file or directory of objects (the feed's file source). The feed
// serves its channel over mutual TLS with the demo mesh's certificates (build/certs: the feed's
// own, the mesh CA), each target read by the demo sidecar unless the test names its readers, and
// its operator endpoints on a plain port on 127.0.0.1.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { TargetConfig } from "../../feed/src/config.js";
import { startFeed, type RunningFeed } from "../../feed/src/main.js";
import type { KubeCluster } from "../support/kube.js";
import { REPO_ROOT } from "../support/paths.js";
import { channelGet, feedChannelFiles, SIDECAR_PRINCIPAL, type ChannelAnswer } from "../support/feed_tls.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";

export const RBAC_MANIFEST = join(REPO_ROOT, "feed/deploy/rbac.yaml");

/** Applies the shipped RBAC and returns a kubeconfig of the feed's ServiceAccount. */
export async function feedKubeconfig(cluster: KubeCluster): Promise<string> {
  // Created only when missing: re-applying a namespace would drop labels the test gave it
  // (server-side apply removes fields the same manager no longer sets).
  for (const name of ["mesh-feed", "istio-system"]) {
    try {
      await cluster.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name } } });
    } catch (error) {
      if ((error as { code?: number }).code !== 409) throw error;
    }
  }
  await cluster.applyYaml(readFileSync(RBAC_MANIFEST, "utf8"));
  return (await cluster.serviceAccountKubeconfig("mesh-feed", "mesh-feed")).path;
}

export interface FeedRun {
  feed: RunningFeed;
  /** The operator's plain port: /metrics, /snapshots, /snapshot/<any>, /healthz, /readyz. */
  base: string;
  /** The channel (mutual TLS): /delta/<target>, /snapshot/<target>. */
  channel: string;
  /** GET on the channel as the demo sidecar (the readers every target has unless told). */
  get(path: string, headers?: Record<string, string>): Promise<ChannelAnswer>;
  dir: string;
}

export type TargetInput = Omit<TargetConfig, "network" | "config" | "readers"> & Partial<Pick<TargetConfig, "network" | "config" | "readers">>;

/** A cluster the feed reads: a real API server (with the shipped RBAC), or a file or directory of objects (the file source). */
export type FeedCluster = { id: string; cluster: KubeCluster } | { id: string; files: string };

/** `extra` overrides the configuration's fields; its `channel` is merged into the default one (e.g. a fixed port). */
export async function runFeed(clusters: FeedCluster[], targets: TargetInput[], extra: Record<string, unknown> = {}): Promise<FeedRun> {
  await writeDemoCerts();
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "feed-run-"));
  const clusterConfigs = [];
  for (const c of clusters) clusterConfigs.push("files" in c ? { id: c.id, files: c.files } : { id: c.id, kubeconfig: await feedKubeconfig(c.cluster) });
  const config = {
    trustDomain: "cluster.local",
    wasmDir: join(REPO_ROOT, "build"),
    operator: { address: "127.0.0.1", port: 0 },
    debounce: { quietMs: 100, maxMs: 1000 },
    clusters: clusterConfigs,
    targets: targets.map((t) => ({ readers: [SIDECAR_PRINCIPAL], ...t })),
    ...extra,
    channel: { address: "127.0.0.1", port: 0, ...feedChannelFiles(), reloadMs: 200, ...(extra.channel as object | undefined) },
  };
  const path = join(dir, "feed.yaml");
  writeFileSync(path, stringify(config));
  const feed = await startFeed(path);
  const channel = `https://127.0.0.1:${feed.channelPort}`;
  return { feed, base: `http://127.0.0.1:${feed.port}`, channel, get: (path, headers) => channelGet(channel + path, undefined, headers), dir };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** Polls `attempt` until it returns a value (not undefined) or `timeoutMs` passes; returns it and the time it took. */
export async function eventually<T>(what: string, timeoutMs: number, attempt: () => Promise<T | undefined>, everyMs = 25): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  let last: unknown;
  while (Date.now() - started < timeoutMs) {
    try {
      const v = await attempt();
      if (v !== undefined) return { value: v, ms: Date.now() - started };
    } catch (error) {
      last = error;
    }
    await sleep(everyMs);
  }
  throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (last error: ${(last as Error).message})` : ""}`);
}

// The feed's own configuration file (YAML or JSON); see feed/README.md "Configuration". Every
// problem is one line naming the field, and the feed does not start.
import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { isIP } from "node:net";
import { parse } from "yaml";
import { DEFAULT_CAPS, MAX_COUNT_CAP, type FeedCaps } from "./compute_caps.js";
import { NetworkResolver } from "./mesh_networks.js";
import { principalPatternProblem } from "./readers.js";
import type { ServerLimits } from "./server_guard.js";
import { FILTERS, type FilterName } from "./render.js";
import { parseHaConfig, type LeaderElectionConfig, type PushConfig } from "./config_ha.js";

export interface ClusterConfig {
  /** The cluster id (istiod's cluster name; part of every workload uid). */
  id: string;
  /** Path to a kubeconfig for this API server, or "in-cluster" (the pod's service account). */
  kubeconfig?: string;
  /** Instead of an API server: a YAML file, or a directory of them, holding the cluster's objects (file_source.ts). */
  files?: string;
}

/**
 * Istio's remote secrets (`istioctl create-remote-secret`): Secrets labelled
 * `istio/multiCluster: "true"` in one namespace, each data key a cluster id and its value a
 * kubeconfig; their clusters join and leave the feed at run time (remote_secrets.ts).
 */
export interface RemoteSecretsConfig {
  /** Whose API server holds the Secrets (a cluster id from `clusters` with a kubeconfig). */
  cluster: string;
  /** The namespace watched (the feed's own, as istiod watches its system namespace). */
  namespace: string;
}

export interface WasmPluginTarget {
  /** Which cluster's API server holds the WasmPlugin (a cluster id from `clusters`). */
  cluster: string;
  namespace: string;
  name: string;
  /** The rest of the WasmPlugin spec (url, selector, type, phase, failStrategy...); pluginConfig is the feed's. */
  spec: Record<string, unknown>;
}

export interface TargetConfig {
  name: string;
  filter: FilterName;
  /** The network whose view this target gets (split horizon). */
  network: string;
  /** The filter's own fields (localNetwork, role, localWorkload, ...), rendered before the mesh. */
  config: Record<string, unknown>;
  ecds?: { file: string; template?: string };
  wasmPlugin?: WasmPluginTarget;
  /** Who may read this target on the channel: Istio principal patterns (readers.ts); none = nobody. */
  readers: string[];
}

/** Where the channel learns a caller's identity (caller_identity.ts). */
export type IdentityFrom = "tls" | "istio-sidecar";

/** Where Istio's inbound sidecar connects to the application from (its inbound passthrough bind addresses). */
export const ISTIO_INBOUND_SOURCES = ["127.0.0.6", "::6"];

/**
 * The filters' channel: `/delta/<target>` and `/snapshot/<target>` (channel.ts), over the feed's
 * own mutual TLS (`identityFrom: tls`) or in clear behind the feed's Istio sidecar, which
 * terminates Istio's mutual TLS and forwards the caller's identity (`identityFrom: istio-sidecar`).
 */
export interface ChannelConfig {
  identityFrom: IdentityFrom;
  /** istio-sidecar: the only peer addresses a request is taken from (the sidecar's). */
  sidecarAddresses: string[];
  address: string;
  port: number;
  /** tls: the feed's own workload certificate (PEM chain), its key, and the mesh's trust root(s); "" otherwise. */
  certFile: string;
  keyFile: string;
  caFile: string;
  /** How often the three files are checked for a rotation. */
  reloadMs: number;
  /** Connections, timeouts and buffered bytes (server_guard.ts, feed/docs/server-limits.md). */
  limits: ServerLimits;
}

/** The operator's plain port (its limits know no caller identity: maxConnectionsPerCaller is 0). */
export interface OperatorConfig {
  address: string;
  port: number;
  limits: ServerLimits;
}

/** /healthz and /readyz from a worker thread, answered while the feed's own loop renders (health.ts). */
export interface HealthConfig {
  address: string;
  port: number;
  /** /healthz fails once the feed's event loop has not turned for this long (a hang, not a render). */
  staleAfterMs: number;
}

/**
 * The channel's defaults. Every sidecar of one service account shares a SPIFFE id, and each of
 * its Envoy workers polls on its own connection: the cap per caller is a share of the total,
 * not a handful; one sidecar (that id from one address) polls on at most its worker count of
 * connections, so 32 per peer. A reading client takes a slice within milliseconds: 5 s without
 * one is a client that stopped reading. 15 s to take one response is far more than a full message needs on a cluster
 * network; idle sockets go after 2 minutes (above the longest long poll, delta.maxWaitSeconds).
 */
export const DEFAULT_CHANNEL_LIMITS: ServerLimits = {
  maxConnections: 10_000,
  maxConnectionsPerCaller: 2_000,
  maxConnectionsPerPeer: 32,
  idleTimeoutMs: 120_000,
  headersTimeoutMs: 10_000,
  writeTimeoutMs: 15_000,
  stallTimeoutMs: 5_000,
  maxUnsentBytes: 1 << 20,
  maxBufferedBytes: 32 << 20,
};

/** The operator port: a few scrapers and operators, never thousands. */
export const DEFAULT_OPERATOR_LIMITS: ServerLimits = { ...DEFAULT_CHANNEL_LIMITS, maxConnections: 64, maxConnectionsPerCaller: 0, maxConnectionsPerPeer: 0, idleTimeoutMs: 60_000, writeTimeoutMs: 60_000, stallTimeoutMs: 10_000 };

export const DEFAULT_HEALTH: HealthConfig = { address: "127.0.0.1", port: 9091, staleAfterMs: 30_000 };

export interface FeedConfig {
  trustDomain: string;
  domainSuffix: string;
  systemNamespace: string;
  meshNetworksFile?: string;
  debounce: { quietMs: number; maxMs: number };
  /** The operator's plain port: /snapshots, /snapshot/<any target>, /metrics, /healthz, /readyz. */
  operator?: OperatorConfig;
  channel?: ChannelConfig;
  health?: HealthConfig;
  /** Directory holding <filter>.wasm, used to validate every snapshot before it is published. */
  wasmDir: string;
  clusters: ClusterConfig[];
  targets: TargetConfig[];
  delta: DeltaConfig;
  /** What one object may forward to the filters (compute_caps.ts). */
  caps: FeedCaps;
  /** Clusters from Istio's remote secrets, in addition to `clusters`. */
  remoteSecrets?: RemoteSecretsConfig;
  /**
   * How long a cluster other than the first of `clusters` may take to list its objects before
   * the feed stops waiting for it (istiod's PILOT_REMOTE_CLUSTER_TIMEOUT); 0 waits for ever.
   */
  clusterSyncTimeoutSeconds: number;
  /** How often the configuration file is checked for a change (0: never; config_reload.ts). */
  configReloadMs: number;
  /** Several replicas: the Lease electing the one writer (config_ha.ts); absent: this process writes. */
  leaderElection?: LeaderElectionConfig;
  /** Retry of failed deliveries (config_ha.ts). */
  push: PushConfig;
}

/** istiod's PILOT_REMOTE_CLUSTER_TIMEOUT default. */
export const DEFAULT_CLUSTER_SYNC_TIMEOUT_SECONDS = 30;
export const DEFAULT_CONFIG_RELOAD_MS = 2000;

/** The delta channel (feed/docs/deltas.md). */
export interface DeltaConfig {
  /** Debounce of the delta path (each delta costs what changed, so it is short). */
  quietMs: number;
  maxMs: number;
  /** Longest a long poll is held (a request's `wait` is capped to it). */
  maxWaitSeconds: number;
  journal: { maxRecords: number; maxBytes: number; minBytes: number; maxVersions: number };
  /** Id limits a version may not pass (the filters' MAX_WORKLOADS / MAX_SERVICES, assembly/mesh/parse.ts). */
  maxWorkloads: number;
  maxServices: number;
  /**
   * Full builds for callers: a bucket of fullBuildBurst, one more per minFullIntervalMs; without
   * one, the last built (delta/channel.ts servedFull). 5 s by default: each build is a message of
   * the mesh's size (5 MB at 20k pods) that becomes garbage a version later, and V8 collects such
   * Buffers only after ~64 MB of them; at one build a second under an `epoch=0` flood that
   * garbage alone took the feed's RSS past its + 100 MB bound (feed/docs/server-limits.md). A
   * caller given an older one takes the delta from it on its next poll.
   */
  minFullIntervalMs: number;
  fullBuildBurst: number;
}

/**
 * 5 ms of quiet, 50 ms at most: the watch delivers a burst of events in one read (a list of
 * updates, a pod's status and its slice); waiting a few milliseconds puts them in one version,
 * and 50 ms bounds what that adds to the propagation target (API write → filter, p99 < 1 s). The
 * snapshot (JSON) deliveries keep `debounce` (100 ms / 1 s): each of those re-renders the mesh.
 */
export const DEFAULT_DELTA: DeltaConfig = {
  quietMs: 5,
  maxMs: 50,
  maxWaitSeconds: 60,
  journal: { maxRecords: 1_000_000, maxBytes: 64 << 20, minBytes: 1 << 20, maxVersions: 100_000 },
  maxWorkloads: 2_000_000,
  maxServices: 2_000_000,
  minFullIntervalMs: 5000,
  fullBuildBurst: 4,
};

/**
 * Debounce defaults: 100 ms of quiet is istiod's PILOT_DEBOUNCE_AFTER (a pod's start is a burst
 * of 3-4 updates within ~100 ms: created, scheduled, IP, Ready, then its EndpointSlice); 1 s at
 * most, where istiod allows 10 s (PILOT_DEBOUNCE_MAX), because this bound is the freshness a
 * connection can count on (the target is p99 < 1 s from the API write).
 */
export const DEFAULT_DEBOUNCE = { quietMs: 100, maxMs: 1000 };

class Reader {
  constructor(private readonly path: string) {}
  fail(field: string, reason: string): never {
    throw new Error(`${this.path}: ${field}: ${reason}`);
  }
}

function str(r: Reader, o: Record<string, unknown>, field: string, at: string, fallback?: string): string {
  const v = o[field];
  if (v === undefined || v === null) {
    if (fallback !== undefined) return fallback;
    r.fail(`${at}${field}`, "missing required field");
  }
  if (typeof v !== "string") r.fail(`${at}${field}`, "expected a string");
  return v;
}

function int(r: Reader, o: Record<string, unknown>, field: string, at: string, min: number, max: number, fallback: number): number {
  const v = o[field];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) r.fail(`${at}${field}`, `expected an integer in [${min}, ${max}]`);
  return v;
}

function obj(r: Reader, v: unknown, at: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) r.fail(at, "expected an object");
  return v as Record<string, unknown>;
}

function known(r: Reader, o: Record<string, unknown>, at: string, fields: string[]): void {
  for (const k of Object.keys(o)) if (!fields.includes(k)) r.fail(`${at}${k}`, `unknown field (known: ${fields.join(", ")})`);
}

/**
 * `limits` of the channel or the operator port; `perCaller` only where callers have identities;
 * `maxUnsentBytes` only on the operator port (node:http answers pipelined requests at once, the
 * channel's own HTTP layer one at a time: channel_http.ts).
 */
function limitsOf(r: Reader, v: unknown, at: string, defaults: ServerLimits, perCaller: boolean, channel: boolean): ServerLimits {
  if (v === undefined) return defaults;
  const o = obj(r, v, at.slice(0, -1));
  if (channel && "maxUnsentBytes" in o) r.fail(`${at}maxUnsentBytes`, "not a channel limit: the channel answers a connection's requests one at a time, so a client that does not read holds one answer and is dropped by stallTimeoutMs");
  const fields = ["maxConnections", "idleTimeoutMs", "headersTimeoutMs", "writeTimeoutMs", "stallTimeoutMs", "maxBufferedBytes", ...(channel ? [] : ["maxUnsentBytes"])];
  known(r, o, at, perCaller ? [...fields, "maxConnectionsPerCaller", "maxConnectionsPerPeer"] : fields);
  const l: ServerLimits = {
    maxConnections: int(r, o, "maxConnections", at, 1, 1_000_000, defaults.maxConnections),
    maxConnectionsPerCaller: perCaller ? int(r, o, "maxConnectionsPerCaller", at, 1, 1_000_000, defaults.maxConnectionsPerCaller) : 0,
    // Unset: the default, or the caller's cap when that is lower (a peer is one of the caller's).
    maxConnectionsPerPeer: perCaller ? int(r, o, "maxConnectionsPerPeer", at, 1, 1_000_000, Math.min(defaults.maxConnectionsPerPeer, int(r, o, "maxConnectionsPerCaller", at, 1, 1_000_000, defaults.maxConnectionsPerCaller))) : 0,
    idleTimeoutMs: int(r, o, "idleTimeoutMs", at, 1000, 3_600_000, defaults.idleTimeoutMs),
    headersTimeoutMs: int(r, o, "headersTimeoutMs", at, 100, 600_000, defaults.headersTimeoutMs),
    writeTimeoutMs: int(r, o, "writeTimeoutMs", at, 100, 3_600_000, defaults.writeTimeoutMs),
    stallTimeoutMs: int(r, o, "stallTimeoutMs", at, 100, 3_600_000, defaults.stallTimeoutMs),
    maxUnsentBytes: int(r, o, "maxUnsentBytes", at, 0, 2 ** 32, defaults.maxUnsentBytes),
    maxBufferedBytes: int(r, o, "maxBufferedBytes", at, 0, 2 ** 40, defaults.maxBufferedBytes),
  };
  if (perCaller && l.maxConnectionsPerCaller > l.maxConnections) r.fail(`${at}maxConnectionsPerCaller`, "must be at most maxConnections");
  // A cap per peer above the caller's would never bite: it says the configuration is not what was meant.
  if (perCaller && l.maxConnectionsPerPeer > l.maxConnectionsPerCaller) r.fail(`${at}maxConnectionsPerPeer`, "must be at most maxConnectionsPerCaller");
  return l;
}

const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
const DNS = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

export function parseFeedConfig(text: string, path = "feed config"): FeedConfig {
  const r = new Reader(path);
  const root = obj(r, parse(text), "(root)");
  // The one plain server the feed used to have served the filters and the operator alike.
  if ("http" in root) r.fail("http", "replaced: `operator` (plain, local: metrics and every snapshot) and `channel` (mutual TLS: the filters)");
  known(r, root, "", ["trustDomain", "domainSuffix", "systemNamespace", "meshNetworksFile", "debounce", "delta", "operator", "channel", "health", "wasmDir", "clusters", "targets", "caps", "remoteSecrets", "clusterSyncTimeoutSeconds", "configReloadMs", "leaderElection", "push"]);
  const base = dirname(path);
  const rel = (p: string) => (isAbsolute(p) || p === "in-cluster" ? p : resolve(base, p));
  const trustDomain = str(r, root, "trustDomain", "", "cluster.local");
  if (!TRUST_DOMAIN.test(trustDomain)) r.fail("trustDomain", "not a SPIFFE trust domain ([a-z0-9._-])");
  const domainSuffix = str(r, root, "domainSuffix", "", "cluster.local");
  if (!DNS.test(domainSuffix)) r.fail("domainSuffix", "not a DNS suffix");
  const systemNamespace = str(r, root, "systemNamespace", "", "istio-system");
  const meshNetworksFile = root.meshNetworksFile === undefined ? undefined : rel(str(r, root, "meshNetworksFile", ""));
  const d = root.debounce === undefined ? {} : obj(r, root.debounce, "debounce");
  known(r, d, "debounce.", ["quietMs", "maxMs"]);
  const debounce = { quietMs: int(r, d, "quietMs", "debounce.", 0, 60_000, DEFAULT_DEBOUNCE.quietMs), maxMs: int(r, d, "maxMs", "debounce.", 0, 600_000, DEFAULT_DEBOUNCE.maxMs) };
  if (debounce.maxMs < debounce.quietMs) r.fail("debounce.maxMs", "must be at least quietMs");
  const dl = root.delta === undefined ? {} : obj(r, root.delta, "delta");
  known(r, dl, "delta.", ["quietMs", "maxMs", "maxWaitSeconds", "journal", "maxWorkloads", "maxServices", "minFullIntervalMs", "fullBuildBurst"]);
  const jl = dl.journal === undefined ? {} : obj(r, dl.journal, "delta.journal");
  known(r, jl, "delta.journal.", ["maxRecords", "maxBytes", "minBytes", "maxVersions"]);
  const dj = DEFAULT_DELTA.journal;
  const delta: DeltaConfig = {
    quietMs: int(r, dl, "quietMs", "delta.", 0, 60_000, DEFAULT_DELTA.quietMs),
    maxMs: int(r, dl, "maxMs", "delta.", 0, 600_000, DEFAULT_DELTA.maxMs),
    maxWaitSeconds: int(r, dl, "maxWaitSeconds", "delta.", 0, 3600, DEFAULT_DELTA.maxWaitSeconds),
    journal: {
      maxRecords: int(r, jl, "maxRecords", "delta.journal.", 1, 100_000_000, dj.maxRecords),
      maxBytes: int(r, jl, "maxBytes", "delta.journal.", 1, 2 ** 32, dj.maxBytes),
      minBytes: int(r, jl, "minBytes", "delta.journal.", 0, 2 ** 32, dj.minBytes),
      maxVersions: int(r, jl, "maxVersions", "delta.journal.", 1, 100_000_000, dj.maxVersions),
    },
    maxWorkloads: int(r, dl, "maxWorkloads", "delta.", 0, 2 ** 32 - 1, DEFAULT_DELTA.maxWorkloads),
    maxServices: int(r, dl, "maxServices", "delta.", 0, 2 ** 32 - 1, DEFAULT_DELTA.maxServices),
    minFullIntervalMs: int(r, dl, "minFullIntervalMs", "delta.", 0, 600_000, DEFAULT_DELTA.minFullIntervalMs),
    fullBuildBurst: int(r, dl, "fullBuildBurst", "delta.", 1, 1000, DEFAULT_DELTA.fullBuildBurst),
  };
  if (delta.maxMs < delta.quietMs) r.fail("delta.maxMs", "must be at least quietMs");
  const cp = root.caps === undefined ? {} : obj(r, root.caps, "caps");
  known(r, cp, "caps.", ["maxPortsPerService", "maxMembershipsPerWorkload", "maxTextBytes"]);
  const caps: FeedCaps = {
    maxPortsPerService: int(r, cp, "maxPortsPerService", "caps.", 1, MAX_COUNT_CAP, DEFAULT_CAPS.maxPortsPerService),
    maxMembershipsPerWorkload: int(r, cp, "maxMembershipsPerWorkload", "caps.", 1, MAX_COUNT_CAP, DEFAULT_CAPS.maxMembershipsPerWorkload),
    // A SPIFFE id of Kubernetes names needs ~600 bytes; the filters take at most 2,048.
    maxTextBytes: int(r, cp, "maxTextBytes", "caps.", 256, 2048, DEFAULT_CAPS.maxTextBytes),
  };
  let operator: FeedConfig["operator"];
  if (root.operator !== undefined) {
    const h = obj(r, root.operator, "operator");
    known(r, h, "operator.", ["address", "port", "limits"]);
    operator = {
      address: str(r, h, "address", "operator.", "127.0.0.1"),
      port: int(r, h, "port", "operator.", 0, 65535, 9090),
      limits: limitsOf(r, h.limits, "operator.limits.", DEFAULT_OPERATOR_LIMITS, false, false),
    };
  }
  let health: HealthConfig | undefined;
  if (root.health !== undefined) {
    const h = obj(r, root.health, "health");
    known(r, h, "health.", ["address", "port", "staleAfterMs"]);
    health = {
      address: str(r, h, "address", "health.", DEFAULT_HEALTH.address),
      port: int(r, h, "port", "health.", 0, 65535, DEFAULT_HEALTH.port),
      staleAfterMs: int(r, h, "staleAfterMs", "health.", 1000, 3_600_000, DEFAULT_HEALTH.staleAfterMs),
    };
    if (operator && health.port !== 0 && health.port === operator.port && health.address === operator.address) r.fail("health.port", "is the operator port's");
  }
  let channel: ChannelConfig | undefined;
  if (root.channel !== undefined) {
    const c = obj(r, root.channel, "channel");
    const identityFrom = str(r, c, "identityFrom", "channel.", "tls") as IdentityFrom;
    if (identityFrom !== "tls" && identityFrom !== "istio-sidecar") r.fail("channel.identityFrom", `expected "tls" or "istio-sidecar", not ${JSON.stringify(identityFrom)}`);
    const sidecar = identityFrom === "istio-sidecar";
    // Behind the sidecar the feed holds no certificate, and the sidecar multiplexes every caller
    // over its own connections: a cap per caller on connections would cap the sidecar.
    known(r, c, "channel.", sidecar ? ["identityFrom", "sidecarAddresses", "address", "port", "limits"] : ["identityFrom", "address", "port", "certFile", "keyFile", "caFile", "reloadMs", "limits"]);
    const file = (field: string) => {
      if (sidecar) return "";
      const v = str(r, c, field, "channel.");
      if (v === "") r.fail(`channel.${field}`, "expected a path to a PEM file");
      return rel(v);
    };
    let sidecarAddresses: string[] = [];
    if (sidecar) {
      const v = c.sidecarAddresses ?? ISTIO_INBOUND_SOURCES;
      if (!Array.isArray(v) || v.length === 0 || v.some((a) => typeof a !== "string" || isIP(a) === 0)) r.fail("channel.sidecarAddresses", "expected a non-empty list of IP addresses");
      sidecarAddresses = (v as string[]).slice();
    }
    channel = {
      identityFrom,
      sidecarAddresses,
      address: str(r, c, "address", "channel.", "0.0.0.0"),
      port: int(r, c, "port", "channel.", 0, 65535, 9443),
      certFile: file("certFile"),
      keyFile: file("keyFile"),
      caFile: file("caFile"),
      reloadMs: sidecar ? 0 : int(r, c, "reloadMs", "channel.", 50, 3_600_000, 1000),
      limits: limitsOf(r, c.limits, "channel.limits.", sidecar ? { ...DEFAULT_CHANNEL_LIMITS, maxConnectionsPerCaller: 0, maxConnectionsPerPeer: 0 } : DEFAULT_CHANNEL_LIMITS, !sidecar, true),
    };
    // A held long poll sends nothing until it is answered: it must not count as idle.
    if (channel.limits.idleTimeoutMs <= delta.maxWaitSeconds * 1000) r.fail("channel.limits.idleTimeoutMs", `must be above delta.maxWaitSeconds (${delta.maxWaitSeconds} s): a held long poll is not idle`);
    if (health && health.port !== 0 && health.port === channel.port && health.address === channel.address) r.fail("health.port", "is the channel port's");
    if (operator && operator.port !== 0 && operator.port === channel.port && operator.address === channel.address) r.fail("channel.port", "is the operator port's");
  }
  const wasmDir = rel(str(r, root, "wasmDir", "", "build"));
  if (!Array.isArray(root.clusters) || root.clusters.length === 0) r.fail("clusters", "expected a non-empty list");
  const clusters = (root.clusters as unknown[]).map((c, i) => {
    const o = obj(r, c, `clusters[${i}]`);
    const at = `clusters[${i}].`;
    known(r, o, at, ["id", "kubeconfig", "files"]);
    const id = str(r, o, "id", at);
    // Exactly one source: an API server or files.
    const hasKube = o.kubeconfig !== undefined && o.kubeconfig !== null;
    const hasFiles = o.files !== undefined && o.files !== null;
    if (hasKube && hasFiles) r.fail(`${at}files`, "give either kubeconfig (an API server) or files, not both");
    if (!hasKube && !hasFiles) r.fail(`${at}kubeconfig`, "missing: give kubeconfig (an API server) or files (a YAML file or directory)");
    if (hasFiles) {
      const files = str(r, o, "files", at);
      if (files === "") r.fail(`${at}files`, "expected a path to a file or directory");
      return { id, files: rel(files) };
    }
    return { id, kubeconfig: rel(str(r, o, "kubeconfig", at)) };
  });
  const ids = new Set<string>();
  clusters.forEach((c, i) => {
    if (ids.has(c.id)) r.fail(`clusters[${i}].id`, `duplicate cluster id ${JSON.stringify(c.id)}`);
    ids.add(c.id);
  });
  let remoteSecrets: RemoteSecretsConfig | undefined;
  if (root.remoteSecrets !== undefined) {
    const o = obj(r, root.remoteSecrets, "remoteSecrets");
    known(r, o, "remoteSecrets.", ["cluster", "namespace"]);
    const firstApi = clusters.find((c) => c.kubeconfig)?.id;
    const cluster = str(r, o, "cluster", "remoteSecrets.", firstApi ?? "");
    if (!clusters.find((c) => c.id === cluster)?.kubeconfig) r.fail("remoteSecrets.cluster", `expected the id of a cluster read from an API server (kubeconfig), not ${JSON.stringify(cluster)}`);
    const namespace = str(r, o, "namespace", "remoteSecrets.");
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace) || namespace.length > 63) r.fail("remoteSecrets.namespace", "not a namespace name");
    remoteSecrets = { cluster, namespace };
  }
  const clusterSyncTimeoutSeconds = int(r, root, "clusterSyncTimeoutSeconds", "", 0, 86_400, DEFAULT_CLUSTER_SYNC_TIMEOUT_SECONDS);
  const configReloadMs = int(r, root, "configReloadMs", "", 0, 3_600_000, DEFAULT_CONFIG_RELOAD_MS);
  if (!Array.isArray(root.targets) || root.targets.length === 0) r.fail("targets", "expected a non-empty list");
  const names = new Set<string>();
  const targets = (root.targets as unknown[]).map((t, i): TargetConfig => {
    const at = `targets[${i}].`;
    const o = obj(r, t, `targets[${i}]`);
    known(r, o, at, ["name", "filter", "network", "config", "ecds", "wasmPlugin", "readers"]);
    const name = str(r, o, "name", at);
    if (!/^[A-Za-z0-9._-]+$/.test(name)) r.fail(`${at}name`, "expected [A-Za-z0-9._-]+ (it is a URL path segment and a metric label)");
    if (names.has(name)) r.fail(`${at}name`, `duplicate target ${JSON.stringify(name)}`);
    names.add(name);
    const filter = str(r, o, "filter", at) as FilterName;
    if (!FILTERS.includes(filter)) r.fail(`${at}filter`, `expected one of: ${FILTERS.join(", ")}`);
    const config = o.config === undefined ? {} : obj(r, o.config, `${at}config`);
    for (const k of ["workloads", "services"]) if (k in config) r.fail(`${at}config.${k}`, "is the feed's to write");
    let ecds: TargetConfig["ecds"];
    if (o.ecds !== undefined) {
      const e = obj(r, o.ecds, `${at}ecds`);
      known(r, e, `${at}ecds.`, ["file", "template"]);
      ecds = { file: rel(str(r, e, "file", `${at}ecds.`)), ...(e.template !== undefined && { template: rel(str(r, e, "template", `${at}ecds.`)) }) };
    }
    let wasmPlugin: WasmPluginTarget | undefined;
    if (o.wasmPlugin !== undefined) {
      const w = obj(r, o.wasmPlugin, `${at}wasmPlugin`);
      known(r, w, `${at}wasmPlugin.`, ["cluster", "namespace", "name", "spec"]);
      const cluster = str(r, w, "cluster", `${at}wasmPlugin.`, clusters[0].id);
      if (!ids.has(cluster)) r.fail(`${at}wasmPlugin.cluster`, `unknown cluster ${JSON.stringify(cluster)}`);
      if (!clusters.find((c) => c.id === cluster)?.kubeconfig) r.fail(`${at}wasmPlugin.cluster`, `cluster ${JSON.stringify(cluster)} reads files: no API server to apply a WasmPlugin to`);
      const spec = w.spec === undefined ? {} : obj(r, w.spec, `${at}wasmPlugin.spec`);
      if ("pluginConfig" in spec) r.fail(`${at}wasmPlugin.spec.pluginConfig`, "is the feed's to write");
      wasmPlugin = { cluster, namespace: str(r, w, "namespace", `${at}wasmPlugin.`), name: str(r, w, "name", `${at}wasmPlugin.`), spec };
    }
    let readers: string[] = [];
    if (o.readers !== undefined) {
      if (!Array.isArray(o.readers)) r.fail(`${at}readers`, "expected a list of principals (trust-domain/ns/<namespace>/sa/<service account>, * as prefix or suffix)");
      readers = (o.readers as unknown[]).map((p, j) => {
        const problem = typeof p === "string" ? principalPatternProblem(p) : "expected a string";
        if (problem) r.fail(`${at}readers[${j}]`, problem);
        return p as string;
      });
    }
    return { name, filter, network: str(r, o, "network", at, ""), config, ...(ecds && { ecds }), ...(wasmPlugin && { wasmPlugin }), readers };
  });
  const { leaderElection, push } = parseHaConfig(root, clusters, (field, reason) => r.fail(field, reason));
  return { trustDomain, domainSuffix, systemNamespace, ...(meshNetworksFile && { meshNetworksFile }), debounce, delta, caps, ...(operator && { operator }), ...(channel && { channel }), ...(health && { health }), wasmDir, clusters, targets, ...(remoteSecrets && { remoteSecrets }), clusterSyncTimeoutSeconds, configReloadMs, ...(leaderElection && { leaderElection }), push };
}

export function loadFeedConfig(path: string): FeedConfig {
  return parseFeedConfig(readFileSync(path, "utf8"), path);
}

export function loadNetworks(config: FeedConfig): NetworkResolver {
  return config.meshNetworksFile ? NetworkResolver.parse(readFileSync(config.meshNetworksFile, "utf8")) : new NetworkResolver();
}

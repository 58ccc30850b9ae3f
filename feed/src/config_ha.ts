// The configuration of several replicas (feed/README.md "High availability"): the Lease that
// elects the one replica allowed to write (leaderElection) and how a failed delivery is retried
// (push). Kept apart from config.ts, which calls parseHaConfig; every problem is one line naming
// the field, and the feed does not start.
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";

export interface LeaderElectionConfig {
  /** The cluster (an id from `clusters`, read from an API server) whose API server holds the Lease. */
  cluster: string;
  namespace: string;
  /** The Lease's name (coordination.k8s.io/v1). */
  name: string;
  /** This replica's name in the Lease: unique per process. */
  identity: string;
  /** How long a holder that stopped renewing keeps the Lease in the others' eyes. */
  leaseDurationMs: number;
  /** The holder stops writing when it could not renew for this long (before anyone may take over). */
  renewDeadlineMs: number;
  /** How often the Lease is renewed, or tried by the others. */
  retryPeriodMs: number;
}

export interface PushConfig {
  /** First wait before a failed delivery is tried again; it doubles (with jitter) up to retryMaxMs. */
  retryInitialMs: number;
  retryMaxMs: number;
  /** /readyz fails once a target's delivery has been behind for this long. */
  unreadyAfterMs: number;
  /** One read or write of a delivery that has not answered by then counts as failed (and is retried). */
  timeoutMs: number;
}

/**
 * istiod's leader election (pilot/pkg/leaderelection): a 30 s lease, renewed within half of it,
 * tried every quarter of it. A dead leader's writes resume within leaseDuration + retryPeriod.
 */
export const DEFAULT_LEADER_TIMING = { leaseDurationMs: 30_000, renewDeadlineMs: 15_000, retryPeriodMs: 7_500 };

/** 1 s doubling to 30 s (the filters' own reconnect backoff); unready after a minute behind. */
export const DEFAULT_PUSH: PushConfig = { retryInitialMs: 1_000, retryMaxMs: 30_000, unreadyAfterMs: 60_000, timeoutMs: 30_000 };

type Fail = (field: string, reason: string) => never;

function object(fail: Fail, v: unknown, at: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(at, "expected an object");
  return v as Record<string, unknown>;
}

function only(fail: Fail, o: Record<string, unknown>, at: string, fields: string[]): void {
  for (const k of Object.keys(o)) if (!fields.includes(k)) fail(`${at}.${k}`, `unknown field (known: ${fields.join(", ")})`);
}

function ms(fail: Fail, o: Record<string, unknown>, field: string, at: string, min: number, fallback: number): number {
  const v = o[field];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > 3_600_000) fail(`${at}.${field}`, `expected an integer in [${min}, 3600000]`);
  return v;
}

function text(fail: Fail, o: Record<string, unknown>, field: string, at: string, fallback: string | undefined): string {
  const v = o[field] ?? fallback;
  if (v === undefined) fail(`${at}.${field}`, "missing required field");
  if (typeof v !== "string" || v === "") fail(`${at}.${field}`, "expected a non-empty string");
  return v;
}

/** A name unique per process: the pod's name when given (downward API), else the host's, plus a random suffix. */
export function defaultIdentity(): string {
  return process.env.POD_NAME || `${hostname()}_${randomBytes(4).toString("hex")}`;
}

export function parseHaConfig(
  root: Record<string, unknown>,
  clusters: ReadonlyArray<{ id: string; kubeconfig?: string }>,
  fail: Fail,
): { leaderElection?: LeaderElectionConfig; push: PushConfig } {
  const p = root.push === undefined ? {} : object(fail, root.push, "push");
  only(fail, p, "push", ["retryInitialMs", "retryMaxMs", "unreadyAfterMs", "timeoutMs"]);
  const push: PushConfig = {
    retryInitialMs: ms(fail, p, "retryInitialMs", "push", 10, DEFAULT_PUSH.retryInitialMs),
    retryMaxMs: ms(fail, p, "retryMaxMs", "push", 10, DEFAULT_PUSH.retryMaxMs),
    unreadyAfterMs: ms(fail, p, "unreadyAfterMs", "push", 0, DEFAULT_PUSH.unreadyAfterMs),
    timeoutMs: ms(fail, p, "timeoutMs", "push", 100, DEFAULT_PUSH.timeoutMs),
  };
  if (push.retryMaxMs < push.retryInitialMs) fail("push.retryMaxMs", "must be at least retryInitialMs");
  if (root.leaderElection === undefined) return { push };
  const l = object(fail, root.leaderElection, "leaderElection");
  only(fail, l, "leaderElection", ["cluster", "namespace", "name", "identity", "leaseDurationMs", "renewDeadlineMs", "retryPeriodMs"]);
  const cluster = text(fail, l, "cluster", "leaderElection", clusters.find((c) => c.kubeconfig)?.id);
  const found = clusters.find((c) => c.id === cluster);
  if (!found) fail("leaderElection.cluster", `unknown cluster ${JSON.stringify(cluster)}`);
  if (!found.kubeconfig) fail("leaderElection.cluster", `cluster ${JSON.stringify(cluster)} reads files: no API server to hold the Lease`);
  const leaderElection: LeaderElectionConfig = {
    cluster,
    namespace: text(fail, l, "namespace", "leaderElection", undefined),
    name: text(fail, l, "name", "leaderElection", "mesh-feed"),
    identity: text(fail, l, "identity", "leaderElection", defaultIdentity()),
    leaseDurationMs: ms(fail, l, "leaseDurationMs", "leaderElection", 1000, DEFAULT_LEADER_TIMING.leaseDurationMs),
    renewDeadlineMs: ms(fail, l, "renewDeadlineMs", "leaderElection", 100, DEFAULT_LEADER_TIMING.renewDeadlineMs),
    retryPeriodMs: ms(fail, l, "retryPeriodMs", "leaderElection", 50, DEFAULT_LEADER_TIMING.retryPeriodMs),
  };
  // Safety: the holder gives up (renewDeadline) well before the others may take over
  // (leaseDuration), and tries several times (retryPeriod) before it gives up.
  if (leaderElection.renewDeadlineMs >= leaderElection.leaseDurationMs) fail("leaderElection.renewDeadlineMs", "must be below leaseDurationMs");
  if (leaderElection.retryPeriodMs * 1.2 >= leaderElection.renewDeadlineMs) fail("leaderElection.retryPeriodMs", "must be below renewDeadlineMs / 1.2");
  if (leaderElection.leaseDurationMs % 1000 !== 0) fail("leaderElection.leaseDurationMs", "must be whole seconds (the Lease stores seconds)");
  return { leaderElection, push };
}

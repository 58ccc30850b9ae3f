// The real Envoy in front of several feed replicas, for tests/feed/replicas*_envoy.test.ts: the
// shipped sidecar configuration with its mesh_feed cluster pointed at every replica's channel
// (round robin, as a Service spreads a sidecar's polls over the feed's pods), the application's
// connections as the filter decides them, and the filters' own message counters.
import assert from "node:assert/strict";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { parse, stringify } from "yaml";
import { CLIENT_ADDRESS } from "../support/capture.js";
import type { EnvoyProcess } from "../support/envoy.js";
import { socketAddress } from "../support/envoy_config.js";
import { exchange } from "../support/tcp.js";
import { DEMO_IDENTITIES } from "../../scripts/demo-certs.js";
import { meshFeedSidecarConfig } from "./delta_envoy_config.js";
import { metric, readyz, TARGET, type Replica } from "./replicas_support.js";
import { freePort } from "../support/ports.js";

export const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
export const SIDECAR_LABELS = { app: "demo", "security.istio.io/tlsMode": "istio" };
export const WORKERS = 4;
/** One VM per worker and the main thread's: each polls the feed on its own. */
export const VMS = WORKERS + 1;
/** The filters' long poll (seconds) unless a test says otherwise (the shipped sidecar's is 30). */
export const WAIT_SECONDS = 5;

export function channelPort(r: Replica): number {
  return Number(new URL(r.channel).port);
}

/** The shipped sidecar, its mesh_feed cluster pointed at every replica's channel port (round robin). */
export function sidecarConfig(ports: number[], waitSeconds = WAIT_SECONDS): string {
  const config = parse(meshFeedSidecarConfig(ports[0], TARGET, waitSeconds));
  const feed = config.static_resources.clusters.find((c: { name: string }) => c.name === "mesh_feed");
  feed.lb_policy = "ROUND_ROBIN";
  feed.load_assignment.endpoints = [{ lb_endpoints: ports.map((port) => ({ endpoint: { address: socketAddress("127.0.0.1", port) } })) }];
  return stringify(config);
}

/** The feed's answers of one kind (feed_delta_requests_total{kind}), summed over the given replicas. */
export async function answered(replicas: Iterable<Replica>, kind: string): Promise<number> {
  let sum = 0;
  for (const r of replicas) sum += (await metric(r, "feed_delta_requests_total", { kind })) ?? 0;
  return sum;
}

export interface Applied {
  full: number;
  delta: number;
  repair: number;
  noChange: number;
  unavailable: number;
  refused: number;
}

/** The application's view through the sidecar: connections to 127.0.0.11 and what decided them. */
export class SidecarProbe {
  constructor(private readonly envoy: () => EnvoyProcess) {}

  private async stat(name: string): Promise<number> {
    return (await this.envoy().stats()).get(name) ?? 0;
  }

  feedStat(name: string): Promise<number> {
    return this.stat(`wasmcustom.passthrough_mtls.feed.${name}`);
  }

  private dial(host: string, port: number, payload: string) {
    return exchange(host, port, payload, 1_000, CLIENT_ADDRESS);
  }

  /** A connection to httpbin-0 went out as mutual TLS with the sidecar's identity (the pod is in the model). */
  readonly mtlsTo11 = async () => (await this.dial("127.0.0.11", 8443, "ping-1")).received.toString() === `httpbin-0 peer=${SIDECAR}\nping-1`;
  /** A connection to 127.0.0.11 went out plain (no mesh pod there in the model). */
  readonly plainTo11 = async () => (await this.dial("127.0.0.11", 8080, "hello")).received.toString() === "plain-11\nhello";

  /** 16 connections, each decided as `decided` says: spread over the workers by the kernel. */
  async inARow(decided: () => Promise<boolean>): Promise<boolean> {
    for (let i = 0; i < 16; i++) if (!(await decided())) return false;
    return true;
  }

  /** The filters' message counters, summed over the VMs. */
  async applied(): Promise<Applied> {
    return {
      full: await this.feedStat("applied_full"),
      delta: await this.feedStat("applied_delta"),
      repair: await this.feedStat("applied_repair"),
      noChange: await this.feedStat("no_change"),
      unavailable: await this.feedStat("unavailable"),
      refused: await this.feedStat("refused"),
    };
  }

  /** What the VMs applied since `before`, and what the live replicas answered (since their start). */
  async report(before: Applied, live: Replica[]): Promise<string> {
    const now = await this.applied();
    const kinds = ["rebased", "ask_buckets", "repair"];
    const served = await Promise.all(kinds.map((k) => answered(live, k)));
    let unavailable = 0;
    for (const r of live) unavailable += (await metric(r, "feed_channel_unavailable_total")) ?? 0;
    return (
      `VMs applied full ${now.full - before.full}, delta ${now.delta - before.delta}, repair ${now.repair - before.repair}, no-change ${now.noChange - before.noChange}, ` +
      `unavailable ${now.unavailable - before.unavailable}; live replicas answered ${kinds.map((k, i) => `${k} ${served[i]}`).join(", ")}, 503 ${unavailable}`
    );
  }

  /** The property: one full message per VM (its first model), none after, nothing refused. */
  async assertNoFullAfterFirst(): Promise<void> {
    assert.equal(await this.feedStat("applied_full"), VMS, "full messages applied: one per VM, its first model");
    assert.equal(await this.feedStat("refused"), 0, "no message refused by the filter");
  }
}

/**
 * The feed's Service as kube-proxy makes it: one address (the shipped sidecar's mesh_feed cluster
 * is STRICT_DNS to the Service's name), each new TCP connection placed on a ready replica in
 * turn, established connections left where they are. Ready: the replica's /readyz answered 200
 * at the last look (every 250 ms), as the EndpointSlice follows the readiness probe (faster
 * here than a kubelet's 10 s period). TLS passes through untouched.
 */
export class ServiceBalancer {
  private server: Server | undefined;
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly ready = new Set<string>();
  /** Open connections by replica identity. */
  private readonly open = new Map<string, Set<Socket>>();

  private constructor(
    readonly port: number,
    private readonly replicas: () => Replica[],
  ) {}

  static async start(replicas: () => Replica[]): Promise<ServiceBalancer> {
    const b = new ServiceBalancer(await freePort(), replicas);
    await b.probe();
    b.timer = setInterval(() => void b.probe(), 250);
    const server = createServer((inbound) => b.place(inbound));
    b.server = server;
    await new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen(b.port, "127.0.0.1", () => done());
    });
    return b;
  }

  private probing = false;

  private async probe(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    const all = this.replicas();
    const answers = await Promise.all(all.map((r) => readyz(r)));
    this.ready.clear();
    all.forEach((r, i) => answers[i]!.status === 200 && this.ready.add(r.identity));
    this.probing = false;
  }

  private place(inbound: Socket): void {
    const candidates = this.replicas().filter((r) => this.ready.has(r.identity));
    if (candidates.length === 0) {
      inbound.destroy();
      return;
    }
    const r = candidates[this.next++ % candidates.length]!;
    const outbound = createConnection({ host: "127.0.0.1", port: channelPort(r) });
    let set = this.open.get(r.identity);
    if (!set) this.open.set(r.identity, (set = new Set()));
    const conns = set;
    conns.add(inbound);
    for (const s of [inbound, outbound]) s.on("error", () => s.destroy());
    inbound.pipe(outbound).pipe(inbound);
    inbound.on("close", () => {
      conns.delete(inbound);
      outbound.destroy();
    });
    outbound.on("close", () => inbound.destroy());
  }

  /** Connections open to the replica now. */
  connections(r: Replica): number {
    return this.open.get(r.identity)?.size ?? 0;
  }

  /**
   * Drops every open connection; the VMs reconnect, placed in turn over the ready replicas from
   * `first` on (so that it gets two of five: then a worker's VM polls it, not only the main
   * thread's, which decides no connection).
   */
  resetAll(first?: Replica): void {
    const i = first ? this.replicas().filter((r) => this.ready.has(r.identity)).indexOf(first) : -1;
    if (i >= 0) this.next = i;
    for (const set of this.open.values()) for (const s of set) s.destroy();
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.resetAll();
    const server = this.server;
    if (server) await new Promise<void>((done) => server.close(() => done()));
  }
}

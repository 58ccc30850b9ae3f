// The feed's entry point: `tsx feed/src/main.ts --config feed.yaml`. Watches every configured
// API server, renders and validates the mesh on every (debounced) change, and delivers it to
// each target; serves the filters' channel (mutual TLS: /delta, /snapshot of the caller's
// targets) and the operator's plain port (/snapshots, /snapshot, /metrics, /healthz, /readyz);
// with `health`, /healthz and /readyz also from a worker thread that renders never block; with
// `leaderElection`, only the replica holding the Lease writes the deliveries (leader.ts).
// Clusters come from the configuration and from Istio's remote secrets, and change at run time
// (cluster_set.ts, remote_secrets.ts); the configuration file is followed (config_reload.ts).
// SIGTERM/SIGINT stop it.
import { parseArgs } from "node:util";
import { isMainThread } from "node:worker_threads";
import type { AddressInfo } from "node:net";
import type { KubeConfig } from "@kubernetes/client-node";
import { ClusterSet } from "./cluster_set.js";
import { defaultLogger, FeedController, type Logger } from "./controller.js";
import { loadFeedConfig, loadNetworks } from "./config.js";
import { WasmPluginDelivery } from "./deliver/wasmplugin.js";
import { FeedChannelServer } from "./channel.js";
import { FeedHttpServer } from "./http.js";
import { ConfigReloader, configClusterSource } from "./config_reload.js";
import { HealthServer } from "./health.js";
import { LeaseElector } from "./leader.js";
import { RemoteSecretWatch } from "./remote_secrets.js";
import { loadKubeConfig } from "./watch.js";

export interface RunningFeed {
  controller: FeedController;
  /** The operator's plain server and its port. */
  http?: FeedHttpServer;
  port?: number;
  /** The filters' mutual-TLS channel and its port. */
  channel?: FeedChannelServer;
  channelPort?: number;
  /** /healthz and /readyz from a worker thread (health.ts), when configured. */
  healthPort?: number;
  /** The clusters read now (configuration and remote secrets). */
  clusters: ClusterSet;
  /** Checks the configuration file now (tests; it is also checked every configReloadMs). */
  reload(): void;
  stop(): Promise<void>;
}

/** config_ha.ts checked that the Lease's cluster is read from an API server. */
function kubeConfigOf(kubeConfigs: Map<string, KubeConfig>, cluster: string): KubeConfig {
  const kc = kubeConfigs.get(cluster);
  if (!kc) throw new Error(`leaderElection.cluster: cluster ${JSON.stringify(cluster)} has no kubeconfig`);
  return kc;
}

/** How often a feed without a model yet looks again whether it has one (to start listening). */
const MODEL_CHECK_MS = 100;

/**
 * Listens on the channel once the controller has a model (at once when it has one), unless the
 * feed stopped first. A failure to listen (the port taken) rejects; startFeed fails with it when
 * the model came in its start, otherwise it is logged and the feed stays unready (ready(): the
 * channel is not listening).
 */
function listenOnceModelled(controller: FeedController, channel: FeedChannelServer, stopped: () => boolean, log: Logger): Promise<AddressInfo> {
  return new Promise<void>((modelled, gone) => {
    const look = () => {
      if (stopped()) return gone(new Error("the feed stopped before it had a model"));
      if (controller.noModel() !== undefined) return setTimeout(look, MODEL_CHECK_MS).unref();
      modelled();
    };
    look();
  }).then(() =>
    channel.listen().then(
      (address) => {
        log("info", `channel: listening on port ${address.port} (the feed has a model)`);
        return address;
      },
      (error: Error) => {
        log("error", `channel: cannot listen: ${error.message}; the feed stays unready`);
        throw error;
      },
    ),
  );
}

export async function startFeed(configPath: string): Promise<RunningFeed> {
  const config = loadFeedConfig(configPath);
  const networks = loadNetworks(config);
  const kubeConfigs = new Map(config.clusters.flatMap((c) => (c.kubeconfig ? [[c.id, loadKubeConfig(c.kubeconfig)] as const] : [])));
  const needsApply = config.targets.some((t) => t.wasmPlugin);
  const controller = new FeedController(
    config,
    { trustDomain: config.trustDomain, domainSuffix: config.domainSuffix, systemNamespace: config.systemNamespace, networks, caps: config.caps },
    [],
    needsApply ? new WasmPluginDelivery(kubeConfigs, undefined, (message) => defaultLogger("warn", message)) : undefined,
  );
  const log = defaultLogger;
  const le = config.leaderElection;
  const elector = le
    ? new LeaseElector(kubeConfigOf(kubeConfigs, le.cluster), le, { started: () => controller.pushes.resume(), stopped: () => controller.pushes.pause() }, controller.metrics, log)
    : undefined;
  if (elector && le) controller.useLease(elector, le.cluster, le.renewDeadlineMs);
  let http: FeedHttpServer | undefined;
  let port: number | undefined;
  let channel: FeedChannelServer | undefined;
  let channelPort: number | undefined;
  let health: HealthServer | undefined;
  let healthPort: number | undefined;
  try {
    if (config.health) {
      health = new HealthServer(config.health, () => controller.ready());
      healthPort = await health.listen();
    }
    if (config.operator) {
      http = new FeedHttpServer(controller, config.operator.limits, controller.metrics);
      port = (await http.listen(config.operator.port, config.operator.address)).port;
    }
    if (config.channel) {
      // Built now (its certificate files read: a bad set fails the start at once), listening
      // once there is a model (below).
      channel = new FeedChannelServer(controller, config.channel, config.targets, controller.metrics, log, config.delta.maxWaitSeconds);
      channel.prepare();
      const c = channel;
      controller.channelListening = () => c.listening;
    }
  } catch (error) {
    controller.stop();
    await http?.close();
    await channel?.close();
    await health?.close();
    throw error;
  }
  // Each cluster is read from its API server or from its files (config.ts allows exactly one);
  // the first is the feed's own (waited for without a limit), the others may time out.
  const clusterSet = new ClusterSet(controller, log, config.clusterSyncTimeoutSeconds, config.clusters[0]?.id);
  let secrets: RemoteSecretWatch | undefined;
  let reloader: ConfigReloader | undefined;
  const stopInputs = async () => {
    // The Lease first: released, another replica takes the writes over at its next try.
    await elector?.stop();
    reloader?.stop();
    await secrets?.stop();
    await clusterSet.stop();
  };
  /** A start that fails after the inputs began: everything it opened is closed before the error goes up. */
  const abandonStart = async () => {
    controller.stop();
    await stopInputs();
    await http?.close();
    await channel?.close();
    await health?.close();
  };
  try {
    for (const c of config.clusters) clusterSet.add(c.id, "config", configClusterSource(c));
    // Elected while the caches fill: nothing is written before every cluster synced (controller.ts).
    elector?.start();
    if (config.remoteSecrets) {
      // Nothing is published before the Secrets were listed and their clusters synced or timed out (istiod's HasSynced).
      const release = controller.holdStart();
      const kc = kubeConfigs.get(config.remoteSecrets.cluster) ?? loadKubeConfig(config.clusters.find((c) => c.id === config.remoteSecrets?.cluster)?.kubeconfig ?? "");
      secrets = new RemoteSecretWatch(kc, config.remoteSecrets.namespace, clusterSet, controller.metrics, log);
      await secrets.start();
      release();
    }
    await clusterSet.started();
  } catch (error) {
    await abandonStart();
    throw error;
  }
  reloader = new ConfigReloader(configPath, config, { clusters: clusterSet, setReaders: (t, r) => channel?.setReaders(t, r), recompute: () => controller.recompute(), metrics: controller.metrics, log });
  reloader.start();
  await controller.flush();
  // The channel listens only once the feed has a model: during the start (the lists, the first
  // computation and check, seconds of a blocked event loop at 100k pods) a filter's poll is a
  // refused connection, which it retries within 5 s (feed_retry.ts), instead of a connection
  // the kernel accepts and whose TLS handshake waits behind the start and times out.
  // feed/docs/high-availability.md, "Restarts and reconnection".
  let stopped = false;
  const listening = channel ? listenOnceModelled(controller, channel, () => stopped, log) : undefined;
  try {
    if (listening && controller.noModel() === undefined) channelPort = (await listening).port;
  } catch (error) {
    await abandonStart();
    throw error;
  }
  void listening?.then((a) => (channelPort = a.port)).catch(() => undefined);
  return {
    controller,
    http,
    port,
    channel,
    get channelPort() {
      return channelPort;
    },
    healthPort,
    clusters: clusterSet,
    reload: () => reloader?.check(),
    async stop() {
      stopped = true;
      controller.stop();
      await stopInputs();
      await http?.close();
      await channel?.close();
      await health?.close();
    },
  };
}

// Not in a worker thread: the filter check worker loads this same bundle (check_worker.ts).
if (isMainThread && import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { config: { type: "string", short: "c" } } });
  if (!values.config) {
    console.error("usage: tsx feed/src/main.ts --config <feed.yaml>");
    process.exit(2);
  }
  startFeed(values.config).then(
    (feed) => {
      const stop = () => void feed.stop().then(() => process.exit(0));
      process.on("SIGTERM", stop);
      process.on("SIGINT", stop);
    },
    (error) => {
      console.error(`feed: ${(error as Error).message}`);
      process.exit(1);
    },
  );
}

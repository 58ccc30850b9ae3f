// The feed's entry point: `tsx feed/src/main.ts --config feed.yaml`. Watches every configured
// API server, renders and validates the mesh on every (debounced) change, and delivers it to
// each target; serves the filters' channel (mutual TLS: /delta, /snapshot of the caller's
// targets) and the operator's plain port (/snapshots, /snapshot, /metrics, /healthz, /readyz);
// with `health`, /healthz and /readyz also from a worker thread that renders never block.
// SIGTERM/SIGINT stop it.
import { parseArgs } from "node:util";
import { ClusterObjects } from "./cluster_objects.js";
import { defaultLogger, FeedController } from "./controller.js";
import { loadFeedConfig, loadNetworks } from "./config.js";
import { WasmPluginDelivery } from "./deliver/wasmplugin.js";
import { FeedChannelServer } from "./channel.js";
import { FeedHttpServer } from "./http.js";
import { FileSource } from "./file_source.js";
import { HealthServer } from "./health.js";
import { ClusterWatch, loadKubeConfig } from "./watch.js";

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
  stop(): Promise<void>;
}

export async function startFeed(configPath: string): Promise<RunningFeed> {
  const config = loadFeedConfig(configPath);
  const networks = loadNetworks(config);
  const kubeConfigs = new Map(config.clusters.flatMap((c) => (c.kubeconfig ? [[c.id, loadKubeConfig(c.kubeconfig)] as const] : [])));
  const clusters = config.clusters.map((c) => new ClusterObjects(c.id));
  const needsApply = config.targets.some((t) => t.wasmPlugin);
  const controller = new FeedController(
    config,
    { trustDomain: config.trustDomain, domainSuffix: config.domainSuffix, systemNamespace: config.systemNamespace, networks, caps: config.caps },
    clusters,
    needsApply ? new WasmPluginDelivery(kubeConfigs, undefined, (message) => defaultLogger("warn", message)) : undefined,
  );
  const log = defaultLogger;
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
      channel = new FeedChannelServer(controller, config.channel, config.targets, controller.metrics, log, config.delta.maxWaitSeconds);
      channelPort = (await channel.listen()).port;
    }
  } catch (error) {
    controller.stop();
    await http?.close();
    await health?.close();
    throw error;
  }
  const hooks = {
    changed: (id: string) => controller.changed(id),
    synced: (id: string) => controller.markSynced(id),
    refused: (id: string, reason: string) => controller.sourceRefused(id, reason),
    watchFailed: (id: string, kind: string) => controller.clusterState.watchFailed(id, kind),
    watchRecovered: (id: string, kind: string) => controller.clusterState.watchRecovered(id, kind),
    log,
  };
  // Each cluster is read from its API server or from its files (config.ts allows exactly one).
  const watches = config.clusters.map((c, i) => {
    const kc = kubeConfigs.get(c.id);
    return kc ? new ClusterWatch(clusters[i], kc, hooks) : new FileSource(clusters[i], c.files ?? "", hooks);
  });
  try {
    await Promise.all(watches.map((w) => w.start()));
  } catch (error) {
    controller.stop();
    await Promise.all(watches.map((w) => w.stop()));
    await http?.close();
    await channel?.close();
    await health?.close();
    throw error;
  }
  await controller.flush();
  return {
    controller,
    http,
    port,
    channel,
    channelPort,
    healthPort,
    async stop() {
      controller.stop();
      await Promise.all(watches.map((w) => w.stop()));
      await http?.close();
      await channel?.close();
      await health?.close();
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
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

// A root context that takes live changes from the mesh feed: it owns the FeedClient (when the
// configuration has `meshFeed`) and hands it the root's ticks and HTTP-call responses, which
// Envoy delivers to the root context. The mesh filters (through mesh_root.ts) and the feed_probe
// fixture extend it; a filter without a feed extends ConfiguredRoot and carries no feed code.
import { ConfiguredRoot } from "./config_root";
import { FeedClient, MeshSink } from "./feed_client";
import { FeedConfig } from "./feed_config";

/** `C` is the filter's configuration (config_root.ts). */
export class FeedRootContext<C> extends ConfiguredRoot<C> {
  /** Live changes from the mesh feed (meshFeed in the configuration); null without one. */
  feed: FeedClient | null = null;

  /** Starts polling the feed when `config` is set; `prefix` names the client's counters and log lines. */
  protected startFeed(config: FeedConfig | null, sink: MeshSink, prefix: string): void {
    if (config === null) return;
    const client = new FeedClient(config, sink, prefix, this.id);
    this.feed = client;
    client.start();
  }

  onTick(): void {
    const feed = this.feed;
    if (feed !== null) feed.onTick();
  }

  onHttpCallResponse(token: u32, headers: u32, bodySize: u32, trailers: u32): void {
    const feed = this.feed;
    if (feed !== null) feed.onResponse(token, headers, bodySize);
  }
}

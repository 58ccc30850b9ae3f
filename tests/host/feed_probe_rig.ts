// The feed_probe fixture (the filters' feed client with a test sink) in the proxy-wasm host,
// polling a FakeFeed on loopback, on a clock the test moves ahead instead of waiting out
// backoffs. Shared by the feed client's tests (feed_client.test.ts, feed_retry.test.ts).
import assert from "node:assert/strict";
import { after, afterEach, before } from "node:test";
import { ProxyWasmHost } from "../../host/index.js";
import { FakeFeed } from "../support/fake_feed.js";
import { ensureBuilt } from "./helpers.js";

export class FeedProbeRig {
  readonly feed = new FakeFeed();
  /** The host of the test running now (disposed after it). */
  host: ProxyWasmHost | undefined;
  private skippedMs = 0n;
  /** Wall time plus what the test skipped ahead (tickAfter), in nanoseconds. */
  readonly clock = (): bigint => (BigInt(Date.now()) + this.skippedMs) * 1_000_000n;

  /** Registers the enclosing describe's hooks: the feed started once and killed at the end; each test's host disposed and the feed's injected answers cleared. */
  hooks(): this {
    before(() => this.feed.start());
    after(() => this.feed.kill());
    afterEach(() => {
      this.host?.dispose();
      this.feed.inject.length = 0;
    });
    return this;
  }

  /** feed_probe configured with `configuration`, its `mesh_feed` cluster on the feed, started. */
  async start(configuration: string): Promise<ProxyWasmHost> {
    const host = await ProxyWasmHost.fromFile(ensureBuilt("feed_probe"), {
      rootId: "feed_probe",
      pluginConfiguration: configuration,
      clock: this.clock,
      clusters: { mesh_feed: { address: `127.0.0.1:${this.feed.boundPort}` } },
    });
    this.host = host;
    assert.ok(host.start(), host.startFailure);
    return host;
  }

  /** The client's counter `name` (feed_probe.feed.<name>), 0 before it is set. */
  metric(name: string): number {
    return this.host?.metrics().get(`feed_probe.feed.${name}`) ?? 0;
  }

  /** HTTP calls the client made so far. */
  calls(): number {
    return this.host?.httpCalls.length ?? 0;
  }

  /** Moves the clock `ms` ahead and fires one tick, as Envoy's timer would. */
  tickAfter(ms: number): void {
    this.skippedMs += BigInt(ms);
    this.host?.tick();
  }
}

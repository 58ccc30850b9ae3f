// When the feed's channel accepts connections (feed/docs/high-availability.md, "Restarts and
// reconnection"), against the real feed process and the real kube-apiserver behind a relay the
// test can cut: a feed that has no model yet (its initial lists not in) does not listen, so a
// filter's poll is a refused connection, not a connection whose TLS handshake waits behind the
// start; once it has a model it listens and serves; a replica cut off from its API server later
// keeps accepting and answers each poll 503 with the reason (the serving gate), as before. Its
// accept queue is as long as the kernel allows (feed/docs/server-limits.md, "The accept queue").
// Run: bash scripts/in-netns.sh node --import tsx --test tests/feed/channel_listen.test.ts
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createConnection } from "node:net";
import { after, before, describe, it } from "node:test";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { channelGet } from "../support/feed_tls.js";
import { eventually, sleep } from "./harness.js";
import { metric, readyz, ReplicaSet, TARGET, TIMING, type Replica } from "./replicas_support.js";

/** The accept queue's length of the socket listening on the port (`ss`: a listener's Send-Q). */
function acceptBacklog(port: number): number {
  const line = execFileSync("ss", ["-Hltn", `sport = :${port}`], { encoding: "utf8" }).trim();
  const fields = line.split(/\s+/);
  assert.equal(fields[0], "LISTEN", `one listener on ${port}: ${line}`);
  return Number(fields[2]);
}

/** How a TCP connection to the port ends: "connected" (something accepted it) or the error's code. */
function connectOutcome(port: number): Promise<string> {
  return new Promise((done) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      done("connected");
    });
    socket.once("error", (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
  });
}

describe("feed: the channel listens once the feed has a model", { concurrency: false }, () => {
  let cluster: KubeCluster;
  let set: ReplicaSet;
  let replica: Replica;
  let port = 0;
  const poll = () => channelGet(`${replica.channel}/delta/${TARGET}?epoch=0&version=0&format=3`);

  before(async () => {
    cluster = await startKubeCluster({ name: "feed-channel-listen" });
    await cluster.createNamespace("apps");
    await cluster.createPod({ namespace: "apps", name: "app-0", labels: { "security.istio.io/tlsMode": "istio", app: "app" } });
    await cluster.setPodStatus("apps", "app-0", { podIP: "10.20.0.10" });
    set = new ReplicaSet(cluster);
    await set.setup();
  });

  after(async () => {
    await set?.stopAll();
    await cluster?.stop();
  });

  it("without its initial lists: unready, and a connection to the channel is refused; with them: it listens and serves", async () => {
    replica = await set.start(undefined, { apiServerCut: true });
    port = Number(new URL(replica.channel).port);
    const { value: unready } = await eventually("the operator port answers", 30_000, async () => {
      const a = await readyz(replica);
      return a.status === 0 ? undefined : a;
    });
    assert.equal(unready.status, 503);
    assert.match(unready.text, /waiting for the initial lists of cluster1/);
    // Refused every time over two seconds of a start that cannot finish: nothing listens.
    for (let i = 0; i < 10; i++) {
      assert.equal(await connectOutcome(port), "ECONNREFUSED", `attempt ${i}`);
      await sleep(200);
    }
    await replica.relay.restore();
    await set.ready(replica);
    // The longest accept queue the kernel gives (Node's default is 511): thousands of VMs come
    // back within seconds of a restart.
    assert.equal(acceptBacklog(port), Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8").trim()));
    // Nothing reached the TLS layer before it listened: no handshake failed.
    assert.equal((await metric(replica, "feed_channel_refused_total", { reason: "handshake" })) ?? 0, 0);
    const answer = await poll();
    assert.equal(answer.status, 200, answer.body.toString());
    assert.equal(answer.headers["x-feed-kind"], "full");
  });

  it("cut off from its API server after that: it keeps accepting and answers 503 with the reason, unready; back in touch, it serves", async () => {
    await replica.relay.cut();
    // renewDeadline (the test's 2.5 s), plus scheduling on a shared machine.
    const { value: cut } = await eventually("unready once cut off", TIMING.renewDeadlineMs + 5000, async () => {
      const a = await readyz(replica);
      return a.status === 503 ? a : undefined;
    });
    assert.match(cut.text, /not serving the channel/);
    assert.equal(await connectOutcome(port), "connected");
    const refused = await poll();
    assert.equal(refused.status, 503);
    assert.match(refused.body.toString(), /^not serving: /);
    assert.equal(refused.headers.connection, "close");
    await replica.relay.restore();
    await set.ready(replica);
    assert.equal((await poll()).status, 200);
  });
});

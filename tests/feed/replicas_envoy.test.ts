// Two feed replicas (separate processes, the writers' Lease) behind one `mesh_feed` cluster of
// the real Envoy (--concurrency 4: four worker VMs and the main thread's, each polling on its
// own), as a Kubernetes Service spreads a sidecar's polls over the feed's pods: round robin over
// both endpoints. A replica SIGKILLed, then restarted behind its endpoint, then the other one
// rolled (SIGTERM, a new process on its endpoint): the VMs' polls that reach a dead replica fail,
// the others go on, and a change made right after each kill or stop decides every new connection
// within the bound stated below. The shipped sidecar configuration otherwise (mutual TLS to the
// feed, meshFeed, no snapshot in the configuration); a private network namespace captures the
// application's connections as a sidecar's are (run under scripts/in-netns.sh).
//
// The property: no VM receives a full message after its first model. Every replica derives the
// same content digest from the same mesh, so a poll that moves to another replica (or to a
// restarted one, a new epoch) with a current model gets a no-change ("rebased" on the feed),
// and one whose model differs (a change one replica published before the other) a repair of
// the buckets that differ. The filters' `feed.applied_full` therefore stays at one per VM
// from the first model on, while the replicas count the rebased answers that show the polls
// did move.
// Run: bash scripts/in-netns.sh node --import tsx --test --test-concurrency=1 tests/feed/replicas_envoy.test.ts
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { captureOutbound, releaseCapture } from "../support/capture.js";
import { EnvoyProcess } from "../support/envoy.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { startBackend, type Backend } from "../support/tcp.js";
import { CERT_DIR } from "../../scripts/demo-certs.js";
import { eventually, sleep } from "./harness.js";
import { answered, channelPort, SIDECAR, SIDECAR_LABELS, SidecarProbe, sidecarConfig, VMS, WORKERS } from "./replicas_envoy_support.js";
import { ReplicaSet } from "./replicas_support.js";

/**
 * The bound a connection's model keeps after a replica dies: the delta debounce and a held
 * poll's answer (as tests/feed/delta_envoy.test.ts: 7 s on a loaded 2-core machine) plus the
 * filter's first reconnect wait after a failed poll (1 s) plus a full message's transfer and
 * load. No Lease wait: the channel does not depend on the leader.
 */
const BOUND_MS = 7000 + 1000 + 2000;

describe("two feed replicas behind the real Envoy's mesh_feed cluster: a replica killed, restarted, the other rolled; no VM receives a full message after its first", () => {
  let cluster: KubeCluster;
  let set: ReplicaSet;
  let envoy: EnvoyProcess;
  let httpbin: TlsPod; // 127.0.0.11:8443, certificate spiffe://cluster.local/ns/default/sa/httpbin
  let plain11: Backend; // 127.0.0.11:8080, plain
  let killedPort = 0; // the SIGKILLed replica's channel port (its endpoint in Envoy)
  const probe = new SidecarProbe(() => envoy);
  const { mtlsTo11, plainTo11 } = probe;
  const inARow = (decided: () => Promise<boolean>) => probe.inARow(decided);
  const applied = () => probe.applied();
  const report = (before: Awaited<ReturnType<typeof applied>>) => probe.report(before, [...set.replicas.values()]);
  const assertNoFullAfterFirst = () => probe.assertNoFullAfterFirst();

  before(async () => {
    cluster = await startKubeCluster({ name: "feed-rep-envoy" });
    await cluster.createNamespace("default");
    set = new ReplicaSet(cluster);
    await set.setup();
    const replicas = await Promise.all([set.start(), set.start()]);
    await Promise.all(replicas.map((r) => set.ready(r)));
    httpbin = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
    plain11 = await startBackend("plain-11", "127.0.0.11", 8080);
    envoy = await EnvoyProcess.start({ name: "feed-rep-envoy", adminPort: 15000, concurrency: WORKERS, config: sidecarConfig(replicas.map(channelPort)) });
    captureOutbound(15001);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await set?.stopAll();
    await cluster?.stop();
    for (const p of [httpbin, plain11]) await p?.close();
  });

  it(`every VM (${VMS}) loads a model from the replicas; a pod created: mTLS with its identity; polls moving between replicas bring no full message`, async (t) => {
    await eventually("a full model in every VM", 20_000, async () => ((await probe.feedStat("applied_full")) >= VMS ? true : undefined));
    const start = { full: 0, delta: 0, repair: 0, noChange: 0, unavailable: 0, refused: 0 };
    await cluster.createPod({ namespace: "default", name: "httpbin-0", labels: SIDECAR_LABELS, serviceAccountName: "httpbin" });
    await cluster.setPodStatus("default", "httpbin-0", { podIP: "127.0.0.11" });
    // Each worker's VM takes the new pod on its own poll, a few ms apart: a run of connections,
    // all mTLS, starting over until every VM has it (as after the kill and the roll below).
    await eventually("16 mTLS connections to httpbin-0 in a row", BOUND_MS, async () => ((await inARow(mtlsTo11)) ? true : undefined), 50);
    // The polls alternate between the replicas: each VM's model reached the other one (a held
    // poll ends within waitSeconds, 5 s) and was found current there.
    await eventually("every VM's poll answered rebased by another replica", 30_000, async () => ((await answered(set.replicas.values(), "rebased")) >= VMS ? true : undefined), 250);
    t.diagnostic(`after the first models and a pod created: ${await report(start)}`);
    await assertNoFullAfterFirst();
  });

  it(`a replica SIGKILLed and the pod deleted at once: every new connection decides plain within ${BOUND_MS} ms, from the survivor's model; no full message`, async (t) => {
    const before = await applied();
    const victim = [...set.replicas.values()][0];
    killedPort = channelPort(victim);
    await set.crash(victim);
    const changed = Date.now();
    await cluster.deletePod("default", "httpbin-0");
    const { ms } = await eventually("plain passthrough to 127.0.0.11", BOUND_MS, async () => ((await plainTo11()) ? true : undefined), 50);
    // Not one worker left on the old model: a run of connections, all plain (the workers' VMs
    // each take the change on their own poll, a few ms apart: the run starts over until then).
    await eventually("16 plain connections in a row", BOUND_MS, async () => ((await inARow(plainTo11)) ? true : undefined), 50);
    const decidedWithin = Date.now() - changed;
    assert.ok(decidedWithin <= BOUND_MS + 2000, `${decidedWithin} ms`);
    // A few more polls of each VM (held ones end within 5 s): none brings a full message.
    await sleep(6000);
    t.diagnostic(`replica killed + pod deleted -> first plain connection after ${ms} ms, 16 in a row by ${decidedWithin} ms; since the kill: ${await report(before)}`);
    await assertNoFullAfterFirst();
    assert.ok(httpbin.peers.every((p) => p === SIDECAR));
  });

  it(`the killed replica restarted behind its endpoint, then the other rolled (SIGTERM, a pod created at once): connections follow within ${BOUND_MS} ms; no full message`, async (t) => {
    const before = await applied();
    assert.ok(killedPort > 0 && set.replicas.size === 1, "one replica left after the kill");
    const restarted = await set.start(killedPort);
    await set.ready(restarted);
    // The restarted replica (a new epoch, the same mesh) answers the VMs' current models with no-change.
    await eventually("the restarted replica answers the VMs rebased", 30_000, async () => ((await answered([restarted], "rebased")) >= VMS ? true : undefined), 250);
    const old = [...set.replicas.values()].find((r) => r !== restarted);
    assert.ok(old);
    const oldPort = channelPort(old);
    await set.stop(old);
    const changed = Date.now();
    await cluster.createPod({ namespace: "default", name: "httpbin-0", labels: SIDECAR_LABELS, serviceAccountName: "httpbin" });
    await cluster.setPodStatus("default", "httpbin-0", { podIP: "127.0.0.11" });
    const { ms } = await eventually("mTLS to httpbin-0 again", BOUND_MS, async () => ((await mtlsTo11()) ? true : undefined), 50);
    await eventually("16 mTLS connections in a row", BOUND_MS, async () => ((await inARow(mtlsTo11)) ? true : undefined), 50);
    const decidedWithin = Date.now() - changed;
    assert.ok(decidedWithin <= BOUND_MS + 2000, `${decidedWithin} ms`);
    const rolled = await set.start(oldPort);
    await set.ready(rolled);
    await eventually("the rolled replica answers the VMs rebased", 30_000, async () => ((await answered([rolled], "rebased")) >= VMS ? true : undefined), 250);
    t.diagnostic(`killed replica restarted; other stopped + pod created -> first mTLS connection after ${ms} ms, 16 in a row by ${decidedWithin} ms; rolled replica back; since the restart: ${await report(before)}`);
    await assertNoFullAfterFirst();
    assert.ok(httpbin.peers.every((p) => p === SIDECAR));
  });
});

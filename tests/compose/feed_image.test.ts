// The feed's container image (feed/image/): built on the private Docker engine and run with the
// shipped Deployment's settings against a real kube-apiserver, serving a real Envoy
// (tests/compose/feed_image.inner.ts, inside a private network + mount namespace). Like the
// compose test, it leaves the machine's network as it was and no process behind.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { requireKubeBinaries } from "../support/kube.js";
import { hostNetwork, prepare, processesLeftIn, runInner } from "./netns_run.js";

describe("the feed's image as a container (npm run test:compose)", { concurrency: false }, () => {
  let before_ = "";
  before(() => {
    requireKubeBinaries();
    prepare("scripts/docker-engine.sh", "install");
    prepare("scripts/docker-images.sh", "prepare");
    before_ = hostNetwork();
  });

  it("builds, turns Ready with the shipped settings, and serves a real Envoy", { timeout: 1_200_000 }, async () => {
    const started = Date.now();
    const { code, report, netns } = await runInner("tests/compose/feed_image.inner.ts");
    console.log(`# feed image: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(code, 0, "tests/compose/feed_image.inner.ts failed (its report is above)");
    assert.match(report, /ℹ pass 4\b/, "the inner run did not pass all 4 of its tests");
    assert.match(report, /ℹ skipped 0\b/);
    assert.ok(netns, "the run never entered a private network namespace");
    assert.deepEqual(await processesLeftIn(netns), [], `processes left in ${netns}`);
  });

  it("the machine's network is as it was before", () => {
    assert.equal(hostNetwork(), before_);
  });
});

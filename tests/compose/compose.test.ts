// `npm run test:compose`: docker-compose.yml on a real Docker engine. Everything that needs the
// machine's network happens here first (the compose plugin from the Go module proxy, the engine
// and image inputs from Debian's mirror); then tests/compose/topologies.inner.ts runs inside a
// private network + mount namespace, twice in a row (a second run right after the first must
// work). The engine's bridge, iptables chains and mounts live and die with that namespace: this
// file checks that the machine's own links, addresses, routes, iptables rules and forwarding
// switches are the same afterwards, and that no process is left in the namespace. (Kernel
// modules loaded on first use, such as overlay or the NAT targets, are the kernel's and stay.)
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { hostNetwork, prepare, processesIn, runInner } from "./netns_run.js";

describe("docker compose (npm run test:compose)", { concurrency: false }, () => {
  let before_ = "";
  before(() => {
    prepare("scripts/docker-compose-plugin.sh");
    prepare("scripts/docker-engine.sh", "install");
    prepare("scripts/docker-images.sh", "prepare");
    before_ = hostNetwork();
  });

  for (const round of ["first run", "second run, right after"]) {
    // Each compose command inside has its own deadline; this one bounds a run that hangs anyway.
    it(`${round}: every topology in the header shows what the README says`, { timeout: 1_200_000 }, async () => {
      const started = Date.now();
      const { code, report, netns } = await runInner("tests/compose/topologies.inner.ts");
      console.log(`# ${round}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
      assert.equal(code, 0, "tests/compose/topologies.inner.ts failed (its report is above)");
      // Every test of the inner file ran and passed: none skipped, none missing.
      assert.match(report, /ℹ pass 9\b/, "the inner run did not pass all 9 of its tests");
      assert.match(report, /ℹ skipped 0\b/);
      assert.ok(netns, "the run never entered a private network namespace");
      // Container shims, dockerd, containerd: none may outlive the run.
      assert.deepEqual(processesIn(netns), [], `processes left in ${netns}`);
    });
  }

  it("the machine's network is as it was before", () => {
    assert.equal(hostNetwork(), before_);
  });
});

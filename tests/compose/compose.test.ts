// `npm run test:compose`: docker-compose.yml on a real Docker engine. Everything that needs the
// machine's network happens here first (the compose plugin from the Go module proxy, the engine
// and image inputs from Debian's mirror); then tests/compose/topologies.inner.ts runs inside a
// private network + mount namespace, twice in a row (a second run right after the first must
// work). The engine's bridge, iptables chains and mounts live and die with that namespace: this
// file checks that the machine's own links, addresses, routes, iptables rules and forwarding
// switches are the same afterwards, and that no process is left in the namespace. (Kernel
// modules loaded on first use, such as overlay or the NAT targets, are the kernel's and stay.)
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { readdirSync, readlinkSync } from "node:fs";
import { before, describe, it } from "node:test";
import { REPO_ROOT } from "../support/paths.js";

function prepare(...args: string[]): void {
  const started = Date.now();
  execFileSync("bash", args, { cwd: REPO_ROOT, stdio: ["ignore", "inherit", "inherit"], timeout: 1_800_000 });
  console.log(`# ${args.join(" ")}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** The machine's network as dockerd could change it; counters and timestamps left out. */
function hostNetwork(): string {
  const read = (command: string, ...args: string[]) => {
    try {
      return execFileSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    } catch {
      return `(${command} unavailable)`;
    }
  };
  const rules = (text: string) => text.split("\n").filter((line) => !line.startsWith("#")).map((line) => line.replace(/\[\d+:\d+\]/, "")).join("\n");
  return [
    read("ip", "-o", "link"),
    read("ip", "-o", "addr"),
    read("ip", "route"),
    rules(read("iptables-save")),
    rules(read("ip6tables-save")),
    read("cat", "/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/bridge/bridge-nf-call-iptables"),
  ].join("\n---\n");
}

/** Processes whose network namespace is `netns` (a "net:[inode]" link). */
function processesIn(netns: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/net`) === netns) found.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

/** One run of the topologies in a fresh private namespace; resolves with its exit code, report and namespace. */
function runInner(): Promise<{ code: number | null; report: string; netns: string }> {
  return new Promise((done) => {
    // Without NODE_TEST_CONTEXT: node --test inside a test would otherwise skip its files.
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    const child = spawn("bash", ["scripts/docker-netns.sh", "node", "--import", "tsx", "--test", "--test-reporter=spec", "tests/compose/topologies.inner.ts"], {
      cwd: REPO_ROOT,
      env,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let report = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      report += chunk.toString();
      process.stderr.write(chunk);
    });
    const own = readlinkSync("/proc/self/ns/net");
    let netns = "";
    // bash execs unshare, which enters the new namespace and execs the test runner: same pid.
    const watch = setInterval(() => {
      try {
        const link = readlinkSync(`/proc/${child.pid}/ns/net`);
        if (link !== own) netns = link;
      } catch {
        // not started or gone
      }
      if (netns) clearInterval(watch);
    }, 20);
    child.on("close", (code) => {
      clearInterval(watch);
      done({ code, report, netns });
    });
  });
}

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
      const { code, report, netns } = await runInner();
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

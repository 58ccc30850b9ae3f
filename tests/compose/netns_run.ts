// What the docker tests' outer halves share: the preparation steps that need the machine's
// network, running an inner test file inside a private network + mount namespace
// (scripts/docker-netns.sh) and what must be true of the machine afterwards.
import { execFileSync, spawn } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { REPO_ROOT } from "../support/paths.js";

export function prepare(...args: string[]): void {
  const started = Date.now();
  execFileSync("bash", args, { cwd: REPO_ROOT, stdio: ["ignore", "inherit", "inherit"], timeout: 1_800_000 });
  console.log(`# ${args.join(" ")}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** The machine's network as dockerd could change it; counters and timestamps left out. */
export function hostNetwork(): string {
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

/** Processes whose network namespace is `netns` (a "net:[inode]" link), as "pid command line". */
export function processesIn(netns: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/net`) !== netns) continue;
      found.push(`${entry} ${readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ").trim()}`);
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

/** One run of `file` (a node:test file) in a fresh private namespace; resolves with its exit code, report and namespace. */
export function runInner(file: string): Promise<{ code: number | null; report: string; netns: string }> {
  return new Promise((done) => {
    // Without NODE_TEST_CONTEXT: node --test inside a test would otherwise skip its files.
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    const child = spawn("bash", ["scripts/docker-netns.sh", "node", "--import", "tsx", "--test", "--test-reporter=spec", file], {
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

/**
 * The processes still in `netns` once those that are on their way out have had `ms` to go: the
 * kube harness's guards (tests/kube/harness/process.ts) end their children on stdin's end and
 * then exit on their own, a moment after the test runner that owned them.
 */
export async function processesLeftIn(netns: string, ms = 15_000): Promise<string[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const left = processesIn(netns);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((done) => setTimeout(done, 200));
  }
}

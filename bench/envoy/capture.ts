// Capture for load generators. wrk, h2load and iperf3 cannot choose their source address, so the
// shared capture (tests/support/capture.ts, by source 127.0.0.100) cannot catch them. Instead the
// generators run as their own user and an iptables `owner` match redirects that user's TCP to the
// sidecar's outbound port, the way Istio's capture tells the app from Envoy by uid. Envoy runs as
// root, so its upstream connections are never redirected back to itself.
//
// Only inside the private network namespace scripts/in-netns.sh makes (it sets MESH_TEST_NETNS).
import { execFileSync } from "node:child_process";

/** The user the generators run as ("nobody"): only its connections are captured. */
export const GENERATOR_UID = 65534;
export const GENERATOR_GID = 65534;

function requireBenchNamespace(): void {
  if (process.env.MESH_TEST_NETNS !== "1") {
    throw new Error("bench/envoy: not inside a private network namespace; run through scripts/in-netns.sh (npm run bench does)");
  }
}

function iptables(args: string[]): void {
  execFileSync("iptables", ["-w", ...args], { stdio: ["ignore", "ignore", "pipe"] });
}

/** Sends every TCP connection the generator user opens to 127.0.0.1:`port` (replacing any earlier rule). */
export function captureGeneratorTo(port: number): void {
  requireBenchNamespace();
  releaseGeneratorCapture();
  iptables(["-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-m", "owner", "--uid-owner", String(GENERATOR_UID), "-j", "REDIRECT", "--to-ports", String(port)]);
}

/** Removes the generator's capture rule (other rules in OUTPUT stay). */
export function releaseGeneratorCapture(): void {
  requireBenchNamespace();
  const rules = execFileSync("iptables", ["-w", "-t", "nat", "-S", "OUTPUT"], { encoding: "utf8" });
  for (const rule of rules.split("\n")) {
    if (rule.startsWith("-A OUTPUT") && rule.includes(`--uid-owner ${GENERATOR_UID}`)) {
      iptables(["-t", "nat", "-D", ...rule.slice(3).trim().split(/\s+/)]);
    }
  }
}

/** Makes a whole prefix (e.g. the snapshot's 10.0.0.0/8 pod addresses) local in this namespace. */
export function makePrefixLocal(prefix: string): void {
  requireBenchNamespace();
  execFileSync("ip", ["route", "replace", "local", prefix, "dev", "lo"], { stdio: ["ignore", "ignore", "pipe"] });
}

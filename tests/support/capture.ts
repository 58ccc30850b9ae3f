// Mesh-style traffic capture for end-to-end tests: an iptables REDIRECT of the client's outbound
// TCP to Envoy's outbound listener, whose original_dst listener filter restores the destination
// the client dialled (SO_ORIGINAL_DST), exactly as a sidecar's capture does. Only the client's
// source address is redirected, so Envoy's own upstream connections (from 127.0.0.1) are not.
//
// These rules must only ever change a private network namespace: scripts/in-netns.sh (and
// scripts/docker-netns.sh, the private engine's) creates one and marks it; outside it every call
// here refuses.
import { execFileSync } from "node:child_process";

/** The address test clients connect from; only its traffic is captured. */
export const CLIENT_ADDRESS = "127.0.0.100";

function requireTestNamespace(): void {
  if (process.env.MESH_TEST_NETNS !== "1" && process.env.MDF_DOCKER_NETNS !== "1") {
    throw new Error("capture: not inside the test network namespace; run through scripts/in-netns.sh (npm run test:mesh)");
  }
}

function iptables(args: string[]): void {
  execFileSync("iptables", ["-w", ...args], { stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * Redirects every TCP connection from `source` (default CLIENT_ADDRESS) to 127.0.0.1:`port`.
 * Several sidecars in one namespace each capture their own client address.
 */
export function captureOutbound(port: number, source: string = CLIENT_ADDRESS): void {
  requireTestNamespace();
  iptables(["-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-s", source, "-j", "REDIRECT", "--to-ports", String(port)]);
}

/** Removes every capture rule. */
export function releaseCapture(): void {
  requireTestNamespace();
  iptables(["-t", "nat", "-F", "OUTPUT"]);
}

/** The original_dst listener filter, as a sidecar's outbound listener has it. */
export const ORIGINAL_DST_LISTENER_FILTER = {
  name: "envoy.filters.listener.original_dst",
  typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst" },
};

// Service VIPs come from the API server's service range (10.96.0.0/16). In the test's private
// network namespace that range is made local, so an application can dial a VIP and the
// sidecar-style capture restores it (nothing is ever sent to it: the filters tunnel to pods).
import { execFileSync } from "node:child_process";
import { SERVICE_CIDR } from "../support/kube.js";

export function routeServiceRangeLocally(): void {
  if (process.env.MESH_TEST_NETNS !== "1") throw new Error("not inside the test network namespace: run through scripts/in-netns.sh (npm run test:feed)");
  try {
    execFileSync("ip", ["route", "add", "local", SERVICE_CIDR, "dev", "lo"], { stdio: ["ignore", "ignore", "pipe"] });
  } catch (error) {
    if (!/File exists/.test(String((error as { stderr?: Buffer }).stderr ?? ""))) throw error;
  }
}

/**
 * The API server refuses loopback addresses in EndpointSlices (pod status takes them). The
 * feed, like istiod, takes a pod-backed endpoint's addresses from its Pod (targetRef), so the
 * slices these tests write carry a stand-in for the loopback pod IP.
 */
export function sliceAddress(podIp: string): string {
  const [, , c, d] = podIp.split(".");
  return `10.250.${c}.${d}`;
}

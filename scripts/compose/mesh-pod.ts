// docker-compose's `mesh-pod`: plays a Kubernetes pod's network namespace for the
// passthrough_mtls services. It starts the demo pods on loopback addresses, installs the
// sidecar-style capture (iptables REDIRECT of the application's address to 15001), waits for
// the sidecar Envoy that shares this namespace, then dials every demo destination once and
// prints where each went. It stays up so you can dial more (`docker compose exec mesh-pod ...`).
import { CLIENT_ADDRESS, captureOutbound } from "../../tests/support/capture.js";
import { sleep } from "../../tests/support/envoy.js";
import { startTlsPod } from "../../tests/support/pods.js";
import { exchange, startBackend } from "../../tests/support/tcp.js";
import { CERT_DIR } from "../demo-certs.js";

async function waitForSidecar(): Promise<void> {
  for (;;) {
    try {
      const response = await fetch("http://127.0.0.1:15000/ready");
      if ((await response.text()).trim() === "LIVE") return;
    } catch {
      // not up yet
    }
    await sleep(500);
  }
}

await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
await startBackend("legacy-0", "127.0.0.12", 8080);
await startTlsPod("reviews-0", "127.0.0.13", 8443, CERT_DIR, "pod-c");
await startTlsPod("db-0", "127.0.0.14", 5432, CERT_DIR, "pod-h");
await startBackend("outside", "127.0.0.30", 9000);
// tunnel_port's application on pod p1 (its sidecar: the tunnel-port-server service).
await startBackend("app-p1-9376", "127.0.0.21", 9376);
// waypoint_route's backends behind the local (net1) and remote (net2) waypoints.
await startBackend("backend-net1", "127.0.0.42", 9080);
await startBackend("backend-net2", "127.0.0.62", 9080);
captureOutbound(15001);
console.log("mesh-pod: pods up, capture installed; waiting for the sidecar on 127.0.0.1:15000");
await waitForSidecar();
const SCENARIOS: Record<string, ReadonlyArray<readonly [string, number]>> = {
  passthrough_mtls: [["127.0.0.11", 8443], ["127.0.0.13", 8443], ["127.0.0.12", 8080], ["127.0.0.14", 5432], ["127.0.0.30", 9000]],
  tunnel_port: [["127.10.0.2", 80], ["127.10.0.2", 81], ["127.0.0.30", 9000]],
  waypoint_route: [["127.10.1.1", 80], ["127.10.1.3", 80]],
};
const destinations = SCENARIOS[process.env.MESH_POD_SCENARIO ?? "passthrough_mtls"] ?? SCENARIOS.passthrough_mtls!;
for (const [address, port] of destinations) {
  const reply = await exchange(address, port, "hello", 10_000, CLIENT_ADDRESS);
  const first = reply.received.toString().split("\n")[0] || "(refused, nothing sent)";
  console.log(`mesh-pod: ${address}:${port} -> ${first}`);
}
console.log("mesh-pod: done; counters: curl -s 127.0.0.1:15000/stats | grep wasmcustom");

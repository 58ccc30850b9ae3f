// What each compose topology's application (scripts/compose/mesh-pod.ts) runs: the pods it
// serves itself, the Envoys it waits for, the destinations it dials with the answer the README
// promises, and where the filter's counters are. One entry per topology in docker-compose.yml.
import { startTlsPod } from "../../tests/support/pods.js";
import { startBackend, type Backend } from "../../tests/support/tcp.js";

export interface Target {
  address: string;
  port: number;
  what: string;
  /** The first line the destination answers with, or "" when the connection must be refused. */
  expect: string;
}

export interface Scenario {
  /** Envoy admin endpoints (host:port) that must report LIVE before dialling; the first one's counters are printed. */
  admins: string[];
  /** Counter name prefix, after Envoy's `wasmcustom.`. */
  counters: string;
  /** iptables capture of the application's address (127.0.0.100) to the sidecar's 15001. */
  capture: boolean;
  /** Pods and backends this container serves itself (in the pod's namespace). */
  startPods(certDir: string): Promise<Backend[]>;
  /** Listeners run by other services that must accept before dialling. */
  waitFor: Array<[string, number]>;
  targets: Target[];
  /** Stays up after the first round and dials again whenever the sidecar applies a new ECDS config. */
  liveUpdates: boolean;
}

const PEER = "peer=URI:spiffe://cluster.local/ns/default/sa/sleep";

const passthroughMtls: Scenario = {
  admins: ["127.0.0.1:15000"],
  counters: "passthrough_mtls.",
  capture: true,
  startPods: async (certs) => [
    await startTlsPod("httpbin-0", "127.0.0.11", 8443, certs, "pod-a"),
    await startBackend("legacy-0", "127.0.0.12", 8080),
    await startTlsPod("reviews-0", "127.0.0.13", 8443, certs, "pod-c"),
    await startTlsPod("db-0", "127.0.0.14", 5432, certs, "pod-h"),
    await startBackend("outside", "127.0.0.30", 9000),
  ],
  waitFor: [],
  targets: [
    { address: "127.0.0.11", port: 8443, what: "mesh pod, tlsMode istio (mTLS)", expect: `httpbin-0 ${PEER}` },
    { address: "127.0.0.13", port: 8443, what: "mesh pod presenting a wrong identity", expect: "" },
    { address: "127.0.0.12", port: 8080, what: "mesh pod, tlsMode disabled (plain)", expect: "legacy-0" },
    { address: "127.0.0.14", port: 5432, what: "headless service db, pod db-0 (mTLS)", expect: `db-0 ${PEER}` },
    { address: "127.0.0.30", port: 9000, what: "not a mesh pod (plain passthrough)", expect: "outside" },
  ],
  liveUpdates: false,
};

export const SCENARIOS: Record<string, Scenario> = {
  probe: {
    admins: ["127.0.0.1:9901"],
    counters: "probe.",
    capture: false,
    startPods: async () => [],
    waitFor: [["127.0.0.1", 18081], ["127.0.0.1", 18082], ["127.0.0.1", 18083]],
    targets: [
      { address: "127.0.0.2", port: 10000, what: "route 127.0.0.2 -> backend_a", expect: "backend_a" },
      { address: "127.0.0.3", port: 10000, what: "route 127.0.0.3 -> backend_b", expect: "backend_b" },
      { address: "127.0.0.4", port: 10000, what: "no route: tcp_proxy's own cluster", expect: "backend_default" },
    ],
    liveUpdates: false,
  },
  passthrough_mtls: passthroughMtls,
  passthrough_mtls_subset: passthroughMtls,
  tunnel_port: {
    admins: ["127.0.0.1:15000", "127.0.0.21:15000"],
    counters: "tunnel_port.",
    capture: true,
    startPods: async () => [await startBackend("app-p1-9376", "127.0.0.21", 9376), await startBackend("outside", "127.0.0.30", 9000)],
    waitFor: [],
    targets: [
      { address: "127.10.0.2", port: 80, what: "admin.default:80 -> p1:9376 over HBONE (allowed)", expect: "app-p1-9376" },
      { address: "127.10.0.2", port: 81, what: "admin.default:81 -> p1:9376 (81 denied by RBAC)", expect: "" },
      { address: "127.0.0.30", port: 9000, what: "not in the mesh (plain passthrough)", expect: "outside" },
    ],
    liveUpdates: false,
  },
  waypoint_route: {
    admins: ["127.0.0.1:15000", "127.0.0.41:15000", "127.0.0.51:15000", "127.0.0.61:15000"],
    counters: "waypoint_route.",
    capture: true,
    startPods: async () => [await startBackend("backend-net1", "127.0.0.42", 9080), await startBackend("backend-net2", "127.0.0.62", 9080)],
    waitFor: [],
    targets: [
      { address: "127.10.1.1", port: 80, what: "my-svc:80 via its waypoint (local one healthy)", expect: "backend-net1" },
      { address: "127.10.1.3", port: 80, what: "isolated:80, only waypoint on net3 (no gateway)", expect: "" },
    ],
    liveUpdates: true,
  },
};

// A cluster-like mesh snapshot (the shared `workloads` / `services` model every filter reads,
// assembly/mesh/README.md) at any size, with the facts a benchmark needs to draw destinations
// that take each of a filter's routes. Deterministic, so runs can be compared.
//
// For `pods` workload entries (every entry counts as a pod):
// - local pods on the default network ("" = network id 0), IPv4 10.0.1.0 + index; ~1% of the
//   entries on network "net-b": half share an IP with a local pod (the local one must win for
//   pod-IP lookups), half have IPs no local pod has (10.128.x.y);
// - ~1000 identities (service accounts) spiffe://cluster.local/ns/ns-<n>/sa/sa-<k> in 50
//   namespaces; 3 zones of one region locally, another region on net-b;
// - tlsMode istio for 95% of local pods, disabled (no identity) for 5%;
// - one ClusterIP service per 50 local pods (VIP 172.20.x.y, port 80 → 8080; every 10th
//   endpoint overrides it to 8081, as a rolling port change does);
// - every 10th ClusterIP service is fronted by a namespace waypoint; one waypoint per 1000 local
//   pods (at least 2), each a service with 2 instances: even waypoints run on this network
//   (10.64.x.y pods), odd ones only on net-b, where they are "proxy" workloads (no address)
//   behind net-b's east-west gateway (a gateway workload, 172.16.0.1, HBONE port 15008);
// - one headless service per 500 local pods (StatefulSet-like), 10 endpoints each (2% of pods),
//   on one of 5432 / 9042 / 27017 / 6379 (target port = service port).
// The waypoint instances and the gateway are among the `pods` entries (taken from the local
// count), so the per-pod figures divide by the real number of workload entries.
export type OwnFields = Readonly<Record<string, string | number | boolean>>;

export interface HeadlessMember {
  readonly ip: string;
  readonly port: number;
  readonly hostname: string;
}

/** passthrough_mtls's routes: kept for bench/envoy/ (real Envoy), which dials these. */
export type Route = "mtls" | "headless" | "plaintext_pod" | "not_a_pod";
export const ROUTES: readonly Route[] = ["mtls", "headless", "plaintext_pod", "not_a_pod"];

export interface Snapshot {
  readonly pods: number;
  readonly localPods: number;
  readonly remotePods: number;
  readonly services: number;
  readonly headlessServices: number;
  readonly waypoints: number;
  /** The whole plugin configuration: own fields first, then the mesh. */
  readonly config: Uint8Array;
  /** Every headless (pod, port) pair: Istio builds one listener for each. */
  readonly headlessMembers: readonly HeadlessMember[];
  /** `IP:PORT` destinations per passthrough_mtls route, drawn uniformly over the table. */
  readonly destinations: Readonly<Record<Route, string[]>>;
}

export const HEADLESS_PORTS = [5432, 9042, 27017, 6379];
const PODS_PER_SERVICE = 50;
const PODS_PER_HEADLESS = 500;
const HEADLESS_STRIDE = 50; // one member every 50 pods of its block → 10 per service
const PODS_PER_WAYPOINT = 1000;
const WAYPOINT_INSTANCES = 2;
const ZONES = ["us-east1-a", "us-east1-b", "us-east1-c"];
export const GATEWAY_IP = "172.16.0.1";

/** mulberry32: small, fast, seeded. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function dotted(u: number): string {
  return `${u >>> 24}.${(u >>> 16) & 255}.${(u >>> 8) & 255}.${u & 255}`;
}

// Facts about pod i / service s, shared by the generator and the destination pickers.
export const localIp = (i: number): string => dotted(((10 << 24) >>> 0) + 256 + i);
export const remoteOnlyIp = (r: number): string => dotted(((10 << 24) >>> 0) + (128 << 16) + r);
export const isDisabled = (i: number): boolean => i % 20 === 7;
export const isHeadlessMember = (i: number): boolean => i % HEADLESS_STRIDE === 3;
/** Target port of pod i as an endpoint of its ClusterIP service (service port 80). */
export const targetPort = (i: number): number => (i % 10 === 4 ? 8081 : 8080);
export const serviceOf = (i: number): number => Math.floor(i / PODS_PER_SERVICE);
export const vip = (s: number): string => dotted(((172 << 24) >>> 0) + (20 << 16) + s + 1);
export const hasWaypoint = (s: number): boolean => s % 10 === 5;
/** The waypoint fronting service s (when it has one); even = instances on this network. */
export const waypointOf = (s: number, waypoints: number): number => Math.floor(s / 10) % waypoints;
export const isLocalWaypoint = (w: number): boolean => w % 2 === 0;
export const identity = (k: number): string => `spiffe://cluster.local/ns/ns-${k % 50}/sa/sa-${k % 1000}`;
const headlessPort = (s: number): number => HEADLESS_PORTS[s % HEADLESS_PORTS.length]!;
const headlessHostname = (s: number): string => `db-${s}.ns-${s % 50}.svc.cluster.local`;
const localUid = (i: number): string => `Kubernetes//Pod/ns-${i % 50}/app-${i}`;
const waypointHostname = (w: number): string => `waypoint.ns-${w % 50}-${w}.svc.cluster.local`;
const waypointInstanceUid = (w: number, k: number): string => `Kubernetes//Pod/ns-${w % 50}/waypoint-${w}-${k}`;
const waypointInstanceIp = (w: number, k: number): string => dotted(((10 << 24) >>> 0) + (64 << 16) + w * WAYPOINT_INSTANCES + k);

/** Accumulates JSON text in chunks and turns it into bytes without one giant JS string. */
class Chunks {
  private parts: string[] = [];
  private size = 0;
  private readonly buffers: Buffer[] = [];
  push(text: string): void {
    this.parts.push(text);
    this.size += text.length;
    if (this.size > 8 << 20) this.flush();
  }
  private flush(): void {
    this.buffers.push(Buffer.from(this.parts.join(""), "utf8"));
    this.parts = [];
    this.size = 0;
  }
  bytes(): Uint8Array {
    this.flush();
    return Buffer.concat(this.buffers);
  }
}

export function buildSnapshot(pods: number, own: OwnFields = {}): Snapshot {
  const remotePods = Math.max(2, Math.floor(pods / 100));
  const waypoints = Math.max(2, Math.floor(pods / PODS_PER_WAYPOINT));
  const extras = waypoints * WAYPOINT_INSTANCES + 1; // waypoint instances + the gateway
  const localPods = pods - remotePods - extras;
  if (localPods < PODS_PER_SERVICE * 10) throw new Error(`a snapshot needs at least ~600 pods, not ${pods}`);
  const out = new Chunks();
  out.push(`${JSON.stringify(own).slice(0, -1)}${Object.keys(own).length ? "," : ""}"workloads":[`);
  for (let i = 0; i < localPods; i++) {
    const tls = isDisabled(i) ? '"tlsMode":"disabled"' : `"tlsMode":"istio","identity":"${identity(i)}"`;
    out.push(
      `${i ? "," : ""}{"uid":"${localUid(i)}","addresses":["${localIp(i)}"],${tls},` +
        `"locality":"us-east1/${ZONES[i % 3]}"}`,
    );
  }
  // Remote network: even r shares a local pod's IP, odd r has an IP no local pod has.
  const sharedLocal = (r: number): number => (r * 50 + 11) % localPods;
  for (let r = 0; r < remotePods; r++) {
    const ip = r % 2 === 0 ? localIp(sharedLocal(r)) : remoteOnlyIp(r);
    out.push(
      `,{"uid":"Kubernetes//Pod/ns-${r % 50}/remote-${r}","addresses":["${ip}"],"network":"net-b",` +
        `"tlsMode":"istio","identity":"${identity(r * 7)}","locality":"us-west1/us-west1-a"}`,
    );
  }
  out.push(
    `,{"uid":"Kubernetes//Pod/istio-system/eastwest-b","addresses":["${GATEWAY_IP}"],"network":"net-b",` +
      `"tlsMode":"istio","identity":"spiffe://cluster.local/ns/istio-system/sa/eastwest","locality":"us-west1/us-west1-a"}`,
  );
  for (let w = 0; w < waypoints; w++) {
    for (let k = 0; k < WAYPOINT_INSTANCES; k++) {
      const id = `"tlsMode":"istio","identity":"spiffe://cluster.local/ns/ns-${w % 50}/sa/waypoint"`;
      out.push(
        isLocalWaypoint(w)
          ? `,{"uid":"${waypointInstanceUid(w, k)}","addresses":["${waypointInstanceIp(w, k)}"],${id},` +
              `"locality":"us-east1/${ZONES[k % 3]}"}`
          : `,{"uid":"${waypointInstanceUid(w, k)}","addresses":[],"network":"net-b",${id},` +
              `"locality":"us-west1/us-west1-a","networkGateway":{"address":"${GATEWAY_IP}","hboneMtlsPort":15008}}`,
      );
    }
  }
  out.push('],"services":[');
  const services = Math.ceil(localPods / PODS_PER_SERVICE);
  for (let s = 0; s < services; s++) {
    const endpoints: string[] = [];
    for (let i = s * PODS_PER_SERVICE; i < Math.min(localPods, (s + 1) * PODS_PER_SERVICE); i++) {
      const override = targetPort(i) === 8080 ? "" : `,"ports":{"80":${targetPort(i)}}`;
      endpoints.push(`{"workload":"${localUid(i)}"${override}}`);
    }
    const waypoint = hasWaypoint(s) ? `,"waypoint":{"hostname":"${waypointHostname(waypointOf(s, waypoints))}"}` : "";
    out.push(
      `${s ? "," : ""}{"hostname":"svc-${s}.ns-${s % 50}.svc.cluster.local","vips":[{"address":"${vip(s)}"}],` +
        `"ports":{"80":8080},"endpoints":[${endpoints.join(",")}]${waypoint}}`,
    );
  }
  for (let w = 0; w < waypoints; w++) {
    const endpoints = Array.from({ length: WAYPOINT_INSTANCES }, (_, k) => `{"workload":"${waypointInstanceUid(w, k)}"}`);
    out.push(
      `,{"hostname":"${waypointHostname(w)}","ports":{"15008":15008},` +
        `"subjectAltNames":["spiffe://cluster.local/ns/ns-${w % 50}/sa/waypoint"],"endpoints":[${endpoints.join(",")}]}`,
    );
  }
  const headlessServices = Math.ceil(localPods / PODS_PER_HEADLESS);
  const headlessMembers: HeadlessMember[] = [];
  for (let s = 0; s < headlessServices; s++) {
    const port = headlessPort(s);
    const hostname = headlessHostname(s);
    const endpoints: string[] = [];
    for (let i = s * PODS_PER_HEADLESS; i < Math.min(localPods, (s + 1) * PODS_PER_HEADLESS); i++) {
      if (!isHeadlessMember(i)) continue;
      endpoints.push(`{"workload":"${localUid(i)}"}`);
      headlessMembers.push({ ip: localIp(i), port, hostname });
    }
    out.push(
      `,{"hostname":"${hostname}","headless":true,"ports":{"${port}":${port}},` +
        `"endpoints":[${endpoints.join(",")}]}`,
    );
  }
  out.push("]}");
  const destinations = passthroughDestinations(localPods, remotePods, headlessMembers);
  return {
    pods,
    localPods,
    remotePods,
    services,
    headlessServices,
    waypoints,
    config: out.bytes(),
    headlessMembers,
    destinations,
  };
}

const DESTINATIONS_PER_ROUTE = 2_000;

function passthroughDestinations(localPods: number, remotePods: number, headlessMembers: readonly HeadlessMember[]): Record<Route, string[]> {
  const random = prng(7919);
  const pick = (n: number): number => Math.floor(random() * n);
  const out: Record<Route, string[]> = { mtls: [], headless: [], plaintext_pod: [], not_a_pod: [] };
  while (out.mtls.length < DESTINATIONS_PER_ROUTE) {
    const i = pick(localPods);
    if (!isDisabled(i) && !isHeadlessMember(i)) out.mtls.push(`${localIp(i)}:${targetPort(i)}`);
  }
  while (out.headless.length < DESTINATIONS_PER_ROUTE) {
    const m = headlessMembers[pick(headlessMembers.length)]!;
    out.headless.push(`${m.ip}:${m.port}`);
  }
  while (out.plaintext_pod.length < DESTINATIONS_PER_ROUTE) {
    const i = pick(localPods);
    if (isDisabled(i)) out.plaintext_pod.push(`${localIp(i)}:${targetPort(i)}`);
  }
  while (out.not_a_pod.length < DESTINATIONS_PER_ROUTE) {
    // Half outside the mesh, half pods that exist only on the other network.
    out.not_a_pod.push(
      random() < 0.5 ? `192.168.${pick(256)}.${1 + pick(254)}:443` : `${remoteOnlyIp(1 + 2 * pick(Math.floor(remotePods / 2)))}:8080`,
    );
  }
  return out;
}

// A cluster-like mesh snapshot for passthrough_mtls's plugin configuration, plus destinations
// for each route the filter can take. Deterministic (seeded), so runs can be compared.
//
// For `pods` workloads (every workload entry counts as a pod):
// - 99% on this proxy's network ("" = network id 0), 1% on network "net-b": half of those share
//   an IP with a local pod (the local one must win), half have IPs no local pod has;
// - unique IPv4 per local pod: 10.0.1.0 + index (10.x.y.z), remote-only IPs from 10.128.0.0;
// - ~1000 identities (service accounts) spiffe://cluster.local/ns/ns-<n>/sa/sa-<k>, in 50
//   namespaces; 3 zones of one region;
// - tlsMode istio for 95% of pods, disabled (no identity) for 5%;
// - one ClusterIP service (VIP 172.20.x.y, port 80 → 8080) per 50 local pods, all of them as
//   endpoints: what a real snapshot carries even though this filter does not route on VIPs;
// - one headless service per 500 local pods (StatefulSet-like), 10 endpoints each (2% of pods),
//   on one of 5432 / 9042 / 27017 / 6379 (target port = service port).
export type Route = "mtls" | "headless" | "plaintext_pod" | "not_a_pod";
export const ROUTES: readonly Route[] = ["mtls", "headless", "plaintext_pod", "not_a_pod"];

export interface HeadlessMember {
  readonly ip: string;
  readonly port: number;
  readonly hostname: string;
}

export interface Snapshot {
  readonly pods: number;
  readonly localPods: number;
  readonly remotePods: number;
  readonly headlessServices: number;
  readonly config: Uint8Array;
  /** Destinations (`IP:PORT`) per route, in random order. */
  readonly destinations: Readonly<Record<Route, string[]>>;
  /** Every headless (pod, port) pair: Istio builds one listener for each. */
  readonly headlessMembers: readonly HeadlessMember[];
}

const HEADLESS_PORTS = [5432, 9042, 27017, 6379];
const PODS_PER_SERVICE = 50;
const PODS_PER_HEADLESS = 500;
const HEADLESS_STRIDE = 50; // one member every 50 pods of its block → 10 per service
const ZONES = ["us-east1-a", "us-east1-b", "us-east1-c"];

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

const localIp = (i: number): string => dotted(((10 << 24) >>> 0) + 256 + i);
const remoteOnlyIp = (r: number): string => dotted(((10 << 24) >>> 0) + (128 << 16) + r);
const isDisabled = (i: number): boolean => i % 20 === 7;
const isHeadlessMember = (i: number): boolean => i % HEADLESS_STRIDE === 3;
const headlessPort = (s: number): number => HEADLESS_PORTS[s % HEADLESS_PORTS.length]!;
const headlessHostname = (s: number): string => `db-${s}.ns-${s % 50}.svc.cluster.local`;
const localUid = (i: number): string => `Kubernetes//Pod/ns-${i % 50}/app-${i}`;
const identity = (k: number): string => `spiffe://cluster.local/ns/ns-${k % 50}/sa/sa-${k % 1000}`;

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

export function buildSnapshot(pods: number, seed = 1): Snapshot {
  const remotePods = Math.max(2, Math.floor(pods / 100));
  const localPods = pods - remotePods;
  const out = new Chunks();
  out.push('{"localNetwork":"","workloads":[');
  for (let i = 0; i < localPods; i++) {
    const tls = isDisabled(i)
      ? '"tlsMode":"disabled"'
      : `"tlsMode":"istio","identity":"${identity(i)}"`;
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
  out.push('],"services":[');
  const services = Math.ceil(localPods / PODS_PER_SERVICE);
  for (let s = 0; s < services; s++) {
    const endpoints: string[] = [];
    for (let i = s * PODS_PER_SERVICE; i < Math.min(localPods, (s + 1) * PODS_PER_SERVICE); i++) {
      endpoints.push(`{"workload":"${localUid(i)}"}`);
    }
    out.push(
      `${s ? "," : ""}{"hostname":"svc-${s}.ns-${s % 50}.svc.cluster.local",` +
        `"vips":[{"address":"${dotted(((172 << 24) >>> 0) + (20 << 16) + s + 1)}"}],` +
        `"ports":{"80":8080},"endpoints":[${endpoints.join(",")}]}`,
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

  // Destinations, drawn uniformly over the whole table (cache behaviour matters at 1M).
  const random = prng(seed * 7919);
  const pick = (n: number): number => Math.floor(random() * n);
  const count = 20_000;
  const destinations: Record<Route, string[]> = { mtls: [], headless: [], plaintext_pod: [], not_a_pod: [] };
  while (destinations.mtls.length < count) {
    const i = pick(localPods);
    if (!isDisabled(i) && !isHeadlessMember(i)) destinations.mtls.push(`${localIp(i)}:8080`);
  }
  while (destinations.headless.length < count) {
    const m = headlessMembers[pick(headlessMembers.length)]!;
    destinations.headless.push(`${m.ip}:${m.port}`);
  }
  while (destinations.plaintext_pod.length < count) {
    const i = pick(localPods);
    if (isDisabled(i)) destinations.plaintext_pod.push(`${localIp(i)}:8080`);
  }
  while (destinations.not_a_pod.length < count) {
    // Half outside the mesh, half pods that exist only on the other network.
    if (random() < 0.5) {
      destinations.not_a_pod.push(`192.168.${pick(256)}.${1 + pick(254)}:443`);
    } else {
      const r = 1 + 2 * pick(Math.floor(remotePods / 2));
      destinations.not_a_pod.push(`${remoteOnlyIp(r)}:8080`);
    }
  }
  return {
    pods,
    localPods,
    remotePods,
    headlessServices,
    config: out.bytes(),
    destinations,
    headlessMembers,
  };
}

/** A mixed stream: 60% mTLS pods, 15% headless members, 10% disabled pods, 15% not a pod. */
export function mixedDestinations(snapshot: Snapshot, count: number, seed = 2): string[] {
  const random = prng(seed);
  const weights: Array<[Route, number]> = [
    ["mtls", 0.6],
    ["headless", 0.15],
    ["plaintext_pod", 0.1],
    ["not_a_pod", 0.15],
  ];
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    let x = random();
    let route: Route = "not_a_pod";
    for (const [r, w] of weights) {
      if (x < w) {
        route = r;
        break;
      }
      x -= w;
    }
    const list = snapshot.destinations[route];
    out.push(list[Math.floor(random() * list.length)]!);
  }
  return out;
}

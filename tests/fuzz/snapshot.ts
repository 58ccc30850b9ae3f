// Valid mesh snapshots (the shared model of assembly/mesh/README.md) in which every field of the
// schema is used: two networks, IPv4 and IPv6 pods, the same IP on both networks, sidecar and
// plain pods, unhealthy pods, localities, waypoints (local and remote), an east-west gateway
// by address and by hostname, remote "proxy" workloads, headless services, per-endpoint port
// overrides, explicit clusters, load-balancing preferences. The fuzzer mutates these; the soak
// runs connections through a large one. Also answers, from the snapshot alone, the facts the
// oracles need (which (service port, target port) pairs the local workload serves).

export type Json = Record<string, unknown>;

export const LOCAL_NETWORK = "net1";
export const REMOTE_NETWORK = "net2";
const TRUST = "spiffe://cluster.local/ns";

export interface Snapshot {
  readonly workloads: Json[];
  readonly services: Json[];
  /** The sidecar's own workload (an endpoint of services[0]) on LOCAL_NETWORK. */
  readonly localWorkload: string;
  /** Destinations the mesh knows, as Envoy prints them (IP:PORT). */
  readonly knownDestinations: string[];
}

const ipv4 = (i: number, base: number) => `10.${base}.${(i >> 8) & 0xff}.${i & 0xff}`;
const ipv6 = (i: number) => `fd00::${(i & 0xffff).toString(16)}:1`;
const id = (ns: string, sa: string) => `${TRUST}/${ns}/sa/${sa}`;

/**
 * A snapshot with `pods` application pods spread over `services` services (at least 8 pods and
 * 4 services, so that every kind of workload and service is present).
 */
export function meshSnapshot(pods = 40, services = 8): Snapshot {
  pods = Math.max(8, pods);
  services = Math.max(4, services);
  const workloads: Json[] = [];
  const known: string[] = [];
  for (let i = 0; i < pods; i++) {
    const remote = i % 10 === 9;
    const w: Json = {
      uid: `pod-${i}`,
      // a remote pod reuses a local pod's IP: the same address on two networks is legal
      addresses: remote ? [ipv4(i - 1, 1)] : i % 7 === 3 ? [ipv4(i, 1), ipv6(i)] : [ipv4(i, 1)],
      network: remote ? REMOTE_NETWORK : LOCAL_NETWORK,
      locality: `r${i % 2}/z${i % 3}${i % 4 === 0 ? "/s1" : ""}`,
    };
    if (i % 9 !== 4) {
      w.tlsMode = "istio";
      w.identity = id("default", `sa-${i % 5}`);
    } else if (i % 2 === 0) {
      w.identity = id("plain", "legacy");
    }
    if (i % 11 === 6) w.healthy = false;
    if (i % 13 === 5) w.waypoint = { hostname: "waypoint.default.svc.cluster.local" };
    workloads.push(w);
    if (!remote) known.push(`${ipv4(i, 1)}:8080`, `${ipv4(i, 1)}:9376`);
  }
  // waypoint instances: one local, one remote "proxy" reached through the gateway by address,
  // one remote through the gateway service by hostname
  workloads.push(
    { uid: "wp-local", addresses: ["10.9.0.1"], network: LOCAL_NETWORK, locality: "r1/z2", tlsMode: "istio", identity: id("default", "waypoint") },
    {
      uid: "wp-remote",
      addresses: [],
      network: REMOTE_NETWORK,
      locality: "r0/z0",
      tlsMode: "istio",
      identity: id("default", "waypoint"),
      networkGateway: { address: "172.16.2.1", hboneMtlsPort: 15008 },
    },
    {
      uid: "wp-remote-by-name",
      addresses: [],
      network: "net3",
      tlsMode: "istio",
      identity: id("default", "waypoint"),
      networkGateway: { hostname: "eastwest.istio-system.svc.cluster.local" },
    },
    { uid: "ew2", addresses: ["172.16.2.1"], network: REMOTE_NETWORK, tlsMode: "istio", identity: id("istio-system", "eastwest") },
    { uid: "ew3", addresses: ["172.16.3.1", "fd00:3::1"], network: "net3", tlsMode: "istio", identity: id("istio-system", "eastwest"), healthy: true },
    {
      uid: "remote-proxy",
      addresses: [],
      network: REMOTE_NETWORK,
      tlsMode: "istio",
      identity: id("default", "sa-remote"),
      networkGateway: { address: "172.16.9.9" }, // resolves to nothing: an unknown gateway
    },
  );
  const out: Json[] = [];
  const perService = Math.max(1, Math.floor(pods / services));
  for (let s = 0; s < services; s++) {
    const endpoints: Json[] = [];
    for (let p = s * perService; p < Math.min(pods, (s + 1) * perService); p++) {
      endpoints.push(p % 6 === 1 ? { workload: `pod-${p}`, ports: { "80": 9376 } } : { workload: `pod-${p}` });
    }
    if (s === 1) endpoints.push({ workload: "remote-proxy" });
    const svc: Json = {
      hostname: `svc-${s}.default.svc.cluster.local`,
      ports: s % 3 === 2 ? { "80": 8080, "443": 8443, "9000": 9000 } : { "80": 8080, "443": 8443 },
      endpoints,
    };
    const headless = s % 4 === 3;
    if (headless) svc.headless = true;
    else {
      const vip = `10.96.${(s + 1) >> 8}.${(s + 1) & 0xff}`;
      svc.vips = s % 5 === 4 ? [{ address: vip }, { network: LOCAL_NETWORK, address: `fd00:96::${(s + 1).toString(16)}` }] : [{ network: LOCAL_NETWORK, address: vip }];
      known.push(`${vip}:80`, `${vip}:443`);
    }
    if (s % 4 === 2) svc.waypoint = { hostname: "waypoint.default.svc.cluster.local" };
    if (s % 6 === 5) svc.waypoint = { address: "10.9.0.1", port: 15008 };
    if (s % 5 === 1) svc.subjectAltNames = [id("default", `sa-${s % 5}`)];
    if (s % 7 === 6) svc.cluster = `custom_cluster_${s}`;
    if (s % 3 === 0) svc.loadBalancing = { routingPreference: ["network", "region", "zone"], mode: "failover" };
    if (s % 8 === 7) svc.loadBalancing = { routingPreference: [], mode: "standard" };
    out.push(svc);
  }
  out.push(
    {
      hostname: "waypoint.default.svc.cluster.local",
      ports: { "15008": 15008 },
      endpoints: [{ workload: "wp-remote" }, { workload: "wp-remote-by-name" }, { workload: "wp-local" }],
      subjectAltNames: [id("default", "waypoint")],
    },
    {
      hostname: "eastwest.istio-system.svc.cluster.local",
      ports: { "15008": 15443 },
      endpoints: [{ workload: "ew3" }],
      subjectAltNames: [id("istio-system", "eastwest")],
    },
  );
  // services whose every choice is remote or broken: the double HBONE and error outcomes
  workloads.push(
    { uid: "far-pod", addresses: ["10.202.0.1"], network: REMOTE_NETWORK, tlsMode: "istio", identity: id("default", "far") },
    { uid: "no-gateway", addresses: ["10.204.0.1"], network: "net4", tlsMode: "istio", identity: id("default", "lost") },
    { uid: "sick", addresses: ["10.1.250.1"], network: LOCAL_NETWORK, tlsMode: "istio", identity: id("default", "sick"), healthy: false },
    // waypoint_route rules 7 and 5: a service whose only endpoint has no sidecar, a pod whose own waypoint names nothing
    { uid: "plain-only", addresses: ["10.1.251.1"], network: LOCAL_NETWORK },
    // rule 8: a remote proxy whose gateway service does not expose the HBONE port
    {
      uid: "behind-portless-gateway",
      addresses: [],
      network: REMOTE_NETWORK,
      tlsMode: "istio",
      identity: id("default", "far"),
      networkGateway: { hostname: "eastwest-noport.istio-system.svc.cluster.local" },
    },
    { uid: "lost-waypoint", addresses: ["10.1.252.1"], network: LOCAL_NETWORK, tlsMode: "istio", identity: id("default", "lost-wp"), waypoint: { hostname: "gone.default.svc.cluster.local" } },
  );
  const special: [string, Json][] = [
    ["remote-waypoint", { waypoint: { hostname: "waypoint-far.default.svc.cluster.local" } }],
    ["remote-endpoints", { endpoints: [{ workload: "wp-remote" }] }],
    ["missing-waypoint", { waypoint: { hostname: "gone.default.svc.cluster.local" } }],
    ["unknown-gateway", { endpoints: [{ workload: "remote-proxy" }] }],
    ["no-gateway", { endpoints: [{ workload: "no-gateway" }] }],
    ["no-healthy", { endpoints: [{ workload: "sick" }] }],
    ["plain-endpoint", { endpoints: [{ workload: "plain-only" }] }],
    ["portless-gateway", { endpoints: [{ workload: "behind-portless-gateway" }] }],
    ["portless-waypoint", { waypoint: { hostname: "waypoint-noport.default.svc.cluster.local" } }],
  ];
  special.forEach(([name, extra], k) => {
    out.push({ hostname: `${name}.default.svc.cluster.local`, vips: [{ network: LOCAL_NETWORK, address: `10.97.0.${k + 1}` }], ports: { "80": 8080 }, endpoints: [], ...extra });
    known.push(`10.97.0.${k + 1}:80`);
  });
  out.push(
    { hostname: "eastwest-noport.istio-system.svc.cluster.local", ports: { "15443": 15443 }, endpoints: [{ workload: "ew2" }] },
    { hostname: "waypoint-noport.default.svc.cluster.local", ports: { "15021": 15021 }, endpoints: [{ workload: "wp-local" }] },
  );
  out.push({
    hostname: "waypoint-far.default.svc.cluster.local",
    ports: { "15008": 15008 },
    endpoints: [{ workload: "wp-remote" }, { workload: "far-pod" }],
    subjectAltNames: [id("default", "waypoint")],
  });
  known.push("10.9.0.1:15008", "[fd00:96::5]:80", "10.202.0.1:8080", "10.1.252.1:8080");
  return { workloads, services: out, localWorkload: ipv4(0, 1), knownDestinations: known };
}

/**
 * (service port, target port) pairs the workload at `localAddress` (on `network`) serves: over
 * every service listing it as an endpoint, its per-endpoint override first, else the default.
 * Written from the README's rules, independently of the filter.
 */
export function servedPairs(snapshot: Snapshot, localAddress: string, network = LOCAL_NETWORK): Set<string> {
  const pairs = new Set<string>();
  const self = snapshot.workloads.find(
    (w) => (w.network ?? "") === network && Array.isArray(w.addresses) && (w.addresses as string[]).includes(localAddress),
  );
  if (!self) return pairs;
  for (const svc of snapshot.services) {
    const ports = (svc.ports ?? {}) as Record<string, number>;
    for (const ep of (svc.endpoints ?? []) as Json[]) {
      if (ep.workload !== self.uid) continue;
      const overrides = (ep.ports ?? {}) as Record<string, number>;
      for (const [servicePort, target] of Object.entries(ports)) pairs.add(`${servicePort}/${overrides[servicePort] ?? target}`);
    }
  }
  return pairs;
}

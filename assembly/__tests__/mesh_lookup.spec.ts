import {
  Address,
  formatIp,
  Mesh,
  parseIpString,
  parseMeshConfigString,
  parseSocketAddressString,
  RefTarget,
  Scope,
} from "../mesh";

function mesh(text: string): Mesh {
  const result = parseMeshConfigString(text);
  const m = result.mesh;
  if (m === null) {
    expect(result.error).toBe("");
    return new Mesh();
  }
  return m;
}

function ip(text: string): Address {
  const a = new Address();
  parseIpString(text, a);
  return a;
}

function utf8(buf: ArrayBuffer | null): string {
  return buf === null ? "<null>" : String.UTF8.decode(buf);
}

// Workloads: 0 pod-a (net "", v4 + v6), 1 pod-b (net "", v4), 2 twin (net "east", same IP as
// pod-a), 3 remote waypoint proxy on "east" (no address), 4 waypoint pod (net ""), 5 gateway pod
// on "east".
const MESH = `{
  "workloads": [
    {"uid": "pod-a", "addresses": ["10.0.0.1", "fd00::a"], "locality": "r1/z1/s1"},
    {"uid": "pod-b", "addresses": ["10.0.0.2"], "locality": "r1/z2"},
    {"uid": "twin", "addresses": ["10.0.0.1"], "network": "east", "locality": "r1/z1/s1"},
    {"uid": "wp-remote", "addresses": [], "network": "east",
     "networkGateway": {"address": "192.0.2.1", "hboneMtlsPort": 15443}},
    {"uid": "wp-local", "addresses": ["10.0.9.1"]},
    {"uid": "gw-east", "addresses": ["192.0.2.1"], "network": "east",
     "identity": "spiffe://td/ns/istio-system/sa/gw", "tlsMode": "istio"}
  ],
  "services": [
    {"hostname": "web", "vips": [{"address": "10.96.0.1"}, {"network": "east", "address": "10.96.0.1"},
       {"address": "fd00:96::1"}],
     "ports": {"80": 9376, "443": 8443},
     "endpoints": [{"workload": "pod-a", "ports": {"80": 9377}}, {"workload": "pod-b"}]},
    {"hostname": "db", "headless": true, "ports": {"5432": 5432, "80": 8080},
     "endpoints": [{"workload": "pod-a"}, {"workload": "pod-b", "ports": {"80": 9090}}]},
    {"hostname": "db2", "headless": true, "ports": {"5433": 5432},
     "endpoints": [{"workload": "pod-a"}]},
    {"hostname": "waypoint", "vips": [{"address": "10.96.0.9"}], "ports": {"15008": 15008},
     "endpoints": [{"workload": "wp-local"}, {"workload": "wp-remote"}],
     "loadBalancing": {"routingPreference": ["network", "region", "zone"]}},
    {"hostname": "fronted", "waypoint": {"hostname": "waypoint"}},
    {"hostname": "lost", "waypoint": {"hostname": "missing.example"}},
    {"hostname": "by-vip", "waypoint": {"address": "10.96.0.9"}},
    {"hostname": "by-pod", "waypoint": {"address": "10.0.9.1", "port": 15009}},
    {"hostname": "nowhere", "waypoint": {"address": "203.0.113.7"}}
  ]
}`;

describe("workloadByAddress", () => {
  it("finds a workload by IPv4 and by IPv6", () => {
    const m = mesh(MESH);
    expect(m.workloadByAddress(0, ip("10.0.0.1"))).toBe(0);
    expect(m.workloadByAddress(0, ip("10.0.0.2"))).toBe(1);
    expect(m.workloadByAddress(0, ip("fd00::a"))).toBe(0);
    expect(m.workloadByAddress(0, ip("FD00:0:0::A"))).toBe(0);
    expect(m.workloadByV4(0, 0x0a000002)).toBe(1);
  });

  it("finds the IPv4 entry through an IPv4-mapped IPv6 destination", () => {
    const m = mesh(MESH);
    const a = new Address();
    expect(parseSocketAddressString("[::ffff:10.0.0.2]:80", a)).toBe(true);
    expect(m.workloadByAddress(0, a)).toBe(1);
  });

  it("resolves the same IP per network", () => {
    const m = mesh(MESH);
    const east = m.networkId("east");
    expect(east).toBe(1);
    expect(m.workloadByAddress(0, ip("10.0.0.1"))).toBe(0);
    expect(m.workloadByAddress(east, ip("10.0.0.1"))).toBe(2);
    expect(m.workloadByAddress(east, ip("10.0.0.2"))).toBe(-1);
  });

  it("resolves the same IPv6 address per network", () => {
    const m = mesh(`{"workloads": [
      {"uid": "a", "addresses": ["fd00::1"], "network": "west"},
      {"uid": "b", "addresses": ["fd00:0::1"], "network": "east"}]}`);
    expect(m.workloadByAddress(m.networkId("west"), ip("fd00::1"))).toBe(0);
    expect(m.workloadByAddress(m.networkId("east"), ip("fd00::1"))).toBe(1);
    expect(m.workloadByAddress(0, ip("fd00::1"))).toBe(-1);
  });

  it("answers -1 for unknown addresses and networks without trapping", () => {
    const m = mesh(MESH);
    expect(m.workloadByAddress(0, ip("10.0.0.99"))).toBe(-1);
    expect(m.workloadByAddress(0, ip("fd00::b"))).toBe(-1);
    expect(m.workloadByAddress(0, new Address())).toBe(-1);
    expect(m.workloadByAddress(7, ip("10.0.0.1"))).toBe(-1);
    expect(m.workloadByAddress(-1, ip("10.0.0.1"))).toBe(-1);
    expect(m.workloadByAddress(70000, ip("10.0.0.1"))).toBe(-1);
    expect(new Mesh().workloadByAddress(0, ip("10.0.0.1"))).toBe(-1);
    expect(new Mesh().workloadByAddress(0, ip("fd00::1"))).toBe(-1);
  });

  it("answers neutral values for out-of-range indexes", () => {
    const m = mesh(MESH);
    expect(m.workloadNetwork(99)).toBe(-1);
    expect(m.workloadHealthy(-1)).toBe(false);
    expect(m.workloadIdentity(99)).toBe("");
    expect(m.workloadAddressCount(-5)).toBe(0);
    expect(m.serviceHostname(99)).toBe("");
    expect(m.endpointWorkload(0, 5)).toBe(-1);
    expect(m.endpointWorkload(99, 0)).toBe(-1);
    expect(m.servicePortAt(0, 9)).toBe(-1);
    expect(m.san(0, 0)).toBe("");
    expect(m.refTarget(99)).toBe(RefTarget.None);
    expect(m.refPort(-1)).toBe(-1);
    expect(m.networkName(42)).toBe("");
    expect(m.lbPreference(0, 7)).toBe(0);
  });
});

describe("serviceByVip", () => {
  it("finds a service by VIP per network, IPv4 and IPv6", () => {
    const m = mesh(MESH);
    expect(m.serviceByVip(0, ip("10.96.0.1"))).toBe(0);
    expect(m.serviceByVip(1, ip("10.96.0.1"))).toBe(0);
    expect(m.serviceByVip(0, ip("fd00:96::1"))).toBe(0);
    expect(m.serviceByVip(1, ip("fd00:96::1"))).toBe(-1);
    expect(m.serviceByVip(0, ip("10.96.0.9"))).toBe(3);
    expect(m.serviceByVip(0, ip("10.0.0.1"))).toBe(-1);
  });

  it("finds a service by hostname", () => {
    const m = mesh(MESH);
    expect(m.serviceByHostname("db")).toBe(1);
    expect(m.serviceByHostname("nope")).toBe(-1);
  });
});

describe("targetPort", () => {
  it("uses the endpoint's own override first", () => {
    const m = mesh(MESH);
    expect(m.targetPort(0, 0, 80)).toBe(9377);
  });

  it("falls back to the service default without an override", () => {
    const m = mesh(MESH);
    expect(m.targetPort(0, 0, 443)).toBe(8443);
    expect(m.targetPort(0, 1, 80)).toBe(9376);
    expect(m.serviceTargetPort(0, 80)).toBe(9376);
  });

  it("answers -1 for a port the service does not expose or a bad endpoint", () => {
    const m = mesh(MESH);
    expect(m.targetPort(0, 0, 81)).toBe(-1);
    expect(m.targetPort(0, 2, 80)).toBe(-1);
    expect(m.targetPort(0, -1, 80)).toBe(-1);
    expect(m.targetPort(0, 0, 0)).toBe(-1);
    expect(m.targetPort(0, 0, 70000)).toBe(-1);
    expect(m.exposesPort(0, 443)).toBe(true);
    expect(m.exposesPort(0, 444)).toBe(false);
  });
});

describe("headlessServiceOf", () => {
  it("matches the endpoint's effective target port", () => {
    const m = mesh(MESH);
    // db: 5432 → 5432 for both, 80 → 8080 default, 9090 for pod-b.
    expect(m.headlessServiceOf(0, 5432)).toBe(1);
    expect(m.headlessServiceOf(0, 8080)).toBe(1);
    expect(m.headlessServiceOf(1, 9090)).toBe(1);
    expect(m.headlessServicePort(1, 9090)).toBe(80);
    expect(utf8(m.headlessCluster(1, 9090))).toBe("outbound|80||db");
  });

  it("does not match service ports or overridden defaults", () => {
    const m = mesh(MESH);
    expect(m.headlessServiceOf(0, 80)).toBe(-1);
    expect(m.headlessServiceOf(1, 8080)).toBe(-1);
    expect(m.headlessCluster(1, 8080)).toBeNull();
  });

  it("lets the first headless service win and ignores non-headless services", () => {
    const m = mesh(MESH);
    // db2 also maps pod-a 5433 → 5432, but db comes first.
    expect(m.headlessServiceOf(0, 5432)).toBe(1);
    expect(m.headlessServicePort(0, 5432)).toBe(5432);
    // web has pod-a on 9377 but is not headless.
    expect(m.headlessServiceOf(0, 9377)).toBe(-1);
    expect(m.headlessServiceOf(2, 5432)).toBe(-1);
    expect(m.headlessServiceOf(99, 5432)).toBe(-1);
  });
});

describe("reference resolution", () => {
  it("resolves a hostname reference to a service", () => {
    const m = mesh(MESH);
    const r = m.serviceWaypoint(4);
    expect(m.refTarget(r)).toBe(RefTarget.Service);
    expect(m.refIndex(r)).toBe(3);
    expect(m.refPort(r)).toBe(15008);
  });

  it("records an unknown hostname as unresolved, not as an error", () => {
    const m = mesh(MESH);
    const r = m.serviceWaypoint(5);
    expect(m.refTarget(r)).toBe(RefTarget.Unresolved);
    expect(m.refIndex(r)).toBe(-1);
    expect(m.refHostname(r)).toBe("missing.example");
  });

  it("resolves an address reference to a VIP's service or to a workload", () => {
    const m = mesh(MESH);
    const byVip = m.serviceWaypoint(6);
    expect(m.refTarget(byVip)).toBe(RefTarget.Service);
    expect(m.refIndex(byVip)).toBe(3);
    const byPod = m.serviceWaypoint(7);
    expect(m.refTarget(byPod)).toBe(RefTarget.Workload);
    expect(m.refIndex(byPod)).toBe(4);
    expect(m.refPort(byPod)).toBe(15009);
    const nowhere = m.serviceWaypoint(8);
    expect(m.refTarget(nowhere)).toBe(RefTarget.Unresolved);
    const a = new Address();
    expect(m.refAddress(nowhere, a)).toBe(true);
    expect(formatIp(a)).toBe("203.0.113.7");
  });

  it("resolves a gateway address on the referencing workload's network first", () => {
    const m = mesh(MESH);
    const gw = m.workloadGateway(3);
    expect(m.refTarget(gw)).toBe(RefTarget.Workload);
    expect(m.refIndex(gw)).toBe(5);
    expect(m.refPort(gw)).toBe(15443);
    expect(m.workloadIdentity(m.refIndex(gw))).toBe("spiffe://td/ns/istio-system/sa/gw");
  });

  it("falls back to other networks when the referrer's has no match", () => {
    const m = mesh(`{"workloads": [
      {"uid": "gw", "addresses": ["192.0.2.1"], "network": "east"},
      {"uid": "remote", "network": "west", "networkGateway": {"address": "192.0.2.1"}}]}`);
    const r = m.workloadGateway(1);
    expect(m.refTarget(r)).toBe(RefTarget.Workload);
    expect(m.refIndex(r)).toBe(0);
  });

  it("prefers the referrer's network when the address exists on several", () => {
    const m = mesh(`{"workloads": [
      {"uid": "gw-default", "addresses": ["192.0.2.1"]},
      {"uid": "gw-east", "addresses": ["192.0.2.1"], "network": "east"},
      {"uid": "remote", "network": "east", "networkGateway": {"address": "192.0.2.1"}},
      {"uid": "local", "addresses": ["10.0.0.1"], "networkGateway": {"address": "192.0.2.1"}}]}`);
    expect(m.refIndex(m.workloadGateway(2))).toBe(1);
    expect(m.refIndex(m.workloadGateway(3))).toBe(0);
  });

  it("shares identical references", () => {
    const m = mesh(`{"workloads": [
      {"uid": "a", "addresses": [], "network": "e", "networkGateway": {"address": "192.0.2.1"}},
      {"uid": "b", "addresses": [], "network": "e", "networkGateway": {"address": "192.0.2.1"}}]}`);
    expect(m.workloadGateway(0)).toBe(m.workloadGateway(1));
    expect(m.refCount()).toBe(1);
  });
});

describe("locality ranking", () => {
  it("compares scopes by id and counts leading matches in preference order", () => {
    const m = mesh(MESH);
    // pod-a r1/z1/s1 (net ""), pod-b r1/z2 (net ""), twin r1/z1/s1 (net east).
    expect(m.sameScope(Scope.Network, 0, 1)).toBe(true);
    expect(m.sameScope(Scope.Region, 0, 1)).toBe(true);
    expect(m.sameScope(Scope.Zone, 0, 1)).toBe(false);
    expect(m.sameScope(Scope.Subzone, 0, 2)).toBe(true);
    expect(m.sameScope(Scope.Network, 0, 2)).toBe(false);
    // Service 3 prefers network, region, zone.
    expect(m.localityRank(3, 0, 1)).toBe(2);
    expect(m.localityRank(3, 0, 0)).toBe(3);
    expect(m.localityRank(3, 0, 2)).toBe(0);
    // Service 0 has the default (4 scopes).
    expect(m.localityRank(0, 0, 0)).toBe(4);
  });

  it("treats a zone name reused in another region as a different zone", () => {
    const m = mesh(`{"workloads": [
      {"uid": "a", "addresses": ["10.0.0.1"], "locality": "r1/z"},
      {"uid": "b", "addresses": ["10.0.0.2"], "locality": "r2/z"}]}`);
    expect(m.sameScope(Scope.Zone, 0, 1)).toBe(false);
  });
});

describe("endpointsOfWorkload", () => {
  it("lists every (service, endpoint) pair of a workload", () => {
    const m = mesh(MESH);
    const pairs = m.endpointsOfWorkload(0);
    expect(pairs.length).toBe(6);
    expect(pairs[0]).toBe(0);
    expect(pairs[1]).toBe(0);
    expect(pairs[2]).toBe(1);
    expect(pairs[4]).toBe(2);
    expect(m.endpointsOfWorkload(5).length).toBe(0);
  });
});

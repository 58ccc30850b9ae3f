import { ConfigReader, parseJsonString } from "../json";
import {
  Address,
  FAMILY_V6,
  formatIp,
  LbMode,
  Mesh,
  MESH_FIELDS,
  parseMesh,
  parseMeshConfigString,
  Scope,
  TlsMode,
} from "../mesh";

function mesh(text: string): Mesh {
  const result = parseMeshConfigString(text);
  const m = result.mesh;
  if (m === null) {
    // Make the failing config visible in the test output, then fail the expectation.
    expect(result.error).toBe("");
    return new Mesh();
  }
  return m;
}

function utf8(buf: ArrayBuffer | null): string {
  return buf === null ? "<null>" : String.UTF8.decode(buf);
}

const FULL = `{
  "workloads": [
    {
      "uid": "pod-a",
      "addresses": ["10.0.0.1", "FD00:0::1"],
      "network": "net1",
      "identity": "spiffe://cluster.local/ns/default/sa/app",
      "tlsMode": "istio",
      "healthy": false,
      "locality": "us-east1/us-east1-b/rack7",
      "waypoint": {"address": "10.0.9.9", "port": 15009},
      "networkGateway": {"hostname": "gw.example.com", "hboneMtlsPort": 15443}
    },
    {"uid": "pod-b", "addresses": ["10.0.0.2"]}
  ],
  "services": [
    {
      "hostname": "my-service.default.svc.cluster.local",
      "vips": [{"address": "10.96.0.10"}, {"network": "net1", "address": "fd00:96::10"}],
      "ports": {"80": 9376, "443": 8443},
      "endpoints": [{"workload": "pod-a", "ports": {"80": 9377}}, {"workload": "pod-b"}],
      "waypoint": {"hostname": "waypoint.default.svc.cluster.local"},
      "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/app", "other"],
      "headless": true,
      "cluster": "custom-cluster",
      "loadBalancing": {"routingPreference": ["zone", "network"], "mode": "standard"}
    },
    {"hostname": "plain.default.svc.cluster.local", "ports": {"8080": 8080}}
  ]
}`;

describe("parseMeshConfig workloads", () => {
  it("reads every workload field", () => {
    const m = mesh(FULL);
    expect(m.workloadCount()).toBe(2);
    const net1 = m.networkId("net1");
    expect(net1).toBeGreaterThan(0);
    expect(m.workloadNetwork(0)).toBe(net1);
    expect(m.networkName(net1)).toBe("net1");
    expect(m.workloadTlsMode(0)).toBe(TlsMode.Istio);
    expect(m.workloadIstio(0)).toBe(true);
    expect(m.workloadHealthy(0)).toBe(false);
    expect(m.workloadIdentity(0)).toBe("spiffe://cluster.local/ns/default/sa/app");
    expect(utf8(m.workloadIdentityUtf8(0))).toBe("spiffe://cluster.local/ns/default/sa/app");
    expect(m.workloadLocality(0)).toBe("us-east1/us-east1-b/rack7");
    expect(m.localityPrefix(m.workloadRegion(0))).toBe("us-east1");
    expect(m.localityPrefix(m.workloadZone(0))).toBe("us-east1/us-east1-b");
    expect(m.localityPrefix(m.workloadSubzone(0))).toBe("us-east1/us-east1-b/rack7");
    expect(m.workloadAddressCount(0)).toBe(2);
    const a = new Address();
    expect(m.workloadAddress(0, 0, a)).toBe(true);
    expect(formatIp(a)).toBe("10.0.0.1");
    expect(m.workloadAddress(0, 1, a)).toBe(true);
    expect(a.family).toBe(FAMILY_V6);
    expect(formatIp(a)).toBe("fd00::1");
    expect(m.workloadAddress(0, 2, a)).toBe(false);
  });

  it("reads the waypoint and network gateway references", () => {
    const m = mesh(FULL);
    const wp = m.workloadWaypoint(0);
    expect(wp).toBeGreaterThanOrEqual(0);
    expect(m.refPort(wp)).toBe(15009);
    expect(m.refHostname(wp)).toBe("");
    const a = new Address();
    expect(m.refAddress(wp, a)).toBe(true);
    expect(formatIp(a)).toBe("10.0.9.9");
    expect(a.port).toBe(15009);
    const gw = m.workloadGateway(0);
    expect(m.refHostname(gw)).toBe("gw.example.com");
    expect(m.refPort(gw)).toBe(15443);
    expect(m.refAddress(gw, a)).toBe(false);
  });

  it("applies the workload defaults", () => {
    const m = mesh(FULL);
    expect(m.workloadNetwork(1)).toBe(0);
    expect(m.networkName(0)).toBe("");
    expect(m.networkId("")).toBe(0);
    expect(m.workloadTlsMode(1)).toBe(TlsMode.Disabled);
    expect(m.workloadHealthy(1)).toBe(true);
    expect(m.workloadIdentity(1)).toBe("");
    expect(m.workloadIdentityUtf8(1).byteLength).toBe(0);
    expect(m.workloadLocality(1)).toBe("");
    expect(m.workloadRegion(1)).toBe(0);
    expect(m.workloadWaypoint(1)).toBe(-1);
    expect(m.workloadGateway(1)).toBe(-1);
  });

  it("accepts a remote proxy workload with no addresses but a network gateway", () => {
    const m = mesh(`{"workloads": [{"uid": "remote", "addresses": [], "network": "net2",
      "networkGateway": {"address": "192.0.2.1"}}]}`);
    expect(m.workloadAddressCount(0)).toBe(0);
    expect(m.refPort(m.workloadGateway(0))).toBe(15008);
    const m2 = mesh(`{"workloads": [{"uid": "remote", "networkGateway": {"hostname": "gw"}}]}`);
    expect(m2.workloadAddressCount(0)).toBe(0);
  });

  it("accepts shorter localities", () => {
    const m = mesh(`{"workloads": [
      {"uid": "a", "addresses": ["10.0.0.1"], "locality": "r1"},
      {"uid": "b", "addresses": ["10.0.0.2"], "locality": "r1/z1"}]}`);
    expect(m.workloadRegion(0)).toBe(m.workloadRegion(1));
    expect(m.workloadZone(0)).toBe(0);
    expect(m.localityPrefix(m.workloadZone(1))).toBe("r1/z1");
    expect(m.workloadSubzone(1)).toBe(0);
  });

  it("interns identities and localities shared by pods", () => {
    const m = mesh(`{"workloads": [
      {"uid": "a", "addresses": ["10.0.0.1"], "identity": "spiffe://td/ns/n/sa/s", "locality": "r/z"},
      {"uid": "b", "addresses": ["10.0.0.2"], "identity": "spiffe://td/ns/n/sa/s", "locality": "r/z"}]}`);
    expect(m.workloadIdentityId(0)).toBe(m.workloadIdentityId(1));
    expect(m.workloadLocalityId(0)).toBe(m.workloadLocalityId(1));
    expect(m.workloadIdentityUtf8(0) == m.workloadIdentityUtf8(1)).toBe(true);
  });
});

describe("parseMeshConfig services", () => {
  it("reads every service field", () => {
    const m = mesh(FULL);
    expect(m.serviceCount()).toBe(2);
    expect(m.serviceHostname(0)).toBe("my-service.default.svc.cluster.local");
    expect(m.serviceByHostname("my-service.default.svc.cluster.local")).toBe(0);
    expect(m.serviceHeadless(0)).toBe(true);
    expect(m.vipCount(0)).toBe(2);
    const a = new Address();
    expect(m.vipAddress(0, 1, a)).toBe(true);
    expect(formatIp(a)).toBe("fd00:96::10");
    expect(m.vipNetworkId(0, 0)).toBe(0);
    expect(m.vipNetworkId(0, 1)).toBe(m.networkId("net1"));
    expect(m.servicePortCount(0)).toBe(2);
    expect(m.servicePortAt(0, 0)).toBe(80);
    expect(m.servicePortAt(0, 1)).toBe(443);
    expect(m.serviceTargetPort(0, 80)).toBe(9376);
    expect(m.serviceTargetPort(0, 443)).toBe(8443);
    expect(m.endpointCount(0)).toBe(2);
    expect(m.endpointWorkload(0, 0)).toBe(0);
    expect(m.endpointWorkload(0, 1)).toBe(1);
    expect(m.refHostname(m.serviceWaypoint(0))).toBe("waypoint.default.svc.cluster.local");
    expect(m.refPort(m.serviceWaypoint(0))).toBe(15008);
    expect(m.sanCount(0)).toBe(2);
    expect(m.san(0, 0)).toBe("spiffe://cluster.local/ns/default/sa/app");
    expect(m.san(0, 1)).toBe("other");
    expect(utf8(m.clusterName(0, 80))).toBe("custom-cluster");
    expect(utf8(m.clusterName(0, 443))).toBe("custom-cluster");
    expect(m.lbMode(0)).toBe(LbMode.Standard);
    expect(m.lbPreferenceCount(0)).toBe(2);
    expect(m.lbPreference(0, 0)).toBe(Scope.Zone);
    expect(m.lbPreference(0, 1)).toBe(Scope.Network);
  });

  it("applies the service defaults", () => {
    const m = mesh(FULL);
    expect(m.serviceHeadless(1)).toBe(false);
    expect(m.vipCount(1)).toBe(0);
    expect(m.endpointCount(1)).toBe(0);
    expect(m.serviceWaypoint(1)).toBe(-1);
    expect(m.sanCount(1)).toBe(0);
    expect(m.lbMode(1)).toBe(LbMode.Failover);
    expect(m.lbPreferenceCount(1)).toBe(4);
    expect(m.lbPreference(1, 0)).toBe(Scope.Network);
    expect(m.lbPreference(1, 1)).toBe(Scope.Region);
    expect(m.lbPreference(1, 2)).toBe(Scope.Zone);
    expect(m.lbPreference(1, 3)).toBe(Scope.Subzone);
  });

  it("derives Istio-style cluster names per port, precomputed", () => {
    const m = mesh(FULL);
    expect(utf8(m.clusterName(1, 8080))).toBe("outbound|8080||plain.default.svc.cluster.local");
    expect(m.clusterName(1, 80)).toBeNull();
    const first = m.clusterName(1, 8080);
    expect(first === m.clusterName(1, 8080)).toBe(true);
  });

  it("accepts an empty routing preference and a service without ports", () => {
    const m = mesh(`{"services": [{"hostname": "s", "loadBalancing": {"routingPreference": []}}]}`);
    expect(m.lbPreferenceCount(0)).toBe(0);
    expect(m.servicePortCount(0)).toBe(0);
    expect(m.lbMode(0)).toBe(LbMode.Failover);
  });
});

describe("parseMeshConfig whole configuration", () => {
  it("accepts an empty configuration and empty lists", () => {
    expect(mesh("{}").workloadCount()).toBe(0);
    const m = mesh(`{"workloads": [], "services": []}`);
    expect(m.workloadCount()).toBe(0);
    expect(m.serviceCount()).toBe(0);
    expect(m.networkCount()).toBe(1);
  });

  it("treats null lists as absent, like every other optional field", () => {
    const m = mesh(`{"workloads": null, "services": null}`);
    expect(m.workloadCount()).toBe(0);
  });

  it("embeds in a filter's configuration through parseMesh", () => {
    const root = parseJsonString(`{"localNetwork": "net1", "mesh": 1,
      "workloads": [{"uid": "a", "addresses": ["10.0.0.1"], "network": "net1"}]}`).value;
    const reader = new ConfigReader();
    expect(root).not.toBeNull();
    if (root === null) return;
    reader.onlyKnownFields(root, "", ["localNetwork", "mesh"].concat(MESH_FIELDS));
    const m = parseMesh(root, reader, "");
    expect(reader.error()).toBe("");
    expect(m).not.toBeNull();
    if (m !== null) expect(m.networkId("net1")).toBe(1);
  });

  it("prefixes messages with the caller's path", () => {
    const root = parseJsonString(`{"workloads": [{"uid": ""}]}`).value;
    const reader = new ConfigReader();
    if (root === null) return;
    expect(parseMesh(root, reader, "mesh")).toBeNull();
    expect(reader.error()).toBe("mesh.workloads[0].uid: must not be empty");
  });

  it("returns null without reading when the reader already failed", () => {
    const root = parseJsonString(`{"workloads": []}`).value;
    const reader = new ConfigReader();
    reader.fail("other", "first problem");
    if (root === null) return;
    expect(parseMesh(root, reader, "")).toBeNull();
    expect(reader.error()).toBe("other: first problem");
  });
});

// Unit tests of the tunnel_port filter's pure parts: its configuration (parseTunnelConfig), the
// client's decision (decideClient with its round-robin Cursors) and the server's checks
// (checkServer, parsePortBytes). The compiled filter is tested through the proxy-wasm host in
// tests/host/tunnel_port.test.ts.
import { ClientDecision, ClientOutcome, Cursors, decideClient } from "../../filters/tunnel_port/client";
import { parseTunnelConfig, TunnelConfig } from "../../filters/tunnel_port/config";
import { AuthorityText, checkServer, parseCanonicalPort, PORT_ABSENT, PORT_MALFORMED, sameBytes, ServerVerdict } from "../../filters/tunnel_port/server";
import { Address, IpParse, parseIpString, parseSocketAddressString } from "../mesh";

// ---------------------------------------------------------------- the mesh under test

// Network "" is the default one; "west" is another network.
//   web-0     10.1.0.1           istio     web 80->8080, 443->8443; web-alt 70->8080
//   web-1     10.1.0.2           istio     web with override 80->9090; admin 9000->8443
//   legacy-0  10.1.0.3           disabled  legacy 80->80
//   idle-0    10.1.0.9           istio     endpoint of no service
//   api-a/b/c 10.1.1.1-3         istio     api 8080->8080, api-b unhealthy
//   sick-0/1  10.1.2.1-2         istio     sick 80->8080 (sick-1 override 80->8081), both unhealthy
//   v6-0      fd00:1::1          istio     v6 80->8080, VIP fd00:96::60
//   gw-proxy  (no address)       istio     proxied 80->80 (local network, gateway only)
//   west-0    10.2.0.1 on west   istio     remote 80->80 (VIPs 10.96.0.41 and west 10.96.1.41)
const MESH = `
  "workloads": [
    {"uid": "web-0", "addresses": ["10.1.0.1"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/web-0"},
    {"uid": "web-1", "addresses": ["10.1.0.2"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/web-1"},
    {"uid": "legacy-0", "addresses": ["10.1.0.3"]},
    {"uid": "idle-0", "addresses": ["10.1.0.9"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/idle"},
    {"uid": "api-a", "addresses": ["10.1.1.1"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/api-a"},
    {"uid": "api-b", "addresses": ["10.1.1.2"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/api-b", "healthy": false},
    {"uid": "api-c", "addresses": ["10.1.1.3"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/api-c"},
    {"uid": "sick-0", "addresses": ["10.1.2.1"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/sick-0", "healthy": false},
    {"uid": "sick-1", "addresses": ["10.1.2.2"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/sick-1", "healthy": false},
    {"uid": "v6-0", "addresses": ["fd00:1::1"], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/v6"},
    {"uid": "gw-proxy", "addresses": [], "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/west/sa/gw",
     "networkGateway": {"address": "10.2.255.1"}},
    {"uid": "west-0", "addresses": ["10.2.0.1"], "network": "west", "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/west/sa/west-0"}
  ],
  "services": [
    {"hostname": "web.default.svc.cluster.local", "vips": [{"address": "10.96.0.10"}],
     "ports": {"80": 8080, "443": 8443},
     "endpoints": [{"workload": "web-0"}, {"workload": "web-1", "ports": {"80": 9090}}]},
    {"hostname": "web-alt.default.svc.cluster.local", "vips": [{"address": "10.96.0.11"}],
     "ports": {"70": 8080}, "endpoints": [{"workload": "web-0"}]},
    {"hostname": "admin.default.svc.cluster.local", "vips": [{"address": "10.96.0.12"}],
     "ports": {"9000": 8443}, "endpoints": [{"workload": "web-1"}]},
    {"hostname": "api.default.svc.cluster.local", "vips": [{"address": "10.96.0.20"}],
     "ports": {"8080": 8080},
     "endpoints": [{"workload": "api-a"}, {"workload": "api-b"}, {"workload": "api-c"}]},
    {"hostname": "sick.default.svc.cluster.local", "vips": [{"address": "10.96.0.30"}],
     "ports": {"80": 8080},
     "endpoints": [{"workload": "sick-0"}, {"workload": "sick-1", "ports": {"80": 8081}}]},
    {"hostname": "legacy.default.svc.cluster.local", "vips": [{"address": "10.96.0.40"}],
     "ports": {"80": 80}, "endpoints": [{"workload": "legacy-0"}]},
    {"hostname": "remote.default.svc.cluster.local",
     "vips": [{"address": "10.96.0.41"}, {"network": "west", "address": "10.96.1.41"}],
     "ports": {"80": 80}, "endpoints": [{"workload": "west-0"}]},
    {"hostname": "empty.default.svc.cluster.local", "vips": [{"address": "10.96.0.42"}],
     "ports": {"80": 80}, "endpoints": []},
    {"hostname": "proxied.default.svc.cluster.local", "vips": [{"address": "10.96.0.43"}],
     "ports": {"80": 80}, "endpoints": [{"workload": "gw-proxy"}]},
    {"hostname": "v6.default.svc.cluster.local", "vips": [{"address": "fd00:96::60"}],
     "ports": {"80": 8080}, "endpoints": [{"workload": "v6-0"}]}
  ]`;

const CLIENT = `{"role": "client", ${MESH}}`;
const SERVER = `{"role": "server", "localWorkload": "10.1.0.2", ${MESH}}`;
const CLIENT_KNOWN = "role, localNetwork, meshFeed, tunnelCluster, unknownDestination, workloads, services";
// A field neither role knows is refused while the configuration streams, before the role is read.
const ANY_KNOWN = "role, localNetwork, meshFeed, tunnelCluster, unknownDestination, localWorkload, appCluster, workloads, services";
const SERVER_KNOWN = "role, localNetwork, meshFeed, localWorkload, appCluster, workloads, services";

// ---------------------------------------------------------------- helpers

/** The parsed configuration; a refused one fails the test with its error. */
function config(text: string): TunnelConfig {
  const result = parseTunnelConfig(String.UTF8.encode(text));
  expect(result.error).toBe("");
  const c = result.config;
  expect(c).not.toBeNull();
  return changetype<TunnelConfig>(c);
}

/** The error of a configuration that must be refused ("<accepted>" when it was not). */
function refused(text: string): string {
  const result = parseTunnelConfig(String.UTF8.encode(text));
  if (result.config !== null) return "<accepted>";
  return result.error;
}

function utf8(buffer: ArrayBuffer): string {
  return String.UTF8.decode(buffer);
}

function address(text: string): Address {
  const dst = new Address();
  expect(parseSocketAddressString(text, dst)).toBe(true, text + " must parse");
  return dst;
}

/** The workload holding IP `ip` on network "" (-1 when none). */
function workloadAt(c: TunnelConfig, ip: string): i32 {
  const a = new Address();
  expect(parseIpString(ip, a)).toBe(IpParse.Ok);
  return c.mesh.workloadByAddress(c.mesh.networkId(""), a);
}

function decideFor(c: TunnelConfig, cursors: Cursors, destination: string, out: ClientDecision = new ClientDecision()): ClientDecision {
  decideClient(c, cursors, address(destination), out);
  return out;
}

/** Identity of the decided workload: names the pod without relying on indexes. */
function podIdentity(c: TunnelConfig, d: ClientDecision): string {
  return d.workload < 0 ? "<none>" : c.mesh.workloadIdentity(d.workload);
}

function serviceName(c: TunnelConfig, d: ClientDecision): string {
  return d.service < 0 ? "<none>" : c.mesh.serviceHostname(d.service);
}


function sa(name: string): string {
  return "spiffe://cluster.local/ns/default/sa/" + name;
}

function check(c: TunnelConfig, destination: string, servicePort: i32, peerLength: i32 = 40, authority: AuthorityText = AuthorityText.Canonical): ServerVerdict {
  return checkServer(c, address(destination), servicePort, peerLength, authority);
}

function port(text: string): i32 {
  const bytes = String.UTF8.encode(text);
  return parseCanonicalPort(changetype<usize>(bytes), bytes.byteLength);
}

// ---------------------------------------------------------------- configuration

describe("tunnel_port configuration: client", () => {
  it("defaults: tunnel_port_hbone, unknown passthrough, default local network", () => {
    const c = config(`{"role": "client"}`);
    expect(c.client).toBe(true);
    expect(utf8(c.tunnelCluster)).toBe("tunnel_port_hbone");
    expect(c.refuseUnknown).toBe(false);
    expect(c.localWorkload).toBe(-1);
    expect(c.localNetwork).toBe(c.mesh.networkId(""));
    expect(c.mesh.workloadCount()).toBe(0);
  });

  it("treats JSON null as an absent field", () => {
    const c = config(`{"role": "client", "localNetwork": null, "tunnelCluster": null, "unknownDestination": null}`);
    expect(utf8(c.tunnelCluster)).toBe("tunnel_port_hbone");
    expect(c.refuseUnknown).toBe(false);
  });

  it("reads its own fields", () => {
    const c = config(`{"role": "client", "tunnelCluster": "my_hbone", "unknownDestination": "refuse"}`);
    expect(utf8(c.tunnelCluster)).toBe("my_hbone");
    expect(c.refuseUnknown).toBe(true);
    expect(config(`{"role": "client", "unknownDestination": "passthrough"}`).refuseUnknown).toBe(false);
  });

  it("resolves localNetwork to its network id", () => {
    const c = config(`{"role": "client", "localNetwork": "west", ${MESH}}`);
    expect(c.localNetwork).toBe(c.mesh.networkId("west"));
    expect(c.localNetwork).not.toBe(c.mesh.networkId(""));
  });

  it("reads pod-IP service ports from the model: first service in configuration order, overrides applied", () => {
    const c = config(CLIENT);
    const web0 = workloadAt(c, "10.1.0.1");
    const web1 = workloadAt(c, "10.1.0.2");
    const pods = c.mesh;
    // web (80 -> 8080) before web-alt (70 -> 8080).
    expect(pods.servicePortForTarget(web0, 8080)).toBe(80);
    expect(pods.servicePortForTarget(web0, 8443)).toBe(443);
    // web-1 overrides 80 -> 9090; 8443 is web's 443 before admin's 9000.
    expect(pods.servicePortForTarget(web1, 9090)).toBe(80);
    expect(pods.servicePortForTarget(web1, 8443)).toBe(443);
    expect(pods.servicePortForTarget(web1, 8080)).toBe(-1);
    // Every (service port, target) pair a service maps, and only those.
    expect(pods.mapsPort(web0, 70, 8080)).toBe(true);
    expect(pods.mapsPort(web1, 80, 9090)).toBe(true);
    expect(pods.mapsPort(web1, 80, 8080)).toBe(false);
    expect(pods.mapsPort(web0, 80, 8443)).toBe(false);
    expect(pods.servicePortForTarget(-1, 8080)).toBe(-1);
    expect(pods.mapsPort(1 << 30, 80, 8080)).toBe(false);
  });
});

describe("tunnel_port configuration: server", () => {
  it("defaults appCluster to tunnel_port_inbound and resolves localWorkload", () => {
    const c = config(SERVER);
    expect(c.client).toBe(false);
    expect(utf8(c.appCluster)).toBe("tunnel_port_inbound");
    expect(c.localWorkload).toBe(workloadAt(c, "10.1.0.2"));
    expect(c.mesh.workloadIdentity(c.localWorkload)).toBe(sa("web-1"));
  });

  it("reads appCluster", () => {
    expect(utf8(config(`{"role": "server", "localWorkload": "10.1.0.2", "appCluster": "inbound_app", ${MESH}}`).appCluster)).toBe("inbound_app");
  });

  it("collects every (service port, target) pair the workload serves, over every service, overrides applied", () => {
    const c = config(SERVER);
    expect(c.mesh.mapsPort(c.localWorkload, 80, 9090)).toBe(true);
    expect(c.mesh.mapsPort(c.localWorkload, 443, 8443)).toBe(true);
    expect(c.mesh.mapsPort(c.localWorkload, 9000, 8443)).toBe(true);
    expect(c.mesh.mapsPort(c.localWorkload, 80, 8080)).toBe(false);
    expect(c.mesh.servicePortForTarget(c.localWorkload, 9090) >= 0).toBe(true);
    expect(c.mesh.servicePortForTarget(c.localWorkload, 8443) >= 0).toBe(true);
    expect(c.mesh.servicePortForTarget(c.localWorkload, 8080) >= 0).toBe(false);
  });

  it("resolves an IPv6 localWorkload in any spelling", () => {
    const c = config(`{"role": "server", "localWorkload": "FD00:1:0::1", ${MESH}}`);
    expect(c.mesh.workloadIdentity(c.localWorkload)).toBe(sa("v6"));
    expect(c.mesh.mapsPort(c.localWorkload, 80, 8080)).toBe(true);
  });

  it("resolves localWorkload on the configured localNetwork", () => {
    const c = config(`{"role": "server", "localNetwork": "west", "localWorkload": "10.2.0.1", ${MESH}}`);
    expect(c.mesh.workloadIdentity(c.localWorkload)).toBe("spiffe://cluster.local/ns/west/sa/west-0");
    expect(c.mesh.mapsPort(c.localWorkload, 80, 80)).toBe(true);
  });
});

describe("tunnel_port configuration: refusals", () => {
  it("requires a role of client or server", () => {
    expect(refused(`{}`)).toBe("role: missing required field");
    expect(refused(`{"role": null}`)).toBe("role: missing required field");
    expect(refused(`{"role": "proxy"}`)).toBe("role: expected one of: client, server");
    expect(refused(`{"role": "Server"}`)).toBe("role: expected one of: client, server");
    expect(refused(`{"role": ["client"]}`)).toBe("role: expected one of: client, server");
  });

  it("refuses unknown fields, and the other role's fields", () => {
    expect(refused(`{"role": "client", "tunnel_port": 1}`)).toBe("tunnel_port: unknown field (known: " + ANY_KNOWN + ")");
    expect(refused(`{"role": "client", "localWorkload": "10.1.0.2"}`)).toBe("localWorkload: unknown field (known: " + CLIENT_KNOWN + ")");
    expect(refused(`{"role": "client", "appCluster": "x"}`)).toBe("appCluster: unknown field (known: " + CLIENT_KNOWN + ")");
    expect(refused(`{"role": "server", "tunnelCluster": "x"}`)).toBe("tunnelCluster: unknown field (known: " + SERVER_KNOWN + ")");
    expect(refused(`{"role": "server", "unknownDestination": "refuse"}`)).toBe(
      "unknownDestination: unknown field (known: " + SERVER_KNOWN + ")",
    );
  });

  it("refuses tunnelPort: the tunnel port is the HBONE cluster's upstream_port_override now", () => {
    expect(refused(`{"role": "client", "tunnelPort": 15008}`)).toBe("tunnelPort: unknown field (known: " + ANY_KNOWN + ")");
  });

  it("refuses empty or non-string cluster names", () => {
    expect(refused(`{"role": "client", "tunnelCluster": ""}`)).toBe("tunnelCluster: must not be empty");
    expect(refused(`{"role": "client", "tunnelCluster": 1}`)).toBe("tunnelCluster: expected a string");
    expect(refused(`{"role": "server", "localWorkload": "10.1.0.2", "appCluster": "", ${MESH}}`)).toBe("appCluster: must not be empty");
    expect(refused(`{"role": "server", "localWorkload": "10.1.0.2", "appCluster": {}, ${MESH}}`)).toBe("appCluster: expected a string");
  });

  it("refuses a bad unknownDestination", () => {
    expect(refused(`{"role": "client", "unknownDestination": "drop"}`)).toBe("unknownDestination: expected one of: passthrough, refuse");
    expect(refused(`{"role": "client", "unknownDestination": "Refuse"}`)).toBe("unknownDestination: expected one of: passthrough, refuse");
  });

  it("refuses a server without a usable localWorkload", () => {
    expect(refused(`{"role": "server", ${MESH}}`)).toBe("localWorkload: missing required field");
    expect(refused(`{"role": "server", "localWorkload": 1, ${MESH}}`)).toBe("localWorkload: expected a string");
    expect(refused(`{"role": "server", "localWorkload": "web-1", ${MESH}}`)).toBe('localWorkload: not an IP address: "web-1"');
    expect(refused(`{"role": "server", "localWorkload": "fe80::1%eth0", ${MESH}}`)).toBe('localWorkload: not an IP address: "fe80::1%eth0"');
    expect(refused(`{"role": "server", "localWorkload": "10.9.9.9", ${MESH}}`)).toBe(
      "localWorkload: no workload has address 10.9.9.9 on this network",
    );
    // A VIP is not a workload.
    expect(refused(`{"role": "server", "localWorkload": "10.96.0.10", ${MESH}}`)).toBe(
      "localWorkload: no workload has address 10.96.0.10 on this network",
    );
    // west-0 is on another network than the (default) local one.
    expect(refused(`{"role": "server", "localWorkload": "10.2.0.1", ${MESH}}`)).toBe(
      "localWorkload: no workload has address 10.2.0.1 on this network",
    );
    expect(refused(`{"role": "server", "localNetwork": "east", "localWorkload": "10.1.0.2", ${MESH}}`)).toBe(
      "localWorkload: no workload has address 10.1.0.2 on this network",
    );
    expect(refused(`{"role": "server", "localWorkload": "10.1.0.9", ${MESH}}`)).toBe(
      "localWorkload: workload 10.1.0.9 is an endpoint of no service: it serves no port",
    );
  });

  it("refuses a root that is not an object, and text that is not JSON", () => {
    expect(refused("[]")).toBe("(root): expected an object");
    expect(refused("null")).toBe("(root): expected an object");
    expect(refused("")).toBe("byte 0: unexpected end of input");
    expect(refused(`{"role": "client"`)).toBe("byte 17: unexpected end of input");
  });

  it("passes the mesh's own errors through", () => {
    expect(refused(`{"role": "client", "workloads": [{"uid": "a", "addresses": ["10.0.0.1"], "tlsMode": "istio"}]}`)).toBe(
      'workloads[0].identity: required when tlsMode is "istio"',
    );
  });
});

// ---------------------------------------------------------------- cursors

describe("tunnel_port Cursors", () => {
  it("cycles through 0..count-1, one step per take", () => {
    const cursors = new Cursors(2);
    expect(cursors.take(0, 3)).toBe(0);
    expect(cursors.take(0, 3)).toBe(1);
    expect(cursors.take(0, 3)).toBe(2);
    expect(cursors.take(0, 3)).toBe(0);
  });

  it("keeps one cursor per service", () => {
    const cursors = new Cursors(2);
    expect(cursors.take(0, 2)).toBe(0);
    expect(cursors.take(1, 2)).toBe(0);
    expect(cursors.take(1, 2)).toBe(1);
    expect(cursors.take(0, 2)).toBe(1);
  });

  it("answers 0 for a service out of range or an empty count, without trapping", () => {
    const cursors = new Cursors(1);
    expect(cursors.take(-1, 3)).toBe(0);
    expect(cursors.take(1, 3)).toBe(0);
    expect(cursors.take(0, 0)).toBe(0);
    expect(new Cursors(0).take(0, 5)).toBe(0);
    expect(new Cursors(-3).take(0, 5)).toBe(0);
  });

  it("stays in range when the count shrinks", () => {
    const cursors = new Cursors(1);
    cursors.take(0, 5);
    cursors.take(0, 5);
    cursors.take(0, 5);
    const at = cursors.take(0, 2);
    expect(at >= 0 && at < 2).toBe(true);
  });
});

// ---------------------------------------------------------------- client decision

describe("tunnel_port decideClient: service VIPs", () => {
  it("alternates endpoints, each with its own target port, carrying the service port", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    const first = decideFor(c, cursors, "10.96.0.10:80");
    expect(first.outcome).toBe(ClientOutcome.Tunnel);
    expect(podIdentity(c, first)).toBe(sa("web-0"));
    expect(first.targetPort).toBe(8080);
    expect(first.servicePort).toBe(80);
    expect(serviceName(c, first)).toBe("web.default.svc.cluster.local");
    expect(first.panic).toBe(false);
    const second = decideFor(c, cursors, "10.96.0.10:80");
    expect(podIdentity(c, second)).toBe(sa("web-1"));
    expect(second.targetPort).toBe(9090);
    expect(second.servicePort).toBe(80);
    expect(podIdentity(c, decideFor(c, cursors, "10.96.0.10:80"))).toBe(sa("web-0"));
  });

  it("uses the service default for a port the endpoint does not override", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    decideFor(c, cursors, "10.96.0.10:443"); // web-0
    const d = decideFor(c, cursors, "10.96.0.10:443");
    expect(podIdentity(c, d)).toBe(sa("web-1"));
    expect(d.targetPort).toBe(8443);
    expect(d.servicePort).toBe(443);
  });

  it("never picks an unhealthy endpoint while a healthy one exists", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    for (let i = 0; i < 9; i++) {
      const d = decideFor(c, cursors, "10.96.0.20:8080");
      expect(podIdentity(c, d)).not.toBe(sa("api-b"));
      expect(d.panic).toBe(false);
    }
  });

  it("spreads connections evenly over the healthy endpoints (round robin)", () => {
    // api: [api-a healthy, api-b unhealthy, api-c healthy]: each healthy one gets half.
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    let a = 0;
    let other = 0;
    for (let i = 0; i < 30; i++) {
      if (podIdentity(c, decideFor(c, cursors, "10.96.0.20:8080")) == sa("api-a")) a++;
      else other++;
    }
    expect(a).toBe(15);
    expect(other).toBe(15);
  });

  it("panics over unhealthy endpoints in round-robin order when none is healthy", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    const first = decideFor(c, cursors, "10.96.0.30:80");
    expect(first.outcome).toBe(ClientOutcome.Tunnel);
    expect(first.panic).toBe(true);
    expect(podIdentity(c, first)).toBe(sa("sick-0"));
    expect(first.targetPort).toBe(8080);
    const second = decideFor(c, cursors, "10.96.0.30:80");
    expect(second.panic).toBe(true);
    expect(podIdentity(c, second)).toBe(sa("sick-1"));
    expect(second.targetPort).toBe(8081);
  });

  it("finds no endpoint for services without a tunnelable one", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    const vips = ["10.96.0.40:80", "10.96.0.41:80", "10.96.0.42:80", "10.96.0.43:80"];
    for (let i = 0; i < vips.length; i++) {
      const d = decideFor(c, cursors, vips[i]);
      expect(d.outcome).toBe(ClientOutcome.NoEndpoint, vips[i]);
      expect(d.workload).toBe(-1, vips[i]);
      expect(d.servicePort).toBe(80, vips[i]);
      expect(d.service).toBeGreaterThanOrEqual(0, vips[i]);
    }
  });

  it("sees only the local network's VIPs and endpoints", () => {
    const c = config(`{"role": "client", "localNetwork": "west", ${MESH}}`);
    const cursors = new Cursors(c.mesh.serviceCount());
    const remote = decideFor(c, cursors, "10.96.1.41:80");
    expect(remote.outcome).toBe(ClientOutcome.Tunnel);
    expect(podIdentity(c, remote)).toBe("spiffe://cluster.local/ns/west/sa/west-0");
    expect(decideFor(c, cursors, "10.96.0.10:80").outcome).toBe(ClientOutcome.Unknown);
  });

  it("reaches an IPv6 pod through an IPv6 VIP", () => {
    const c = config(CLIENT);
    const d = decideFor(c, new Cursors(c.mesh.serviceCount()), "[fd00:96::60]:80");
    expect(d.outcome).toBe(ClientOutcome.Tunnel);
    expect(podIdentity(c, d)).toBe(sa("v6"));
    expect(d.targetPort).toBe(8080);
  });
});

describe("tunnel_port decideClient: pod IPs and unknown destinations", () => {
  it("takes the dialled port as target and the first mapping service's port", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    const d = decideFor(c, cursors, "10.1.0.1:8080");
    expect(d.outcome).toBe(ClientOutcome.Tunnel);
    expect(podIdentity(c, d)).toBe(sa("web-0"));
    expect(d.targetPort).toBe(8080);
    expect(d.servicePort).toBe(80);
    expect(d.service).toBe(-1);
    expect(d.panic).toBe(false);
    const overridden = decideFor(c, cursors, "10.1.0.2:9090");
    expect(podIdentity(c, overridden)).toBe(sa("web-1"));
    expect(overridden.servicePort).toBe(80);
    expect(overridden.targetPort).toBe(9090);
  });

  it("finds no endpoint for a tlsMode disabled pod a service maps", () => {
    const c = config(CLIENT);
    const d = decideFor(c, new Cursors(c.mesh.serviceCount()), "10.1.0.3:80");
    expect(d.outcome).toBe(ClientOutcome.NoEndpoint);
    expect(d.workload).toBe(-1);
  });

  it("does not know unmapped pod ports, other networks' pods, strangers or unexposed VIP ports", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    const unknown = ["10.1.0.2:8080", "10.1.0.1:80", "10.1.0.9:8080", "10.2.0.1:80", "10.9.9.9:80", "10.96.0.10:81", "[fd00:1::99]:80"];
    for (let i = 0; i < unknown.length; i++) {
      expect(decideFor(c, cursors, unknown[i]).outcome).toBe(ClientOutcome.Unknown, unknown[i]);
    }
  });

  it("resets every field of a reused decision", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    const out = new ClientDecision();
    decideFor(c, cursors, "10.96.0.30:80", out); // a panic tunnel: every field set
    expect(out.panic).toBe(true);
    decideFor(c, cursors, "10.9.9.9:80", out);
    expect(out.outcome).toBe(ClientOutcome.Unknown);
    expect(out.workload).toBe(-1);
    expect(out.servicePort).toBe(-1);
    expect(out.targetPort).toBe(-1);
    expect(out.service).toBe(-1);
    expect(out.panic).toBe(false);
  });

  it("does not move a service's cursor on pod-IP or unknown decisions", () => {
    const c = config(CLIENT);
    const cursors = new Cursors(c.mesh.serviceCount());
    expect(podIdentity(c, decideFor(c, cursors, "10.96.0.10:80"))).toBe(sa("web-0"));
    decideFor(c, cursors, "10.1.0.1:8080");
    decideFor(c, cursors, "10.9.9.9:80");
    decideFor(c, cursors, "10.96.0.10:81");
    expect(podIdentity(c, decideFor(c, cursors, "10.96.0.10:80"))).toBe(sa("web-1"));
  });
});

// ---------------------------------------------------------------- server checks

describe("tunnel_port checkServer", () => {
  it("accepts every served pair on the workload's own address", () => {
    const c = config(SERVER);
    expect(check(c, "10.1.0.2:9090", 80)).toBe(ServerVerdict.Accept);
    expect(check(c, "10.1.0.2:8443", 443)).toBe(ServerVerdict.Accept);
    expect(check(c, "10.1.0.2:8443", 9000)).toBe(ServerVerdict.Accept);
    expect(check(c, "[::ffff:10.1.0.2]:9090", 80)).toBe(ServerVerdict.Accept); // the caller checks the spelling
  });

  it("refuses a missing peer first", () => {
    const c = config(SERVER);
    expect(check(c, "10.1.0.2:9090", 80, 0)).toBe(ServerVerdict.NoPeer);
    expect(check(c, "10.1.0.2:9090", 80, -1)).toBe(ServerVerdict.NoPeer);
    expect(check(c, "10.1.0.1:1", -1, 0)).toBe(ServerVerdict.NoPeer);
  });

  it("refuses a missing service port or destination", () => {
    const c = config(SERVER);
    expect(check(c, "10.1.0.2:9090", PORT_ABSENT)).toBe(ServerVerdict.MissingPort);
    const noPort = address("10.1.0.2:9090");
    noPort.port = -1;
    expect(checkServer(c, noPort, 80, 40, AuthorityText.Canonical)).toBe(ServerVerdict.MissingPort);
    expect(checkServer(c, noPort, PORT_MALFORMED, 40, AuthorityText.Canonical)).toBe(ServerVerdict.MissingPort);
    expect(check(c, "10.1.0.2:9090", 80, 40, AuthorityText.Absent)).toBe(ServerVerdict.MissingPort);
  });

  it("refuses a service port that is present but not one canonical port", () => {
    const c = config(SERVER);
    expect(check(c, "10.1.0.2:9090", PORT_MALFORMED)).toBe(ServerVerdict.MalformedPort);
    expect(check(c, "10.1.0.2:9090", port("081"))).toBe(ServerVerdict.MalformedPort);
    expect(check(c, "10.1.0.2:9090", port("80,81"))).toBe(ServerVerdict.MalformedPort);
    expect(check(c, "10.1.0.2:9090", 65536)).toBe(ServerVerdict.MalformedPort);
    expect(check(c, "10.1.0.1:8080", PORT_MALFORMED)).toBe(ServerVerdict.MalformedPort); // before the authority
    expect(check(c, "10.1.0.2:9090", port("80"))).toBe(ServerVerdict.Accept);
  });

  it("refuses an authority text that is not the destination's canonical spelling, after the service port", () => {
    const c = config(SERVER);
    expect(check(c, "10.1.0.2:9090", 80, 40, AuthorityText.Other)).toBe(ServerVerdict.MalformedAuthority);
    expect(check(c, "10.1.0.1:8080", 80, 40, AuthorityText.Other)).toBe(ServerVerdict.MalformedAuthority); // before the workload
    expect(check(c, "10.1.0.2:9090", PORT_MALFORMED, 40, AuthorityText.Other)).toBe(ServerVerdict.MalformedPort);
    expect(check(c, "10.1.0.2:9090", 80, 0, AuthorityText.Other)).toBe(ServerVerdict.NoPeer);
  });

  it("compares the authority text byte for byte", () => {
    const a = String.UTF8.encode("10.1.0.2:9090");
    const b = String.UTF8.encode("10.1.0.2:09090");
    const pa = changetype<usize>(a);
    expect(sameBytes(pa, a.byteLength, pa, a.byteLength)).toBe(true);
    expect(sameBytes(changetype<usize>(b), b.byteLength, pa, a.byteLength)).toBe(false);
    expect(sameBytes(pa, a.byteLength - 1, pa, a.byteLength)).toBe(false);
  });

  it("refuses an authority naming another workload or no workload", () => {
    const c = config(SERVER);
    expect(check(c, "10.1.0.1:8080", 80)).toBe(ServerVerdict.ForeignAuthority);
    expect(check(c, "10.9.9.9:9090", 80)).toBe(ServerVerdict.ForeignAuthority);
    expect(check(c, "10.96.0.10:80", 80)).toBe(ServerVerdict.ForeignAuthority);
    expect(check(c, "10.1.0.1:1", 80)).toBe(ServerVerdict.ForeignAuthority);
  });

  it("refuses a target port the workload does not serve, overrides applied", () => {
    const c = config(SERVER);
    expect(check(c, "10.1.0.2:8080", 80)).toBe(ServerVerdict.UnservedPort); // web's default, overridden here
    expect(check(c, "10.1.0.2:22", 80)).toBe(ServerVerdict.UnservedPort);
    expect(check(c, "10.1.0.2:15008", 80)).toBe(ServerVerdict.UnservedPort);
  });

  it("refuses a service port that does not map to that target here", () => {
    const c = config(SERVER);
    expect(check(c, "10.1.0.2:9090", 443)).toBe(ServerVerdict.PortMismatch);
    expect(check(c, "10.1.0.2:9090", 9000)).toBe(ServerVerdict.PortMismatch);
    expect(check(c, "10.1.0.2:8443", 80)).toBe(ServerVerdict.PortMismatch);
    expect(check(c, "10.1.0.2:9090", 8080)).toBe(ServerVerdict.PortMismatch);
  });

  it("checks an IPv6 workload", () => {
    const c = config(`{"role": "server", "localWorkload": "fd00:1::1", ${MESH}}`);
    expect(check(c, "[fd00:1::1]:8080", 80)).toBe(ServerVerdict.Accept);
    expect(check(c, "[fd00:1::2]:8080", 80)).toBe(ServerVerdict.ForeignAuthority);
    expect(check(c, "[fd00:1::1]:8081", 80)).toBe(ServerVerdict.UnservedPort);
  });
});

describe("tunnel_port parseCanonicalPort", () => {
  it("reads canonical decimal ports 1..65535", () => {
    expect(port("1")).toBe(1);
    expect(port("9")).toBe(9);
    expect(port("10")).toBe(10);
    expect(port("80")).toBe(80);
    expect(port("8080")).toBe(8080);
    expect(port("65535")).toBe(65535);
  });

  it("an empty value is absent, not malformed", () => {
    expect(port("")).toBe(PORT_ABSENT);
  });

  it("refuses a leading zero: 081 is not 81 to an exact-match RBAC rule", () => {
    expect(port("081")).toBe(PORT_MALFORMED);
    expect(port("080")).toBe(PORT_MALFORMED);
    expect(port("0081")).toBe(PORT_MALFORMED);
    expect(port("00080")).toBe(PORT_MALFORMED);
    expect(port("01")).toBe(PORT_MALFORMED);
  });

  it("refuses 0, values above 65535 and more than five digits", () => {
    expect(port("0")).toBe(PORT_MALFORMED);
    expect(port("00")).toBe(PORT_MALFORMED);
    expect(port("00000")).toBe(PORT_MALFORMED);
    expect(port("65536")).toBe(PORT_MALFORMED);
    expect(port("99999")).toBe(PORT_MALFORMED);
    expect(port("123456")).toBe(PORT_MALFORMED);
    expect(port("8".repeat(4000))).toBe(PORT_MALFORMED);
  });

  it("refuses signs, spaces, hex, letters and any other byte", () => {
    expect(port("-1")).toBe(PORT_MALFORMED);
    expect(port("+80")).toBe(PORT_MALFORMED);
    expect(port(" 80")).toBe(PORT_MALFORMED);
    expect(port("80 ")).toBe(PORT_MALFORMED);
    expect(port("8 0")).toBe(PORT_MALFORMED);
    expect(port("\t80")).toBe(PORT_MALFORMED);
    expect(port("0x50")).toBe(PORT_MALFORMED);
    expect(port("80a")).toBe(PORT_MALFORMED);
    expect(port("8o")).toBe(PORT_MALFORMED);
    expect(port("80\0")).toBe(PORT_MALFORMED);
    expect(port("８０")).toBe(PORT_MALFORMED); // full-width digits
    expect(port("\n\x0280")).toBe(PORT_MALFORMED); // a StringValue is unwrapped by the caller, not here
  });

  it("refuses a repeated header as the termination shares it: every value joined by ','", () => {
    expect(port("81,80")).toBe(PORT_MALFORMED);
    expect(port("80,81")).toBe(PORT_MALFORMED);
    expect(port("80,80")).toBe(PORT_MALFORMED);
    expect(port("80, 80")).toBe(PORT_MALFORMED);
  });

  it("reads exactly len bytes", () => {
    const bytes = String.UTF8.encode("8080x");
    expect(parseCanonicalPort(changetype<usize>(bytes), 2)).toBe(80);
    expect(parseCanonicalPort(changetype<usize>(bytes), 4)).toBe(8080);
    expect(parseCanonicalPort(changetype<usize>(bytes), 5)).toBe(PORT_MALFORMED);
    expect(parseCanonicalPort(changetype<usize>(bytes), 0)).toBe(PORT_ABSENT);
    expect(parseCanonicalPort(changetype<usize>(bytes), -1)).toBe(PORT_ABSENT);
  });
});

// Unit tests of the waypoint_route filter's pure parts: its configuration (parseWaypointConfig)
// and its per-connection decision (decide) over problem 3's decision table (docs/problems.md):
// waypoint local / remote / unusable, endpoints local / remote / none, gateways by address and by
// hostname, pod IPs, IPv6, locality. Expected values come from the rules, not the implementation.
// The compiled filter is tested through the proxy-wasm host in tests/host/waypoint_route.test.ts.
import { parseWaypointConfig, WaypointConfig } from "../../filters/waypoint_route/config";
import { Decision, decide, Outcome, OUTCOME_NAMES, outcomeName, Scratch } from "../../filters/waypoint_route/decide";
import { Address, formatAddress, parseSocketAddressString } from "../mesh";

// ---------------------------------------------------------------- helpers

/** The parsed configuration; a refused one fails the test with its error. */
function config(text: string): WaypointConfig {
  const result = parseWaypointConfig(String.UTF8.encode(text));
  expect(result.error).toBe("");
  const c = result.config;
  expect(c).not.toBeNull();
  return changetype<WaypointConfig>(c);
}

/** The error of a configuration that must be refused ("<accepted>" when it was not). */
function refused(text: string): string {
  const result = parseWaypointConfig(String.UTF8.encode(text));
  if (result.config !== null) return "<accepted>";
  return result.error;
}

function utf8(buffer: ArrayBuffer): string {
  return String.UTF8.decode(buffer);
}

const scratch = new Scratch();

/** decide() for `destination` ("IP:PORT" / "[IPv6]:PORT"). */
function decideFor(c: WaypointConfig, destination: string, out: Decision = new Decision()): Decision {
  const dst = new Address();
  expect(parseSocketAddressString(destination, dst)).toBe(true, destination + " must parse");
  decide(c, dst, scratch, out);
  return out;
}

function nextHop(d: Decision): string {
  return formatAddress(d.nextHop);
}

/** The chosen instance's identity ("<none>" when none): names the workload without indexes. */
function instanceId(c: WaypointConfig, d: Decision): string {
  return d.instance < 0 ? "<none>" : c.mesh.workloadIdentity(d.instance);
}

function gatewayId(c: WaypointConfig, d: Decision): string {
  return d.gateway < 0 ? "<none>" : c.mesh.workloadIdentity(d.gateway);
}

function serviceName(c: WaypointConfig, d: Decision): string {
  return d.service < 0 ? "<none>" : c.mesh.serviceHostname(d.service);
}

function id(sa: string): string {
  return "spiffe://cluster.local/ns/default/sa/" + sa;
}

function gwId(sa: string): string {
  return "spiffe://cluster.local/ns/istio-system/sa/" + sa;
}

function health(up: bool): string {
  return up ? "true" : "false";
}

const OWN_AND_MESH_FIELDS = "localWorkload, hboneCluster, doubleHboneCluster, plainCluster, unknownDestination, localNetwork, meshFeed, workloads, services";

const SOURCE = `{"uid": "sleep", "addresses": ["10.1.0.100"], "network": "net1", "locality": "r1/z1/s1",
  "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/sleep"}`;

/** A configuration from the source workload plus `workloads` and `services` (JSON array bodies). */
function withSource(workloads: string, services: string, own: string = ""): string {
  return `{"localWorkload": "10.1.0.100"` + (own.length > 0 ? ", " + own : "") +
    `, "workloads": [` + SOURCE + (workloads.length > 0 ? ", " + workloads : "") + `], "services": [` + services + `]}`;
}

function istio(uid: string, address: string, network: string, locality: string, extra: string = ""): string {
  const addresses = address.length > 0 ? `["` + address + `"]` : "[]";
  return `{"uid": "` + uid + `", "addresses": ` + addresses + `, "network": "` + network + `", "locality": "` + locality +
    `", "tlsMode": "istio", "identity": "` + id(uid) + `"` + extra + "}";
}

// The main world (as in the host test). net1 is the source's network (locality r1/z1/s1).
//   wp-local  10.1.0.41 net1 r1/z2     waypoint service instance (listed LAST)
//   wp-net3   proxy     net3 r2/z1     gateway {address 172.16.3.1, hboneMtlsPort 15009} (listed FIRST)
//   wp-net2   proxy     net2 r1/z1/s1  gateway {hostname eastwest-net2} 15008 -> 15443
//   ew2       172.16.2.1 net2          instance of eastwest-net2 (SANs set)
//   ew3       172.16.3.1 net3          gateway workload
//   backend   10.1.1.1  net1           reviews' endpoint (never used instead of the waypoint)
// reviews: VIP 10.2.0.10 (net1), 9080 -> 8080, waypoint {hostname waypoint}.
// productpage: VIP 10.2.0.20 (net1), 80 -> 8080, SANs, endpoints pp-net2 (proxy, exact locality),
//   pp-r2 10.1.2.1 (other region), pp-r1 10.1.2.2 (source region, 80 -> 9090 override).
const REVIEWS = "reviews.default.svc.cluster.local";
const PRODUCT = "productpage.default.svc.cluster.local";
const WP_SANS = "spiffe://cluster.local/ns/default/sa/waypoint,spiffe://cluster.local/ns/default/sa/waypoint-canary";
const EW2_SANS = "spiffe://cluster.local/ns/istio-system/sa/eastwest-net2";

function world(localUp: bool, net2Up: bool, net3Up: bool, ppLocalUp: bool = true, ppRemoteUp: bool = true): string {
  const gw2 = `, "networkGateway": {"hostname": "eastwest-net2.istio-system.svc.cluster.local", "hboneMtlsPort": 15008}`;
  return withSource(
    istio("wp-local", "10.1.0.41", "net1", "r1/z2", `, "healthy": ` + health(localUp)) + ", " +
      istio("wp-net3", "", "net3", "r2/z1", `, "healthy": ` + health(net3Up) + `, "networkGateway": {"address": "172.16.3.1", "hboneMtlsPort": 15009}`) + ", " +
      istio("wp-net2", "", "net2", "r1/z1/s1", `, "healthy": ` + health(net2Up) + gw2) + ", " +
      `{"uid": "ew2", "addresses": ["172.16.2.1"], "network": "net2", "tlsMode": "istio", "identity": "` + gwId("ew2") + `"}, ` +
      `{"uid": "ew3", "addresses": ["172.16.3.1"], "network": "net3", "tlsMode": "istio", "identity": "` + gwId("ew3") + `"}, ` +
      istio("backend", "10.1.1.1", "net1", "r1/z1") + ", " +
      istio("pp-net2", "", "net2", "r1/z1/s1", `, "healthy": ` + health(ppRemoteUp) + gw2) + ", " +
      istio("pp-r2", "10.1.2.1", "net1", "r2/z1", `, "healthy": ` + health(ppLocalUp)) + ", " +
      istio("pp-r1", "10.1.2.2", "net1", "r1/z7", `, "healthy": ` + health(ppLocalUp)) + ", " +
      `{"uid": "legacy", "addresses": ["10.1.3.1"], "network": "net1"}, ` +
      istio("far-only", "10.3.0.5", "net2", "r1/z1") + ", " +
      `{"uid": "twin-local", "addresses": ["10.1.5.5"], "network": "net1"}, ` +
      istio("twin-remote", "10.1.5.5", "net2", "r1/z1"),
    `{"hostname": "reviews.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.10"}],
      "ports": {"9080": 8080}, "waypoint": {"hostname": "waypoint.default.svc.cluster.local"},
      "endpoints": [{"workload": "backend"}]},
     {"hostname": "waypoint.default.svc.cluster.local", "ports": {"15008": 15008},
      "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/waypoint", "spiffe://cluster.local/ns/default/sa/waypoint-canary"],
      "endpoints": [{"workload": "wp-net3"}, {"workload": "wp-net2"}, {"workload": "wp-local"}]},
     {"hostname": "eastwest-net2.istio-system.svc.cluster.local", "ports": {"15008": 15443},
      "subjectAltNames": ["` + EW2_SANS + `"], "endpoints": [{"workload": "ew2"}]},
     {"hostname": "productpage.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.20"}],
      "ports": {"80": 8080}, "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/productpage"],
      "endpoints": [{"workload": "pp-net2"}, {"workload": "pp-r2"}, {"workload": "pp-r1", "ports": {"80": 9090}}]},
     {"hostname": "remote-only.default.svc.cluster.local", "vips": [{"network": "net2", "address": "10.2.0.90"}],
      "ports": {"80": 8080}, "endpoints": [{"workload": "far-only"}]}`,
  );
}

/**
 * A service far (VIP 10.2.0.60:80 -> 8080) whose waypoint service's only instance is wp-far on
 * net2 (`farAddress`, "" for a proxy) with gateway `gateway` ("" for none), plus extra JSON.
 */
function farWaypoint(gateway: string, extraWorkloads: string = "", extraServices: string = "", farAddress: string = ""): string {
  const gw = gateway.length > 0 ? `, "networkGateway": ` + gateway : "";
  return withSource(
    istio("wp-far", farAddress, "net2", "r1/z1", gw) + ", " + istio("backend", "10.1.1.1", "net1", "r1/z1") +
      (extraWorkloads.length > 0 ? ", " + extraWorkloads : ""),
    `{"hostname": "far.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.60"}],
      "ports": {"80": 8080}, "waypoint": {"hostname": "far-waypoint.default.svc.cluster.local"},
      "endpoints": [{"workload": "backend"}]},
     {"hostname": "far-waypoint.default.svc.cluster.local", "ports": {"15008": 15008}, "endpoints": [{"workload": "wp-far"}]}` +
      (extraServices.length > 0 ? ", " + extraServices : ""),
  );
}

function gatewayPod(uid: string, address: string, network: string, extra: string = ""): string {
  return `{"uid": "` + uid + `", "addresses": ["` + address + `"], "network": "` + network + `", "tlsMode": "istio", "identity": "` +
    gwId(uid) + `"` + extra + "}";
}

const GW_SVC = "gw.istio-system.svc.cluster.local";

/** A local service ranked (VIP 10.2.0.80:80 -> 8080) with local endpoints a then b. */
function ranked(a: string, b: string, loadBalancing: string = ""): string {
  return withSource(
    istio("a", "10.1.4.1", "net1", a) + ", " + istio("b", "10.1.4.2", "net1", b),
    `{"hostname": "ranked.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.80"}],
      "ports": {"80": 8080}, "endpoints": [{"workload": "a"}, {"workload": "b"}]` +
      (loadBalancing.length > 0 ? `, "loadBalancing": ` + loadBalancing : "") + "}",
  );
}

// ---------------------------------------------------------------- configuration

describe("waypoint_route configuration: accepted", () => {
  it("uses the default cluster names and passes unknown destinations through by default", () => {
    const c = config(withSource("", ""));
    expect(utf8(c.hboneCluster)).toBe("waypoint_route_hbone");
    expect(utf8(c.doubleHboneCluster)).toBe("waypoint_route_double_hbone");
    expect(utf8(c.plainCluster)).toBe("waypoint_route_plain");
    expect(c.refuseUnknown).toBe(false);
  });

  it("takes the source workload and its network from localWorkload", () => {
    const c = config(world(true, true, true));
    expect(c.mesh.workloadIdentity(c.source)).toBe(id("sleep"));
    expect(c.network).toBe(c.mesh.networkId("net1"));
    expect(c.network).not.toBe(c.mesh.networkId(""));
  });

  it("reads the own fields", () => {
    const c = config(withSource("", "", `"hboneCluster": "h", "doubleHboneCluster": "d", "plainCluster": "p", "unknownDestination": "refuse"`));
    expect(utf8(c.plainCluster)).toBe("p");
    expect(utf8(c.hboneCluster)).toBe("h");
    expect(utf8(c.doubleHboneCluster)).toBe("d");
    expect(c.refuseUnknown).toBe(true);
    expect(config(withSource("", "", `"unknownDestination": "passthrough"`)).refuseUnknown).toBe(false);
  });

  it("treats JSON null as absent for the optional own fields", () => {
    const c = config(withSource("", "", `"hboneCluster": null, "doubleHboneCluster": null, "unknownDestination": null`));
    expect(utf8(c.hboneCluster)).toBe("waypoint_route_hbone");
    expect(utf8(c.doubleHboneCluster)).toBe("waypoint_route_double_hbone");
    expect(c.refuseUnknown).toBe(false);
  });

  it("finds an IPv6 localWorkload, and one in another spelling", () => {
    const mesh = `"workloads": [{"uid": "s6", "addresses": ["fd00:1::100"], "network": "net9", "tlsMode": "istio",
      "identity": "spiffe://cluster.local/ns/default/sa/s6"}]`;
    const c = config(`{"localWorkload": "fd00:1::100", ` + mesh + "}");
    expect(c.mesh.workloadIdentity(c.source)).toBe(id("s6"));
    expect(c.network).toBe(c.mesh.networkId("net9"));
    expect(config(`{"localWorkload": "FD00:1:0::100", ` + mesh + "}").source).toBe(c.source);
  });

  it("finds a localWorkload on any network", () => {
    const c = config(`{"localWorkload": "10.0.0.1", "workloads": [
      {"uid": "x", "addresses": ["10.0.0.2"]},
      {"uid": "me", "addresses": ["10.0.0.1"], "network": "west"}]}`);
    expect(c.network).toBe(c.mesh.networkId("west"));
  });
});

describe("waypoint_route configuration: refusals", () => {
  it("refuses a missing localWorkload", () => {
    expect(refused(`{"workloads": [` + SOURCE + `]}`)).toBe("localWorkload: missing required field");
    expect(refused(`{"localWorkload": null, "workloads": [` + SOURCE + `]}`)).toBe("localWorkload: missing required field");
  });

  it("refuses a localWorkload that is not a string", () => {
    expect(refused(`{"localWorkload": 10, "workloads": [` + SOURCE + `]}`)).toBe("localWorkload: expected a string");
  });

  it("refuses a localWorkload that is not an IP address", () => {
    expect(refused(`{"localWorkload": "sleep", "workloads": [` + SOURCE + `]}`)).toBe('localWorkload: not an IP address: "sleep"');
    expect(refused(`{"localWorkload": "10.1.0.100:80", "workloads": [` + SOURCE + `]}`)).toBe(
      'localWorkload: not an IP address: "10.1.0.100:80"',
    );
    expect(refused(`{"localWorkload": "", "workloads": [` + SOURCE + `]}`)).toBe('localWorkload: not an IP address: ""');
  });

  it("refuses a localWorkload that is no workload's address (a service VIP included)", () => {
    expect(refused(`{"localWorkload": "10.9.9.9", "workloads": [` + SOURCE + `]}`)).toBe("localWorkload: no workload has address 10.9.9.9");
    const vip = world(true, true, true).replace(`"localWorkload": "10.1.0.100"`, `"localWorkload": "10.2.0.10"`);
    expect(refused(vip)).toBe("localWorkload: no workload has address 10.2.0.10");
    expect(refused(`{"localWorkload": "10.1.0.100"}`)).toBe("localWorkload: no workload has address 10.1.0.100");
  });

  it("refuses an unknown top-level field and lists the known ones", () => {
    expect(refused(withSource("", "", `"hbone_cluster": "x"`))).toBe("hbone_cluster: unknown field (known: " + OWN_AND_MESH_FIELDS + ")");
  });

  it("refuses empty cluster names", () => {
    expect(refused(withSource("", "", `"hboneCluster": ""`))).toBe("hboneCluster: must not be empty");
    expect(refused(withSource("", "", `"doubleHboneCluster": ""`))).toBe("doubleHboneCluster: must not be empty");
    expect(refused(withSource("", "", `"plainCluster": ""`))).toBe("plainCluster: must not be empty");
    expect(refused(withSource("", "", `"plainCluster": 7`))).toBe("plainCluster: expected a string");
  });

  it("refuses cluster names that are not strings", () => {
    expect(refused(withSource("", "", `"hboneCluster": 1`))).toBe("hboneCluster: expected a string");
    expect(refused(withSource("", "", `"doubleHboneCluster": ["x"]`))).toBe("doubleHboneCluster: expected a string");
  });

  it("refuses an unknownDestination other than passthrough or refuse", () => {
    expect(refused(withSource("", "", `"unknownDestination": "drop"`))).toBe("unknownDestination: expected one of: passthrough, refuse");
    expect(refused(withSource("", "", `"unknownDestination": "Refuse"`))).toBe("unknownDestination: expected one of: passthrough, refuse");
    expect(refused(withSource("", "", `"unknownDestination": true`))).toBe("unknownDestination: expected one of: passthrough, refuse");
  });

  it("refuses a root that is not an object", () => {
    expect(refused("[]")).toBe("(root): expected an object");
    expect(refused(`"10.1.0.100"`)).toBe("(root): expected an object");
    expect(refused("null")).toBe("(root): expected an object");
  });

  it("refuses text that is not JSON, naming the byte", () => {
    expect(refused("{")).toBe("byte 1: unexpected end of input");
    expect(refused("")).toBe("byte 0: unexpected end of input");
  });

  it("passes a mesh problem through with its path", () => {
    expect(refused(withSource(`{"uid": "x", "addresses": ["10.0.0.300"]}`, ""))).toBe('workloads[1].addresses[0]: not an IP address: "10.0.0.300"');
  });

  it("reports only the first problem: an unknown field before a missing localWorkload", () => {
    expect(refused(`{"extra": 1}`)).toBe("extra: unknown field (known: " + OWN_AND_MESH_FIELDS + ")");
  });

  it("reports an own-field problem before a mesh problem", () => {
    expect(refused(`{"localWorkload": "10.1.0.100", "hboneCluster": "", "workloads": [{"uid": ""}]}`)).toBe("hboneCluster: must not be empty");
  });
});

// ---------------------------------------------------------------- rule 1: waypoint

describe("waypoint_route decision: a waypoint on this network", () => {
  it("chooses the local instance over remote ones listed first with a better locality: HBONE to it, :authority VIP:P", () => {
    const c = config(world(true, true, true));
    const d = decideFor(c, "10.2.0.10:9080");
    expect(d.outcome).toBe(Outcome.HboneWaypoint);
    expect(nextHop(d)).toBe("10.1.0.41:15008");
    expect(d.authority.toString()).toBe("10.2.0.10:9080");
    // The waypoint service's SANs or the chosen instance's own identity (ztunnel's workload_and_services_san).
    expect(d.sans.toString()).toBe(WP_SANS + "," + id("wp-local"));
    expect(d.gatewaySans.toString()).toBe("");
    expect(d.gateway).toBe(-1);
    expect(instanceId(c, d)).toBe(id("wp-local"));
    expect(serviceName(c, d)).toBe(REVIEWS);
    expect(d.servicePort).toBe(9080);
  });

  it("uses a waypoint workload given by address with its reference port, verifying its identity", () => {
    const c = config(withSource(
      istio("wp-solo", "10.1.0.42", "net1", "r1/z1") + ", " + istio("backend", "10.1.1.1", "net1", "r1/z1"),
      `{"hostname": "details.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.40"}],
        "ports": {"9080": 9080}, "waypoint": {"address": "10.1.0.42", "port": 15088}, "endpoints": [{"workload": "backend"}]},
       {"hostname": "details2.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.41"}],
        "ports": {"9080": 9080}, "waypoint": {"address": "10.1.0.42"}, "endpoints": [{"workload": "backend"}]}`,
    ));
    const d = decideFor(c, "10.2.0.40:9080");
    expect(d.outcome).toBe(Outcome.HboneWaypoint);
    expect(nextHop(d)).toBe("10.1.0.42:15088");
    expect(d.sans.toString()).toBe(id("wp-solo"));
    expect(d.authority.toString()).toBe("10.2.0.40:9080");
    expect(nextHop(decideFor(c, "10.2.0.41:9080"))).toBe("10.1.0.42:15008");
  });

  it("uses the instance identity when the waypoint service has no subjectAltNames", () => {
    const c = config(withSource(
      istio("wp-0", "10.1.0.43", "net1", "r1/z1"),
      `{"hostname": "s.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.42"}],
        "ports": {"80": 8080}, "waypoint": {"hostname": "w.default.svc.cluster.local"}},
       {"hostname": "w.default.svc.cluster.local", "ports": {"15008": 15008}, "endpoints": [{"workload": "wp-0"}]}`,
    ));
    const d = decideFor(c, "10.2.0.42:80");
    expect(d.outcome).toBe(Outcome.HboneWaypoint);
    expect(d.sans.toString()).toBe(id("wp-0"));
  });
});

describe("waypoint_route decision: a waypoint on another network", () => {
  it("goes double HBONE through a gateway service with a translated HBONE port, :authority <hostname>:P", () => {
    const c = config(world(false, true, true));
    const d = decideFor(c, "10.2.0.10:9080");
    expect(d.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(instanceId(c, d)).toBe(id("wp-net2")); // same region/zone/subzone beats wp-net3 (other region, listed first)
    expect(nextHop(d)).toBe("172.16.2.1:15443");
    expect(d.authority.toString()).toBe(REVIEWS + ":9080");
    expect(d.sans.toString()).toBe(WP_SANS);
    expect(d.gatewaySans.toString()).toBe(EW2_SANS + "," + gwId("ew2"));
    expect(gatewayId(c, d)).toBe(gwId("ew2"));
  });

  it("goes double HBONE through a gateway workload given by address on its hboneMtlsPort", () => {
    const c = config(world(false, false, true));
    const d = decideFor(c, "10.2.0.10:9080");
    expect(d.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(instanceId(c, d)).toBe(id("wp-net3"));
    expect(nextHop(d)).toBe("172.16.3.1:15009");
    expect(d.authority.toString()).toBe(REVIEWS + ":9080");
    expect(d.sans.toString()).toBe(WP_SANS);
    expect(d.gatewaySans.toString()).toBe(gwId("ew3"));
  });

  it("refuses with unknown waypoint when no instance is healthy, never choosing the service's endpoint", () => {
    const c = config(world(false, false, false));
    const d = decideFor(c, "10.2.0.10:9080");
    expect(d.outcome).toBe(Outcome.ErrorUnknownWaypoint);
    expect(d.instance).toBe(-1);
    expect(d.authority.toString()).toBe("");
    expect(nextHop(d)).toBe("");
  });

  it("refuses with no valid destination a remote instance without a gateway", () => {
    const d = decideFor(config(farWaypoint("", "", "", "10.3.0.41")), "10.2.0.60:80");
    expect(d.outcome).toBe(Outcome.ErrorNoValidDestination);
  });

  it("refuses with unknown waypoint an unresolved waypoint reference", () => {
    const c = config(withSource(
      istio("backend", "10.1.1.1", "net1", "r1/z1"),
      `{"hostname": "a.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.70"}],
        "ports": {"80": 8080}, "waypoint": {"hostname": "nope.default.svc.cluster.local"}, "endpoints": [{"workload": "backend"}]},
       {"hostname": "b.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.71"}],
        "ports": {"80": 8080}, "waypoint": {"address": "10.1.9.9"}, "endpoints": [{"workload": "backend"}]}`,
    ));
    expect(decideFor(c, "10.2.0.70:80").outcome).toBe(Outcome.ErrorUnknownWaypoint);
    expect(decideFor(c, "10.2.0.71:80").outcome).toBe(Outcome.ErrorUnknownWaypoint);
  });
});

// ---------------------------------------------------------------- rule 3: gateways

describe("waypoint_route decision: gateways", () => {
  it("translates the HBONE port through the gateway endpoint's override", () => {
    const c = config(farWaypoint(
      `{"hostname": "` + GW_SVC + `"}`,
      gatewayPod("gw-a", "172.16.2.11", "net2"),
      `{"hostname": "` + GW_SVC + `", "ports": {"15008": 15443}, "endpoints": [{"workload": "gw-a", "ports": {"15008": 15444}}]}`,
    ));
    const d = decideFor(c, "10.2.0.60:80");
    expect(d.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(nextHop(d)).toBe("172.16.2.11:15444");
    expect(d.gatewaySans.toString()).toBe(gwId("gw-a"));
    expect(d.sans.toString()).toBe(id("wp-far"));
    expect(d.authority.toString()).toBe("far.default.svc.cluster.local:80");
  });

  it("skips unhealthy gateway instances and instances of other networks", () => {
    const c = config(farWaypoint(
      `{"hostname": "` + GW_SVC + `"}`,
      gatewayPod("gw-down", "172.16.2.11", "net2", `, "healthy": false`) + ", " + gatewayPod("gw-net3", "172.16.3.11", "net3") + ", " +
        gatewayPod("gw-ok", "172.16.2.12", "net2"),
      `{"hostname": "` + GW_SVC + `", "ports": {"15008": 15008},
        "endpoints": [{"workload": "gw-down"}, {"workload": "gw-net3"}, {"workload": "gw-ok"}]}`,
    ));
    const d = decideFor(c, "10.2.0.60:80");
    expect(d.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(nextHop(d)).toBe("172.16.2.12:15008");
    expect(gatewayId(c, d)).toBe(gwId("gw-ok"));
  });

  it("refuses with unknown gateway an unresolved gateway hostname or address", () => {
    expect(decideFor(config(farWaypoint(`{"hostname": "nope.istio-system.svc.cluster.local"}`)), "10.2.0.60:80").outcome).toBe(
      Outcome.ErrorUnknownGateway,
    );
    expect(decideFor(config(farWaypoint(`{"address": "172.16.9.9"}`)), "10.2.0.60:80").outcome).toBe(Outcome.ErrorUnknownGateway);
  });

  it("refuses with unknown gateway a gateway service with nothing healthy and addressed on the waypoint's network", () => {
    const unhealthy = farWaypoint(
      `{"hostname": "` + GW_SVC + `"}`,
      gatewayPod("gw-down", "172.16.2.11", "net2", `, "healthy": false`) + ", " + gatewayPod("gw-net3", "172.16.3.11", "net3"),
      `{"hostname": "` + GW_SVC + `", "ports": {"15008": 15008}, "endpoints": [{"workload": "gw-down"}, {"workload": "gw-net3"}]}`,
    );
    expect(decideFor(config(unhealthy), "10.2.0.60:80").outcome).toBe(Outcome.ErrorUnknownGateway);
    const empty = farWaypoint(`{"hostname": "` + GW_SVC + `"}`, "", `{"hostname": "` + GW_SVC + `", "ports": {"15008": 15008}}`);
    expect(decideFor(config(empty), "10.2.0.60:80").outcome).toBe(Outcome.ErrorUnknownGateway);
  });

  it("refuses with unknown gateway a gateway workload without identity", () => {
    const c = config(farWaypoint(`{"address": "172.16.2.31"}`, `{"uid": "gw-anon", "addresses": ["172.16.2.31"], "network": "net2"}`));
    expect(decideFor(c, "10.2.0.60:80").outcome).toBe(Outcome.ErrorUnknownGateway);
  });

  it("refuses with unknown gateway an unhealthy gateway workload given by address", () => {
    const c = config(farWaypoint(`{"address": "172.16.2.11"}`, gatewayPod("gw-down", "172.16.2.11", "net2", `, "healthy": false`)));
    expect(decideFor(c, "10.2.0.60:80").outcome).toBe(Outcome.ErrorUnknownGateway);
  });

  it("refuses with unknown gateway a gateway address that is a workload of another network only", () => {
    const c = config(farWaypoint(`{"address": "10.1.0.77"}`, istio("not-a-gateway", "10.1.0.77", "net1", "r1/z1")));
    expect(decideFor(c, "10.2.0.60:80").outcome).toBe(Outcome.ErrorUnknownGateway);
  });

  it("accepts an identified gateway that is not sidecar'd (tlsMode disabled) by service as by address", () => {
    const gw = `{"uid": "gw-plain", "addresses": ["172.16.2.21"], "network": "net2", "identity": "` + gwId("gw-plain") + `"}`;
    const svc = `{"hostname": "` + GW_SVC + `", "ports": {"15008": 15008}, "endpoints": [{"workload": "gw-plain"}]}`;
    const byAddress = decideFor(config(farWaypoint(`{"address": "172.16.2.21"}`, gw, svc)), "10.2.0.60:80");
    expect(byAddress.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(byAddress.gatewaySans.toString()).toBe(gwId("gw-plain"));
    const byHostname = decideFor(config(farWaypoint(`{"hostname": "` + GW_SVC + `"}`, gw, svc)), "10.2.0.60:80");
    expect(byHostname.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(byHostname.gatewaySans.toString()).toBe(gwId("gw-plain"));
    expect(nextHop(byHostname)).toBe("172.16.2.21:15008");
  });
});

// ---------------------------------------------------------------- rule 2: endpoints

describe("waypoint_route decision: endpoints without a waypoint", () => {
  it("HBONEs to the best local endpoint's pod with :authority podIP:T (its own override) and the pod's identity", () => {
    const c = config(world(true, true, true));
    const d = decideFor(c, "10.2.0.20:80");
    expect(d.outcome).toBe(Outcome.HboneEndpoint);
    expect(instanceId(c, d)).toBe(id("pp-r1"));
    expect(nextHop(d)).toBe("10.1.2.2:15008");
    expect(d.authority.toString()).toBe("10.1.2.2:9090");
    expect(d.sans.toString()).toBe(id("productpage") + "," + id("pp-r1"));
    expect(d.gateway).toBe(-1);
  });

  it("goes double HBONE to a remote endpoint with the service's SANs when no local one is healthy", () => {
    const c = config(world(true, true, true, false, true));
    const d = decideFor(c, "10.2.0.20:80");
    expect(d.outcome).toBe(Outcome.DoubleHboneEndpoint);
    expect(instanceId(c, d)).toBe(id("pp-net2"));
    expect(nextHop(d)).toBe("172.16.2.1:15443");
    expect(d.authority.toString()).toBe(PRODUCT + ":80");
    expect(d.sans.toString()).toBe(id("productpage"));
    expect(d.gatewaySans.toString()).toBe(EW2_SANS + "," + gwId("ew2"));
  });

  it("refuses with no endpoint when no endpoint is healthy", () => {
    const d = decideFor(config(world(true, true, true, false, false)), "10.2.0.20:80");
    expect(d.outcome).toBe(Outcome.ErrorNoEndpoint);
  });

  it("refuses with no valid destination a remote endpoint without a gateway", () => {
    const c = config(withSource(
      istio("far-pod", "10.3.0.5", "net2", "r1/z1"),
      `{"hostname": "far.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.22"}],
        "ports": {"80": 8080}, "endpoints": [{"workload": "far-pod"}]}`,
    ));
    expect(decideFor(c, "10.2.0.22:80").outcome).toBe(Outcome.ErrorNoValidDestination);
  });
});

// ---------------------------------------------------------------- locality

describe("waypoint_route decision: locality", () => {
  it("prefers the source's region over another region", () => {
    const c = config(ranked("r2/z1", "r1/z9"));
    expect(instanceId(c, decideFor(c, "10.2.0.80:80"))).toBe(id("b"));
  });

  it("prefers the source's zone over its region alone", () => {
    const c = config(ranked("r1/z2", "r1/z1"));
    expect(instanceId(c, decideFor(c, "10.2.0.80:80"))).toBe(id("b"));
  });

  it("prefers the source's subzone over its zone alone", () => {
    const c = config(ranked("r1/z1/s2", "r1/z1/s1"));
    expect(instanceId(c, decideFor(c, "10.2.0.80:80"))).toBe(id("b"));
  });

  it("breaks ties by configuration order", () => {
    const c = config(ranked("r1/z1", "r1/z1"));
    expect(instanceId(c, decideFor(c, "10.2.0.80:80"))).toBe(id("a"));
    const d = config(ranked("r3/z1", "r2/z1"));
    expect(instanceId(d, decideFor(d, "10.2.0.80:80"))).toBe(id("a"));
  });

  it("follows a custom routingPreference", () => {
    const region = config(ranked("r1/z2", "r1/z1", `{"routingPreference": ["region"]}`));
    expect(instanceId(region, decideFor(region, "10.2.0.80:80"))).toBe(id("a"));
    const none = config(ranked("r2/z1", "r1/z1/s1", `{"routingPreference": []}`));
    expect(instanceId(none, decideFor(none, "10.2.0.80:80"))).toBe(id("a"));
    const zone = config(ranked("r1/z2", "r1/z1", `{"routingPreference": ["region", "zone"]}`));
    expect(instanceId(zone, decideFor(zone, "10.2.0.80:80"))).toBe(id("b"));
  });

  it("counts only the leading scopes of the routingPreference that match", () => {
    // [zone, region]: b shares the source's region but not its zone, so that counts for nothing:
    // a and b tie and a (first) wins.
    const c = config(ranked("r2/z9", "r1/z2", `{"routingPreference": ["zone", "region"]}`));
    expect(instanceId(c, decideFor(c, "10.2.0.80:80"))).toBe(id("a"));
  });
});

// ---------------------------------------------------------------- rule 4: pods and unknown

describe("waypoint_route decision: pod IPs and unknown destinations", () => {
  it("HBONEs to a mesh pod of this network dialled by IP", () => {
    const c = config(world(true, true, true));
    const d = decideFor(c, "10.1.1.1:8080");
    expect(d.outcome).toBe(Outcome.HbonePod);
    expect(nextHop(d)).toBe("10.1.1.1:15008");
    expect(d.authority.toString()).toBe("10.1.1.1:8080");
    expect(d.sans.toString()).toBe(id("backend"));
    expect(d.service).toBe(-1);
  });

  it("sends a pod without a sidecar as plain TCP", () => {
    expect(decideFor(config(world(true, true, true)), "10.1.3.1:8080").outcome).toBe(Outcome.PlaintextPod);
  });

  it("never crosses networks for a pod IP", () => {
    const c = config(world(true, true, true));
    expect(decideFor(c, "10.3.0.5:8080").outcome).toBe(Outcome.Unknown);
    // 10.1.5.5 is a plain pod here and a sidecar'd pod on net2: this network's wins.
    expect(decideFor(c, "10.1.5.5:8080").outcome).toBe(Outcome.PlaintextPod);
  });

  it("treats an address outside this network's mesh view as unknown", () => {
    const c = config(world(true, true, true));
    const d = decideFor(c, "10.9.9.9:443");
    expect(d.outcome).toBe(Outcome.Unknown);
    expect(d.instance).toBe(-1);
    expect(decideFor(c, "10.2.0.90:80").outcome).toBe(Outcome.Unknown); // a VIP of net2 only
  });

  it("resets every field of a reused decision", () => {
    const c = config(world(false, true, true));
    const d = new Decision();
    decideFor(c, "10.2.0.10:9080", d); // double HBONE: everything set
    expect(d.outcome).toBe(Outcome.DoubleHboneWaypoint);
    decideFor(c, "10.9.9.9:443", d);
    expect(d.outcome).toBe(Outcome.Unknown);
    expect(d.service).toBe(-1);
    expect(d.servicePort).toBe(-1);
    expect(d.instance).toBe(-1);
    expect(d.gateway).toBe(-1);
    expect(nextHop(d)).toBe("");
    expect(d.authority.toString()).toBe("");
    expect(d.sans.toString()).toBe("");
    expect(d.gatewaySans.toString()).toBe("");
  });
});

// ---------------------------------------------------------------- IPv6

describe("waypoint_route decision: IPv6", () => {
  it("brackets IPv6 next hops and authorities, and canonicalises the dialled spelling", () => {
    const c = config(`{"localWorkload": "fd00:1::100", "workloads": [
      {"uid": "s6", "addresses": ["fd00:1::100"], "network": "net1", "locality": "r1/z1", "tlsMode": "istio",
       "identity": "spiffe://cluster.local/ns/default/sa/s6"},
      ` + istio("wp6", "fd00:1::41", "net1", "r1/z1") + `,
      ` + istio("wp6-net2", "", "net2", "r1/z1", `, "networkGateway": {"address": "fd00:3::1"}`) + `,
      {"uid": "ew6", "addresses": ["fd00:3::1"], "network": "net2", "tlsMode": "istio", "identity": "` + gwId("ew6") + `"},
      ` + istio("pod6", "fd00:1::5", "net1", "r1/z1") + `],
      "services": [
      {"hostname": "v6.default.svc.cluster.local", "vips": [{"network": "net1", "address": "fd00:2::10"}], "ports": {"80": 8080},
       "waypoint": {"hostname": "w6.default.svc.cluster.local"}},
      {"hostname": "w6.default.svc.cluster.local", "ports": {"15008": 15008}, "endpoints": [{"workload": "wp6-net2"}, {"workload": "wp6"}]},
      {"hostname": "e6.default.svc.cluster.local", "vips": [{"network": "net1", "address": "fd00:2::11"}], "ports": {"80": 8080},
       "endpoints": [{"workload": "pod6"}]}]}`);
    const w = decideFor(c, "[FD00:2:0:0:0:0:0:10]:80");
    expect(w.outcome).toBe(Outcome.HboneWaypoint);
    expect(nextHop(w)).toBe("[fd00:1::41]:15008");
    expect(w.authority.toString()).toBe("[fd00:2::10]:80");
    const e = decideFor(c, "[fd00:2::11]:80");
    expect(e.outcome).toBe(Outcome.HboneEndpoint);
    expect(nextHop(e)).toBe("[fd00:1::5]:15008");
    expect(e.authority.toString()).toBe("[fd00:1::5]:8080");
    const p = decideFor(c, "[fd00:1::5]:9000");
    expect(p.outcome).toBe(Outcome.HbonePod);
    expect(p.authority.toString()).toBe("[fd00:1::5]:9000");
    expect(nextHop(p)).toBe("[fd00:1::5]:15008");
    expect(decideFor(c, "[fd00:3::1]:80").outcome).toBe(Outcome.Unknown); // a net2 workload
  });

  it("goes double HBONE through an IPv6 gateway", () => {
    const c = config(`{"localWorkload": "fd00:1::100", "workloads": [
      {"uid": "s6", "addresses": ["fd00:1::100"], "network": "net1", "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/default/sa/s6"},
      ` + istio("wp6-net2", "", "net2", "r1/z1", `, "networkGateway": {"address": "fd00:3::1", "hboneMtlsPort": 15009}`) + `,
      {"uid": "ew6", "addresses": ["fd00:3::1"], "network": "net2", "tlsMode": "istio", "identity": "` + gwId("ew6") + `"}],
      "services": [
      {"hostname": "v6.default.svc.cluster.local", "vips": [{"network": "net1", "address": "fd00:2::10"}], "ports": {"80": 8080},
       "waypoint": {"hostname": "w6.default.svc.cluster.local"}},
      {"hostname": "w6.default.svc.cluster.local", "ports": {"15008": 15008}, "endpoints": [{"workload": "wp6-net2"}]}]}`);
    const d = decideFor(c, "[fd00:2::10]:80");
    expect(d.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(nextHop(d)).toBe("[fd00:3::1]:15009");
    expect(d.authority.toString()).toBe("v6.default.svc.cluster.local:80");
    expect(d.gatewaySans.toString()).toBe(gwId("ew6"));
    expect(d.sans.toString()).toBe(id("wp6-net2"));
  });
});

// ---------------------------------------------------------------- scale of candidates

describe("waypoint_route decision: many candidates", () => {
  it("finds the only healthy instance among 300 waypoint instances (more than the scratch buffer holds)", () => {
    let workloads = "";
    let endpoints = "";
    for (let i = 0; i < 300; i++) {
      if (i > 0) {
        workloads += ", ";
        endpoints += ", ";
      }
      workloads += istio("wp-" + i.toString(), "10.1." + (10 + (i >> 8)).toString() + "." + (i & 255).toString(), "net1", "r1/z1",
        i == 299 ? "" : `, "healthy": false`);
      endpoints += `{"workload": "wp-` + i.toString() + `"}`;
    }
    const c = config(withSource(
      workloads,
      `{"hostname": "big.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.0.99"}], "ports": {"80": 8080},
        "waypoint": {"hostname": "bigw.default.svc.cluster.local"}},
       {"hostname": "bigw.default.svc.cluster.local", "ports": {"15008": 15008}, "endpoints": [` + endpoints + `]}`,
    ));
    const d = decideFor(c, "10.2.0.99:80");
    expect(d.outcome).toBe(Outcome.HboneWaypoint);
    expect(instanceId(c, d)).toBe(id("wp-299"));
    expect(nextHop(d)).toBe("10.1.11.43:15008");
  });
});

// ---------------------------------------------------------------- rules 5-9 (ztunnel's build_request)

/** A workload without a sidecar (tlsMode disabled), with an identity only when `identified`. */
function plainPod(uid: string, addresses: string, network: string, locality: string, extra: string = ""): string {
  return `{"uid": "` + uid + `", "addresses": [` + addresses + `], "network": "` + network + `", "locality": "` + locality + `"` + extra + "}";
}

const WAYPOINT_SVC = `{"hostname": "waypoint.default.svc.cluster.local", "ports": {"15008": 15008},
  "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/waypoint"], "endpoints": [{"workload": "wp-local"}]}`;
const BY_HOSTNAME = `, "waypoint": {"hostname": "waypoint.default.svc.cluster.local"}`;

/**
 * Rule 5 world: pods with their own waypoint (by hostname: the waypoint service, instance wp-local
 * 10.1.0.41; by address: wp-solo 10.1.0.42), a plain pod with a waypoint, and a service whose
 * endpoint has a waypoint. `local` is the localWorkload.
 */
function podWaypoints(local: string = "10.1.0.100", wpLocalUp: bool = true): string {
  return withSource(
    istio("wp-local", "10.1.0.41", "net1", "r1/z1", `, "healthy": ` + health(wpLocalUp)) + ", " +
      istio("wp-solo", "10.1.0.42", "net1", "r1/z1") + ", " +
      istio("app", "10.1.6.1", "net1", "r1/z1", BY_HOSTNAME) + ", " +
      istio("app-by-address", "10.1.6.2", "net1", "r1/z1", `, "waypoint": {"address": "10.1.0.42"}`) + ", " +
      plainPod("app-plain", `"10.1.6.3"`, "net1", "r1/z1", BY_HOSTNAME) + ", " +
      istio("app-lost", "10.1.6.4", "net1", "r1/z1", `, "waypoint": {"hostname": "nope.default.svc.cluster.local"}`) + ", " +
      istio("app-far", "10.1.6.5", "net1", "r1/z1", `, "waypoint": {"hostname": "far-waypoint.default.svc.cluster.local"}`) + ", " +
      istio("wp-far", "", "net2", "r1/z1", `, "networkGateway": {"address": "172.16.3.1"}`) + ", " +
      `{"uid": "ew3", "addresses": ["172.16.3.1"], "network": "net2", "tlsMode": "istio", "identity": "` + gwId("ew3") + `"}`,
    WAYPOINT_SVC + `,
     {"hostname": "far-waypoint.default.svc.cluster.local", "ports": {"15008": 15008}, "endpoints": [{"workload": "wp-far"}]},
     {"hostname": "app.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.1.1"}], "ports": {"80": 8080},
      "endpoints": [{"workload": "app"}]}`,
  ).replace(`"localWorkload": "10.1.0.100"`, `"localWorkload": "` + local + `"`);
}

describe("waypoint_route decision: rule 5, a pod's own waypoint", () => {
  it("sends a pod IP through its workload's waypoint: HBONE to the waypoint, :authority podIP:port", () => {
    const c = config(podWaypoints());
    const d = decideFor(c, "10.1.6.1:8080");
    expect(d.outcome).toBe(Outcome.HbonePodWaypoint);
    expect(d.rule).toBe(5);
    expect(nextHop(d)).toBe("10.1.0.41:15008");
    expect(d.authority.toString()).toBe("10.1.6.1:8080");
    expect(d.sans.toString()).toBe(id("waypoint") + "," + id("wp-local"));
    expect(instanceId(c, d)).toBe(id("wp-local"));
    expect(d.service).toBe(-1);
  });

  it("uses a waypoint given by address at that address and its identity", () => {
    const d = decideFor(config(podWaypoints()), "10.1.6.2:9000");
    expect(d.outcome).toBe(Outcome.HbonePodWaypoint);
    expect(nextHop(d)).toBe("10.1.0.42:15008");
    expect(d.authority.toString()).toBe("10.1.6.2:9000");
    expect(d.sans.toString()).toBe(id("wp-solo"));
  });

  it("sends a pod without a sidecar through its waypoint too (the waypoint's policy applies)", () => {
    const d = decideFor(config(podWaypoints()), "10.1.6.3:8080");
    expect(d.outcome).toBe(Outcome.HbonePodWaypoint);
    expect(nextHop(d)).toBe("10.1.0.41:15008");
    expect(d.authority.toString()).toBe("10.1.6.3:8080");
  });

  it("goes straight to the pod when this proxy is that waypoint (by service instance or by address)", () => {
    const asWaypoint = config(podWaypoints("10.1.0.41"));
    const d = decideFor(asWaypoint, "10.1.6.1:8080");
    expect(d.outcome).toBe(Outcome.HbonePod);
    expect(d.rule).toBe(5);
    expect(nextHop(d)).toBe("10.1.6.1:15008");
    expect(d.sans.toString()).toBe(id("app"));
    expect(decideFor(asWaypoint, "10.1.6.3:8080").outcome).toBe(Outcome.PlaintextPod);
    // The other waypoint's pod still goes through its own waypoint.
    expect(decideFor(asWaypoint, "10.1.6.2:9000").outcome).toBe(Outcome.HbonePodWaypoint);
    const asSolo = config(podWaypoints("10.1.0.42"));
    expect(decideFor(asSolo, "10.1.6.2:9000").outcome).toBe(Outcome.HbonePod);
    expect(decideFor(asSolo, "10.1.6.1:8080").outcome).toBe(Outcome.HbonePodWaypoint);
  });

  it("refuses with unknown pod waypoint when the waypoint is unhealthy or names nothing", () => {
    const down = decideFor(config(podWaypoints("10.1.0.100", false)), "10.1.6.1:8080");
    expect(down.outcome).toBe(Outcome.ErrorUnknownPodWaypoint);
    expect(down.rule).toBe(5);
    expect(nextHop(down)).toBe("");
    expect(down.authority.toString()).toBe("");
    expect(decideFor(config(podWaypoints()), "10.1.6.4:8080").outcome).toBe(Outcome.ErrorUnknownPodWaypoint);
  });

  it("refuses a pod whose waypoint is only on another network: a pod IP never crosses networks", () => {
    const d = decideFor(config(podWaypoints()), "10.1.6.5:8080");
    expect(d.outcome).toBe(Outcome.ErrorUnknownPodWaypoint);
    expect(d.rule).toBe(4);
    expect(nextHop(d)).toBe("");
    expect(d.sans.toString()).toBe("");
    expect(d.gateway).toBe(-1);
  });

  it("does not apply an endpoint's own waypoint to service-addressed traffic (ztunnel: handled by the service)", () => {
    const d = decideFor(config(podWaypoints()), "10.2.1.1:80");
    expect(d.outcome).toBe(Outcome.HboneEndpoint);
    expect(nextHop(d)).toBe("10.1.6.1:15008");
    expect(d.authority.toString()).toBe("10.1.6.1:8080");
  });
});

describe("waypoint_route decision: rule 6, a VIP on a port the service does not list", () => {
  it("goes through the local waypoint with :authority VIP:port as dialled", () => {
    const c = config(world(true, true, true));
    const d = decideFor(c, "10.2.0.10:9999");
    expect(d.outcome).toBe(Outcome.HboneWaypoint);
    expect(d.rule).toBe(6);
    expect(nextHop(d)).toBe("10.1.0.41:15008");
    expect(d.authority.toString()).toBe("10.2.0.10:9999");
    expect(serviceName(c, d)).toBe(REVIEWS);
    expect(d.servicePort).toBe(9999);
    expect(decideFor(c, "10.2.0.10:9080").rule).toBe(1);
  });

  it("goes double HBONE to a remote waypoint with :authority <hostname>:port as dialled", () => {
    const d = decideFor(config(world(false, true, true)), "10.2.0.10:9999");
    expect(d.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(d.rule).toBe(6);
    expect(d.authority.toString()).toBe(REVIEWS + ":9999");
    expect(nextHop(d)).toBe("172.16.2.1:15443");
  });

  it("refuses without a waypoint, as ztunnel does (no upstream: the port is unknown), never passing it through", () => {
    const c = config(world(true, true, true));
    const d = decideFor(c, "10.2.0.20:81");
    expect(d.outcome).toBe(Outcome.ErrorUnlistedPort);
    expect(d.rule).toBe(6);
    expect(serviceName(c, d)).toBe(PRODUCT);
    expect(nextHop(d)).toBe("");
    expect(d.instance).toBe(-1);
  });
});

/** Rule 7 world: services whose endpoints lack HBONE, locally and remotely. */
function plainEndpoints(): string {
  const gw2 = `, "networkGateway": {"address": "172.16.2.1"}`;
  return withSource(
    plainPod("legacy", `"10.1.3.1"`, "net1", "r1/z1") + ", " +
      istio("meshy", "10.1.3.2", "net1", "r2/z1") + ", " +
      plainPod("legacy-remote", `"10.3.3.1"`, "net2", "r1/z1", gw2) + ", " +
      plainPod("legacy-nogw", `"10.3.3.2"`, "net2", "r1/z1") + ", " +
      plainPod("proxy-here", "", "net1", "r1/z1", gw2) + ", " +
      `{"uid": "ew2", "addresses": ["172.16.2.1"], "network": "net2", "tlsMode": "istio", "identity": "` + gwId("ew2") + `"}`,
    `{"hostname": "legacy.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.2.1"}], "ports": {"80": 8080},
      "endpoints": [{"workload": "meshy"}, {"workload": "legacy", "ports": {"80": 8081}}]},
     {"hostname": "legacy-remote.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.2.2"}], "ports": {"80": 8080},
      "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/legacy"], "endpoints": [{"workload": "legacy-remote"}]},
     {"hostname": "legacy-anon.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.2.3"}], "ports": {"80": 8080},
      "endpoints": [{"workload": "legacy-remote"}]},
     {"hostname": "legacy-nogw.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.2.4"}], "ports": {"80": 8080},
      "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/legacy"], "endpoints": [{"workload": "legacy-nogw"}]},
     {"hostname": "here.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.2.5"}], "ports": {"80": 8080},
      "endpoints": [{"workload": "proxy-here"}]}`,
  );
}

describe("waypoint_route decision: rule 7, endpoints without HBONE", () => {
  it("sends a local endpoint without a sidecar plain TCP to podIP:T (its own override), no identity", () => {
    const c = config(plainEndpoints());
    const d = decideFor(c, "10.2.2.1:80");
    // legacy shares the source's region; meshy (with HBONE) is in another: locality decides, not tunnel support.
    expect(d.outcome).toBe(Outcome.PlaintextEndpoint);
    expect(d.rule).toBe(7);
    expect(nextHop(d)).toBe("10.1.3.1:8081");
    expect(d.authority.toString()).toBe("");
    expect(d.sans.toString()).toBe("");
    expect(c.mesh.workloadIstio(d.instance)).toBe(false);
  });

  it("reaches a remote endpoint without HBONE by double HBONE through its gateway, verifying the service's SANs", () => {
    const d = decideFor(config(plainEndpoints()), "10.2.2.2:80");
    expect(d.outcome).toBe(Outcome.DoubleHboneEndpoint);
    expect(d.rule).toBe(7);
    expect(nextHop(d)).toBe("172.16.2.1:15008");
    expect(d.authority.toString()).toBe("legacy-remote.default.svc.cluster.local:80");
    expect(d.sans.toString()).toBe(id("legacy"));
    expect(d.gatewaySans.toString()).toBe(gwId("ew2"));
  });

  it("refuses a remote endpoint with no identity to verify at the inner hop, or without a gateway", () => {
    const anon = decideFor(config(plainEndpoints()), "10.2.2.3:80");
    expect(anon.outcome).toBe(Outcome.ErrorNoValidDestination);
    expect(anon.rule).toBe(7);
    expect(decideFor(config(plainEndpoints()), "10.2.2.4:80").outcome).toBe(Outcome.ErrorNoValidDestination);
  });

  it("never uses an unaddressed workload on this network, even with a gateway (ztunnel's load_balance)", () => {
    expect(decideFor(config(plainEndpoints()), "10.2.2.5:80").outcome).toBe(Outcome.ErrorNoEndpoint);
  });
});

describe("waypoint_route decision: rule 8, HBONE port maps of gateway and waypoint services", () => {
  it("refuses as unknown gateway (its own counter) a gateway service that does not expose the gateway's HBONE port", () => {
    const c = config(farWaypoint(
      `{"hostname": "` + GW_SVC + `"}`,
      gatewayPod("gw-a", "172.16.2.11", "net2"),
      `{"hostname": "` + GW_SVC + `", "ports": {"15443": 15443}, "endpoints": [{"workload": "gw-a"}]}`,
    ));
    const d = decideFor(c, "10.2.0.60:80");
    expect(d.outcome).toBe(Outcome.ErrorUnknownGatewayPort);
    expect(d.rule).toBe(8);
    // A gateway with hboneMtlsPort 15443 that the service lists is fine.
    const listed = config(farWaypoint(
      `{"hostname": "` + GW_SVC + `", "hboneMtlsPort": 15443}`,
      gatewayPod("gw-a", "172.16.2.11", "net2"),
      `{"hostname": "` + GW_SVC + `", "ports": {"15443": 15443}, "endpoints": [{"workload": "gw-a"}]}`,
    ));
    expect(nextHop(decideFor(listed, "10.2.0.60:80"))).toBe("172.16.2.11:15443");
  });

  it("translates the waypoint's HBONE port by the waypoint service's port map and its endpoint override", () => {
    const c = config(withSource(
      istio("wp-a", "10.1.0.51", "net1", "r1/z1") + ", " + istio("wp-b", "10.1.0.52", "net1", "r1/z1"),
      `{"hostname": "s.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.3.1"}], "ports": {"80": 8080},
        "waypoint": {"hostname": "w.default.svc.cluster.local"}},
       {"hostname": "t.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.3.2"}], "ports": {"80": 8080},
        "waypoint": {"hostname": "v.default.svc.cluster.local"}},
       {"hostname": "w.default.svc.cluster.local", "ports": {"15008": 15088}, "endpoints": [{"workload": "wp-a"}]},
       {"hostname": "v.default.svc.cluster.local", "ports": {"15008": 15088}, "endpoints": [{"workload": "wp-b", "ports": {"15008": 15099}}]}`,
    ));
    expect(nextHop(decideFor(c, "10.2.3.1:80"))).toBe("10.1.0.51:15088");
    expect(nextHop(decideFor(c, "10.2.3.2:80"))).toBe("10.1.0.52:15099");
  });

  it("refuses as unknown waypoint (its own counter) a waypoint service that does not list the waypoint's HBONE port, for a pod's waypoint too", () => {
    const c = config(withSource(
      istio("wp-a", "10.1.0.51", "net1", "r1/z1"),
      `{"hostname": "s.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.3.1"}], "ports": {"80": 8080},
        "waypoint": {"hostname": "w.default.svc.cluster.local"}},
       {"hostname": "w.default.svc.cluster.local", "ports": {"15021": 15021}, "endpoints": [{"workload": "wp-a"}]}`,
    ));
    const d = decideFor(c, "10.2.3.1:80");
    expect(d.outcome).toBe(Outcome.ErrorUnknownWaypointPort);
    expect(d.rule).toBe(8);
    expect(nextHop(d)).toBe("");
    const pods = config(withSource(
      istio("wp-a", "10.1.0.51", "net1", "r1/z1") + ", " + istio("app", "10.1.6.1", "net1", "r1/z1", `, "waypoint": {"hostname": "w.default.svc.cluster.local"}`),
      `{"hostname": "w.default.svc.cluster.local", "ports": {"15021": 15021}, "endpoints": [{"workload": "wp-a"}]}`,
    ));
    expect(decideFor(pods, "10.1.6.1:8080").outcome).toBe(Outcome.ErrorUnknownWaypointPort);
  });
});

/** Rule 9 world: a dual-stack source, service, endpoints, waypoint and gateway. */
function dualStack(): string {
  return `{"localWorkload": "10.1.0.100", "workloads": [
    {"uid": "sleep", "addresses": ["10.1.0.100", "fd00:1::100"], "network": "net1", "locality": "r1/z1", "tlsMode": "istio", "identity": "` + id("sleep") + `"},
    {"uid": "pod", "addresses": ["10.1.7.1", "fd00:1::7"], "network": "net1", "locality": "r1/z1", "tlsMode": "istio", "identity": "` + id("pod") + `"},
    {"uid": "pod4", "addresses": ["10.1.7.4"], "network": "net1", "locality": "r1/z1", "tlsMode": "istio", "identity": "` + id("pod4") + `"},
    {"uid": "plain", "addresses": ["10.1.7.2", "fd00:1::8"], "network": "net1", "locality": "r1/z1"},
    {"uid": "wp", "addresses": ["10.1.7.3", "fd00:1::9"], "network": "net1", "locality": "r1/z1", "tlsMode": "istio", "identity": "` + id("wp") + `"},
    {"uid": "wp-net2", "addresses": [], "network": "net2", "tlsMode": "istio", "identity": "` + id("wp-net2") + `",
     "networkGateway": {"hostname": "` + GW_SVC + `"}},
    {"uid": "gw", "addresses": ["172.16.2.1", "fd00:3::1"], "network": "net2", "tlsMode": "istio", "identity": "` + gwId("gw") + `"}],
  "services": [
    {"hostname": "ds.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.4.1"}, {"network": "net1", "address": "fd00:2::41"}],
     "ports": {"80": 8080}, "endpoints": [{"workload": "pod"}]},
    {"hostname": "v4only.default.svc.cluster.local", "vips": [{"network": "net1", "address": "fd00:2::44"}], "ports": {"80": 8080},
     "endpoints": [{"workload": "pod4"}]},
    {"hostname": "dsplain.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.4.2"}, {"network": "net1", "address": "fd00:2::42"}],
     "ports": {"80": 8080}, "endpoints": [{"workload": "plain"}]},
    {"hostname": "dswp.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.4.3"}, {"network": "net1", "address": "fd00:2::43"}],
     "ports": {"80": 8080}, "waypoint": {"hostname": "w.default.svc.cluster.local"}},
    {"hostname": "dswpaddr.default.svc.cluster.local", "vips": [{"network": "net1", "address": "fd00:2::45"}],
     "ports": {"80": 8080}, "waypoint": {"address": "10.1.7.3"}},
    {"hostname": "dsfar.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.4.6"}, {"network": "net1", "address": "fd00:2::46"}],
     "ports": {"80": 8080}, "waypoint": {"hostname": "far.default.svc.cluster.local"}},
    {"hostname": "w.default.svc.cluster.local", "ports": {"15008": 15008}, "endpoints": [{"workload": "wp"}]},
    {"hostname": "far.default.svc.cluster.local", "ports": {"15008": 15008}, "endpoints": [{"workload": "wp-net2"}]},
    {"hostname": "` + GW_SVC + `", "ports": {"15008": 15008}, "endpoints": [{"workload": "gw"}]}]}`;
}

describe("waypoint_route decision: rule 9, dual stack keeps the dialled family", () => {
  it("reaches a dual-stack endpoint on the family of the VIP dialled", () => {
    const c = config(dualStack());
    const v6 = decideFor(c, "[fd00:2::41]:80");
    expect(v6.outcome).toBe(Outcome.HboneEndpoint);
    expect(nextHop(v6)).toBe("[fd00:1::7]:15008");
    expect(v6.authority.toString()).toBe("[fd00:1::7]:8080");
    const v4 = decideFor(c, "10.2.4.1:80");
    expect(nextHop(v4)).toBe("10.1.7.1:15008");
    expect(v4.authority.toString()).toBe("10.1.7.1:8080");
  });

  it("falls back to the endpoint's only family when it lacks the dialled one", () => {
    const d = decideFor(config(dualStack()), "[fd00:2::44]:80");
    expect(nextHop(d)).toBe("10.1.7.4:15008");
    expect(d.authority.toString()).toBe("10.1.7.4:8080");
  });

  it("keeps the family for a plain endpoint, a waypoint by hostname and a gateway by hostname", () => {
    const c = config(dualStack());
    const plain = decideFor(c, "[fd00:2::42]:80");
    expect(plain.outcome).toBe(Outcome.PlaintextEndpoint);
    expect(nextHop(plain)).toBe("[fd00:1::8]:8080");
    const wp = decideFor(c, "[fd00:2::43]:80");
    expect(wp.outcome).toBe(Outcome.HboneWaypoint);
    expect(nextHop(wp)).toBe("[fd00:1::9]:15008");
    expect(wp.authority.toString()).toBe("[fd00:2::43]:80");
    expect(nextHop(decideFor(c, "10.2.4.3:80"))).toBe("10.1.7.3:15008");
    const far = decideFor(c, "[fd00:2::46]:80");
    expect(far.outcome).toBe(Outcome.DoubleHboneWaypoint);
    expect(nextHop(far)).toBe("[fd00:3::1]:15008");
    expect(nextHop(decideFor(c, "10.2.4.6:80"))).toBe("172.16.2.1:15008");
  });

  it("dials a waypoint named by address at that address whatever the family (as ztunnel warns)", () => {
    const d = decideFor(config(dualStack()), "[fd00:2::45]:80");
    expect(d.outcome).toBe(Outcome.HboneWaypoint);
    expect(nextHop(d)).toBe("10.1.7.3:15008");
    expect(d.authority.toString()).toBe("[fd00:2::45]:80");
  });

  it("keeps a pod dialled by its IPv6 address on it", () => {
    const d = decideFor(config(dualStack()), "[fd00:1::7]:9000");
    expect(d.outcome).toBe(Outcome.HbonePod);
    expect(nextHop(d)).toBe("[fd00:1::7]:15008");
    expect(d.authority.toString()).toBe("[fd00:1::7]:9000");
  });
});

describe("waypoint_route decision: identities at the waypoint hop", () => {
  it("lists an instance identity that is already one of the service's SANs once", () => {
    const c = config(withSource(
      istio("waypoint", "10.1.0.41", "net1", "r1/z1"),
      `{"hostname": "s.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.3.1"}], "ports": {"80": 8080},
        "waypoint": {"hostname": "w.default.svc.cluster.local"}},
       {"hostname": "w.default.svc.cluster.local", "ports": {"15008": 15008},
        "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/waypoint-canary", "` + id("waypoint") + `"], "endpoints": [{"workload": "waypoint"}]}`,
    ));
    expect(decideFor(c, "10.2.3.1:80").sans.toString()).toBe(id("waypoint-canary") + "," + id("waypoint"));
  });

  it("refuses a waypoint with nothing to verify (no SANs, an instance without identity)", () => {
    const c = config(withSource(
      plainPod("anon", `"10.1.0.60"`, "net1", "r1/z1"),
      `{"hostname": "s.default.svc.cluster.local", "vips": [{"network": "net1", "address": "10.2.3.1"}], "ports": {"80": 8080},
        "waypoint": {"address": "10.1.0.60"}}`,
    ));
    const d = decideFor(c, "10.2.3.1:80");
    expect(d.outcome).toBe(Outcome.ErrorUnknownWaypoint);
    expect(nextHop(d)).not.toBe(""); // decided up to the identity check, then refused
  });
});

describe("waypoint_route outcomes", () => {
  it("names every outcome (one counter each), the last one included, and never reads past the names", () => {
    expect(OUTCOME_NAMES.length).toBe(<i32>Outcome.ErrorNoLocalWorkload + 1);
    expect(outcomeName(Outcome.HboneWaypoint)).toBe("hbone_waypoint");
    expect(outcomeName(Outcome.ErrorUnknownWaypointPort)).toBe("error_unknown_waypoint_port");
    expect(outcomeName(Outcome.ErrorNoLocalWorkload)).toBe("error_no_local_workload");
    expect(outcomeName(<Outcome>99)).toBe("unnamed_outcome");
    expect(outcomeName(<Outcome>-1)).toBe("unnamed_outcome");
  });
});

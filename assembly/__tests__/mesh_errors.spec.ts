import { MeshLimits } from "../mesh";
import { parseMeshDocument } from "../mesh/parse";
import { SAN_COMMA } from "../mesh/validate";

/** The error of a configuration that must be refused ("<accepted>" when it was not). */
function refused(text: string, limits: MeshLimits = new MeshLimits()): string {
  const doc = parseMeshDocument(String.UTF8.encode(text), [], limits);
  return doc.mesh === null ? doc.error : "<accepted>";
}

/** One workload object, wrapped into a configuration. */
function workload(fields: string): string {
  return refused(`{"workloads": [{"uid": "w0", "addresses": ["10.0.0.1"]}, {${fields}}]}`);
}

const W1 = `{"uid": "w1", "addresses": ["10.0.0.1"]}`;

/** A service object next to workload w1 (10.0.0.1). */
function service(fields: string): string {
  return refused(`{"workloads": [${W1}], "services": [{"hostname": "s0"}, {${fields}}]}`);
}

const WORKLOAD_KNOWN = "uid, addresses, network, identity, tlsMode, healthy, locality, waypoint, networkGateway";
const SERVICE_KNOWN =
  "hostname, vips, ports, endpoints, waypoint, subjectAltNames, headless, cluster, loadBalancing";

describe("mesh configuration errors: structure", () => {
  it("passes JSON syntax errors through", () => {
    expect(refused(`{"workloads": [}`)).toBe("byte 15: unexpected character '}'");
  });

  it("refuses a root that is not an object", () => {
    expect(refused("[]")).toBe("(root): expected an object");
  });

  it("refuses unknown fields at every level", () => {
    expect(refused(`{"workload": []}`)).toBe("workload: unknown field (known: workloads, services)");
    expect(workload(`"uid": "w", "addresses": ["10.0.0.2"], "ip": "x"`)).toBe(
      "workloads[1].ip: unknown field (known: " + WORKLOAD_KNOWN + ")",
    );
    expect(service(`"hostname": "s", "vip": []`)).toBe(
      "services[1].vip: unknown field (known: " + SERVICE_KNOWN + ")",
    );
    expect(service(`"hostname": "s", "vips": [{"address": "10.1.0.1", "net": "a"}]`)).toBe(
      "services[1].vips[0].net: unknown field (known: network, address)",
    );
    expect(service(`"hostname": "s", "endpoints": [{"workload": "w1", "port": 1}]`)).toBe(
      "services[1].endpoints[0].port: unknown field (known: workload, ports)",
    );
    expect(service(`"hostname": "s", "waypoint": {"hostname": "w", "hboneMtlsPort": 1}`)).toBe(
      "services[1].waypoint.hboneMtlsPort: unknown field (known: address, hostname, port)",
    );
    expect(workload(`"uid": "w", "networkGateway": {"hostname": "g", "port": 1}`)).toBe(
      "workloads[1].networkGateway.port: unknown field (known: address, hostname, hboneMtlsPort)",
    );
    expect(service(`"hostname": "s", "loadBalancing": {"prefs": []}`)).toBe(
      "services[1].loadBalancing.prefs: unknown field (known: routingPreference, mode)",
    );
  });

  it("refuses wrong types with the field path", () => {
    expect(refused(`{"workloads": {}}`)).toBe("workloads: expected an array");
    expect(refused(`{"workloads": [5]}`)).toBe("workloads[0]: expected an object");
    expect(workload(`"uid": 7`)).toBe("workloads[1].uid: expected a string");
    expect(workload(`"uid": "w", "addresses": "10.0.0.2"`)).toBe("workloads[1].addresses: expected an array");
    expect(workload(`"uid": "w", "addresses": [1]`)).toBe("workloads[1].addresses[0]: expected a string");
    expect(workload(`"uid": "w", "addresses": ["10.0.0.2"], "healthy": "yes"`)).toBe(
      "workloads[1].healthy: expected a boolean",
    );
    expect(workload(`"uid": "w", "addresses": ["10.0.0.2"], "tlsMode": "strict"`)).toBe(
      "workloads[1].tlsMode: expected one of: istio, disabled",
    );
    expect(service(`"hostname": "s", "ports": []`)).toBe("services[1].ports: expected an object");
    expect(service(`"hostname": "s", "ports": {"80": "9376"}`)).toBe(
      "services[1].ports.80: expected an integer in [1, 65535]",
    );
    expect(service(`"hostname": "s", "headless": 1`)).toBe("services[1].headless: expected a boolean");
    expect(service(`"hostname": "s", "subjectAltNames": [1]`)).toBe(
      "services[1].subjectAltNames[0]: expected a string",
    );
  });

  it("refuses missing required fields", () => {
    expect(workload(`"addresses": ["10.0.0.2"]`)).toBe("workloads[1].uid: missing required field");
    expect(service(`"ports": {}`)).toBe("services[1].hostname: missing required field");
    expect(service(`"hostname": "s", "vips": [{"network": "n"}]`)).toBe(
      "services[1].vips[0].address: missing required field",
    );
    expect(service(`"hostname": "s", "endpoints": [{}]`)).toBe(
      "services[1].endpoints[0].workload: missing required field",
    );
  });
});

describe("mesh configuration errors: addresses", () => {
  it("refuses a bad IP address", () => {
    expect(workload(`"uid": "w", "addresses": ["10.0.0.2", "10.0.0.300"]`)).toBe(
      'workloads[1].addresses[1]: not an IP address: "10.0.0.300"',
    );
    expect(service(`"hostname": "s", "vips": [{"address": "vip"}]`)).toBe(
      'services[1].vips[0].address: not an IP address: "vip"',
    );
  });

  it("refuses an IPv6 address with a zone", () => {
    expect(workload(`"uid": "w", "addresses": ["fe80::1%eth0"]`)).toBe(
      'workloads[1].addresses[0]: IPv6 zone not allowed: "fe80::1%eth0"',
    );
  });

  it("refuses empty addresses unless the workload has a network gateway", () => {
    expect(workload(`"uid": "w", "addresses": []`)).toBe(
      "workloads[1].addresses: must not be empty unless networkGateway is set",
    );
    expect(workload(`"uid": "w"`)).toBe("workloads[1].addresses: must not be empty unless networkGateway is set");
  });

  it("refuses an address used twice on one network", () => {
    expect(workload(`"uid": "w", "addresses": ["10.0.0.1"]`)).toBe(
      'workloads[1].addresses[0]: address "10.0.0.1" on the default network is already used by workloads[0]',
    );
    expect(
      refused(`{"workloads": [{"uid": "a", "network": "n", "addresses": ["fd00::1"]},
        {"uid": "b", "network": "n", "addresses": ["FD00:0::1"]}]}`),
    ).toBe('workloads[1].addresses[0]: address "FD00:0::1" on network "n" is already used by workloads[0]');
    expect(workload(`"uid": "w", "addresses": ["10.0.0.2", "::ffff:10.0.0.2"]`)).toBe(
      'workloads[1].addresses[1]: duplicate address "::ffff:10.0.0.2"',
    );
  });

  it("reports an IPv4 clash before anything found later, though the table is filled after the services", () => {
    // A later service error.
    expect(refused(`{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "b", "addresses": ["10.0.0.1"]}],
      "services": [{"hostname": "s", "endpoints": [{"workload": "nope"}]}]}`)).toBe(
      'workloads[1].addresses[0]: address "10.0.0.1" on the default network is already used by workloads[0]',
    );
    // A later error in the same workload's addresses, and in a later workload.
    expect(workload(`"uid": "w", "addresses": ["10.0.0.1", "not-an-ip"]`)).toBe(
      'workloads[1].addresses[0]: address "10.0.0.1" on the default network is already used by workloads[0]',
    );
    expect(refused(`{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "b", "addresses": ["10.0.0.2", "10.0.0.\\u0032"]},
      {"uid": "c", "identity": "nope", "addresses": ["10.0.0.3"]}]}`)).toBe(
      'workloads[1].addresses[1]: duplicate address "10.0.0.2"',
    );
    // An IPv6 clash (found at once) after an IPv4 one in the same list: the IPv4 one is first.
    expect(refused(`{"workloads": [{"uid": "a", "addresses": ["10.0.0.1", "fd00::1"]},
      {"uid": "b", "addresses": ["10.0.0.9", "10.0.0.1", "fd00::1"]}]}`)).toBe(
      'workloads[1].addresses[1]: address "10.0.0.1" on the default network is already used by workloads[0]',
    );
    // ... and before it: the IPv6 one is first.
    expect(refused(`{"workloads": [{"uid": "a", "addresses": ["10.0.0.1", "fd00::1"]},
      {"uid": "b", "addresses": ["fd00::1", "10.0.0.1"]}]}`)).toBe(
      'workloads[1].addresses[0]: address "fd00::1" on the default network is already used by workloads[0]',
    );
    // An earlier field of a later workload does not hide a clash of an earlier one.
    expect(refused(`{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "b", "addresses": ["10.0.0.1"]},
      {"uid": "a", "addresses": ["10.0.0.5"]}]}`)).toBe(
      'workloads[1].addresses[0]: address "10.0.0.1" on the default network is already used by workloads[0]',
    );
  });

  it("refuses a VIP used twice on one network", () => {
    expect(
      refused(`{"services": [{"hostname": "a", "vips": [{"address": "10.96.0.1"}]},
        {"hostname": "b", "vips": [{"address": "10.96.0.1"}]}]}`),
    ).toBe('services[1].vips[0].address: VIP "10.96.0.1" on the default network is already used by services[0]');
    expect(service(`"hostname": "s", "vips": [{"address": "10.96.0.1"}, {"address": "10.96.0.1"}]`)).toBe(
      'services[1].vips[1].address: duplicate VIP "10.96.0.1"',
    );
  });
});

describe("mesh configuration errors: workloads", () => {
  it("refuses a duplicate uid", () => {
    expect(workload(`"uid": "w0", "addresses": ["10.0.0.2"]`)).toBe(
      'workloads[1].uid: duplicate uid "w0" (first at workloads[0])',
    );
  });

  it("refuses an empty uid", () => {
    expect(workload(`"uid": "", "addresses": ["10.0.0.2"]`)).toBe("workloads[1].uid: must not be empty");
  });

  it("requires an identity when tlsMode is istio", () => {
    expect(workload(`"uid": "w", "addresses": ["10.0.0.2"], "tlsMode": "istio"`)).toBe(
      'workloads[1].identity: required when tlsMode is "istio"',
    );
  });

  it("refuses an identity that is not a SPIFFE URI of the Istio shape", () => {
    const shape = "not a SPIFFE identity (expected spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>): ";
    const bad = [
      "spiffe://td/ns/n/sa/s/extra",
      "spiffe://td/ns/n/serviceaccount/s",
      "spiffe://TD/ns/n/sa/s",
      "spiffe:///ns/n/sa/s",
      "spiffe://td/ns//sa/s",
      "spiffe://td/ns/../sa/s",
      "https://td/ns/n/sa/s",
      "",
    ];
    for (let i = 0; i < bad.length; i++) {
      const id = bad[i];
      expect(workload(`"uid": "w", "addresses": ["10.0.0.2"], "identity": "${id}"`)).toBe(
        "workloads[1].identity: " + shape + '"' + id + '"',
      );
    }
  });

  it("refuses a malformed locality", () => {
    expect(workload(`"uid": "w", "addresses": ["10.0.0.2"], "locality": "r//s"`)).toBe(
      'workloads[1].locality: not a locality (expected region[/zone[/subzone]]): "r//s"',
    );
    expect(workload(`"uid": "w", "addresses": ["10.0.0.2"], "locality": "a/b/c/d"`)).toBe(
      'workloads[1].locality: not a locality (expected region[/zone[/subzone]]): "a/b/c/d"',
    );
  });
});

describe("mesh configuration errors: references", () => {
  it("refuses a reference with both address and hostname, or neither", () => {
    expect(service(`"hostname": "s", "waypoint": {"address": "10.0.0.9", "hostname": "wp"}`)).toBe(
      'services[1].waypoint: both "address" and "hostname" are set; exactly one is allowed',
    );
    expect(workload(`"uid": "w", "networkGateway": {"hboneMtlsPort": 15008}`)).toBe(
      'workloads[1].networkGateway: one of "address" or "hostname" is required',
    );
  });

  it("refuses out-of-range reference ports", () => {
    expect(service(`"hostname": "s", "waypoint": {"hostname": "wp", "port": 0}`)).toBe(
      "services[1].waypoint.port: expected an integer in [1, 65535]",
    );
    expect(workload(`"uid": "w", "networkGateway": {"address": "1.2.3.4", "hboneMtlsPort": 65536}`)).toBe(
      "workloads[1].networkGateway.hboneMtlsPort: expected an integer in [1, 65535]",
    );
  });

  it("refuses a bad reference address or hostname", () => {
    expect(workload(`"uid": "w", "networkGateway": {"address": "gw.example.com"}`)).toBe(
      'workloads[1].networkGateway.address: not an IP address: "gw.example.com"',
    );
    expect(service(`"hostname": "s", "waypoint": {"hostname": "a|b"}`)).toBe(
      'services[1].waypoint.hostname: not a hostname: "a|b"',
    );
  });
});

describe("mesh configuration errors: services", () => {
  it("refuses a duplicate or malformed hostname", () => {
    expect(service(`"hostname": "s0"`)).toBe('services[1].hostname: duplicate hostname "s0" (first at services[0])');
    expect(service(`"hostname": "a..b"`)).toBe('services[1].hostname: not a hostname: "a..b"');
    expect(service(`"hostname": "svc:80"`)).toBe('services[1].hostname: not a hostname: "svc:80"');
    expect(service(`"hostname": ""`)).toBe('services[1].hostname: not a hostname: ""');
  });

  it("refuses out-of-range service and target ports", () => {
    expect(service(`"hostname": "s", "ports": {"0": 80}`)).toBe(
      'services[1].ports.0: not a port number (1..65535): "0"',
    );
    expect(service(`"hostname": "s", "ports": {"65536": 80}`)).toBe(
      'services[1].ports.65536: not a port number (1..65535): "65536"',
    );
    expect(service(`"hostname": "s", "ports": {"http": 80}`)).toBe(
      'services[1].ports.http: not a port number (1..65535): "http"',
    );
    expect(service(`"hostname": "s", "ports": {"80": 0}`)).toBe(
      "services[1].ports.80: expected an integer in [1, 65535]",
    );
    expect(service(`"hostname": "s", "ports": {"80": 65536}`)).toBe(
      "services[1].ports.80: expected an integer in [1, 65535]",
    );
  });

  it("refuses an endpoint that references an unknown workload uid", () => {
    expect(service(`"hostname": "s", "endpoints": [{"workload": "nope"}]`)).toBe(
      'services[1].endpoints[0].workload: unknown workload uid "nope"',
    );
  });

  it("refuses a workload listed twice as an endpoint of one service", () => {
    expect(service(`"hostname": "s", "endpoints": [{"workload": "w1"}, {"workload": "w1"}]`)).toBe(
      'services[1].endpoints[1].workload: workload "w1" is already an endpoint (at services[1].endpoints[0])',
    );
  });

  it("refuses an endpoint port override for a port the service does not have", () => {
    expect(
      service(`"hostname": "s", "ports": {"80": 9376}, "endpoints": [{"workload": "w1", "ports": {"81": 9377}}]`),
    ).toBe("services[1].endpoints[0].ports.81: service port 81 is not in services[1].ports");
    expect(
      service(`"hostname": "s", "ports": {"80": 9376}, "endpoints": [{"workload": "w1", "ports": {"80": 0}}]`),
    ).toBe("services[1].endpoints[0].ports.80: expected an integer in [1, 65535]");
  });

  it("refuses empty names and a bad load-balancing preference", () => {
    expect(service(`"hostname": "s", "cluster": ""`)).toBe("services[1].cluster: must not be empty");
    expect(service(`"hostname": "s", "subjectAltNames": [""]`)).toBe(
      "services[1].subjectAltNames[0]: must not be empty",
    );
    // One entry with a comma would be two SANs to Envoy (measured on 1.40.0): refused.
    expect(service(`"hostname": "s", "subjectAltNames": ["spiffe://td/ns/a/sa/b,spiffe://td/ns/x/sa/y"]`)).toBe(
      "services[1].subjectAltNames[0]: " + SAN_COMMA,
    );
    expect(service(`"hostname": "s", "loadBalancing": {"routingPreference": ["zone", "zone"]}`)).toBe(
      'services[1].loadBalancing.routingPreference[1]: duplicate scope "zone"',
    );
    expect(service(`"hostname": "s", "loadBalancing": {"routingPreference": ["cluster"]}`)).toBe(
      "services[1].loadBalancing.routingPreference[0]: expected one of: network, region, zone, subzone",
    );
    expect(service(`"hostname": "s", "loadBalancing": {"mode": "strict"}`)).toBe(
      "services[1].loadBalancing.mode: expected one of: failover, standard",
    );
  });
});

describe("mesh configuration errors: limits", () => {
  it("refuses more workloads, addresses, services or endpoints than the limits", () => {
    const limits = new MeshLimits();
    limits.workloads = 1;
    limits.addresses = 2;
    limits.services = 1;
    limits.serviceItems = 1;
    const two = `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "b", "addresses": ["10.0.0.2"]}]}`;
    expect(refused(two, limits)).toBe("workloads: 2 workloads exceed the limit of 1");
    const three = `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1", "10.0.0.2", "fd00::1"]}]}`;
    expect(refused(three, limits)).toBe("workloads: 3 addresses exceed the limit of 2");
    const services = `{"services": [{"hostname": "a"}, {"hostname": "b"}]}`;
    expect(refused(services, limits)).toBe("services: 2 services exceed the limit of 1");
    const endpoints = `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}],
      "services": [{"hostname": "a", "endpoints": [{"workload": "a"}, {"workload": "a"}]}]}`;
    expect(refused(endpoints, limits)).toBe("services: 2 endpoints exceed the limit of 1");
    const vips = `{"services": [{"hostname": "a", "vips": [{"address": "1.1.1.1"}, {"address": "1.1.1.2"},
      {"address": "1.1.1.3"}]}]}`;
    expect(refused(vips, limits)).toBe("services: 3 VIPs exceed the limit of 2");
  });

  it("refuses more distinct networks than an address-table entry can name", () => {
    const parts = new Array<string>();
    for (let i = 0; i <= 2048; i++) {
      parts.push(`{"uid": "w${i}", "addresses": ["10.0.0.1"], "network": "n${i}"}`);
    }
    // "" is network 0, so n2047 is the 2049th network.
    expect(refused(`{"workloads": [${parts.join(",")}]}`)).toBe(
      "workloads[2047].network: more than 2048 distinct networks",
    );
  });

  it("keeps the default limits at two million", () => {
    const limits = new MeshLimits();
    expect(limits.workloads).toBe(2000000);
    expect(limits.services).toBe(2000000);
    expect(limits.addresses).toBe(2000000);
  });
});

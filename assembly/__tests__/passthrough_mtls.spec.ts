// Unit tests of the passthrough_mtls filter's pure parts: its configuration (parsePassthroughConfig)
// and its per-connection decision (decide). The compiled filter is tested through the proxy-wasm
// host in tests/host/passthrough_mtls.test.ts.
import {
  DEFAULT_MTLS_CLUSTER,
  DEFAULT_SUBSET_CLUSTER,
  parsePassthroughConfig,
  PassthroughConfig,
} from "../../filters/passthrough_mtls/config";
import { Decision, decide, Route } from "../../filters/passthrough_mtls/decision";
import { Address, parseSocketAddressString } from "../mesh";

// ---------------------------------------------------------------- helpers

/** The parsed configuration; a refused one fails the test with its error. */
function config(text: string): PassthroughConfig {
  const result = parsePassthroughConfig(String.UTF8.encode(text));
  expect(result.error).toBe("");
  const c = result.config;
  expect(c).not.toBeNull();
  return changetype<PassthroughConfig>(c);
}

/** The error of a configuration that must be refused ("<accepted>" when it was not). */
function refused(text: string): string {
  const result = parsePassthroughConfig(String.UTF8.encode(text));
  if (result.config !== null) return "<accepted>";
  return result.error;
}

function utf8(buffer: ArrayBuffer): string {
  return String.UTF8.decode(buffer);
}

/** decide() for `destination` ("IP:PORT" / "[IPv6]:PORT") on the configuration's local network. */
function decideFor(c: PassthroughConfig, destination: string, out: Decision = new Decision()): Decision {
  const dst = new Address();
  expect(parseSocketAddressString(destination, dst)).toBe(true, destination + " must parse");
  decide(c.mesh, c.localNetwork, dst, out);
  return out;
}

/** Identity of the decided workload ("" when none): names the pod without relying on indexes. */
function podIdentity(c: PassthroughConfig, d: Decision): string {
  return d.workload < 0 ? "<none>" : c.mesh.workloadIdentity(d.workload);
}

/** Hostname of the decided headless service ("<none>" when none). */
function serviceName(c: PassthroughConfig, d: Decision): string {
  return d.service < 0 ? "<none>" : c.mesh.serviceHostname(d.service);
}

const OWN_AND_MESH_FIELDS = "localNetwork, mode, mtlsCluster, subsetCluster, lbAddress, meshFeed, workloads, services";

// A mesh with one pod per decision row. Network "" is the default; "west" is another network.
//   app-0       10.0.0.1 + fd00::1   istio       (also an endpoint of the NON-headless service app)
//   legacy-0    10.0.0.2             disabled (tlsMode absent = disabled)
//   httpbin-0   10.0.0.11            istio       same IP as west/httpbin-twin
//   legacy-twin 10.0.0.12            disabled    same IP as west/istio-twin (istio)
//   remote-0    10.0.0.50 on west    istio       only on another network
//   db-0        10.0.1.1             istio       headless db: 5432->5432, 80->8080
//   db-1        10.0.1.2             istio       headless db with endpoint override 80->9090
//   plaindb-0   10.0.2.1             disabled    headless plaindb 5432->5432
//   v6-0        fd00::2              istio       headless cache 6379->6379
//   mapped-0    ::ffff:10.0.3.1      istio       (stored as IPv4 10.0.3.1)
// Service db-replica (headless, 15432->5432, endpoint db-0) comes after db: db must win 5432.
const MESH = `
  "workloads": [
    {"uid": "app-0", "addresses": ["10.0.0.1", "fd00::1"], "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/default/sa/app"},
    {"uid": "legacy-0", "addresses": ["10.0.0.2"]},
    {"uid": "httpbin-0", "addresses": ["10.0.0.11"], "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/default/sa/httpbin"},
    {"uid": "west/httpbin-twin", "addresses": ["10.0.0.11"], "network": "west", "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/west/sa/twin"},
    {"uid": "legacy-twin", "addresses": ["10.0.0.12"], "tlsMode": "disabled"},
    {"uid": "west/istio-twin", "addresses": ["10.0.0.12"], "network": "west", "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/west/sa/istio-twin"},
    {"uid": "west/remote-0", "addresses": ["10.0.0.50"], "network": "west", "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/west/sa/remote"},
    {"uid": "db-0", "addresses": ["10.0.1.1"], "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/default/sa/db-0"},
    {"uid": "db-1", "addresses": ["10.0.1.2"], "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/default/sa/db-1"},
    {"uid": "plaindb-0", "addresses": ["10.0.2.1"]},
    {"uid": "v6-0", "addresses": ["fd00::2"], "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/default/sa/cache"},
    {"uid": "mapped-0", "addresses": ["::ffff:10.0.3.1"], "tlsMode": "istio",
     "identity": "spiffe://cluster.local/ns/default/sa/mapped"}
  ],
  "services": [
    {"hostname": "app.default.svc.cluster.local", "vips": [{"address": "10.96.0.1"}],
     "ports": {"443": 443}, "endpoints": [{"workload": "app-0"}]},
    {"hostname": "db.default.svc.cluster.local", "headless": true,
     "ports": {"5432": 5432, "80": 8080},
     "endpoints": [{"workload": "db-0"}, {"workload": "db-1", "ports": {"80": 9090}}]},
    {"hostname": "db-replica.default.svc.cluster.local", "headless": true,
     "ports": {"15432": 5432}, "endpoints": [{"workload": "db-0"}]},
    {"hostname": "plaindb.default.svc.cluster.local", "headless": true,
     "ports": {"5432": 5432}, "endpoints": [{"workload": "plaindb-0"}]},
    {"hostname": "cache.default.svc.cluster.local", "headless": true, "cluster": "cache_cluster",
     "ports": {"6379": 6379}, "endpoints": [{"workload": "v6-0"}]}
  ]`;

const LOCAL = `{"localNetwork": "", ${MESH}}`;

// ---------------------------------------------------------------- configuration

describe("passthrough_mtls configuration: defaults", () => {
  it("accepts an empty object: direct mode, default cluster names, no workloads", () => {
    const c = config("{}");
    expect(c.subsetMode).toBe(false);
    expect(c.writeLbAddress).toBe(false);
    expect(utf8(c.mtlsCluster)).toBe("outbound_mtls_passthrough");
    expect(utf8(c.subsetCluster)).toBe("passthrough_mtls_subset");
    expect(c.localNetworkName).toBe("");
    expect(c.mesh.workloadCount()).toBe(0);
    expect(c.mesh.serviceCount()).toBe(0);
    // The default network "" is always interned (id 0), even without workloads.
    expect(c.localNetwork).toBe(c.mesh.networkId(""));
  });

  it("exports the default cluster names the README and the Envoy configs use", () => {
    expect(DEFAULT_MTLS_CLUSTER).toBe("outbound_mtls_passthrough");
    expect(DEFAULT_SUBSET_CLUSTER).toBe("passthrough_mtls_subset");
  });

  it("takes the default network as local when localNetwork is absent", () => {
    const c = config(`{${MESH}}`);
    expect(c.localNetworkName).toBe("");
    expect(c.localNetwork).toBe(c.mesh.networkId(""));
    expect(c.localNetwork).toBeGreaterThanOrEqual(0);
  });

  it("treats JSON null as an absent field for every own field", () => {
    const c = config(`{"localNetwork": null, "mode": null, "mtlsCluster": null, "subsetCluster": null, "lbAddress": null}`);
    expect(c.subsetMode).toBe(false);
    expect(c.writeLbAddress).toBe(false);
    expect(utf8(c.mtlsCluster)).toBe(DEFAULT_MTLS_CLUSTER);
    expect(utf8(c.subsetCluster)).toBe(DEFAULT_SUBSET_CLUSTER);
    expect(c.localNetworkName).toBe("");
  });
});

describe("passthrough_mtls configuration: own fields", () => {
  it("reads mode subset", () => {
    expect(config(`{"mode": "subset"}`).subsetMode).toBe(true);
  });

  it("writes lb_address in subset mode (its bridge needs it) or when lbAddress is true", () => {
    expect(config(`{"mode": "subset"}`).writeLbAddress).toBe(true);
    expect(config(`{"mode": "subset", "lbAddress": true}`).writeLbAddress).toBe(true);
    expect(config(`{"lbAddress": true}`).writeLbAddress).toBe(true);
    expect(config(`{"lbAddress": false}`).writeLbAddress).toBe(false);
    expect(config(`{"mode": "direct"}`).writeLbAddress).toBe(false);
  });

  it("refuses lbAddress false in subset mode, and an lbAddress that is not a boolean", () => {
    expect(refused(`{"mode": "subset", "lbAddress": false}`)).toBe("lbAddress: subset mode needs it (its bridge balances on wasm.lb_address)");
    expect(refused(`{"lbAddress": 1}`)).toBe("lbAddress: expected a boolean");
  });

  it("reads mode direct", () => {
    expect(config(`{"mode": "direct"}`).subsetMode).toBe(false);
  });

  it("reads mtlsCluster and subsetCluster as given, UTF-8 included", () => {
    const c = config(`{"mtlsCluster": "my_mtls", "subsetCluster": "my_subset_\u00e9"}`);
    expect(utf8(c.mtlsCluster)).toBe("my_mtls");
    expect(utf8(c.subsetCluster)).toBe("my_subset_\u00e9");
    expect(c.subsetCluster.byteLength).toBe(12); // "é" is two bytes in UTF-8
  });

  it("resolves localNetwork to the id of the network its workloads use", () => {
    const c = config(`{"localNetwork": "west", ${MESH}}`);
    expect(c.localNetworkName).toBe("west");
    expect(c.localNetwork).toBe(c.mesh.networkId("west"));
    expect(c.localNetwork).not.toBe(c.mesh.networkId(""));
    expect(c.localNetwork).toBeGreaterThanOrEqual(0);
  });

  it("accepts a localNetwork no workload is on, with no local network id", () => {
    const c = config(`{"localNetwork": "east", ${MESH}}`);
    expect(c.localNetworkName).toBe("east");
    expect(c.localNetwork).toBe(-1);
  });

  it("parses the embedded mesh: workloads and services", () => {
    const c = config(LOCAL);
    expect(c.mesh.workloadCount()).toBe(12);
    expect(c.mesh.serviceCount()).toBe(5);
  });
});

describe("passthrough_mtls configuration: refusals", () => {
  it("refuses an unknown top-level field and lists the known ones", () => {
    expect(refused(`{"mtls_cluster": "x"}`)).toBe("mtls_cluster: unknown field (known: " + OWN_AND_MESH_FIELDS + ")");
  });

  it("refuses a mode other than direct or subset, case included", () => {
    expect(refused(`{"mode": "fast"}`)).toBe("mode: expected one of: direct, subset");
    expect(refused(`{"mode": "Subset"}`)).toBe("mode: expected one of: direct, subset");
    expect(refused(`{"mode": ""}`)).toBe("mode: expected one of: direct, subset");
  });

  it("refuses a mode that is not a string", () => {
    expect(refused(`{"mode": 1}`)).toBe("mode: expected one of: direct, subset");
  });

  it("refuses an empty mtlsCluster", () => {
    expect(refused(`{"mtlsCluster": ""}`)).toBe("mtlsCluster: must not be empty");
  });

  it("refuses an empty subsetCluster", () => {
    expect(refused(`{"subsetCluster": ""}`)).toBe("subsetCluster: must not be empty");
  });

  it("refuses cluster names and localNetwork that are not strings", () => {
    expect(refused(`{"mtlsCluster": 5}`)).toBe("mtlsCluster: expected a string");
    expect(refused(`{"subsetCluster": ["a"]}`)).toBe("subsetCluster: expected a string");
    expect(refused(`{"localNetwork": false}`)).toBe("localNetwork: expected a string");
  });

  it("refuses a root that is not an object", () => {
    expect(refused("[]")).toBe("(root): expected an object");
    expect(refused(`"x"`)).toBe("(root): expected an object");
    expect(refused("null")).toBe("(root): expected an object");
    expect(refused("42")).toBe("(root): expected an object");
  });

  it("refuses text that is not JSON, naming the byte", () => {
    expect(refused("{")).toBe("byte 1: unexpected end of input");
    expect(refused(`{"mode": "direct",}`)).toBe("byte 18: expected a string key");
  });

  it("refuses an empty configuration", () => {
    expect(refused("")).toBe("byte 0: unexpected end of input");
  });

  it("refuses a workload with a bad address, naming it", () => {
    expect(refused(`{"workloads": [{"uid": "a", "addresses": ["10.0.0.300"]}]}`)).toBe(
      'workloads[0].addresses[0]: not an IP address: "10.0.0.300"',
    );
  });

  it("refuses a duplicate uid, naming both places", () => {
    expect(
      refused(`{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "a", "addresses": ["10.0.0.2"]}]}`),
    ).toBe('workloads[1].uid: duplicate uid "a" (first at workloads[0])');
  });

  it("refuses tlsMode istio without an identity", () => {
    expect(refused(`{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"], "tlsMode": "istio"}]}`)).toBe(
      'workloads[0].identity: required when tlsMode is "istio"',
    );
  });

  it("reports only the first problem: an unknown field before a bad mode", () => {
    expect(refused(`{"mode": "fast", "extra": 1}`)).toBe("extra: unknown field (known: " + OWN_AND_MESH_FIELDS + ")");
  });

  it("reports an own-field problem before a mesh problem", () => {
    expect(refused(`{"mtlsCluster": "", "workloads": [{"uid": ""}]}`)).toBe("mtlsCluster: must not be empty");
  });
});

// ---------------------------------------------------------------- decision

describe("passthrough_mtls decision: routes", () => {
  it("routes a tlsMode istio pod on the local network to mTLS, naming that pod", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.0.0.1:443");
    expect(d.route).toBe(Route.MtlsPod);
    expect(podIdentity(c, d)).toBe("spiffe://cluster.local/ns/default/sa/app");
    expect(d.service).toBe(-1);
    expect(d.localWon).toBe(false);
  });

  it("keeps an endpoint of a non-headless service on the plain mTLS route", () => {
    // app-0 is an endpoint of app.default.svc on target port 443, but app is not headless.
    const c = config(LOCAL);
    expect(decideFor(c, "10.0.0.1:443").route).toBe(Route.MtlsPod);
  });

  it("routes a tlsMode disabled pod (tlsMode absent) to plaintext", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.0.0.2:8080");
    expect(d.route).toBe(Route.PlaintextPod);
    expect(d.workload).toBeGreaterThanOrEqual(0);
    expect(c.mesh.workloadIstio(d.workload)).toBe(false);
    expect(d.service).toBe(-1);
  });

  it("routes an IP no workload has to not-a-pod", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.9.9.9:443");
    expect(d.route).toBe(Route.NotAPod);
    expect(d.workload).toBe(-1);
    expect(d.service).toBe(-1);
    expect(d.localWon).toBe(false);
  });

  it("does not take a service VIP for a pod", () => {
    const c = config(LOCAL);
    expect(decideFor(c, "10.96.0.1:443").route).toBe(Route.NotAPod);
  });

  it("routes a pod that exists only on another network to not-a-pod", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.0.0.50:443");
    expect(d.route).toBe(Route.NotAPod);
    expect(d.workload).toBe(-1);
    expect(d.localWon).toBe(false);
  });

  it("routes an IPv6 pod address to that pod", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "[fd00::1]:443");
    expect(d.route).toBe(Route.MtlsPod);
    expect(podIdentity(c, d)).toBe("spiffe://cluster.local/ns/default/sa/app");
    // Same pod whichever of its addresses is dialled.
    expect(d.workload).toBe(decideFor(c, "10.0.0.1:443").workload);
  });

  it("matches another spelling of the same IPv6 address", () => {
    const c = config(LOCAL);
    expect(decideFor(c, "[FD00:0:0::1]:443").route).toBe(Route.MtlsPod);
    expect(decideFor(c, "[fd00::3]:443").route).toBe(Route.NotAPod);
  });

  it("finds an IPv4 pod through an IPv4-mapped IPv6 destination", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "[::ffff:10.0.0.1]:443");
    expect(d.route).toBe(Route.MtlsPod);
    expect(podIdentity(c, d)).toBe("spiffe://cluster.local/ns/default/sa/app");
  });

  it("finds a pod configured with an IPv4-mapped address through its plain IPv4 destination", () => {
    const c = config(LOCAL);
    expect(podIdentity(c, decideFor(c, "10.0.3.1:443"))).toBe("spiffe://cluster.local/ns/default/sa/mapped");
    expect(podIdentity(c, decideFor(c, "[::ffff:a00:301]:443"))).toBe("spiffe://cluster.local/ns/default/sa/mapped");
  });

  it("routes to not-a-pod when every workload is on another network than the default local one", () => {
    const c = config(`{"workloads": [{"uid": "w", "addresses": ["10.0.0.1"], "network": "west",
      "tlsMode": "istio", "identity": "spiffe://cluster.local/ns/west/sa/w"}]}`);
    const d = decideFor(c, "10.0.0.1:443");
    expect(d.route).toBe(Route.NotAPod);
    expect(d.workload).toBe(-1);
    expect(d.localWon).toBe(false);
  });

  it("routes everything to not-a-pod when the local network has no workloads", () => {
    const c = config(`{"localNetwork": "east", ${MESH}}`);
    expect(decideFor(c, "10.0.0.1:443").route).toBe(Route.NotAPod);
    expect(decideFor(c, "10.0.0.50:443").route).toBe(Route.NotAPod);
    expect(decideFor(c, "10.0.1.1:5432").route).toBe(Route.NotAPod);
  });
});

describe("passthrough_mtls decision: the same IP on two networks", () => {
  it("lets the local network's pod win and says so", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.0.0.11:443");
    expect(d.route).toBe(Route.MtlsPod);
    expect(podIdentity(c, d)).toBe("spiffe://cluster.local/ns/default/sa/httpbin");
    expect(d.localWon).toBe(true);
  });

  it("keeps a local tlsMode disabled pod in clear even when the other network's pod is istio", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.0.0.12:80");
    expect(d.route).toBe(Route.PlaintextPod);
    expect(d.localWon).toBe(true);
  });

  it("lets the other network's pod win when that network is the local one", () => {
    const c = config(`{"localNetwork": "west", ${MESH}}`);
    const twin = decideFor(c, "10.0.0.11:443");
    expect(twin.route).toBe(Route.MtlsPod);
    expect(podIdentity(c, twin)).toBe("spiffe://cluster.local/ns/west/sa/twin");
    expect(twin.localWon).toBe(true);
    const istioTwin = decideFor(c, "10.0.0.12:80");
    expect(istioTwin.route).toBe(Route.MtlsPod);
    expect(podIdentity(c, istioTwin)).toBe("spiffe://cluster.local/ns/west/sa/istio-twin");
    const remote = decideFor(c, "10.0.0.50:443");
    expect(remote.route).toBe(Route.MtlsPod);
    expect(remote.localWon).toBe(false);
    // The default network's pods are now "another network": not candidates.
    expect(decideFor(c, "10.0.0.1:443").route).toBe(Route.NotAPod);
  });

  it("does not claim a win for a pod whose IP no other network has", () => {
    const c = config(LOCAL);
    expect(decideFor(c, "10.0.0.1:443").localWon).toBe(false);
    expect(decideFor(c, "10.0.0.2:80").localWon).toBe(false);
  });
});

describe("passthrough_mtls decision: headless services", () => {
  it("sends a headless member on its served target port to that service", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.0.1.1:5432");
    expect(d.route).toBe(Route.HeadlessMember);
    expect(serviceName(c, d)).toBe("db.default.svc.cluster.local");
    expect(podIdentity(c, d)).toBe("spiffe://cluster.local/ns/default/sa/db-0");
    expect(utf8(changetype<ArrayBuffer>(c.mesh.portSlotCluster(d.service, d.slot)))).toBe(
      "outbound|5432||db.default.svc.cluster.local",
    );
  });

  it("matches the target port, not the service port", () => {
    const c = config(LOCAL);
    // db serves service port 80 on target port 8080.
    const d = decideFor(c, "10.0.1.1:8080");
    expect(d.route).toBe(Route.HeadlessMember);
    expect(serviceName(c, d)).toBe("db.default.svc.cluster.local");
    expect(utf8(changetype<ArrayBuffer>(c.mesh.portSlotCluster(d.service, d.slot)))).toBe(
      "outbound|80||db.default.svc.cluster.local",
    );
    // Dialling the service port on the pod is not a served target port.
    const servicePort = decideFor(c, "10.0.1.1:80");
    expect(servicePort.route).toBe(Route.MtlsPod);
    expect(servicePort.service).toBe(-1);
  });

  it("sends a headless member on a port its service does not serve through the plain mTLS route", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.0.1.1:9999");
    expect(d.route).toBe(Route.MtlsPod);
    expect(d.service).toBe(-1);
    expect(d.slot).toBe(-1);
    expect(c.mesh.portSlotCluster(d.service, d.slot)).toBeNull();
    expect(podIdentity(c, d)).toBe("spiffe://cluster.local/ns/default/sa/db-0");
  });

  it("uses an endpoint's own target port over the service default", () => {
    const c = config(LOCAL);
    // db-1 overrides service port 80 to target 9090.
    const overridden = decideFor(c, "10.0.1.2:9090");
    expect(overridden.route).toBe(Route.HeadlessMember);
    expect(serviceName(c, overridden)).toBe("db.default.svc.cluster.local");
    expect(utf8(changetype<ArrayBuffer>(c.mesh.portSlotCluster(overridden.service, overridden.slot)))).toBe(
      "outbound|80||db.default.svc.cluster.local",
    );
    // The default target 8080 is not served by db-1.
    expect(decideFor(c, "10.0.1.2:8080").route).toBe(Route.MtlsPod);
    // A port without override keeps the service default.
    expect(decideFor(c, "10.0.1.2:5432").route).toBe(Route.HeadlessMember);
    // db-0 has no override: 9090 is not served there.
    expect(decideFor(c, "10.0.1.1:9090").route).toBe(Route.MtlsPod);
  });

  it("lets the first headless service in configuration order win a shared target port", () => {
    const c = config(LOCAL);
    // db (5432->5432) and db-replica (15432->5432) both reach db-0:5432; db comes first.
    const d = decideFor(c, "10.0.1.1:5432");
    expect(serviceName(c, d)).toBe("db.default.svc.cluster.local");
  });

  it("uses a headless service's explicit cluster and works over IPv6", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "[fd00::2]:6379");
    expect(d.route).toBe(Route.HeadlessMember);
    expect(serviceName(c, d)).toBe("cache.default.svc.cluster.local");
    expect(utf8(changetype<ArrayBuffer>(c.mesh.portSlotCluster(d.service, d.slot)))).toBe("cache_cluster");
  });

  it("keeps a tlsMode disabled member of a headless service in clear", () => {
    const c = config(LOCAL);
    const d = decideFor(c, "10.0.2.1:5432");
    expect(d.route).toBe(Route.PlaintextPod);
    expect(d.service).toBe(-1);
  });

  it("resets every field of a reused decision", () => {
    const c = config(LOCAL);
    const d = new Decision();
    decideFor(c, "10.0.0.11:443", d); // localWon
    decideFor(c, "10.0.1.1:5432", d); // headless: service set, localWon must be cleared
    expect(d.route).toBe(Route.HeadlessMember);
    expect(d.localWon).toBe(false);
    decideFor(c, "10.9.9.9:5432", d); // not a pod: workload and service cleared
    expect(d.route).toBe(Route.NotAPod);
    expect(d.workload).toBe(-1);
    expect(d.service).toBe(-1);
    decideFor(c, "10.0.1.1:9999", d); // mTLS: service cleared after a headless decision
    decideFor(c, "10.0.1.1:5432", d);
    decideFor(c, "10.0.1.1:9999", d);
    expect(d.route).toBe(Route.MtlsPod);
    expect(d.service).toBe(-1);
  });
});

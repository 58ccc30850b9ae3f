// The streaming mesh parser (assembly/mesh/parse.ts) against the tree-based one it replaced
// (legacy_mesh_parser.ts, the oracle): the same model and the same first error for every input,
// then the caller's own fields, the tree path through writeJson, and reading from the host.
import { legacyParseMeshConfig } from "./legacy_mesh_parser";
import { ConfigReader, JsonKind, JsonValue, parseJson, writeJson } from "../json";
import { formatIp, TlsMode } from "../mesh";
import { Address } from "../mesh/ip";
import { Mesh } from "../mesh/model";
import { MESH_FIELDS, MeshDocument, MeshLimits, parseMesh, parseMeshDocument, parseMeshSource } from "../mesh/parse";
import { MemorySource } from "../json/source";
import { HostBufferSource } from "../runtime/config_source";
import { BufferType } from "../runtime/types";

/** Everything the Mesh answers through its public API, as text. */
function digest(m: Mesh): string {
  const out = new Array<string>();
  const a = new Address();
  out.push("networks " + m.networkCount().toString());
  for (let n = 0; n < m.networkCount(); n++) out.push(" net " + n.toString() + "=" + m.networkName(n));
  for (let w = 0; w < m.workloadCount(); w++) {
    let line = "w" + w.toString() + " net=" + m.workloadNetwork(w).toString();
    line += " tls=" + (m.workloadTlsMode(w) == TlsMode.Istio ? "istio" : "disabled");
    line += " healthy=" + (m.workloadHealthy(w) ? "1" : "0") + " id=" + m.workloadIdentity(w);
    line += "#" + m.workloadIdentityId(w).toString() + " loc=" + m.workloadLocality(w);
    line += " r=" + m.localityPrefix(m.workloadRegion(w)) + " z=" + m.localityPrefix(m.workloadZone(w));
    line += " s=" + m.localityPrefix(m.workloadSubzone(w));
    line += " wp=" + m.workloadWaypoint(w).toString() + " gw=" + m.workloadGateway(w).toString();
    for (let i = 0; i < m.workloadAddressCount(w); i++) {
      m.workloadAddress(w, i, a);
      line += " " + formatIp(a) + "->" + m.workloadByAddress(m.workloadNetwork(w), a).toString();
    }
    out.push(line);
  }
  for (let s = 0; s < m.serviceCount(); s++) {
    let line = "s" + s.toString() + " " + m.serviceHostname(s) + " by=" + m.serviceByHostname(m.serviceHostname(s)).toString();
    line += " headless=" + (m.serviceHeadless(s) ? "1" : "0") + " wp=" + m.serviceWaypoint(s).toString();
    line += " lb=" + m.lbMode(s).toString() + ":";
    for (let i = 0; i < m.lbPreferenceCount(s); i++) line += m.lbPreference(s, i).toString();
    for (let i = 0; i < m.servicePortCount(s); i++) {
      const port = m.servicePortAt(s, i);
      const cluster = m.clusterName(s, port);
      line += " port " + port.toString() + "->" + m.serviceTargetPort(s, port).toString();
      line += " " + (cluster === null ? "<null>" : String.UTF8.decode(cluster));
      for (let e = 0; e < m.endpointCount(s); e++) line += " e" + e.toString() + ":" + m.targetPort(s, e, port).toString();
    }
    for (let e = 0; e < m.endpointCount(s); e++) line += " ep=" + m.endpointWorkload(s, e).toString();
    for (let i = 0; i < m.sanCount(s); i++) line += " san=" + m.san(s, i);
    for (let i = 0; i < m.vipCount(s); i++) {
      m.vipAddress(s, i, a);
      line += " vip=" + formatIp(a) + "@" + m.vipNetworkId(s, i).toString() + "->" + m.serviceByVip(m.vipNetworkId(s, i), a).toString();
    }
    out.push(line);
  }
  for (let r = 0; r < m.refs.length; r++) {
    let line = "ref" + r.toString() + " t=" + m.refTarget(r).toString() + " i=" + m.refIndex(r).toString();
    line += " port=" + m.refPort(r).toString() + " host=" + m.refHostname(r);
    if (m.refAddress(r, a)) line += " addr=" + formatIp(a);
    out.push(line);
  }
  // Headless lookups for every (workload, port) some service names.
  for (let w = 0; w < m.workloadCount(); w++) {
    for (let s = 0; s < m.serviceCount(); s++) {
      for (let i = 0; i < m.servicePortCount(s); i++) {
        const port = m.serviceTargetPort(s, m.servicePortAt(s, i));
        const h = m.headlessServiceOf(w, port);
        if (h >= 0) out.push("headless " + w.toString() + ":" + port.toString() + "=" + h.toString() + "/" + m.headlessServicePort(w, port).toString());
      }
    }
  }
  return out.join("\n");
}

/** The outcome of a parse: the error, or the model's digest. */
function outcome(mesh: Mesh | null, error: string): string {
  if (mesh === null) return "error: " + error;
  return error.length > 0 ? "both: " + error : digest(mesh);
}

let checked = 0;
let mismatches = 0;
let accepted = 0;
const errorsSeen = new Set<string>();

/** The streaming parser and the original one agree on `bytes`. */
function same(bytes: ArrayBuffer, limits: MeshLimits = new MeshLimits()): bool {
  const expected = legacyParseMeshConfig(bytes, limits);
  const doc = parseMeshDocument(bytes, [], limits);
  const a = outcome(expected.mesh, expected.error);
  let b = outcome(doc.mesh, doc.error);
  // The windowed reader (the way a filter reads the host's configuration) with windows so
  // small that nearly every token crosses a window boundary or lies outside it when re-read.
  const source = new MemorySource(bytes);
  const windowed = parseMeshSource(source, [], limits, 16 + (checked % 5) * 8, 4 + (checked % 4));
  const c = outcome(windowed.mesh, windowed.error);
  if (c != b) b = "windowed: " + c + " / in memory: " + b;
  else if (windowed.mesh !== null && bytes.byteLength > 64 && source.reads < 2) b = "windowed: the window was never refilled";
  checked++;
  if (doc.mesh !== null) accepted++;
  else errorsSeen.add(doc.error);
  if (a != b) {
    mismatches++;
    if (mismatches <= 3) {
      log<string>("input: " + String.UTF8.decode(bytes));
      expect(b).toBe(a);
    }
    return false;
  }
  return true;
}

function sameText(text: string, limits: MeshLimits = new MeshLimits()): bool {
  return same(String.UTF8.encode(text), limits);
}

// ---- fixtures: the configurations of mesh_parse, mesh_errors and passthrough_mtls specs ----

const FULL = `{
  "workloads": [
    {"uid": "pod-a", "addresses": ["10.0.0.1", "FD00:0::1"], "network": "net1",
     "identity": "spiffe://cluster.local/ns/default/sa/app", "tlsMode": "istio", "healthy": false,
     "locality": "us-east1/us-east1-b/rack7", "waypoint": {"address": "10.0.9.9", "port": 15009},
     "networkGateway": {"hostname": "gw.example.com", "hboneMtlsPort": 15443}},
    {"uid": "pod-b", "addresses": ["10.0.0.2"]},
    {"uid": "pod-c", "addresses": ["10.0.0.3", "::ffff:10.0.0.4"], "locality": "us-east1", "network": "net1",
     "waypoint": {"hostname": "my-service.default.svc.cluster.local"}, "identity": "spiffe://cluster.local/ns/default/sa/app"},
    {"uid": "remote", "network": "net2", "networkGateway": {"address": "192.0.2.1"}}
  ],
  "services": [
    {"hostname": "my-service.default.svc.cluster.local",
     "vips": [{"address": "10.96.0.10"}, {"network": "net1", "address": "fd00:96::10"}],
     "ports": {"80": 9376, "443": 8443},
     "endpoints": [{"workload": "pod-a", "ports": {"80": 9377}}, {"workload": "pod-b"}, {"workload": "pod-c"}],
     "waypoint": {"hostname": "waypoint.default.svc.cluster.local"},
     "subjectAltNames": ["spiffe://cluster.local/ns/default/sa/app", "other"],
     "headless": true, "cluster": "custom-cluster",
     "loadBalancing": {"routingPreference": ["zone", "network"], "mode": "standard"}},
    {"hostname": "plain.default.svc.cluster.local", "ports": {"8080": 8080}, "waypoint": {"address": "10.0.0.2"},
     "endpoints": [{"workload": "pod-b", "ports": {"8080": 8081}}], "headless": true},
    {"hostname": "waypoint.default.svc.cluster.local", "vips": [{"address": "10.96.0.99"}],
     "loadBalancing": {"routingPreference": []}}
  ]
}`;

const W1 = `{"uid": "w1", "addresses": ["10.0.0.1"]}`;

/** Bodies of single workloads (after a valid one) and services (after a valid one) from mesh_errors. */
const WORKLOAD_CASES = [
  `"uid": "w", "addresses": ["10.0.0.2"], "ip": "x"`,
  `"uid": "w", "networkGateway": {"hostname": "g", "port": 1}`,
  `"uid": 7`,
  `"uid": "w", "addresses": "10.0.0.2"`,
  `"uid": "w", "addresses": [1]`,
  `"uid": "w", "addresses": ["10.0.0.2"], "healthy": "yes"`,
  `"uid": "w", "addresses": ["10.0.0.2"], "tlsMode": "strict"`,
  `"addresses": ["10.0.0.2"]`,
  `"uid": "w", "addresses": ["10.0.0.2", "10.0.0.300"]`,
  `"uid": "w", "addresses": ["fe80::1%eth0"]`,
  `"uid": "w", "addresses": []`,
  `"uid": "w"`,
  `"uid": "w", "addresses": ["10.0.0.1"]`,
  `"uid": "w", "addresses": ["10.0.0.2", "::ffff:10.0.0.2"]`,
  `"uid": "w0", "addresses": ["10.0.0.2"]`,
  `"uid": "", "addresses": ["10.0.0.2"]`,
  `"uid": "w", "addresses": ["10.0.0.2"], "tlsMode": "istio"`,
  `"uid": "w", "addresses": ["10.0.0.2"], "identity": "spiffe://td/ns/n/sa/s/extra"`,
  `"uid": "w", "addresses": ["10.0.0.2"], "identity": ""`,
  `"uid": "w", "addresses": ["10.0.0.2"], "locality": "r//s"`,
  `"uid": "w", "addresses": ["10.0.0.2"], "locality": "a/b/c/d"`,
  `"uid": "w", "networkGateway": {"hboneMtlsPort": 15008}`,
  `"uid": "w", "networkGateway": {"address": "1.2.3.4", "hboneMtlsPort": 65536}`,
  `"uid": "w", "networkGateway": {"address": "gw.example.com"}`,
  `"uid": "w", "addresses": null, "networkGateway": {"hostname": "gw"}`,
  `"uid": "w", "addresses": ["10.0.0.2"], "identity": null, "tlsMode": null, "healthy": null, "locality": null`,
  `"uid": "w", "addresses": ["10.0.0.2"], "waypoint": null, "networkGateway": null, "network": null`,
  `"uid": "w", "addresses": ["10.0.0.2"], "waypoint": [], "tlsMode": 5`,
  `"uid": null, "addresses": ["10.0.0.2"]`,
  `"uid": "w\\u0030", "addresses": ["10.0.0.2"]`,
  `"uid": "w", "addresses": ["10.0.0.\\u0032"], "network": "n\\u00e9t", "identity": "spiffe://td/ns/n/sa/\\u0073"`,
];

const SERVICE_CASES = [
  `"hostname": "s", "vip": []`,
  `"hostname": "s", "vips": [{"address": "10.1.0.1", "net": "a"}]`,
  `"hostname": "s", "endpoints": [{"workload": "w1", "port": 1}]`,
  `"hostname": "s", "waypoint": {"hostname": "w", "hboneMtlsPort": 1}`,
  `"hostname": "s", "loadBalancing": {"prefs": []}`,
  `"hostname": "s", "ports": []`,
  `"hostname": "s", "ports": {"80": "9376"}`,
  `"hostname": "s", "headless": 1`,
  `"hostname": "s", "subjectAltNames": [1]`,
  `"ports": {}`,
  `"hostname": "s", "vips": [{"network": "n"}]`,
  `"hostname": "s", "endpoints": [{}]`,
  `"hostname": "s", "vips": [{"address": "vip"}]`,
  `"hostname": "s", "vips": [{"address": "10.96.0.1"}, {"address": "10.96.0.1"}]`,
  `"hostname": "s", "waypoint": {"address": "10.0.0.9", "hostname": "wp"}`,
  `"hostname": "s", "waypoint": {"hostname": "wp", "port": 0}`,
  `"hostname": "s", "waypoint": {"hostname": "a|b"}`,
  `"hostname": "s0"`,
  `"hostname": "a..b"`,
  `"hostname": "svc:80"`,
  `"hostname": ""`,
  `"hostname": "s", "ports": {"0": 80}`,
  `"hostname": "s", "ports": {"65536": 80}`,
  `"hostname": "s", "ports": {"http": 80}`,
  `"hostname": "s", "ports": {"80": 0}`,
  `"hostname": "s", "ports": {"80": 65536}`,
  `"hostname": "s", "ports": {"80": null}`,
  `"hostname": "s", "ports": {"80": 8e1, "\\u0038\\u0031": 81.0}`,
  `"hostname": "s", "endpoints": [{"workload": "nope"}]`,
  `"hostname": "s", "endpoints": [{"workload": "w1"}, {"workload": "w1"}]`,
  `"hostname": "s", "ports": {"80": 9376}, "endpoints": [{"workload": "w1", "ports": {"81": 9377}}]`,
  `"hostname": "s", "ports": {"80": 9376}, "endpoints": [{"workload": "w1", "ports": {"80": 0}}]`,
  `"hostname": "s", "ports": {"80": 9376}, "endpoints": [{"workload": "w1", "ports": {"80": null}}]`,
  `"hostname": "s", "cluster": ""`,
  `"hostname": "s", "cluster": 5`,
  `"hostname": "s", "subjectAltNames": [""]`,
  `"hostname": "s", "subjectAltNames": [null]`,
  `"hostname": "s", "loadBalancing": {"routingPreference": ["zone", "zone"]}`,
  `"hostname": "s", "loadBalancing": {"routingPreference": ["cluster"]}`,
  `"hostname": "s", "loadBalancing": {"routingPreference": [1]}`,
  `"hostname": "s", "loadBalancing": {"mode": "strict"}`,
  `"hostname": "s", "loadBalancing": []`,
  `"hostname": "s", "waypoint": {"address": "10.0.0.1"}, "headless": true, "ports": {"80": 8080},
   "endpoints": [{"workload": "w1"}], "subjectAltNames": ["a"], "vips": [{"address": "10.96.1.1", "network": "x"}]`,
];

const WHOLE_CASES = [
  `{"workloads": [}`,
  "[]",
  `"x"`,
  "null",
  `{"workload": []}`,
  `{"workloads": {}}`,
  `{"workloads": [5]}`,
  `{"workloads": [null]}`,
  `{"services": {}, "workloads": [5]}`,
  `{"workloads": [5], "services": 3}`,
  `{"services": [{"hostname": "a", "endpoints": [{"workload": "x"}]}], "workloads": [{"uid": "x", "addresses": ["10.0.0.1"]}]}`,
  `{"services": [{"hostname": "a", "vips": [{"address": "10.96.0.1"}]}, {"hostname": "b", "vips": [{"address": "10.96.0.1"}]}]}`,
  `{"workloads": [{"uid": "a", "network": "n", "addresses": ["fd00::1"]}, {"uid": "b", "network": "n", "addresses": ["FD00:0::1"]}]}`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}], "extra": 1, "services": [{"hostname": 5}]}`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "a", "addresses": ["10.0.0.2"]}], "x": 1}`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}], "workloads": []}`,
  `{}`,
  `{"workloads": null, "services": null}`,
  `{"workloads": [], "services": []}`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}] , "services": [{"hostname": "s", "endpoints": [{"workload": "a"}]}]} x`,
  `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"], "waypoint": {"address": "10.0.0.1"}},
    {"uid": "b", "addresses": ["10.0.0.2"], "network": "n2", "waypoint": {"address": "10.0.0.1"}},
    {"uid": "c", "addresses": ["10.0.0.1"], "network": "n2", "networkGateway": {"address": "10.96.0.1"}}],
   "services": [{"hostname": "s", "vips": [{"address": "10.96.0.1", "network": "n2"}], "waypoint": {"address": "10.0.0.1"}}]}`,
];

function workloadDoc(fields: string): string {
  return `{"workloads": [{"uid": "w0", "addresses": ["10.0.0.1"]}, {${fields}}]}`;
}

function serviceDoc(fields: string): string {
  return `{"workloads": [${W1}], "services": [{"hostname": "s0"}, {${fields}}]}`;
}

/** Every fixture as a whole configuration. */
function fixtures(): Array<string> {
  const all = new Array<string>();
  all.push(FULL);
  for (let i = 0; i < WORKLOAD_CASES.length; i++) all.push(workloadDoc(WORKLOAD_CASES[i]));
  for (let i = 0; i < SERVICE_CASES.length; i++) all.push(serviceDoc(SERVICE_CASES[i]));
  for (let i = 0; i < WHOLE_CASES.length; i++) all.push(WHOLE_CASES[i]);
  return all;
}

// ---- tree mutations: every kind of wrong value, shuffled key orders, unknown keys ----

let seed: u32 = 20240607;

function random(n: i32): i32 {
  seed = seed * 1103515245 + 12345;
  return n <= 0 ? 0 : <i32>((seed >> 8) % <u32>n);
}

const STRINGS = ["", "w0", "w1", "pod-a", "pod-b", "10.0.0.1", "10.0.0.2", "fd00::1", "fe80::1%eth0", "net1",
  "spiffe://cluster.local/ns/default/sa/app", "r/z", "r//z", "istio", "disabled", "standard", "zone", "network",
  "s0", "my-service.default.svc.cluster.local", "a|b", "80", "0", "x", "10.96.0.10", "gw.example.com"];

/** A random value of a random kind. */
function randomValue(depth: i32): JsonValue {
  const kind = random(depth > 1 ? 5 : 7);
  if (kind == 0) return JsonValue.fromNull();
  if (kind == 1) return JsonValue.fromBool(random(2) == 0);
  if (kind == 2) {
    const ints: i64[] = [0, 1, 80, 8080, 15008, 65535, 65536, -1];
    const v = ints[random(ints.length)];
    return JsonValue.fromNumber(<f64>v, true, v);
  }
  if (kind == 3 || kind == 4) return JsonValue.fromString(STRINGS[random(STRINGS.length)]);
  if (kind == 5) {
    const items = new Array<JsonValue>();
    for (let i = random(3); i > 0; i--) items.push(randomValue(depth + 1));
    return JsonValue.fromArray(items);
  }
  const obj = JsonValue.newObject();
  const keys = ["address", "hostname", "port", "workload", "ports", "80", "uid", "routingPreference", "mode", "zz"];
  for (let i = random(3); i > 0; i--) obj.addField(keys[random(keys.length)], randomValue(depth + 1));
  return obj;
}

/** A copy of `v` with (rarely) one node replaced, objects' keys shuffled, entries dropped or repeated. */
function mutate(v: JsonValue, rate: i32): JsonValue {
  if (random(rate) == 0) return randomValue(0);
  if (v.kind == JsonKind.Array) {
    const items = v.items();
    const out = new Array<JsonValue>();
    for (let i = 0; i < items.length; i++) {
      if (random(rate * 2) == 0) continue; // dropped
      const item = mutate(items[i], rate);
      out.push(item);
      if (random(rate * 2) == 0) out.push(item); // repeated
    }
    return JsonValue.fromArray(out);
  }
  if (v.kind == JsonKind.Object) {
    const keys = v.keys().slice(0);
    // Shuffle: the first error must not depend on key order in the document.
    for (let i = keys.length - 1; i > 0; i--) {
      const j = random(i + 1);
      const t = keys[i];
      keys[i] = keys[j];
      keys[j] = t;
    }
    const obj = JsonValue.newObject();
    for (let i = 0; i < keys.length; i++) {
      const child = v.get(keys[i]);
      if (child === null || random(rate * 2) == 0) continue;
      obj.addField(keys[i], mutate(child, rate));
    }
    if (random(rate * 3) == 0) obj.addField("zz", randomValue(1));
    return obj;
  }
  return v;
}

// ==================================================================== specs

describe("parseMeshDocument: same model and messages as the tree-based parser", () => {
  it("on every fixture", () => {
    const all = fixtures();
    let bad = 0;
    for (let i = 0; i < all.length; i++) if (!sameText(all[i])) bad++;
    expect(bad).toBe(0);
  });

  it("on the limit checks", () => {
    const limits = new MeshLimits();
    limits.workloads = 1;
    limits.addresses = 2;
    limits.services = 1;
    limits.serviceItems = 1;
    const docs = [
      `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, {"uid": "b", "addresses": ["10.0.0.2"]}]}`,
      `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1", "10.0.0.2", "fd00::1"]}]}`,
      `{"services": [{"hostname": "a"}, {"hostname": "b"}]}`,
      `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}], "services": [{"hostname": "a", "endpoints": [{"workload": "a"}, {"workload": "a"}]}]}`,
      `{"services": [{"hostname": "a", "vips": [{"address": "1.1.1.1"}, {"address": "1.1.1.2"}, {"address": "1.1.1.3"}]}]}`,
      `{"services": [{"hostname": "a", "ports": {"1": 1, "2": 2}}]}`,
      `{"services": [{"hostname": "a", "subjectAltNames": ["x", "y"]}]}`,
      `{"workloads": [{"uid": 1, "addresses": [1, 2, 3]}]}`,
      `{"workloads": [{"uid": "a", "addresses": ["10.0.0.1"]}, 7], "services": [{"hostname": "a", "vips": [1, 2, 3]}]}`,
    ];
    let bad = 0;
    for (let i = 0; i < docs.length; i++) if (!sameText(docs[i], limits)) bad++;
    expect(bad).toBe(0);
  });

  it("on too many networks", () => {
    const parts = new Array<string>();
    for (let i = 0; i <= 2048; i++) parts.push(`{"uid": "w${i}", "addresses": ["10.0.0.1"], "network": "n${i}"}`);
    expect(sameText(`{"workloads": [${parts.join(",")}]}`)).toBe(true);
  });

  it("on thousands of mutated fixtures: wrong types, shuffled keys, dropped and repeated entries", () => {
    const all = fixtures();
    const trees = new Array<JsonValue>();
    for (let i = 0; i < all.length; i++) {
      const tree = parseJson(String.UTF8.encode(all[i])).value;
      if (tree !== null) trees.push(tree);
    }
    checked = 0;
    mismatches = 0;
    accepted = 0;
    errorsSeen.clear();
    for (let round = 0; round < 4000; round++) {
      const base = trees[round % trees.length];
      same(String.UTF8.encode(writeJson(mutate(base, 6 + (round % 20)))));
    }
    log<string>(
      "mutated configurations compared: " + checked.toString() + ", accepted: " + accepted.toString() +
        ", distinct errors: " + errorsSeen.size.toString(),
    );
    expect(mismatches).toBe(0);
    // The mutations reach both outcomes and many different checks.
    expect(accepted).toBeGreaterThan(100);
    expect(errorsSeen.size).toBeGreaterThan(150);
  });

  it("on corrupted bytes (JSON errors win wherever they are)", () => {
    const base = Uint8Array.wrap(String.UTF8.encode(FULL));
    const interesting: u8[] = [0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x30, 0x2d, 0x80, 0x20, 0x61];
    mismatches = 0;
    for (let round = 0; round < 1500; round++) {
      const copy = base.slice(0);
      seed = seed * 1103515245 + 12345;
      copy[<i32>((seed >> 8) % <u32>copy.length)] = interesting[random(interesting.length)];
      same(copy.buffer);
    }
    for (let len = 0; len < base.length; len += 7) same(base.slice(0, len).buffer);
    expect(mismatches).toBe(0);
  });
});

const OWN = ["localNetwork", "mode"];

describe("parseMeshDocument: the caller's own fields", () => {
  it("hands back the own fields as a small object and streams the mesh", () => {
    const doc = parseMeshDocument(
      String.UTF8.encode(`{"mode": "subset", "workloads": [${W1}], "localNetwork": {"a": [1]}, "services": []}`),
      OWN,
    );
    expect(doc.error).toBe("");
    expect(doc.ok()).toBe(true);
    const own = doc.own;
    expect(own).not.toBeNull();
    if (own === null) return;
    expect(own.keys().join(",")).toBe("mode,localNetwork");
    expect(writeJson(own)).toBe('{"mode":"subset","localNetwork":{"a":[1]}}');
    const m = doc.mesh;
    expect(m !== null && m.workloadCount() == 1).toBe(true);
  });

  it("refuses unknown top-level fields with ConfigReader's message, listing own fields first", () => {
    const doc = parseMeshDocument(String.UTF8.encode(`{"workloads": [], "mtls_cluster": "x", "y": 1}`), OWN);
    expect(doc.error).toBe("mtls_cluster: unknown field (known: localNetwork, mode, workloads, services)");
    expect(doc.own).toBeNull();
    expect(doc.mesh).toBeNull();
    expect(parseMeshDocument(String.UTF8.encode(`{"a b": 1}`), OWN).error).toBe(
      '["a b"]: unknown field (known: localNetwork, mode, workloads, services)',
    );
  });

  it("reports JSON errors anywhere before everything else, and a root that is not an object", () => {
    expect(parseMeshDocument(String.UTF8.encode(`{"x": 1, "workloads": [}`), OWN).error).toBe(
      "byte 23: unexpected character '}'",
    );
    expect(parseMeshDocument(String.UTF8.encode(`{"mode": 1, "mode": 2}`), OWN).error).toBe(
      'byte 12: duplicate key "mode"',
    );
    expect(parseMeshDocument(String.UTF8.encode(`[1]`), OWN).error).toBe("(root): expected an object");
    expect(parseMeshDocument(String.UTF8.encode(`[1`), OWN).error).toBe("byte 2: unexpected end of input");
  });

  it("keeps the own fields when the mesh fails, so the caller can report its own first", () => {
    const doc = parseMeshDocument(String.UTF8.encode(`{"workloads": [{"uid": ""}], "mode": 5}`), OWN);
    expect(doc.error).toBe("workloads[0].uid: must not be empty");
    expect(doc.mesh).toBeNull();
    const own = doc.own;
    expect(own !== null && own.has("mode")).toBe(true);
  });

  it("streams services that come before workloads", () => {
    const doc = parseMeshDocument(
      String.UTF8.encode(`{"services": [{"hostname": "s", "endpoints": [{"workload": "w1"}]}], "workloads": [${W1}]}`),
      OWN,
    );
    expect(doc.error).toBe("");
    const m = doc.mesh;
    expect(m !== null && m.endpointWorkload(0, 0) == 0).toBe(true);
  });
});

describe("parseMesh on a tree: the same parser through writeJson", () => {
  it("gives the same model and messages as parseMeshDocument, under the caller's path", () => {
    const all = fixtures();
    let bad = 0;
    for (let i = 0; i < all.length; i++) {
      const tree = parseJson(String.UTF8.encode(all[i])).value;
      if (tree === null || !tree.isObject()) continue;
      const reader = new ConfigReader();
      if (!reader.onlyKnownFields(tree, "", MESH_FIELDS)) continue;
      const fromTree = parseMesh(tree, reader, "");
      const doc: MeshDocument = parseMeshDocument(String.UTF8.encode(all[i]), []);
      if (outcome(fromTree, reader.error()) != outcome(doc.mesh, doc.error)) {
        bad++;
        expect(outcome(fromTree, reader.error())).toBe(outcome(doc.mesh, doc.error));
      }
    }
    expect(bad).toBe(0);
    const tree = parseJson(String.UTF8.encode(`{"workloads": [{"uid": 1}]}`)).value;
    if (tree === null) return;
    const reader = new ConfigReader();
    expect(parseMesh(tree, reader, "mesh")).toBeNull();
    expect(reader.error()).toBe("mesh.workloads[0].uid: expected a string");
  });
});

describe("parseMeshSource: reading the configuration from the host", () => {
  it("refuses the configuration with a message when the host serves no bytes", () => {
    // as-pect's host answers every proxy_* call with Unimplemented: the first window is empty.
    const doc = parseMeshSource(new HostBufferSource(BufferType.PluginConfiguration, 40), []);
    expect(doc.own).toBeNull();
    expect(doc.mesh).toBeNull();
    expect(doc.error).toBe("byte 0: configuration could not be read past this offset");
  });

  it("matches endpoint uids that lie ahead of the services (sorted keys) and cross a window's end", () => {
    // "services" sorts before "workloads": each endpoint's uid is compared with uids further on
    // in the document, some of which start inside the current window and end past it.
    let services = "";
    let workloads = "";
    const uid = (i: i32): string => "kubernetes//Pod/default/a-rather-long-pod-name-" + i.toString();
    for (let i = 0; i < 12; i++) {
      if (i > 0) {
        services += ",";
        workloads += ",";
      }
      // The last service names the first workload, whose uid follows a few bytes later.
      services += `{"hostname": "s${i}.default.svc", "ports": {"80": 8080}, "endpoints": [{"workload": "${uid(11 - i)}"}]}`;
      workloads += `{"uid": "${uid(i)}", "addresses": ["10.0.0.${i + 1}"]}`;
    }
    const bytes = String.UTF8.encode(`{"services": [${services}], "workloads": [${workloads}]}`);
    const whole = parseMeshDocument(bytes, []);
    expect(whole.error).toBe("");
    const expected = digest(whole.mesh!);
    for (let window = 16; window <= 160; window += 3) {
      const windowed = parseMeshSource(new MemorySource(bytes), [], new MeshLimits(), window, 4);
      expect(windowed.error).toBe("", "window " + window.toString());
      expect(digest(windowed.mesh!)).toBe(expected, "window " + window.toString());
    }
  });

  it("reports a source that stops early at the offset where it stopped", () => {
    const text = String.UTF8.encode(`{"workloads": [], "services": []}`);
    const doc = parseMeshSource(new TruncatedSource(text, 20), [], new MeshLimits(), 16, 4);
    expect(doc.error).toBe("byte 20: configuration could not be read past this offset");
  });
});

/** Serves only the first `stop` bytes of `bytes`, as a host that fails part way would. */
class TruncatedSource extends MemorySource {
  constructor(bytes: ArrayBuffer, private stop: i32) {
    super(bytes);
  }

  read(start: i32, length: i32, dest: usize): i32 {
    if (start >= this.stop) return 0;
    return super.read(start, min(length, this.stop - start), dest);
  }
}

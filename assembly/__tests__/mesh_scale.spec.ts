import { Address, Mesh, parseMeshConfigString, parseSocketAddressString } from "../mesh";

const PODS = 100000;
const SERVICES = 100; // 100 endpoints each

function podIp(i: i32): string {
  return "10." + ((i >> 16) & 255).toString() + "." + ((i >> 8) & 255).toString() + "." + (i & 255).toString();
}

/** Shaped like a cluster: shared identities and localities; 100 services of 100 endpoints. */
function bigConfig(): string {
  const parts = new Array<string>();
  parts.push('{"workloads": [');
  for (let i = 0; i < PODS; i++) {
    if (i > 0) parts.push(",");
    parts.push('{"uid":"w' + i.toString() + '","addresses":["' + podIp(i) + '"],"tlsMode":"istio"');
    parts.push(',"identity":"spiffe://td/ns/n/sa/s' + (i % 100).toString() + '"');
    parts.push(',"locality":"r/z' + (i % 3).toString() + '"}');
  }
  parts.push('], "services": [');
  for (let s = 0; s < SERVICES; s++) {
    if (s > 0) parts.push(",");
    parts.push('{"hostname": "svc' + s.toString() + '.default.svc.cluster.local"');
    parts.push(', "vips": [{"address": "10.96.' + (s >> 8).toString() + "." + (s & 255).toString() + '"}]');
    parts.push(', "ports": {"80": 8080}, "endpoints": [');
    for (let e = 0; e < 100; e++) {
      if (e > 0) parts.push(",");
      parts.push('{"workload":"w' + (s * 100 + e).toString() + '"}');
    }
    parts.push("]}");
  }
  parts.push("]}");
  return parts.join("");
}

let built: Mesh | null = null;

function big(): Mesh {
  let m = built;
  if (m === null) {
    const result = parseMeshConfigString(bigConfig());
    expect(result.error).toBe("");
    m = result.mesh;
    if (m === null) return new Mesh();
    built = m;
  }
  return m;
}

describe("a 100k-workload mesh", () => {
  it("parses", () => {
    const m = big();
    expect(m.workloadCount()).toBe(PODS);
    expect(m.serviceCount()).toBe(SERVICES);
    // Interning: 100 identities (+ ""), 3 localities (+ "").
    expect(m.identities.size).toBe(101);
    expect(m.localities.size).toBe(4);
  });

  it("finds every pod by its address and reads its fields", () => {
    const m = big();
    const a = new Address();
    let wrong = 0;
    for (let i = 0; i < PODS; i++) {
      a.setV4((10 << 24) | <u32>i);
      const w = m.workloadByAddress(0, a);
      if (w != i || !m.workloadIstio(w) || m.workloadIdentityId(w) != (i % 100) + 1) wrong++;
    }
    expect(wrong).toBe(0);
    a.setV4((10 << 24) | <u32>PODS);
    expect(m.workloadByAddress(0, a)).toBe(-1);
  });

  it("finds services by VIP and endpoints with their target ports", () => {
    const m = big();
    const a = new Address();
    expect(parseSocketAddressString("10.96.0.99:80", a)).toBe(true);
    const s = m.serviceByVip(0, a);
    expect(s).toBe(99);
    expect(m.endpointCount(s)).toBe(100);
    expect(m.endpointWorkload(s, 99)).toBe(9999);
    expect(m.targetPort(s, 99, a.port)).toBe(8080);
  });

  it("stays within the per-pod memory budget", () => {
    const m = big();
    const perPod = <f64>m.retainedBytes() / <f64>PODS;
    log<string>("mesh retained bytes per pod at 100k pods: " + perPod.toString());
    expect(perPod).toBeLessThan(64.0);
  });
});

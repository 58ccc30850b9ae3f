// The mutable model's pieces on their own: tables with backward-shift deletion, the chunk pool's
// compaction, memberships under churn, and the lookups tunnel_port's client needs computed from
// the memberships (checked against a reference walk over every service's endpoints).
import { parseMeshConfigString } from "../mesh";
import { addMembership, ensureServices, ensureWorkloads, removeService, removeWorkload, setHostname, setPorts, setService, setWorkload } from "../mesh/edit";
import { DEFAULT_CLUSTER, MEM_NEXT, Mesh, PORTS_SCANNED, S_HEADLESS, W_LIVE } from "../mesh/model";
import { ChunkPool } from "../mesh/pool";
import { AddrTable4, AddrTable6, SparseColumn, U64Table } from "../mesh/table";

let seed: u32 = 12345;
function rand(n: i32): i32 {
  seed = seed * 1103515245 + 12345;
  return <i32>((seed >> 8) % <u32>n);
}

describe("tables with deletion", () => {
  it("AddrTable4 stays exact under random insert / remove churn", () => {
    const t = new AddrTable4(0);
    const present = new Map<u32, i32>();
    for (let i = 0; i < 20000; i++) {
      const ip = <u32>rand(3000);
      if (rand(2) == 0) {
        t.ensureRoom(1);
        const r = t.insert(ip, <i32>ip, 1);
        if (!present.has(ip)) present.set(ip, <i32>ip);
        expect(r == -1 || r == <i32>ip).toBe(true);
      } else {
        const removed = t.remove(ip, <i32>ip, 1);
        expect(removed).toBe(present.has(ip));
        if (present.has(ip)) present.delete(ip);
      }
    }
    let bad = 0;
    for (let ip: u32 = 0; ip < 3000; ip++) if ((t.find(ip, 1) >= 0) != present.has(ip)) bad++;
    expect(bad).toBe(0);
    expect(t.size).toBe(present.size);
  });

  it("AddrTable6, U64Table and SparseColumn too", () => {
    const t6 = new AddrTable6(0);
    const u = new U64Table(0);
    const c = new SparseColumn();
    const present = new Set<i32>();
    for (let i = 0; i < 20000; i++) {
      const k = rand(2000);
      if (rand(2) == 0) {
        t6.ensureRoom(1);
        t6.insert(<u64>k, <u64>k * 7, k, 0);
        u.add(<u64>k * 1000003, k);
        c.put(k, <u32>k + 1, 2000);
        present.add(k);
      } else {
        t6.remove(<u64>k, <u64>k * 7, k, 0);
        u.remove(<u64>k * 1000003);
        c.remove(k);
        present.delete(k);
      }
    }
    let bad = 0;
    for (let k = 0; k < 2000; k++) {
      const want = present.has(k);
      if ((t6.find(<u64>k, <u64>k * 7, 0) == k) != want) bad++;
      if ((u.get(<u64>k * 1000003) == k) != want) bad++;
      if ((c.get(k) == <u32>k + 1) != want) bad++;
    }
    expect(bad).toBe(0);
  });
});

describe("ChunkPool", () => {
  it("keeps every live chunk through replacements and compactions; its array stays within 3x live + 128 words", () => {
    const pool = new ChunkPool();
    const lengths = new StaticArray<i32>(100);
    for (let i = 0; i < 5000; i++) {
      const owner = rand(100);
      const n = rand(20);
      if (n == 0) {
        pool.free(owner);
        lengths[owner] = 0;
        continue;
      }
      const at = pool.alloc(owner, n, 100);
      for (let k = 0; k < n; k++) pool.setWord(at + k, <u32>(owner * 1000 + k));
      lengths[owner] = n;
    }
    let bad = 0;
    let live = 0;
    for (let owner = 0; owner < 100; owner++) {
      const n = lengths[owner];
      live += n > 0 ? n + 2 : 0;
      if (pool.capacityOf(owner) != n) bad++;
      const at = pool.offset(owner);
      for (let k = 0; k < n; k++) if (pool.word(at + k) != <u32>(owner * 1000 + k)) bad++;
    }
    expect(bad).toBe(0);
    // It doubles only when, after any compaction, at least 2/3 of the used words are live.
    expect(pool.words.length).toBeLessThanOrEqual(3 * live + 128 + 2 * 22);
    expect(pool.usedWords()).toBeLessThanOrEqual(pool.words.length);
  });
});

describe("memberships under churn", () => {
  it("every membership stays findable from both sides", () => {
    const r = parseMeshConfigString(`{"workloads": [], "services": []}`);
    const m = r.mesh!;
    ensureWorkloads(m, 200);
    ensureServices(m, 10);
    for (let s = 0; s < 10; s++) setService(m, s, 0, -1, 0);
    for (let i = 0; i < 20000; i++) {
      const w = rand(200);
      const op = rand(10);
      if (op < 6) {
        removeWorkload(m, w);
        setWorkload(m, w, W_LIVE, 0, 0);
        const a = rand(10);
        addMembership(m, w, a);
        if (rand(2) == 0) addMembership(m, w, (a + 1 + rand(9)) % 10);
      } else if (op < 9) {
        removeWorkload(m, w);
      } else {
        const s = rand(10);
        removeService(m, s);
        setService(m, s, 0, -1, 0);
      }
    }
    let bad = 0;
    let total = 0;
    for (let s = 0; s < 10; s++) {
      for (let e = 0; e < m.endpointCount(s); e++) {
        const w = m.endpointWorkload(s, e);
        const g = m.membershipOf(w, s);
        if (!m.workloadLive(w) || g < 0 || m.membershipIndex(g) != e || m.globalEndpointWorkload(g) != w) bad++;
        total++;
      }
    }
    for (let w = 0; w < 200; w++) {
      for (let g = m.firstMembership(w); g >= 0; g = m.nextMembership(g)) {
        if (m.endpointWorkload(m.membershipService(g), m.membershipIndex(g)) != w) bad++;
        total--;
      }
    }
    expect(bad).toBe(0);
    expect(total).toBe(0);
    expect(m.memLive).toBe(m.memTotal - freeCount(m));
  });
});

function freeCount(m: Mesh): i32 {
  let n = 0;
  for (let g = m.memFree - 1; g >= 0 && n <= m.memTotal; g = <i32>m.mem3(g, MEM_NEXT) - 1) n++;
  return n;
}

/** The reference: the first service (by id) whose port maps w to `target`, over every endpoint. */
function slowServicePort(m: Mesh, w: i32, target: i32): i32 {
  for (let s = 0; s < m.serviceCount(); s++) {
    for (let e = 0; e < m.endpointCount(s); e++) {
      if (m.endpointWorkload(s, e) != w) continue;
      for (let i = 0; i < m.servicePortCount(s); i++) {
        const port = m.servicePortAt(s, i);
        if (m.targetPort(s, e, port) == target) return port;
      }
    }
  }
  return -1;
}

function slowMaps(m: Mesh, w: i32, servicePort: i32, target: i32): bool {
  for (let s = 0; s < m.serviceCount(); s++) {
    if (!m.exposesPort(s, servicePort)) continue;
    for (let e = 0; e < m.endpointCount(s); e++) {
      if (m.endpointWorkload(s, e) == w && m.targetPort(s, e, servicePort) == target) return true;
    }
  }
  return false;
}

describe("tunnel_port's lookups from the memberships", () => {
  it("servicePortForTarget / mapsPort / servesAnyPort answer what a walk over every endpoint does", () => {
    const parts = new Array<string>();
    for (let i = 0; i < 30; i++) parts.push(`{"uid": "w${i}", "addresses": ["10.0.0.${i}"]}`);
    const services = new Array<string>();
    for (let s = 0; s < 6; s++) {
      const eps = new Array<string>();
      for (let i = s; i < 30; i += 1 + s) eps.push(i % 4 == 0 ? `{"workload": "w${i}", "ports": {"80": ${9000 + s}}}` : `{"workload": "w${i}"}`);
      services.push(`{"hostname": "s${s}.x", "ports": {"80": ${8000 + (s % 3)}, "443": 8443}, "endpoints": [${eps.join(",")}]}`);
    }
    const r = parseMeshConfigString(`{"workloads": [${parts.join(",")}], "services": [${services.join(",")}]}`);
    expect(r.error).toBe("");
    const m = r.mesh!;
    let bad = 0;
    const targets: i32[] = [8000, 8001, 8002, 8443, 9000, 9001, 9002, 9003, 9004, 9005, 7];
    for (let w = 0; w < 30; w++) {
      for (let k = 0; k < targets.length; k++) {
        const t = targets[k];
        if (slowServicePort(m, w, t) != m.servicePortForTarget(w, t)) bad++;
        if (slowMaps(m, w, 80, t) != m.mapsPort(w, 80, t) || slowMaps(m, w, 443, t) != m.mapsPort(w, 443, t)) bad++;
      }
      // Every w here is an endpoint of s0 (every pod from 0 in steps of 1), so each serves a port.
      if (!m.servesAnyPort(w)) bad++;
    }
    expect(m.servesAnyPort(-1)).toBe(false);
    expect(bad).toBe(0);
  });
});

/** The reference: the lowest headless service id listing w with a port whose target for w is `target`. */
function slowHeadless(m: Mesh, w: i32, target: i32): i32 {
  for (let s = 0; s < m.serviceCount(); s++) {
    if (!m.serviceHeadless(s)) continue;
    for (let e = 0; e < m.endpointCount(s); e++) {
      if (m.endpointWorkload(s, e) != w) continue;
      for (let i = 0; i < m.servicePortCount(s); i++) {
        if (m.targetPort(s, e, m.servicePortAt(s, i)) == target) return s;
      }
    }
  }
  return -1;
}

describe("headless lookups under churn", () => {
  // headlessMatch skips workloads whose wHeadless bit is clear; the bit must be set however the
  // membership and the service's headless flag came in: membership first, then the service
  // turning headless with its members kept (a service upsert), or members added to a service id
  // that is not live yet (allowed inside one delta message).
  it("headlessServiceOf answers what a walk over every headless service's endpoints does", () => {
    const r = parseMeshConfigString(`{"workloads": [], "services": []}`);
    const m = r.mesh!;
    const W = 150;
    const S = 12;
    ensureWorkloads(m, W);
    ensureServices(m, S);
    const ports: u32[] = [(80 << 16) | 8080, (5432 << 16) | 5432];
    const moved: u32[] = [(80 << 16) | 9000];
    for (let s = 0; s < S; s++) {
      setService(m, s, s % 3 == 0 ? S_HEADLESS : 0, -1, 0);
      setPorts(m, s, ports, DEFAULT_CLUSTER);
    }
    let bad = 0;
    let headlessHits = 0;
    for (let i = 0; i < 6000; i++) {
      const op = rand(20);
      if (op < 10) {
        const w = rand(W);
        removeWorkload(m, w);
        setWorkload(m, w, W_LIVE, 0, 0);
        // Never twice in one service (the JSON and binary checks refuse duplicate endpoints).
        const a = rand(S);
        addMembership(m, w, a, rand(4) == 0 ? moved : null);
        if (rand(2) == 0) addMembership(m, w, (a + 1 + rand(S - 1)) % S);
      } else if (op < 13) {
        removeWorkload(m, rand(W));
      } else if (op < 18) {
        // Upsert: the flag flips, the members stay.
        const s = rand(S);
        setService(m, s, rand(2) == 0 ? S_HEADLESS : 0, -1, 0);
      } else {
        const s = rand(S);
        removeService(m, s);
        // Members join the dead id first, then it comes back (headless or not) with its ports.
        for (let k = 0; k < 3; k++) {
          const w = rand(W);
          if (m.workloadLive(w) && m.membershipOf(w, s) < 0) addMembership(m, w, s);
        }
        setService(m, s, rand(2) == 0 ? S_HEADLESS : 0, -1, 0);
        setPorts(m, s, ports, DEFAULT_CLUSTER);
      }
      if (i % 500 == 499) {
        const targets: i32[] = [8080, 5432, 9000, 7];
        for (let w = 0; w < W; w++) {
          for (let k = 0; k < targets.length; k++) {
            const want = slowHeadless(m, w, targets[k]);
            if (want >= 0) headlessHits++;
            if (m.headlessServiceOf(w, targets[k]) != want) bad++;
          }
        }
      }
    }
    expect(bad).toBe(0);
    expect(headlessHits).toBeGreaterThan(100);
  });
});

describe("service ports: short lists scanned, long lists indexed", () => {
  it("every port is found, with its target and cluster name, whatever the list's length, through replacements", () => {
    const r = parseMeshConfigString(`{"workloads": [], "services": []}`);
    const m = r.mesh!;
    const S = 40;
    ensureServices(m, S);
    let seed: u32 = 7;
    let bad = 0;
    for (let round = 0; round < 3; round++) {
      for (let s = 0; s < S; s++) {
        // Lengths on both sides of PORTS_SCANNED, and a service moving across it between rounds.
        const n = (s + round * 7) % (PORTS_SCANNED * 3);
        const ports = new Array<u32>();
        const base = <u32>(1000 + round * 3000 + s * 50);
        for (let i = 0; i < n; i++) ports.push(((base + <u32>i * 2) << 16) | (base + <u32>i * 2 + 1));
        setService(m, s, 0, -1, 0);
        setHostname(m, s, "svc-" + s.toString() + "-" + round.toString() + ".default.svc.cluster.local");
        setPorts(m, s, ports, DEFAULT_CLUSTER);
      }
      for (let s = 0; s < S; s++) {
        const n = (s + round * 7) % (PORTS_SCANNED * 3);
        const base = 1000 + round * 3000 + s * 50;
        for (let i = 0; i < n; i++) {
          const port = base + i * 2;
          if (m.serviceTargetPort(s, port) != port + 1) bad++;
          const name = m.clusterName(s, port);
          const want = "outbound|" + port.toString() + "||svc-" + s.toString() + "-" + round.toString() + ".default.svc.cluster.local";
          if (name === null || String.UTF8.decode(name) != want) bad++;
          if (m.exposesPort(s, port + 1)) bad++; // a target port, not a service port
        }
        // The previous round's ports are gone.
        if (round > 0 && m.exposesPort(s, 1000 + (round - 1) * 3000 + s * 50)) bad++;
        seed = seed * 1103515245 + 12345;
      }
    }
    expect(bad).toBe(0);
  });
});

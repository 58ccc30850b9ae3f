// The mesh model's update path: binary full and delta messages applied in place.
// The oracle for a delta is a full load of the state it should produce (a second VM), and the
// oracle for a full load is the JSON build of the same snapshot: all three must read back the
// same model (digestUtf8 in assembly/mesh/bench/entry.ts lists everything the API answers).
import { strict as assert } from "node:assert";
import { before, describe, it } from "node:test";
import { MeshVm } from "../../bench/scale/mesh_vm.ts";
import { encodeMessage, HEADER_BYTES, KIND, RECORD_WORKLOAD_COMPACT, SCOPE, WireRecord, WireService, WireWorkload } from "../support/mesh_wire.ts";

const EPOCH = 7n;

/** A small but complete snapshot: two networks, refs, a gateway-only workload, IPv6, headless. */
function sampleServices(): WireService[] {
  return [
    {
      id: 0,
      hostname: "web.default.svc.cluster.local",
      ports: [[80, 8080], [443, 8443]],
      vips: [{ address: "10.96.0.10" }, { network: "net1", address: "fd00:96::10" }],
      sans: ["spiffe://cluster.local/ns/default/sa/web"],
      waypoint: { hostname: "waypoint.default.svc.cluster.local", port: 15008 },
    },
    { id: 1, hostname: "waypoint.default.svc.cluster.local", ports: [[15008, 15008]], vips: [{ address: "10.96.0.11" }] },
    { id: 2, hostname: "db.default.svc.cluster.local", headless: true, ports: [[5432, 5432], [9000, 9001]], lbStandard: true, lbPrefs: SCOPE.zone | (SCOPE.network << 8) },
    { id: 3, hostname: "ext.example.com", cluster: "outbound|443||ext.example.com", ports: [[443, 443]] },
  ];
}

function sampleWorkloads(): WireWorkload[] {
  return [
    {
      id: 0,
      istio: true,
      identity: "spiffe://cluster.local/ns/default/sa/web",
      locality: "us-east1/us-east1-b/rack1",
      addresses: ["10.0.0.1", "fd00::1"],
      memberships: [{ service: 0 }, { service: 2, overrides: [[5432, 6432]] }],
    },
    { id: 1, addresses: ["10.0.0.2", "10.0.1.2"], locality: "us-east1", memberships: [{ service: 0, overrides: [[80, 9090]] }] },
    { id: 2, network: "net1", istio: true, identity: "spiffe://cluster.local/ns/default/sa/db", addresses: ["10.0.0.1"], waypoint: { address: "10.96.0.11", port: 15009 }, memberships: [{ service: 2 }] },
    { id: 3, network: "net2", addresses: [], gateway: { address: "192.0.2.1", port: 15443 }, healthy: false },
    { id: 4, addresses: ["10.0.0.4"], memberships: [{ service: 1 }] },
  ];
}

function fullMessage(workloads: WireWorkload[], services: WireService[], version: bigint, limits = [16, 8]): Uint8Array {
  const records: WireRecord[] = [...workloads.map((workload) => ({ workload })), ...services.map((service) => ({ service }))];
  return encodeMessage({ kind: KIND.full, epoch: EPOCH, version, workloadIdLimit: limits[0], serviceIdLimit: limits[1], records });
}

function delta(base: bigint, version: bigint, records: WireRecord[], limits = [16, 8]): Uint8Array {
  return encodeMessage({ kind: KIND.delta, epoch: EPOCH, baseVersion: base, version, workloadIdLimit: limits[0], serviceIdLimit: limits[1], records });
}

/** The same snapshot in the JSON configuration form (ids = positions; uids made up). */
function asJson(workloads: WireWorkload[], services: WireService[]): string {
  const ref = (r: { address?: string; hostname?: string; port: number }, portName: string) =>
    r.hostname !== undefined ? { hostname: r.hostname, [portName]: r.port } : { address: r.address, [portName]: r.port };
  const scopes = ["", "network", "region", "zone", "subzone"];
  return JSON.stringify({
    workloads: workloads.map((w) => ({
      uid: `w${w.id}`,
      addresses: w.addresses,
      ...(w.network ? { network: w.network } : {}),
      ...(w.identity ? { identity: w.identity } : {}),
      tlsMode: w.istio ? "istio" : "disabled",
      healthy: w.healthy !== false,
      ...(w.locality ? { locality: w.locality } : {}),
      ...(w.waypoint ? { waypoint: ref(w.waypoint, "port") } : {}),
      ...(w.gateway ? { networkGateway: ref(w.gateway, "hboneMtlsPort") } : {}),
    })),
    services: services.map((s) => {
      const prefs: string[] = [];
      for (let p = s.lbPrefs ?? 0x04030201, i = 0; i < 4 && (p & 255) !== 0; i++, p >>>= 8) prefs.push(scopes[p & 255]);
      return {
        hostname: s.hostname,
        ...(s.headless ? { headless: true } : {}),
        ...(s.cluster !== undefined ? { cluster: s.cluster } : {}),
        ports: Object.fromEntries((s.ports ?? []).map(([p, t]) => [String(p), t])),
        vips: (s.vips ?? []).map((v) => ({ network: v.network ?? "", address: v.address })),
        endpoints: workloads
          .filter((w) => (w.memberships ?? []).some((m) => m.service === s.id))
          .map((w) => {
            const m = w.memberships!.find((x) => x.service === s.id)!;
            return { workload: `w${w.id}`, ...(m.overrides?.length ? { ports: Object.fromEntries(m.overrides.map(([p, t]) => [String(p), t])) } : {}) };
          }),
        ...(s.waypoint ? { waypoint: ref(s.waypoint, "port") } : {}),
        subjectAltNames: s.sans ?? [],
        loadBalancing: { routingPreference: prefs, mode: s.lbStandard ? "standard" : "failover" },
      };
    }),
  });
}

let vm: MeshVm;
let oracle: MeshVm;

before(async () => {
  vm = await MeshVm.create();
  oracle = await MeshVm.create();
});

describe("full load", () => {
  it("reads back the same model as the JSON build of the same snapshot", () => {
    const w = sampleWorkloads();
    const s = sampleServices();
    assert.equal(vm.apply(fullMessage(w, s, 1n)), "");
    assert.ok(oracle.configureJson(asJson(w, s)), "the JSON form is accepted");
    const digest = vm.digest();
    assert.equal(digest, oracle.digest());
    // Spot checks that the digest is about something: the gateway-only workload, headless, refs.
    assert.match(digest, /w3 net=net2 istio=0 healthy=0 .* gw=192\.0\.2\.1:15443->1\/-1/);
    assert.match(digest, /in2:5432=6432h2\/5432:9000=9001h2\/9000/);
    assert.match(digest, /s0 web\.default\.svc\.cluster\.local by=0 .*wp=waypoint\.default\.svc\.cluster\.local:15008->3\/1/);
    assert.equal(vm.version(), 1);
  });
});

describe("full load, format 2: tables and compact workload records", () => {
  function fullInline(workloads: WireWorkload[], services: WireService[], version: bigint): Uint8Array {
    const records: WireRecord[] = [...workloads.map((workload) => ({ workload })), ...services.map((service) => ({ service }))];
    return encodeMessage({ kind: KIND.full, epoch: EPOCH, version, workloadIdLimit: 16, serviceIdLimit: 8, records, fullWorkloads: "inline" });
  }
  /** The compact full message with its first byte `at` of the tables / records found by content. */
  const compact = () => fullMessage(sampleWorkloads(), sampleServices(), 2n);

  it("a compact message and the same records inline read back the same model", () => {
    const c = compact();
    const inline = fullInline(sampleWorkloads(), sampleServices(), 2n);
    assert.ok(Buffer.from(c).includes(Buffer.from([RECORD_WORKLOAD_COMPACT, 0, 0, 0, 0])), "workload 0 is a compact record");
    assert.equal(vm.apply(c), "");
    assert.equal(oracle.apply(inline), "");
    assert.equal(vm.digest(), oracle.digest());
  });

  // Tables: u32 text count at 56, then texts (u16 length + bytes), u32 reference count, references.
  function tables(msg: Uint8Array): { texts: Array<{ at: number; text: string }>; refCountAt: number; recordsAt: number } {
    const b = Buffer.from(msg.buffer, msg.byteOffset, msg.length);
    let p = HEADER_BYTES;
    const n = b.readUInt32LE(p);
    p += 4;
    const texts: Array<{ at: number; text: string }> = [];
    for (let i = 0; i < n; i++) {
      const len = b.readUInt16LE(p);
      texts.push({ at: p, text: b.toString("utf8", p + 2, p + 2 + len) });
      p += 2 + len;
    }
    const refCountAt = p;
    const refs = b.readUInt32LE(p);
    p += 4;
    for (let i = 0; i < refs; i++) {
      p += b[p] === 1 ? 2 + (b[p + 1] === 4 ? 4 : 16) : 3 + b.readUInt16LE(p + 1);
      p += 2;
    }
    return { texts, refCountAt, recordsAt: p };
  }

  const refusals: Array<[string, (m: Uint8Array) => Uint8Array, RegExp]> = [
    [
      "a text that is not UTF-8",
      (m) => {
        const t = tables(m).texts.find((x) => x.text.startsWith("spiffe://"))!;
        m[t.at + 2] = 0xff;
        return m;
      },
      /^tables\.texts\[\d+\]: not valid UTF-8$/,
    ],
    [
      "a text index past the table",
      (m) => {
        // Record 0 is workload 0: type, id, flags, then the network's index.
        const { texts, recordsAt: p } = tables(m);
        assert.equal(m[p], RECORD_WORKLOAD_COMPACT);
        m[p + 6] = texts.length; // one past the last (the table has < 128 texts: one byte)
        return m;
      },
      /^record 0 \(workload upsert id 0\)\.network: text \d+ is not in the table of \d+$/,
    ],
    [
      "an overlong varint",
      (m) => {
        const { recordsAt: p } = tables(m);
        // 0x80 0x00 is 0 written in two bytes: the message grows by one byte.
        const b = Buffer.from(m);
        const out = Buffer.concat([b.subarray(0, p + 6), Buffer.from([b[p + 6] | 0x80, 0x00]), b.subarray(p + 7)]);
        out.writeUInt32LE(out.length - HEADER_BYTES, 44);
        return new Uint8Array(out);
      },
      /^record 0 \(workload upsert id 0\)\.network: overlong varint$/,
    ],
    [
      "an identity text that is not an identity, named at the first record using it",
      (m) => {
        const t = tables(m).texts.find((x) => x.text === "spiffe://cluster.local/ns/default/sa/db")!;
        m[t.at + 2] = "x".charCodeAt(0);
        return m;
      },
      /^record \d+ \(workload upsert id 2\)\.identity: not a SPIFFE identity .*"xpiffe:\/\/cluster\.local\/ns\/default\/sa\/db"$/,
    ],
    [
      "a reference count past the end",
      (m) => {
        Buffer.from(m.buffer, m.byteOffset, m.length).writeUInt32LE(60_000, tables(m).refCountAt);
        return m;
      },
      /^tables\.refCount: 60000 references cannot fit in the message$/,
    ],
    [
      "a text count over the limit",
      (m) => {
        Buffer.from(m.buffer, m.byteOffset, m.length).writeUInt32LE(0xffffffff, HEADER_BYTES);
        return m;
      },
      /^tables\.textCount: 4294967295 texts exceed the limit of 1048576$/,
    ],
  ];
  for (const [name, damage, expected] of refusals) {
    it(`refuses ${name}, naming it, and keeps the model`, () => {
      vm.reset();
      assert.equal(vm.apply(fullMessage(sampleWorkloads(), sampleServices(), 1n)), "");
      const before = vm.digest();
      assert.match(vm.apply(damage(compact())), expected);
      assert.equal(vm.digest(), before);
    });
  }

  it("refuses a compact record in a delta (a delta has no tables)", () => {
    vm.reset();
    assert.equal(vm.apply(fullMessage(sampleWorkloads(), sampleServices(), 1n)), "");
    const before = vm.digest();
    const d = Buffer.from(delta(1n, 2n, [{ workload: { id: 9, addresses: ["10.9.0.1"] } }]));
    d[HEADER_BYTES] = RECORD_WORKLOAD_COMPACT;
    assert.match(vm.apply(d), /^record 0 \(workload upsert id 9\)\.type: 5 \(compact workload upsert\) is only valid in a full message$/);
    assert.equal(vm.digest(), before);
  });

  it("every truncation of a compact full message is refused with a named field, never traps", () => {
    vm.reset();
    assert.equal(vm.apply(fullMessage(sampleWorkloads(), sampleServices(), 1n)), "");
    const before = vm.digest();
    const c = compact();
    for (let n = 0; n < c.length; n++) {
      const bytes = c.slice(0, n);
      // A consistent header for the shorter body, so the refusal comes from the tables or records.
      if (n >= HEADER_BYTES) Buffer.from(bytes.buffer).writeUInt32LE(n - HEADER_BYTES, 44);
      const error = vm.apply(bytes);
      assert.match(error, /^(header|tables|record \d+ \([a-z0-9 ]+( id \d+)?\))(\.[A-Za-z\[\]0-9.]+)?: ./, `truncated at ${n}: ${error}`);
      assert.equal(vm.digest(), before);
    }
  });
});

describe("delta", () => {
  it("pod churn, service changes and id reuse match a full load of the resulting state", () => {
    const workloads = new Map<number, WireWorkload>(sampleWorkloads().map((w) => [w.id, w]));
    const services = new Map<number, WireService>(sampleServices().map((s) => [s.id, s]));
    assert.equal(vm.apply(fullMessage([...workloads.values()], [...services.values()], 1n)), "");
    let version = 1n;
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    let nextIp = 100;
    const freshWorkload = (id: number): WireWorkload => {
      const live = [...services.keys()];
      const memberships = live.length && rand(4) > 0 ? [{ service: live[rand(live.length)], ...(rand(5) === 0 ? { overrides: [[80, 7000 + rand(100)] as [number, number]] } : {}) }] : [];
      const ip = nextIp++;
      return {
        id,
        istio: rand(2) === 0,
        identity: `spiffe://cluster.local/ns/ns${rand(3)}/sa/sa${rand(5)}`,
        locality: ["", "r1", "r1/z1", "r1/z2/s1"][rand(4)],
        network: ["", "", "net1"][rand(3)],
        addresses: rand(6) === 0 ? [`10.1.${ip >> 8 & 255}.${ip & 255}`, `fd00::${ip.toString(16)}`] : [`10.1.${ip >> 8 & 255}.${ip & 255}`],
        memberships,
      };
    };
    for (let batch = 0; batch < 60; batch++) {
      const records: WireRecord[] = [];
      const changes = 1 + rand(12);
      for (let c = 0; c < changes; c++) {
        const op = rand(10);
        if (op < 5) {
          const id = rand(16);
          const w = freshWorkload(id);
          workloads.set(id, w);
          records.push({ workload: w });
        } else if (op < 8) {
          const id = rand(16);
          workloads.delete(id);
          records.push({ removeWorkload: id });
        } else if (op < 9) {
          const id = rand(8);
          const s: WireService = { id, hostname: `svc${id}-${batch}.ns.svc.cluster.local`, headless: rand(2) === 0, ports: [[80, 8000 + rand(10)]], vips: [{ address: `10.97.${batch}.${id}` }] };
          services.set(id, s);
          records.push({ service: s });
        } else {
          const id = rand(8);
          services.delete(id);
          records.push({ removeService: id });
          // The service's memberships go with it (the model drops them).
          for (const w of workloads.values()) w.memberships = (w.memberships ?? []).filter((m) => m.service !== id);
        }
      }
      // Memberships named in this batch must point at services live after it: drop the others
      // from the records (a feed never sends them; the refusal is tested below).
      for (const r of records) if ("workload" in r) r.workload.memberships = (r.workload.memberships ?? []).filter((m) => services.has(m.service));
      const next = version + 1n;
      assert.equal(vm.apply(delta(version, next, records)), "", `batch ${batch}`);
      version = next;
      oracle.reset();
      assert.equal(oracle.apply(fullMessage([...workloads.values()], [...services.values()], version)), "");
      assert.equal(vm.digest(), oracle.digest(), `batch ${batch}`);
    }
    assert.equal(vm.version(), Number(version));
  });

  it("an address can move between workloads and an id can be reused within one message", () => {
    const w = sampleWorkloads();
    const s = sampleServices();
    vm.reset();
    assert.equal(vm.apply(fullMessage(w, s, 1n)), "");
    const records: WireRecord[] = [
      { workload: { id: 4, addresses: ["10.0.0.99"] } }, // frees 10.0.0.4
      { workload: { id: 5, addresses: ["10.0.0.4"], memberships: [{ service: 1 }] } },
      { removeWorkload: 1 },
      { workload: { id: 1, addresses: ["10.0.0.2"], memberships: [{ service: 3 }] } }, // id 1 reused
      { removeService: 3 },
      { service: { id: 3, hostname: "ext2.example.com", ports: [[443, 443]] } }, // service id 3 reused
    ];
    assert.equal(vm.apply(delta(1n, 2n, records)), "");
    const digest = vm.digest();
    assert.equal(vm.workloadByV4(0, 0x0a000004), 5);
    assert.equal(vm.workloadByV4(0, 0x0a000063), 4);
    assert.match(digest, /w1 .* 10\.0\.0\.2->1 in3:443=443/);
    assert.match(digest, /s3 ext2\.example\.com by=3 .* eps=1/);
  });
});

describe("refusals leave the model untouched and name the field", () => {
  const cases: Array<[string, (base: bigint) => Uint8Array, RegExp]> = [
    ["identity required", (b) => delta(b, b + 1n, [{ workload: { id: 9, istio: true, addresses: ["10.9.0.1"] } }]), /^record 0 \(workload upsert id 9\)\.identity: required when tlsMode is istio$/],
    ["bad identity", (b) => delta(b, b + 1n, [{ workload: { id: 9, identity: "spiffe://td/ns/x", addresses: ["10.9.0.1"] } }]), /^record 0 \(workload upsert id 9\)\.identity: not a SPIFFE identity/],
    ["address clash", (b) => delta(b, b + 1n, [{ workload: { id: 9, addresses: ["10.9.0.1"] } }, { workload: { id: 10, addresses: ["10.0.0.2"] } }]), /^record 1 \(workload upsert id 10\)\.addresses\[0\]: address 10\.0\.0\.2 on network "" is already used by workload 1$/],
    ["membership of a removed service", (b) => delta(b, b + 1n, [{ removeService: 1 }, { workload: { id: 9, addresses: ["10.9.0.1"], memberships: [{ service: 1 }] } }]), /^record 1 \(workload upsert id 9\)\.memberships\[0\]\.service: service 1 is not live after this message$/],
    ["VIP clash", (b) => delta(b, b + 1n, [{ service: { id: 5, hostname: "x.example.com", vips: [{ address: "10.96.0.10" }] } }]), /^record 0 \(service upsert id 5\)\.vips\[0\]\.address: VIP 10\.96\.0\.10 is already used by service 0$/],
    ["hostname clash", (b) => delta(b, b + 1n, [{ service: { id: 5, hostname: "web.default.svc.cluster.local" } }]), /^record 0 \(service upsert id 5\)\.hostname: duplicate hostname/],
    ["id over the limit", (b) => delta(b, b + 1n, [{ removeWorkload: 16 }]), /^record 0 \(workload remove id 16\)\.id: not below the workload id limit 16$/],
    ["wrong base version", (b) => delta(b + 5n, b + 6n, []), /^header\.baseVersion: delta from version \d+, but the model is at version \d+$/],
  ];
  for (const [name, make, expected] of cases) {
    it(name, () => {
      vm.reset();
      assert.equal(vm.apply(fullMessage(sampleWorkloads(), sampleServices(), 3n)), "");
      const before = vm.digest();
      const error = vm.apply(make(3n));
      assert.match(error, expected);
      assert.equal(vm.digest(), before);
      assert.equal(vm.version(), 3);
    });
  }

  it("every truncation and every single-byte corruption of a delta is refused or applied, never traps", () => {
    vm.reset();
    const full = fullMessage(sampleWorkloads(), sampleServices(), 3n);
    assert.equal(vm.apply(full), "");
    const good = delta(3n, 4n, [
      { workload: { id: 9, istio: true, identity: "spiffe://cluster.local/ns/a/sa/b", waypoint: { hostname: "waypoint.default.svc.cluster.local", port: 15008 }, addresses: ["10.9.0.1", "fd00::9"], memberships: [{ service: 2, overrides: [[5432, 1]] }] } },
      { service: { id: 6, hostname: "new.example.com", cluster: "c", ports: [[1, 2]], vips: [{ network: "n", address: "fd00::66" }], sans: ["a"], waypoint: { address: "10.0.0.1", port: 1 } } },
      { removeWorkload: 4 },
    ]);
    const before = vm.digest();
    for (let n = 0; n < good.length; n++) {
      const error = vm.apply(good.subarray(0, n));
      assert.match(error, /^(header|record \d+ \([a-z ]+( id \d+)?\))(\.[A-Za-z\[\]0-9.]+)?: ./, `truncated at ${n}: ${error}`);
      assert.equal(vm.digest(), before);
    }
    let applied = 0;
    for (let i = 0; i < good.length; i++) {
      for (const flip of [0x01, 0x80, 0xff]) {
        const bad = good.slice();
        bad[i] ^= flip;
        const error = vm.apply(bad);
        if (error === "") {
          applied++;
          vm.reset();
          assert.equal(vm.apply(full), "");
        } else {
          assert.match(error, /^(header|record \d+ \([a-z0-9 ]+( id \d+)?\))(\.[A-Za-z\[\]0-9.]+)?: ./, `byte ${i} ^ ${flip}: ${error}`);
          assert.equal(vm.digest(), before, `byte ${i} ^ ${flip} changed the model: ${error}`);
        }
      }
    }
    assert.ok(applied > 0, "some corruptions are still valid messages (texts, ports)");
    assert.equal(vm.apply(good), "");
  });
});

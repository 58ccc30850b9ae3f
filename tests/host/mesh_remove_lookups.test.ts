// A service remove touches every index that can name the service: its hostname, its VIPs, its
// ports, its member list and its members' memberships. The hostname index reclaims a removed
// service's entry later (a later delta, a bounded number per message), and a removed service
// with a few VIPs and SANs keeps them (VIP table entries, SAN slots) until a later delta or its
// own re-upsert releases them (RetiredServices), so these tests check
// that the lookups answer at once as they did when every index was cleared in the remove itself:
// the removed service is gone from every lookup, a later or same-message upsert of the same id
// or hostname answers again, and the model reads back exactly what a full load of the same state
// does (the digest asks every live service's hostname and VIPs back).
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { MeshVm } from "../../bench/scale/mesh_vm.ts";
import { EPOCH, full, manyMembershipsWorkload, MAX_LIST, plainServices, servicesWithVipAndSan } from "../support/mesh_crafted.ts";
import { encodeMessage, KIND, type WireRecord, type WireService, type WireWorkload } from "../support/mesh_wire.ts";

const LIMITS: [number, number] = [16, 16];

function service(id: number, hostname: string, vip: string): WireService {
  return { id, hostname, ports: [[80, 8000 + id]], vips: [{ address: vip }] };
}

const pod = (id: number, services: number[]): WireWorkload => ({
  id,
  identity: `spiffe://td/ns/n/sa/p${id}`,
  istio: true,
  addresses: [`10.1.0.${id + 1}`],
  memberships: services.map((s) => ({ service: s })),
});

function deltaAt(version: number, records: WireRecord[]): Uint8Array {
  return encodeMessage({ kind: KIND.delta, epoch: EPOCH, baseVersion: BigInt(version), version: BigInt(version + 1), workloadIdLimit: LIMITS[0], serviceIdLimit: LIMITS[1], records });
}

/** The digest a fresh full load of exactly these records reads back. */
async function fullDigest(records: WireRecord[]): Promise<string> {
  const vm = await MeshVm.create();
  assert.equal(vm.apply(full(records, 1n, LIMITS)), "");
  return vm.digest();
}

const BASE: WireRecord[] = [
  { service: service(0, "a.ns.svc", "10.96.0.1") },
  { service: service(1, "b.ns.svc", "10.96.0.2") },
  { service: service(2, "c.ns.svc", "10.96.0.3") },
  { workload: pod(0, [0, 1, 2]) },
  { workload: pod(1, [1]) },
];

async function base(): Promise<MeshVm> {
  const vm = await MeshVm.create();
  assert.equal(vm.apply(full(BASE, 1n, LIMITS)), "");
  return vm;
}

function assertService(vm: MeshVm, id: number, hostname: string, vip: string): void {
  assert.equal(vm.serviceByHostname(hostname), id, `${hostname} → ${id}`);
  assert.equal(vm.serviceByVip4("", vip), id, `${vip} → ${id}`);
  assert.equal(vm.servicePorts(id), 1);
  assert.equal(vm.serviceTargetPort(id, 80), 8000 + id);
}

function assertGone(vm: MeshVm, id: number, hostname: string, vip: string): void {
  assert.equal(vm.serviceByHostname(hostname), -1, `${hostname} still answers`);
  assert.equal(vm.serviceByVip4("", vip), -1, `${vip} still answers`);
  assert.equal(vm.servicePorts(id), -1, `service ${id} still live`);
  assert.equal(vm.serviceTargetPort(id, 80), -1);
}

describe("lookups after a service remove", () => {
  it("a removed service is gone from the hostname, VIP and port lookups and from its members at once", async () => {
    const vm = await base();
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }])), "");
    assertGone(vm, 1, "b.ns.svc", "10.96.0.2");
    assertService(vm, 0, "a.ns.svc", "10.96.0.1");
    assertService(vm, 2, "c.ns.svc", "10.96.0.3");
    assert.equal(vm.live().memberships, 2, "pod 0 keeps services 0 and 2, pod 1 has none");
    const after = [BASE[0], BASE[2], { workload: pod(0, [0, 2]) }, { workload: pod(1, []) }];
    assert.equal(vm.digest(), await fullDigest(after));
  });

  it("the same id and hostname upserted by the next delta answer again, with no member until one joins", async () => {
    const vm = await base();
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }])), "");
    assert.equal(vm.apply(deltaAt(2, [{ service: service(1, "b.ns.svc", "10.96.0.2") }])), "");
    assertService(vm, 1, "b.ns.svc", "10.96.0.2");
    const after = [BASE[0], BASE[1], BASE[2], { workload: pod(0, [0, 2]) }, { workload: pod(1, []) }];
    assert.equal(vm.digest(), await fullDigest(after));
  });

  it("removed and upserted again in one delta: the upsert is the state, the old members are gone", async () => {
    const vm = await base();
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }, { service: service(1, "b.ns.svc", "10.96.0.2") }])), "");
    assertService(vm, 1, "b.ns.svc", "10.96.0.2");
    const after = [BASE[0], BASE[1], BASE[2], { workload: pod(0, [0, 2]) }, { workload: pod(1, []) }];
    assert.equal(vm.digest(), await fullDigest(after));
  });

  it("a removed service's hostname and VIP taken by another id, in the same delta and in the next one", async () => {
    const vm = await base();
    // Same delta: id 1 goes, id 5 takes its hostname and VIP.
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }, { service: service(5, "b.ns.svc", "10.96.0.2") }])), "");
    assertService(vm, 5, "b.ns.svc", "10.96.0.2");
    assert.equal(vm.servicePorts(1), -1);
    // Next delta: id 5 goes, id 1 comes back with them.
    assert.equal(vm.apply(deltaAt(2, [{ removeService: 5 }])), "");
    assertGone(vm, 5, "b.ns.svc", "10.96.0.2");
    assert.equal(vm.apply(deltaAt(3, [{ service: service(1, "b.ns.svc", "10.96.0.2") }, { workload: pod(1, [1]) }])), "");
    assertService(vm, 1, "b.ns.svc", "10.96.0.2");
    assert.equal(vm.servicePorts(5), -1);
    const after = [BASE[0], BASE[1], BASE[2], { workload: pod(0, [0, 2]) }, { workload: pod(1, [1]) }];
    assert.equal(vm.digest(), await fullDigest(after));
  });

  it("a removed service's id upserted under another hostname: the old hostname stays gone", async () => {
    const vm = await base();
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 2 }])), "");
    assert.equal(vm.apply(deltaAt(2, [{ service: service(2, "renamed.ns.svc", "10.96.0.3") }])), "");
    assertService(vm, 2, "renamed.ns.svc", "10.96.0.3");
    assert.equal(vm.serviceByHostname("c.ns.svc"), -1);
    // An empty hostname never answers (a removed service's text is "").
    assert.equal(vm.serviceByHostname(""), -1);
  });

  it("a port's cluster name built before the remove is let go with it", async () => {
    // The digest asks every port's cluster name, which builds and keeps "outbound|80||<hostname>"
    // in the port's slot. Built before the remove or not, the model after it holds the same.
    const built = await base();
    built.digest();
    assert.equal(built.apply(deltaAt(1, [{ removeService: 1 }])), "");
    const never = await base();
    assert.equal(never.apply(deltaAt(1, [{ removeService: 1 }])), "");
    never.digest();
    assert.equal(built.retainedBytes(), never.retainedBytes());
  });

  it("a removed service's port slot reused: the next owner's port names its own cluster", async () => {
    const vm = await base();
    // The removed service's slot is reused by the next port stored.
    vm.digest();
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }])), "");
    assert.equal(vm.apply(deltaAt(2, [{ service: service(5, "e.ns.svc", "10.96.0.5") }])), "");
    // The same in one delta: the removes are applied before the upserts store their ports.
    vm.digest();
    assert.equal(vm.apply(deltaAt(3, [{ service: service(6, "f.ns.svc", "10.96.0.6") }, { removeService: 2 }])), "");
    const after = [BASE[0], { service: service(5, "e.ns.svc", "10.96.0.5") }, { service: service(6, "f.ns.svc", "10.96.0.6") }, { workload: pod(0, [0]) }, { workload: pod(1, []) }];
    const digest = vm.digest();
    assert.doesNotMatch(digest, /\|\|[bc]\.ns\.svc/);
    assert.equal(digest, await fullDigest(after));
  });

  it("a hostname moved through every id, one delta at a time, answers only its current holder", async () => {
    const vm = await base();
    let version = 1;
    let holder = 1;
    for (let id = 3; id < LIMITS[1]; id++) {
      assert.equal(vm.apply(deltaAt(version++, [{ removeService: holder }, { service: service(id, "b.ns.svc", "10.96.0.2") }])), "");
      holder = id;
      assert.equal(vm.serviceByHostname("b.ns.svc"), holder);
      assert.equal(vm.serviceByVip4("", "10.96.0.2"), holder);
    }
    const after = [BASE[0], BASE[2], { service: service(holder, "b.ns.svc", "10.96.0.2") }, { workload: pod(0, [0, 2]) }, { workload: pod(1, []) }];
    assert.equal(vm.digest(), await fullDigest(after));
  });
});

describe("lookups after 65,535 service removes in one delta (the crafted bench's input)", () => {
  it("every removed hostname is gone at once; later deltas re-add some under old and new ids and they answer", async () => {
    const services = plainServices(MAX_LIST).map((s) => ({ service: s }));
    const vm = await MeshVm.create();
    const limits: [number, number] = [1, MAX_LIST];
    assert.equal(vm.apply(full([...services, { workload: manyMembershipsWorkload(0) }], 1n, limits)), "");
    const removes = encodeMessage({ kind: KIND.delta, epoch: EPOCH, baseVersion: 1n, version: 2n, workloadIdLimit: limits[0], serviceIdLimit: limits[1], records: services.map((s) => ({ removeService: s.service.id })) });
    assert.equal(vm.apply(removes), "");
    assert.deepEqual(vm.live(), { workloads: 1, services: 0, memberships: 0 });
    for (const id of [0, 1, 4_096, 65_534]) assert.equal(vm.serviceByHostname(`s${id}.c`), -1, `s${id}.c still answers`);
    // Small deltas after it (each reclaims a bounded share of the removed entries): the same
    // hostname on its old id, on another id, and a new hostname on an old id.
    let version = 2n;
    const next = (records: WireRecord[]) =>
      encodeMessage({ kind: KIND.delta, epoch: EPOCH, baseVersion: version, version: ++version, workloadIdLimit: limits[0], serviceIdLimit: limits[1], records });
    assert.equal(vm.apply(next([{ service: { id: 7, hostname: "s7.c", ports: [[80, 8080]] } }])), "");
    assert.equal(vm.apply(next([{ service: { id: 9, hostname: "s8.c", ports: [[80, 8080]] } }])), "");
    assert.equal(vm.apply(next([{ service: { id: 8, hostname: "fresh.c", ports: [[80, 8080]] } }])), "");
    for (let k = 0; k < 50; k++) assert.equal(vm.apply(next([])), "");
    assert.equal(vm.serviceByHostname("s7.c"), 7);
    assert.equal(vm.serviceByHostname("s8.c"), 9);
    assert.equal(vm.serviceByHostname("fresh.c"), 8);
    assert.equal(vm.serviceByHostname("s9.c"), -1);
    assert.equal(vm.live().services, 3);
  });
});

/** A service with a VIP per address in `vips` and one SAN. */
function rich(id: number, hostname: string, vips: string[], san: string): WireService {
  return { id, hostname, ports: [[80, 8000 + id]], vips: vips.map((address) => ({ address })), sans: [san] };
}

/** Empty deltas until every removed service's VIPs and SANs are released; the next version. */
function drain(vm: MeshVm, version: number, limits: [number, number] = LIMITS): number {
  for (let k = 0; k < 5_000 && vm.retiredServices() > 0; k++) {
    assert.equal(vm.apply(encodeMessage({ kind: KIND.delta, epoch: EPOCH, baseVersion: BigInt(version), version: BigInt(version + 1), workloadIdLimit: limits[0], serviceIdLimit: limits[1], records: [] })), "");
    version++;
  }
  assert.equal(vm.retiredServices(), 0, "the removed services' VIPs and SANs are all released");
  return version;
}

describe("VIPs and SANs a removed service keeps until a later delta releases them", () => {
  const RICH: WireRecord[] = [
    { service: rich(0, "a.ns.svc", ["10.96.0.1"], "spiffe://td/ns/n/sa/a") },
    { service: rich(1, "b.ns.svc", ["10.96.0.2"], "spiffe://td/ns/n/sa/b") },
    { service: rich(2, "c.ns.svc", ["10.96.0.3"], "spiffe://td/ns/n/sa/c") },
    { workload: pod(0, [0, 1, 2]) },
  ];
  async function richBase(): Promise<MeshVm> {
    const vm = await MeshVm.create();
    assert.equal(vm.apply(full(RICH, 1n, LIMITS)), "");
    return vm;
  }

  it("the VIP misses right after the remove, while its entry is still held", async () => {
    const vm = await richBase();
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }])), "");
    assert.equal(vm.retiredServices(), 1, "service 1's VIP and SAN are kept for later");
    assert.equal(vm.serviceByVip4("", "10.96.0.2"), -1);
    assert.equal(vm.serviceByVip4("", "10.96.0.1"), 0);
    const after = [RICH[0], RICH[2], { workload: pod(0, [0, 2]) }];
    assert.equal(vm.digest(), await fullDigest(after));
    drain(vm, 2);
    assert.equal(vm.serviceByVip4("", "10.96.0.2"), -1);
    assert.equal(vm.digest(), await fullDigest(after));
  });

  it("the same id upserted again with another VIP and SAN: the old VIP stays gone (same delta and next delta)", async () => {
    for (const sameDelta of [true, false]) {
      const vm = await richBase();
      const upsert: WireRecord = { service: rich(1, "b.ns.svc", ["10.96.0.9"], "spiffe://td/ns/n/sa/b2") };
      if (sameDelta) assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }, upsert])), "");
      else {
        assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }])), "");
        assert.equal(vm.apply(deltaAt(2, [upsert])), "");
      }
      assert.equal(vm.serviceByVip4("", "10.96.0.2"), -1, `old VIP answers (same delta: ${sameDelta})`);
      assert.equal(vm.serviceByVip4("", "10.96.0.9"), 1);
      const after = [RICH[0], upsert, RICH[2], { workload: pod(0, [0, 2]) }];
      assert.equal(vm.digest(), await fullDigest(after));
      drain(vm, sameDelta ? 2 : 3);
      assert.equal(vm.serviceByVip4("", "10.96.0.9"), 1, "releasing the old entries leaves the new one");
      assert.equal(vm.digest(), await fullDigest(after));
    }
  });

  it("a VIP re-used by another service in the same delta and in the next one, then back to its first holder", async () => {
    const vm = await richBase();
    // Same delta: 1 goes, 5 takes its VIP (1's entry is still held).
    const five: WireRecord = { service: rich(5, "e.ns.svc", ["10.96.0.2"], "spiffe://td/ns/n/sa/e") };
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 1 }, five])), "");
    assert.equal(vm.serviceByVip4("", "10.96.0.2"), 5);
    // Next delta: 2 goes; the delta after it: 6 takes 2's VIP.
    assert.equal(vm.apply(deltaAt(2, [{ removeService: 2 }])), "");
    assert.equal(vm.serviceByVip4("", "10.96.0.3"), -1);
    const six: WireRecord = { service: rich(6, "f.ns.svc", ["10.96.0.3"], "spiffe://td/ns/n/sa/f") };
    assert.equal(vm.apply(deltaAt(3, [six])), "");
    assert.equal(vm.serviceByVip4("", "10.96.0.3"), 6);
    // The later release of 1's and 2's entries leaves 5's and 6's.
    let version = drain(vm, 4);
    assert.equal(vm.serviceByVip4("", "10.96.0.2"), 5);
    assert.equal(vm.serviceByVip4("", "10.96.0.3"), 6);
    assert.equal(vm.digest(), await fullDigest([RICH[0], five, six, { workload: pod(0, [0]) }]));
    // 5 goes and 1 comes back with the VIP in one delta; a VIP held by a live service is refused.
    assert.equal(vm.apply(deltaAt(version, [{ removeService: 5 }, RICH[1]])), "");
    version++;
    assert.equal(vm.serviceByVip4("", "10.96.0.2"), 1);
    assert.match(vm.apply(deltaAt(version, [{ service: rich(7, "g.ns.svc", ["10.96.0.2"], "spiffe://td/ns/n/sa/g") }])), /VIP 10\.96\.0\.2 is already used by service 1/);
    assert.equal(vm.digest(), await fullDigest([RICH[0], RICH[1], six, { workload: pod(0, [0]) }]));
    drain(vm, version);
    assert.equal(vm.serviceByVip4("", "10.96.0.2"), 1);
    assert.equal(vm.digest(), await fullDigest([RICH[0], RICH[1], six, { workload: pod(0, [0]) }]));
  });

  it("a service with more VIPs than a removed one keeps releases them in the remove itself", async () => {
    const vips = ["10.96.1.1", "10.96.1.2", "10.96.1.3", "10.96.1.4", "10.96.1.5"];
    const vm = await MeshVm.create();
    assert.equal(vm.apply(full([{ service: rich(0, "many.ns.svc", vips, "spiffe://td/ns/n/sa/m") }, { service: rich(1, "b.ns.svc", ["10.96.0.2"], "spiffe://td/ns/n/sa/b") }], 1n, LIMITS)), "");
    assert.equal(vm.apply(deltaAt(1, [{ removeService: 0 }])), "");
    assert.equal(vm.retiredServices(), 0);
    for (const vip of vips) assert.equal(vm.serviceByVip4("", vip), -1);
    assert.equal(vm.apply(deltaAt(2, [{ service: rich(3, "other.ns.svc", vips.slice(1), "spiffe://td/ns/n/sa/o") }])), "");
    for (const vip of vips.slice(1)) assert.equal(vm.serviceByVip4("", vip), 3);
  });
});

describe("lookups after 65,535 removes of services with a VIP and a SAN each (the crafted bench's input)", () => {
  it("every VIP misses at once; re-adds answer; after the release every lookup equals a full load's", async () => {
    const services = servicesWithVipAndSan(MAX_LIST);
    const vipOf = (id: number) => services[id].vips![0].address;
    const limits: [number, number] = [1, MAX_LIST];
    const vm = await MeshVm.create();
    assert.equal(vm.apply(full([...services.map((service) => ({ service })), { workload: manyMembershipsWorkload(0) }], 1n, limits)), "");
    let version = 1n;
    const next = (records: WireRecord[]) =>
      encodeMessage({ kind: KIND.delta, epoch: EPOCH, baseVersion: version, version: ++version, workloadIdLimit: limits[0], serviceIdLimit: limits[1], records });
    assert.equal(vm.apply(next(services.map((s) => ({ removeService: s.id })))), "");
    assert.equal(vm.retiredServices(), MAX_LIST);
    for (let id = 0; id < MAX_LIST; id++) if (vm.serviceByVip4("", vipOf(id)) !== -1) assert.fail(`VIP ${vipOf(id)} still answers`);
    // The same id and VIP; another id on a removed service's VIP; a new VIP on a removed id.
    const readded: WireService[] = [
      { ...services[7] },
      { ...services[9], vips: [{ address: vipOf(8) }], sans: ["spiffe://td/ns/c/sa/moved"] },
      { ...services[8], hostname: "fresh.c", vips: [{ address: "10.200.0.8" }] },
    ];
    for (const s of readded) assert.equal(vm.apply(next([{ service: s }])), "");
    const state: WireRecord[] = [...readded.map((service) => ({ service })), { workload: { ...manyMembershipsWorkload(0), memberships: [] } }];
    const reference = await MeshVm.create();
    assert.equal(reference.apply(full(state, 1n, limits)), "");
    const compare = (when: string) => {
      for (let id = 0; id < MAX_LIST; id++) {
        const got = vm.serviceByVip4("", vipOf(id));
        if (got !== reference.serviceByVip4("", vipOf(id))) assert.fail(`${when}: VIP ${vipOf(id)} → ${got}`);
      }
      assert.equal(vm.serviceByVip4("", "10.200.0.8"), 8);
      assert.equal(vm.digest(), reference.digest());
    };
    compare("before the release");
    assert.equal(vm.serviceByVip4("", vipOf(8)), 9);
    drain(vm, Number(version), limits);
    compare("after the release");
  });
});

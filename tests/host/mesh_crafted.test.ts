// Crafted feed messages against the decoder's cost: the largest lists one record may carry
// (65,535 ports in a service, 65,535 memberships in a workload, each as a full message and as
// a delta, each also with its last entry repeating the first), a header that claims the
// largest id limits with nothing behind them, and a membership of a service the message does
// not define. Each is decoded or refused whole, with a line naming the field; what it costs is
// asserted as VM linear memory (which never shrinks, so it is what the message leaves behind),
// never as time (bench/scale/mesh_crafted.ts times the same inputs against ordinary messages).
// Every case runs in a fresh VM so that growth is the message's own.
import { strict as assert } from "node:assert";
import { describe, it } from "node:test";
import { MeshVm } from "../../bench/scale/mesh_vm.ts";
import {
  danglingFull,
  delta,
  emptyDeltaAtMaxLimits,
  emptyFullAtMaxLimits,
  full,
  manyMembershipsWorkload,
  manyPortsService,
  MAX_LIST,
  plainServices,
  servicesWithVipAndSan,
  smallBase,
  textTableFull,
  upsertAbsentService,
} from "../support/mesh_crafted.ts";

/** One wasm page: what a message that allocates nothing for its claims may still move. */
const PAGE = 65_536;
/**
 * Linear memory per byte of message a list may leave behind: a port or membership costs the
 * model tens of bytes (slot, index entry, cluster name; membership, member list), and the
 * allocator may double linear memory once on top. 64 B per wire byte, + 1 MiB of fixed cost.
 */
const PER_BYTE = 64;
const FIXED = 1 << 20;

async function vmWith(base?: Uint8Array): Promise<MeshVm> {
  const vm = await MeshVm.create();
  if (base !== undefined) assert.equal(vm.apply(base), "", "the base message loads");
  vm.collect();
  return vm;
}

/** Applies `message`; its outcome, the VM's linear memory growth, and its memory before. */
function measure(vm: MeshVm, message: Uint8Array): { error: string; growth: number; before: number } {
  vm.collect();
  const before = vm.memoryBytes();
  const error = vm.apply(message);
  vm.collect();
  return { error, growth: vm.memoryBytes() - before, before };
}

/**
 * The bound on what a message leaves behind: PER_BYTE per byte + FIXED, or, on a VM that already
 * holds a model (`before`), one doubling of its memory, whichever is larger: AssemblyScript's
 * allocator grows linear memory by at least its current size when a block does not fit, so a
 * delta whose scratch (its record index, a few MB for 65,535 records) outgrows the free space
 * doubles memory whatever it holds.
 */
function assertBounded(growth: number, message: Uint8Array, what: string, before = 0): void {
  const bound = Math.max(PER_BYTE * message.length + FIXED, before);
  assert.ok(growth <= bound, `${what}: linear memory grew ${growth} bytes for a ${message.length}-byte message (bound ${bound})`);
}

describe("crafted messages: declared limits", () => {
  it("an empty full message declaring 2,000,000 / 2,000,000 ids loads without reserving for them", async () => {
    const vm = await vmWith();
    const message = emptyFullAtMaxLimits();
    const { error, growth } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 0, services: 0, memberships: 0 });
    // It took 161 MB when the columns were sized from the header's limits.
    assert.ok(growth <= PAGE, `linear memory grew ${growth} bytes for a ${message.length}-byte message`);
  });

  it("a full message whose text table declares the most texts (1,048,576, all empty) costs in proportion to its bytes", async () => {
    const vm = await vmWith();
    const message = textTableFull();
    const { error, growth } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 0, services: 0, memberships: 0 });
    assertBounded(growth, message, "the largest text table");
    // One text more than the table may hold is refused before anything is reserved for it.
    const over = textTableFull(1_048_577);
    assert.equal(vm.apply(over), "tables.textCount: 1048577 texts exceed the limit of 1048576");
  });

  it("an empty delta declaring the same limits does not grow the model's columns to them", async () => {
    const vm = await vmWith(smallBase(1n));
    const before = vm.digest();
    const { error, growth } = measure(vm, emptyDeltaAtMaxLimits(1n));
    assert.equal(error, "");
    assert.equal(vm.digest(), before);
    assert.equal(vm.version(), 2);
    assert.ok(growth <= PAGE, `linear memory grew ${growth} bytes for an empty delta`);
  });
});

describe("crafted messages: 65,535 ports in one service", () => {
  it("as a full message: decoded, every port stored, memory in proportion to the message", async () => {
    const vm = await vmWith();
    const message = full([{ service: manyPortsService(0) }], 1n, [1, 1]);
    const { error, growth } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 0, services: 1, memberships: 0 });
    assert.equal(vm.servicePorts(0), MAX_LIST, "every port is in the model");
    assert.equal(vm.serviceTargetPort(0, MAX_LIST), MAX_LIST);
    assertBounded(growth, message, "65,535 ports, full");
  });

  it("as a delta: decoded on top of the model", async () => {
    const vm = await vmWith(smallBase(1n));
    const message = delta(1n, [{ service: manyPortsService(1) }], [4, 4]);
    const { error, growth } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 1, services: 2, memberships: 1 });
    assert.equal(vm.servicePorts(1), MAX_LIST, "every port is in the model");
    assertBounded(growth, message, "65,535 ports, delta");
  });

  it("the last port repeating the first is refused whole, naming it, full and delta", async () => {
    const fullVm = await vmWith();
    const bad = full([{ service: manyPortsService(0, MAX_LIST, true) }], 1n, [1, 1]);
    const refusedFull = measure(fullVm, bad);
    assert.equal(refusedFull.error, "record 0 (service upsert id 0).ports[65534]: duplicate service port 1");
    assert.deepEqual(fullVm.live(), { workloads: 0, services: 0, memberships: 0 });
    assertBounded(refusedFull.growth, bad, "refused ports, full");

    const deltaVm = await vmWith(smallBase(1n));
    const before = deltaVm.digest();
    const badDelta = delta(1n, [{ service: manyPortsService(1, MAX_LIST, true) }], [4, 4]);
    const refusedDelta = measure(deltaVm, badDelta);
    assert.equal(refusedDelta.error, "record 0 (service upsert id 1).ports[65534]: duplicate service port 1");
    assert.equal(deltaVm.digest(), before, "the refused delta changed nothing");
    assert.equal(deltaVm.version(), 1);
    assertBounded(refusedDelta.growth, badDelta, "refused ports, delta");
  });
});

describe("crafted messages: 65,535 memberships in one workload", () => {
  const services = plainServices(MAX_LIST).map((service) => ({ service }));

  it("as a full message: decoded, every membership stored", async () => {
    const vm = await vmWith();
    const message = full([...services, { workload: manyMembershipsWorkload(0) }], 1n, [1, MAX_LIST]);
    const { error, growth } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 1, services: MAX_LIST, memberships: MAX_LIST });
    assertBounded(growth, message, "65,535 memberships, full");
  });

  it("as a delta: decoded on top of a model that has the services", async () => {
    const vm = await vmWith(full(services, 1n, [1, MAX_LIST]));
    const message = delta(1n, [{ workload: manyMembershipsWorkload(0) }], [1, MAX_LIST]);
    const { error, growth, before } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 1, services: MAX_LIST, memberships: MAX_LIST });
    assertBounded(growth, message, "65,535 memberships, delta", before);
  });

  it("the last membership repeating the first is refused whole, naming it, full and delta", async () => {
    const fullVm = await vmWith();
    const bad = full([...services, { workload: manyMembershipsWorkload(0, MAX_LIST, true) }], 1n, [1, MAX_LIST]);
    const refusedFull = measure(fullVm, bad);
    assert.equal(refusedFull.error, `record ${MAX_LIST} (workload upsert id 0).memberships[65534].service: service 0 is listed twice`);
    assert.deepEqual(fullVm.live(), { workloads: 0, services: 0, memberships: 0 });
    assertBounded(refusedFull.growth, bad, "refused memberships, full");

    const deltaVm = await vmWith(full(services, 1n, [1, MAX_LIST]));
    const badDelta = delta(1n, [{ workload: manyMembershipsWorkload(0, MAX_LIST, true) }], [1, MAX_LIST]);
    const refusedDelta = measure(deltaVm, badDelta);
    assert.equal(refusedDelta.error, "record 0 (workload upsert id 0).memberships[65534].service: service 0 is listed twice");
    assert.deepEqual(deltaVm.live(), { workloads: 0, services: MAX_LIST, memberships: 0 });
    assert.equal(deltaVm.version(), 1);
    assertBounded(refusedDelta.growth, badDelta, "refused memberships, delta", refusedDelta.before);
  });
});

describe("crafted messages: removing what 65,535 memberships tie together", () => {
  const services = plainServices(MAX_LIST).map((service) => ({ service }));
  const twoPods = full(
    [...services, { workload: manyMembershipsWorkload(0) }, { workload: { ...manyMembershipsWorkload(1), addresses: ["10.200.0.2"] } }],
    1n,
    [2, MAX_LIST],
  );

  it("a pod in 65,535 services, each shared with another pod, removed by a delta: the other pod's memberships stay whole", async () => {
    // Each removed membership moves the other pod's entry in that service's member list; that
    // move once walked the other pod's 65,535 memberships every time.
    const vm = await vmWith(twoPods);
    const message = delta(1n, [{ removeWorkload: 0 }], [2, MAX_LIST]);
    const { error, growth } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 1, services: MAX_LIST, memberships: MAX_LIST });
    assert.ok(growth <= PAGE, `linear memory grew ${growth} bytes`);
  });

  it("all 65,535 services removed by one delta: every membership goes, both pods stay", async () => {
    const vm = await vmWith(twoPods);
    const message = delta(1n, services.map((s) => ({ removeService: s.service.id })), [2, MAX_LIST]);
    const { error, growth, before } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 2, services: 0, memberships: 0 });
    assertBounded(growth, message, "65,535 service removes", before);
    // The pods are whole and can join services again.
    assert.equal(vm.apply(delta(2n, [services[7]!, { workload: { ...manyMembershipsWorkload(1, 1), memberships: [{ service: 7 }], addresses: ["10.200.0.2"] } }], [2, MAX_LIST])), "");
    assert.deepEqual(vm.live(), { workloads: 2, services: 1, memberships: 1 });
  });
});

describe("crafted messages: removing 65,535 services with a VIP and a SAN each", () => {
  it("one delta removes them all within the memory bound; no VIP answers; the VIPs can be given again", async () => {
    const rich = servicesWithVipAndSan(MAX_LIST);
    const vm = await vmWith(full([...rich.map((service) => ({ service })), { workload: manyMembershipsWorkload(0) }], 1n, [1, MAX_LIST]));
    const message = delta(1n, rich.map((s) => ({ removeService: s.id })), [1, MAX_LIST]);
    const { error, growth, before } = measure(vm, message);
    assert.equal(error, "");
    assert.deepEqual(vm.live(), { workloads: 1, services: 0, memberships: 0 });
    assertBounded(growth, message, "65,535 removes of services with a VIP and a SAN", before);
    for (const id of [0, 1, 255, 256, 65_534]) assert.equal(vm.serviceByVip4("", rich[id]!.vips![0]!.address), -1);
    // Every VIP given to another id in one delta: each is taken over from its removed holder.
    const moved = rich.map((s) => ({ service: { ...s, id: MAX_LIST - 1 - s.id, hostname: `moved${s.id}.c` } }));
    assert.equal(vm.apply(delta(2n, moved, [1, MAX_LIST])), "");
    for (const id of [0, 1, 255, 256, 65_534]) assert.equal(vm.serviceByVip4("", rich[id]!.vips![0]!.address), MAX_LIST - 1 - id);
  });
});

describe("crafted messages: a membership of a service the full message does not define", () => {
  it("is refused whole, naming the membership; the model in force stays; a later upsert of that service gains no member", async () => {
    const vm = await vmWith(smallBase(1n, [4, 8]));
    const before = vm.digest();
    // Service 3 is above every service id the message defines (0).
    assert.equal(vm.apply(danglingFull(2n)), "record 1 (workload upsert id 0).memberships[1].service: service 3 is not in this full message");
    assert.equal(vm.digest(), before, "the model in force is kept");
    assert.equal(vm.version(), 1);
    // The delta that used to complete the dangling membership: the service arrives empty.
    assert.equal(vm.apply(upsertAbsentService(1n)), "");
    const late = vm.digest().split("\n").find((line) => line.startsWith("s3 "));
    assert.ok(late !== undefined, "service 3 is live");
    assert.match(late, / eps=( |$)/, `service 3 has no endpoints: ${late}`);
    assert.deepEqual(vm.live(), { workloads: 1, services: 2, memberships: 1 });
  });

  it("is refused in a fresh VM too (nothing loaded before), and naming a service below the highest defined one as well", async () => {
    const vm = await vmWith();
    assert.match(vm.apply(danglingFull(1n)), /^record 1 \(workload upsert id 0\)\.memberships\[1\]\.service: service 3 is not in this full message$/);
    assert.deepEqual(vm.live(), { workloads: 0, services: 0, memberships: 0 });
    const below = full(
      [
        { service: { id: 0, hostname: "a.crafted.svc", ports: [[80, 80]] } },
        { service: { id: 2, hostname: "c.crafted.svc", ports: [[80, 80]] } },
        { workload: { id: 0, addresses: ["10.7.0.9"], memberships: [{ service: 1 }] } },
      ],
      1n,
      [1, 4],
    );
    assert.equal(vm.apply(below), "record 2 (workload upsert id 0).memberships[0].service: service 1 is not in this full message");
  });
});

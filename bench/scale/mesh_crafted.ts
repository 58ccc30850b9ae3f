// The decoder's worst inputs against an ordinary full message of the same size, in the
// model-only VM (mesh_vm.ts, release build). One figure per crafted input, `mesh_crafted_cost`:
// decode CPU time per byte and VM linear memory per byte, the same two for an ordinary full
// message of (about) the same byte size, and the ratios against the targets: at most 2x the
// ordinary message's time per byte and 4x its memory per byte.
//   - many ports in one service (65,535, the most a u16 count says), full and delta;
//   - many memberships in one workload (65,535), full (with the services it names) and delta;
//   - the same lists with the last entry repeating the first (refused: what it costs to refuse);
//   - 65,535 service removes in one delta, every service with the same member (5 bytes each),
//     and the same when each service also had one VIP and one SAN;
//   - the largest text table a full message may declare (1,048,576 empty texts);
//   - maximum declared id limits (2,000,000 / 2,000,000) on an ordinary message's records.
// Time: process CPU time of the apply call alone, the lower quartile of rounds taken in turns
// with the ordinary message (drift on the shared machine cancels). Memory: linear memory of a
// fresh VM after the message and a full collection, minus the fresh VM's (linear memory never
// shrinks, so this is what the message leaves behind). Inputs: tests/support/mesh_crafted.ts,
// the same the host tests and the fuzzer feed. Alone: node --import tsx bench/scale/mesh_crafted.ts [--quick]
import { emit } from "../emit.js";
import { MeshVm } from "./mesh_vm.js";
import { lowQuartile } from "./vm.js";
import { HEADER } from "../../tests/support/mesh_wire.js";
import {
  delta,
  full,
  manyMembershipsWorkload,
  manyPortsService,
  MAX_IDS,
  MAX_LIST,
  ordinaryFull,
  plainServices,
  servicesWithVipAndSan,
  smallBase,
  textTableFull,
} from "../../tests/support/mesh_crafted.js";

const TIME_TARGET = 2;
const MEMORY_TARGET = 4;

interface Input {
  name: string;
  /** Loaded before each timed apply (a delta's model). */
  base?: Uint8Array;
  message: Uint8Array;
  accepted: boolean;
}

function cpuMs(run: () => void): number {
  const before = process.cpuUsage();
  run();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

/** The same message with the header's id limits raised to the most the decoder accepts. */
function atMaxLimits(message: Uint8Array): Uint8Array {
  const out = Uint8Array.from(message);
  const view = new DataView(out.buffer);
  view.setUint32(HEADER.workloadIdLimit, MAX_IDS, true);
  view.setUint32(HEADER.serviceIdLimit, MAX_IDS, true);
  return out;
}

function inputs(): Input[] {
  const services = plainServices(MAX_LIST).map((service) => ({ service }));
  const servicesOnly = full(services, 1n, [1, MAX_LIST]);
  const richServices = servicesWithVipAndSan(MAX_LIST).map((service) => ({ service }));
  return [
    { name: "65,535 ports in one service, full", message: full([{ service: manyPortsService(0) }], 1n, [1, 1]), accepted: true },
    { name: "65,535 ports in one service, delta", base: smallBase(1n), message: delta(1n, [{ service: manyPortsService(1) }], [4, 4]), accepted: true },
    { name: "65,535 ports, the last repeating the first, full (refused)", message: full([{ service: manyPortsService(0, MAX_LIST, true) }], 1n, [1, 1]), accepted: false },
    { name: "65,535 memberships in one workload, full (with its 65,535 services)", message: full([...services, { workload: manyMembershipsWorkload(0) }], 1n, [1, MAX_LIST]), accepted: true },
    { name: "65,535 memberships in one workload, delta", base: servicesOnly, message: delta(1n, [{ workload: manyMembershipsWorkload(0) }], [1, MAX_LIST]), accepted: true },
    { name: "65,535 memberships, the last repeating the first, delta (refused)", base: servicesOnly, message: delta(1n, [{ workload: manyMembershipsWorkload(0, MAX_LIST, true) }], [1, MAX_LIST]), accepted: false },
    {
      name: "65,535 service removes, delta (each service had the same pod as its member)",
      base: full([...services, { workload: manyMembershipsWorkload(0) }], 1n, [1, MAX_LIST]),
      message: delta(1n, services.map((s) => ({ removeService: s.service.id })), [1, MAX_LIST]),
      accepted: true,
    },
    {
      name: "65,535 service removes, delta (each service had one VIP, one SAN and the same pod as its member)",
      base: full([...richServices, { workload: manyMembershipsWorkload(0) }], 1n, [1, MAX_LIST]),
      message: delta(1n, richServices.map((s) => ({ removeService: s.service.id })), [1, MAX_LIST]),
      accepted: true,
    },
    { name: "1,048,576 empty texts in a full message's table (the most it may declare), no records", message: textTableFull(), accepted: true },
    { name: "an ordinary message's records at the maximum id limits (2,000,000 / 2,000,000)", message: atMaxLimits(ordinaryFull(300_000)), accepted: true },
  ];
}

/**
 * Linear memory a fresh VM (with `base` loaded) gains from `message`, and the model's own
 * estimate of what it retains (Mesh.retainedBytes: without the allocator's growth steps and
 * the message itself); throws on the wrong outcome.
 */
async function memoryOf(input: Input): Promise<{ linear: number; model: number }> {
  const vm = await MeshVm.create();
  if (input.base !== undefined) vm.apply(input.base);
  vm.collect();
  const before = vm.memoryBytes();
  const modelBefore = vm.retainedBytes();
  const error = vm.apply(input.message);
  if ((error === "") !== input.accepted) throw new Error(`${input.name}: ${error === "" ? "accepted" : `refused: ${error}`}`);
  vm.collect();
  return { linear: vm.memoryBytes() - before, model: vm.retainedBytes() - modelBefore };
}

/** One timed apply of `input` (its base, if any, loaded first and not timed). */
function timeOnce(vm: MeshVm, input: Input): number {
  vm.reset();
  if (input.base !== undefined) vm.apply(input.base);
  return cpuMs(() => vm.apply(input.message));
}

export async function meshCraftedBench({ quick }: { quick: boolean }): Promise<void> {
  const rounds = quick ? 7 : 21;
  // MESH_CRAFTED_ONLY=<text>: only the inputs whose name contains it (while working on one).
  const only = process.env.MESH_CRAFTED_ONLY ?? "";
  for (const input of inputs().filter((i) => i.name.includes(only))) {
    const ordinary: Input = { name: "ordinary", message: ordinaryFull(input.message.length), accepted: true };
    const crafted = await MeshVm.create();
    const plain = await MeshVm.create();
    timeOnce(crafted, input); // warm-up: compile tiers, first growth of linear memory
    timeOnce(plain, ordinary);
    const craftedMs: number[] = [];
    const ordinaryMs: number[] = [];
    for (let r = 0; r < rounds; r++) {
      // In turns, the order alternating, so drift falls on both.
      if (r % 2 === 0) {
        craftedMs.push(timeOnce(crafted, input));
        ordinaryMs.push(timeOnce(plain, ordinary));
      } else {
        ordinaryMs.push(timeOnce(plain, ordinary));
        craftedMs.push(timeOnce(crafted, input));
      }
    }
    const bytes = input.message.length;
    const ordinaryBytes = ordinary.message.length;
    const nsPerByte = (lowQuartile(craftedMs) * 1e6) / bytes;
    const ordinaryNsPerByte = (lowQuartile(ordinaryMs) * 1e6) / ordinaryBytes;
    const memory = await memoryOf(input);
    const ordinaryMemory = await memoryOf(ordinary);
    const memoryPerByte = memory.linear / bytes;
    const ordinaryMemoryPerByte = ordinaryMemory.linear / ordinaryBytes;
    const timeRatio = nsPerByte / ordinaryNsPerByte;
    const memoryRatio = memoryPerByte / ordinaryMemoryPerByte;
    emit({
      figure: "mesh_crafted_cost",
      input: input.name,
      outcome: input.accepted ? "decoded" : "refused",
      messageBytes: bytes,
      ordinaryMessageBytes: ordinaryBytes,
      decodeNsPerByte: round(nsPerByte),
      ordinaryDecodeNsPerByte: round(ordinaryNsPerByte),
      timeRatio: round(timeRatio),
      memoryBytesPerByte: round(memoryPerByte),
      ordinaryMemoryBytesPerByte: round(ordinaryMemoryPerByte),
      memoryRatio: round(memoryRatio),
      // The model's growth alone (its estimate), beside the ordinary message's: what the
      // message costs without the allocator's doubling of linear memory.
      modelBytesPerByte: round(memory.model / bytes),
      ordinaryModelBytesPerByte: round(ordinaryMemory.model / ordinaryBytes),
      timeTargetMet: timeRatio <= TIME_TARGET,
      memoryTargetMet: memoryRatio <= MEMORY_TARGET,
      target: `time per byte <= ${TIME_TARGET}x and memory per byte <= ${MEMORY_TARGET}x an ordinary full message of the same size`,
    });
  }
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await meshCraftedBench({ quick: process.argv.includes("--quick") });
}

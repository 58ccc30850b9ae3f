// The crafted messages the mesh-feed fuzzer (mesh_delta.test.ts) keeps feeding, whole and
// damaged, next to its random ones: inputs aimed at the decoder's cost that random deltas of a
// 24-pod state never reach (the largest lists one record may carry, header limits that claim
// far more than the message holds, a membership of a service the message does not define).
// Built once per run from tests/support/mesh_crafted.ts; each case names the model it applies
// to (`base`, loaded first; none: a fresh VM) and whether the undamaged message is accepted.
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
} from "../support/mesh_crafted.js";

export interface CraftedCase {
  name: string;
  base?: Uint8Array;
  message: Uint8Array;
  /** The undamaged message: "" (accepted) or a pattern its refusal matches. */
  expect: "" | RegExp;
}

export function craftedCorpus(): CraftedCase[] {
  const services = plainServices(MAX_LIST).map((service) => ({ service }));
  const servicesOnly = full(services, 1n, [1, MAX_LIST]);
  return [
    { name: "empty full at the maximum id limits", message: emptyFullAtMaxLimits(), expect: "" },
    { name: "the largest text table, all texts empty", message: textTableFull(), expect: "" },
    { name: "empty delta at the maximum id limits", base: smallBase(1n), message: emptyDeltaAtMaxLimits(1n), expect: "" },
    { name: "65,535 ports, full", message: full([{ service: manyPortsService(0) }], 1n, [1, 1]), expect: "" },
    { name: "65,535 ports, delta", base: smallBase(1n), message: delta(1n, [{ service: manyPortsService(1) }], [4, 4]), expect: "" },
    { name: "65,535 ports, last repeats first", message: full([{ service: manyPortsService(0, MAX_LIST, true) }], 1n, [1, 1]), expect: /\.ports\[65534\]: duplicate service port 1$/ },
    { name: "65,535 memberships, full", message: full([...services, { workload: manyMembershipsWorkload(0) }], 1n, [1, MAX_LIST]), expect: "" },
    { name: "65,535 memberships, delta", base: servicesOnly, message: delta(1n, [{ workload: manyMembershipsWorkload(0) }], [1, MAX_LIST]), expect: "" },
    { name: "65,535 memberships, last repeats first", base: servicesOnly, message: delta(1n, [{ workload: manyMembershipsWorkload(0, MAX_LIST, true) }], [1, MAX_LIST]), expect: /\.memberships\[65534\]\.service: service 0 is listed twice$/ },
    {
      name: "65,535 removes of services with a VIP and a SAN, delta",
      base: full([...servicesWithVipAndSan(MAX_LIST).map((service) => ({ service })), { workload: manyMembershipsWorkload(0) }], 1n, [1, MAX_LIST]),
      message: delta(1n, services.map((s) => ({ removeService: s.service.id })), [1, MAX_LIST]),
      expect: "",
    },
    { name: "dangling membership, full", base: smallBase(1n, [4, 8]), message: danglingFull(2n), expect: /\.memberships\[1\]\.service: service 3 is not in this full message$/ },
    { name: "upsert of the service a refused full message named", base: smallBase(1n, [4, 8]), message: upsertAbsentService(1n), expect: "" },
  ];
}

// Client side: which services list each workload as an endpoint, for connections that dial a pod
// IP directly (the dialled port is a target port; the service port is the one mapping to it).
// A compressed-row index, sized exactly from a counting pass: 4 bytes per workload plus 8 per
// (service, endpoint) membership. A hash map of (workload, target) and (workload, service port,
// target) keys did the same job for ~230 bytes per pod (AssemblyScript Map/Set entries and
// their doubling growth), more than the whole mesh model.
import { Mesh } from "../../assembly/mesh";

export class PodMemberships {
  /** What the index costs, for the mesh build's memory reservation (MeshLimits). */
  static readonly BYTES_PER_WORKLOAD: i32 = 8; // 4 kept, 4 for the transient fill cursors
  static readonly BYTES_PER_MEMBERSHIP: i32 = 8;

  /** Memberships of workload w are entries [start[w], start[w + 1]), in configuration order. */
  private start: StaticArray<i32>;
  /** Pairs (service, endpoint index within the service). */
  private entries: StaticArray<i32>;

  constructor(private mesh: Mesh) {
    const workloads = mesh.workloadCount();
    const start = new StaticArray<i32>(workloads + 1);
    const services = mesh.serviceCount();
    for (let s = 0; s < services; s++) {
      for (let e = 0, endpoints = mesh.endpointCount(s); e < endpoints; e++) {
        const w = mesh.endpointWorkload(s, e);
        if (w >= 0 && w < workloads) unchecked(start[w + 1]++);
      }
    }
    for (let w = 0; w < workloads; w++) unchecked((start[w + 1] += start[w]));
    const entries = new StaticArray<i32>(unchecked(start[workloads]) << 1);
    // Fill in service order so each workload's list keeps configuration order; `next` reuses
    // nothing from `start`, so it is a transient copy freed after the build.
    const next = StaticArray.slice<i32>(start, 0, workloads);
    for (let s = 0; s < services; s++) {
      for (let e = 0, endpoints = mesh.endpointCount(s); e < endpoints; e++) {
        const w = mesh.endpointWorkload(s, e);
        if (w < 0 || w >= workloads) continue;
        const at = unchecked(next[w]++) << 1;
        unchecked((entries[at] = s));
        unchecked((entries[at + 1] = e));
      }
    }
    this.start = start;
    this.entries = entries;
  }

  /** The service port of the first service (configuration order) whose port maps w to `target`; -1 if none. */
  servicePortFor(w: i32, target: i32): i32 {
    if (w < 0 || w + 1 >= this.start.length || target <= 0) return -1;
    const mesh = this.mesh;
    for (let m = unchecked(this.start[w]), end = unchecked(this.start[w + 1]); m < end; m++) {
      const s = unchecked(this.entries[m << 1]);
      const e = unchecked(this.entries[(m << 1) + 1]);
      for (let i = 0, ports = mesh.servicePortCount(s); i < ports; i++) {
        const servicePort = mesh.servicePortAt(s, i);
        if (mesh.targetPort(s, e, servicePort) == target) return servicePort;
      }
    }
    return -1;
  }

  /** Whether some service listing w maps `servicePort` to `target` for it. */
  maps(w: i32, servicePort: i32, target: i32): bool {
    if (w < 0 || w + 1 >= this.start.length || target <= 0) return false;
    const mesh = this.mesh;
    for (let m = unchecked(this.start[w]), end = unchecked(this.start[w + 1]); m < end; m++) {
      const s = unchecked(this.entries[m << 1]);
      const e = unchecked(this.entries[(m << 1) + 1]);
      if (mesh.exposesPort(s, servicePort) && mesh.targetPort(s, e, servicePort) == target) return true;
    }
    return false;
  }

  byteSize(): i64 {
    return (<i64>this.start.length + <i64>this.entries.length) * 4;
  }
}

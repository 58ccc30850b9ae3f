// Client side: which services list each workload as an endpoint, for connections that dial a pod
// IP directly (the dialled port is a target port; the service port is the one mapping to it).
// A compressed-row index, sized exactly from a counting pass: 4 bytes per workload plus 4 per
// (service, endpoint) membership, nothing transient. A hash map of (workload, target) and
// (workload, service port, target) keys did the same job for ~230 bytes per pod
// (AssemblyScript Map/Set entries and their doubling growth), more than the whole mesh model.
import { Mesh } from "../../assembly/mesh";

export class PodMemberships {
  /** What the index costs, for the mesh build's memory reservation (MeshLimits). */
  static readonly BYTES_PER_WORKLOAD: i32 = 4;
  static readonly BYTES_PER_MEMBERSHIP: i32 = 4;

  /** Memberships of workload w are entries [start[w], start[w + 1]), in configuration order. */
  private start: StaticArray<i32>;
  /** Global endpoint ids (Mesh.endpointService finds the service of one). */
  private entries: StaticArray<i32>;

  constructor(private mesh: Mesh) {
    const workloads = mesh.workloadCount();
    const total = mesh.endpointTotal();
    // Counting sort by workload: count, then running sums, then place the endpoints from the
    // last one back, each at its workload's end moving down, so every list keeps configuration
    // order and `start` ends up at the beginnings without a second cursor array.
    const start = new StaticArray<i32>(workloads + 1);
    for (let g = 0; g < total; g++) {
      const w = mesh.globalEndpointWorkload(g);
      if (w >= 0 && w < workloads) unchecked(start[w + 1]++);
    }
    for (let w = 0; w < workloads; w++) unchecked((start[w + 1] += start[w]));
    const entries = new StaticArray<i32>(unchecked(start[workloads]));
    // start[w + 1] is now the end of w's list; fill backwards, moving each end down.
    for (let g = total - 1; g >= 0; g--) {
      const w = mesh.globalEndpointWorkload(g);
      if (w < 0 || w >= workloads) continue;
      const at = unchecked(start[w + 1]) - 1;
      unchecked((start[w + 1] = at));
      unchecked((entries[at] = g));
    }
    // Now start[w + 1] is the beginning of w's list: shift down by one.
    for (let w = 0; w < workloads; w++) unchecked((start[w] = start[w + 1]));
    unchecked((start[workloads] = entries.length));
    this.start = start;
    this.entries = entries;
  }

  /** The service port of the first service (configuration order) whose port maps w to `target`; -1 if none. */
  servicePortFor(w: i32, target: i32): i32 {
    if (w < 0 || w + 1 >= this.start.length || target <= 0) return -1;
    const mesh = this.mesh;
    for (let m = unchecked(this.start[w]), end = unchecked(this.start[w + 1]); m < end; m++) {
      const g = unchecked(this.entries[m]);
      const s = mesh.endpointService(g);
      const e = mesh.globalEndpointIndex(s, g);
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
      const g = unchecked(this.entries[m]);
      const s = mesh.endpointService(g);
      if (mesh.exposesPort(s, servicePort) && mesh.targetPort(s, mesh.globalEndpointIndex(s, g), servicePort) == target) {
        return true;
      }
    }
    return false;
  }

  byteSize(): i64 {
    return (<i64>this.start.length + <i64>this.entries.length) * 4;
  }
}

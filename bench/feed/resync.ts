// Resync by difference after a feed restart (feed/docs/deltas.md, "Content versions" and
// "Repair"), in process: a feed process at n pods serves a VM of the compiled passthrough_mtls
// its full message; a second process (a restart, or another replica: the same objects listed
// in the opposite order, another epoch) then holds the mesh after k changes the VM never saw.
// What the VM receives from the second process, per k (one JSON line each, bench/emit.ts):
//   feed_resync   k = 0: the 56-byte no-change it adopts; k > 0: the request for its bucket
//                 digests, the digests it sends (POST), the repair (records of the differing
//                 buckets) and the time the VM took to apply it; next to the full message
//   feed_resync_vm_memory  the VM's linear memory after loading the full message with the
//                 content-derived ids, and with the same workloads numbered densely (the ids
//                 before format 3): what sparse ids cost the VM
// Target (issue: resync by difference): a current VM receives <= 4 KB; k missed changes cost O(k).
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { MeshComputer } from "../../feed/src/compute.js";
import { DEFAULT_DELTA } from "../../feed/src/config.js";
import { DeltaChannel } from "../../feed/src/delta/channel.js";
import { NetworkView } from "../../feed/src/delta/network_view.js";
import { assembleFull } from "../../feed/src/delta/wire_full.js";
import { RECORD_WORKLOAD_UPSERT } from "../../feed/src/delta/wire.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { pod, service, slice } from "../../tests/feed/fixtures.js";
import { ChannelVm } from "../../tests/support/delta_vm.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { emit } from "../emit.js";

const PER_SERVICE = 100;
const load = () => +loadavg()[0].toFixed(1);

function ip(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

/** One feed process's objects, compute, view and channel (no shadow VM: the bytes are the same). */
export class Process {
  readonly c = new ClusterObjects("cluster1");
  readonly computer = new MeshComputer({ trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() });
  readonly view = new NetworkView("");
  readonly channel: DeltaChannel;
  /** Pod index → service account suffix (a change gives it another). */
  readonly pods = new Map<number, string>();

  constructor(epoch: number, n: number, reverse: boolean) {
    this.channel = new DeltaChannel(epoch, DEFAULT_DELTA, []);
    const order = Array.from({ length: n }, (_, i) => (reverse ? n - 1 - i : i));
    for (const i of order) this.setPod(i, `sa-${Math.floor(i / PER_SERVICE)}`); // one service account per service, as a deployment has
    for (let s = 0; s < n / PER_SERVICE; s++) {
      this.c.upsert("services", service("bench", `s-${s}`, [{ name: "http", port: 80, targetPort: 8080 }], { clusterIP: `10.96.${s >> 8}.${s & 255}` }));
      this.writeSlice(s);
    }
    this.publish();
  }

  setPod(i: number, sa: string): void {
    this.pods.set(i, sa);
    this.c.upsert("pods", pod("bench", `p-${i}`, { ip: ip(i + 256), sa, labels: { app: `s-${Math.floor(i / PER_SERVICE)}`, "security.istio.io/tlsMode": "istio" } }));
  }

  removePod(i: number): void {
    this.pods.delete(i);
    this.c.remove("pods", pod("bench", `p-${i}`));
    this.writeSlice(Math.floor(i / PER_SERVICE));
  }

  writeSlice(s: number): void {
    const eps = [];
    for (let i = s * PER_SERVICE; i < (s + 1) * PER_SERVICE; i++) if (this.pods.has(i)) eps.push({ ip: ip(i + 256), pod: `p-${i}` });
    this.c.upsert("endpointSlices", slice("bench", `s-${s}`, `s-${s}-1`, [{ name: "http", port: 8080 }], eps));
  }

  publish(): void {
    const { mesh, changes } = this.computer.update([this.c]);
    const outcome = this.channel.publish(this.view, mesh, this.view.update(mesh, changes));
    if ("error" in outcome && outcome.error) throw new Error(outcome.error);
  }
}

/**
 * Change number j of a series: a third remove pods, a third change a pod's service account (its
 * service's SAN list grows by one), a third add pods. A removal or an addition changes the
 * service's record only when it changes the service's SANs.
 */
export function change(p: Process, n: number, j: number): void {
  const i = (j * 7919) % n;
  if (j % 3 === 0) p.removePod(i);
  else if (j % 3 === 1) p.setPod(i, `moved-${j}`);
  else {
    const k = n + j;
    p.setPod(k, `sa-${Math.floor(k / PER_SERVICE)}`);
    p.writeSlice(Math.floor(k / PER_SERVICE));
  }
}

export function resyncBytes(n: number, ks: number[]): void {
  const wasm = new Uint8Array(readFileSync(`${REPO_ROOT}/build/passthrough_mtls.wasm`));
  const a = new Process(1, n, false);
  const full = a.channel.full();
  const b = new Process(2, n, true);
  let applied = 0;
  for (const k of ks) {
    while (applied < k) change(b, n, applied++);
    if (k > 0) b.publish();
    const vm = new ChannelVm(wasm, `resync-${n}-${k}`);
    try {
      vm.pump(a.channel);
      if (vm.metric("applied_full") !== 1) throw new Error(`the VM refused the full message: ${vm.warnings().join("; ")}`);
      const before = vm.bytes;
      const first = vm.pump(b.channel);
      let answer = first;
      let applyMs = 0;
      if (first.kind === 5) {
        const started = performance.now();
        answer = vm.pump(b.channel);
        applyMs = performance.now() - started;
      }
      const refused = vm.metric("refused");
      emit({
        figure: "feed_resync",
        pods: n,
        missedChanges: k,
        answer: answer.rebased ? "no-change (same content)" : answer.kind === 4 ? "repair" : answer.kind === 1 ? "full" : String(answer.kind),
        bytesReceived: vm.bytes - before,
        bytesSent: vm.sent,
        records: answer.records,
        repairMs: +applyMs.toFixed(1), // the feed answering the POST + the VM applying the repair, in process
        fullMessageBytes: full.length,
        vmRefused: refused,
        loadAverage: load(),
      });
    } finally {
      vm.dispose();
    }
  }
  // The VM's memory with these ids, and with the same workloads numbered densely.
  const records = [...(a.channel as unknown as { workloadRecords: Map<number, Buffer> }).workloadRecords.values()];
  const services = [...(a.channel as unknown as { serviceRecords: Map<number, Buffer> }).serviceRecords.values()];
  const dense = records.map((r, i) => {
    const copy = Buffer.from(r);
    if (copy[0] === RECORD_WORKLOAD_UPSERT) copy.writeUInt32LE(i, 1);
    return copy;
  });
  const limits = a.channel.stats;
  const memory = (label: string, workloads: Buffer[], workloadIdLimit: number) => {
    const body = assembleFull({ epoch: 9, base: 0, version: 1, workloadIdLimit, serviceIdLimit: limits.serviceIdLimit, format: 2 }, [services, workloads]);
    const vm = new ChannelVm(wasm, `memory-${label}`);
    try {
      vm.respond(body);
      if (vm.metric("applied_full") !== 1) throw new Error(`${label}: refused: ${vm.warnings().join("; ")}`);
      return vm.host.guestMemoryBytes;
    } finally {
      vm.dispose();
    }
  };
  const sparse = memory("content ids", records, limits.workloadIdLimit);
  const packed = memory("dense ids", dense, records.length);
  emit({
    figure: "feed_resync_vm_memory",
    pods: n,
    workloadIdLimit: limits.workloadIdLimit,
    vmBytesContentIds: sparse,
    vmBytesDenseIds: packed,
    bytesPerPodContentIds: +(sparse / n).toFixed(1),
    bytesPerPodDenseIds: +(packed / n).toFixed(1),
    loadAverage: load(),
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const sizes = (process.argv.find((a) => a.startsWith("--sizes="))?.slice(8) ?? "10000,100000").split(",").map(Number);
  for (const n of sizes) resyncBytes(n, [0, 1, 10, 100, 1000]);
}

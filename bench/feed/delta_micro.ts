// In-process costs of the feed's delta path (no API server): where the time of one change goes
// at 1k / 10k / 100k pods, next to what the snapshot (JSON) path costs for the same mesh, and
// the encoder's speed on 1M pods. One JSON line per figure (bench/emit.ts):
//   feed_delta_costs    full compute, first publish (every record encoded), and per pod change:
//                       incremental update + view + diff + answer (p50/p99), records and bytes
//                       per change; the compiled filter's check of each version in the feed's
//                       shadow VM, the feed's only check (filterCheckMs p50/p99;
//                       firstPublishCheckedMs: the first version, a full load; filterRebuildMs: a
//                       shadow rebuilt at the current version, i.e. the full message loaded, then
//                       one change); the JSON path: viewFor, JSON + sha256, the check in the
//                       compiled filter
//   feed_wire_encode    1M workloads (+10k services) encoded into one full message: best and median of 5
import { join } from "node:path";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { MeshComputer } from "../../feed/src/compute.js";
import type { ComputedMesh } from "../../feed/src/mesh_model.js";
import { DEFAULT_DELTA } from "../../feed/src/config.js";
import { DeltaChannel } from "../../feed/src/delta/channel.js";
import { FilterShadow } from "../../feed/src/delta/filter_shadow.js";
import { NetworkView } from "../../feed/src/delta/network_view.js";
import { WireWriter, writeServiceUpsert, writeWorkloadUpsert, writeHeader, KIND_FULL, HEADER_BYTES, type WireWorkload } from "../../feed/src/delta/wire.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { renderPluginConfig } from "../../feed/src/render.js";
import { FilterValidator } from "../../feed/src/validate.js";
import { viewFor } from "../../feed/src/view.js";
import { pod, service, slice } from "../../tests/feed/fixtures.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { emit } from "../emit.js";

const PER_SERVICE = 100;

function ip(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

const round = (v: number) => +v.toFixed(3);

export function deltaCosts(n: number, changes = 200, validateJson = true): { jsonText: string; view: NetworkView; mesh: ComputedMesh } {
  const c = new ClusterObjects("cluster1");
  const podOf = (i: number, phase = "Running") => pod("bench", `p-${i}`, { ip: ip(i + 256), sa: `sa-${i % 1000}`, phase, labels: { app: `s-${Math.floor(i / PER_SERVICE)}`, "security.istio.io/tlsMode": "istio" } });
  for (let i = 0; i < n; i++) c.upsert("pods", podOf(i));
  for (let s = 0; s < n / PER_SERVICE; s++) {
    c.upsert("services", service("bench", `s-${s}`, [{ name: "http", port: 80, targetPort: 8080 }], { clusterIP: `10.96.${s >> 8}.${s & 255}` }));
    const eps = [];
    for (let i = s * PER_SERVICE; i < (s + 1) * PER_SERVICE; i++) eps.push({ ip: ip(i + 256), pod: `p-${i}` });
    c.upsert("endpointSlices", slice("bench", `s-${s}`, `s-${s}-1`, [{ name: "http", port: 8080 }], eps));
  }
  const computer = new MeshComputer({ trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() });
  const view = new NetworkView("");
  // Unchecked: the delta path's own cost.
  const channel = new DeltaChannel(Date.now(), DEFAULT_DELTA, []);
  // The same versions, checked in a shadow VM of the compiled passthrough_mtls (what the feed
  // does): the difference is the check's cost per change.
  const validator = new FilterValidator((f) => join(REPO_ROOT, "build", `${f}.wasm`));
  const shadow = new FilterShadow({ name: "bench", filter: "passthrough_mtls", network: "", config: {} }, () => validator.bytes("passthrough_mtls"));
  const checked = new DeltaChannel(channel.epoch, DEFAULT_DELTA, [shadow]);
  let t = performance.now();
  const first = computer.update([c]);
  const computeMs = performance.now() - t;
  t = performance.now();
  const moved0 = view.update(first.mesh, first.changes);
  channel.publish(view, first.mesh, moved0);
  const firstPublishMs = performance.now() - t;
  t = performance.now();
  const firstChecked = checked.publish(view, first.mesh, moved0);
  const firstPublishCheckedMs = performance.now() - t;
  if (!firstChecked.published) throw new Error(`the compiled filter refused the first version: ${firstChecked.error}`);
  t = performance.now();
  const full = channel.full();
  const fullMs = performance.now() - t;
  // One pod's change per render: alternately Succeeded (leaves the mesh) and Running again.
  const perChange: number[] = [];
  const bytes: number[] = [];
  const records: number[] = [];
  const filterCheck: number[] = [];
  for (let k = 0; k < changes; k++) {
    // Pairs: the pod leaves the mesh (Succeeded), then comes back (Running).
    const i = ((k >> 1) * 7919) % n;
    const before = channel.version;
    c.upsert("pods", podOf(i, k % 2 === 0 ? "Succeeded" : "Running"));
    t = performance.now();
    const u = computer.update([c]);
    const moved = view.update(u.mesh, u.changes);
    channel.publish(view, u.mesh, moved);
    const answer = channel.answer(channel.epoch, before);
    perChange.push(performance.now() - t);
    const shadowMs = shadow.ms;
    const outcome = checked.publish(view, u.mesh, moved);
    if (!outcome.published) throw new Error(`change ${k}: the compiled filter refused it: ${outcome.error}`);
    filterCheck.push(shadow.ms - shadowMs);
    if (channel.version === before) throw new Error(`change ${k}: nothing published`);
    bytes.push(answer.body.length);
    records.push(answer.records);
  }
  // A shadow rebuilt (another filter refused a version this one took): the full message of the
  // current version loaded in a new VM, then the next change.
  shadow.reset();
  c.upsert("pods", podOf(0, "Succeeded"));
  const u = computer.update([c]);
  const moved = view.update(u.mesh, u.changes);
  channel.publish(view, u.mesh, moved);
  const shadowMs = shadow.ms;
  const rebuilt = checked.publish(view, u.mesh, moved);
  if (!rebuilt.published) throw new Error(`the rebuilt shadow refused a change: ${rebuilt.error}`);
  const filterRebuildMs = shadow.ms - shadowMs;
  // The snapshot (JSON) path for the same mesh, as the feed renders it for ECDS/WasmPlugin.
  t = performance.now();
  const v = viewFor(computer.current, "");
  const viewMs = performance.now() - t;
  t = performance.now();
  const rendered = renderPluginConfig("passthrough_mtls", "", {}, v.snapshot);
  const jsonMs = performance.now() - t;
  let validateMs: number | undefined;
  if (validateJson) {
    const verdict = validator.check("passthrough_mtls", rendered.text);
    if (!verdict.ok) throw new Error(`bench mesh refused: ${verdict.error}`);
    validateMs = verdict.ms;
  }
  emit({
    figure: "feed_delta_costs",
    pods: n,
    fullComputeMs: round(computeMs),
    firstPublishMs: round(firstPublishMs),
    fullMessageBytes: full.length,
    fullMessageMs: round(fullMs),
    changeMsP50: round(percentile(perChange, 50)),
    changeMsP99: round(percentile(perChange, 99)),
    filterCheckMsP50: round(percentile(filterCheck, 50)),
    filterCheckMsP99: round(percentile(filterCheck, 99)),
    firstPublishCheckedMs: round(firstPublishCheckedMs),
    filterRebuildMs: round(filterRebuildMs),
    shadowResyncs: shadow.resyncs,
    recordsPerChange: percentile(records, 50),
    bytesPerChange: percentile(bytes, 50),
    jsonViewMs: round(viewMs),
    jsonRenderMs: round(jsonMs),
    jsonBytes: rendered.bytes,
    jsonValidateMs: validateMs === undefined ? undefined : round(validateMs),
  });
  return { jsonText: rendered.text, view, mesh: computer.current };
}

/** The encoder alone: 1M workloads and 10k services into one full message. */
export function wireEncode(workloads = 1_000_000, services = 10_000): void {
  const list: WireWorkload[] = [];
  for (let i = 0; i < workloads; i++) {
    list.push({ id: i, flags: 3, network: "", identity: `spiffe://cluster.local/ns/bench/sa/sa-${i % 1000}`, locality: "region/zone", addresses: [ip(i + 256)], memberships: [{ service: Math.floor(i / PER_SERVICE), overrides: [] }] });
  }
  const runs: number[] = [];
  const cpu: number[] = [];
  let size = 0;
  // One buffer for every round (sized for the message): the figure is the encoding, not the allocator.
  const w = new WireWriter(workloads * 80 + services * 100 + HEADER_BYTES);
  for (let r = 0; r < 5; r++) {
    const t = performance.now();
    const c0 = process.cpuUsage();
    w.pos = HEADER_BYTES;
    for (let s = 0; s < services; s++) writeServiceUpsert(w, { id: s, hostname: `s-${s}.bench.svc.cluster.local`, flags: 0, lbPrefs: 0x04030201, ports: [[80, 8080]], vips: [{ network: "", address: `10.96.${s >> 8}.${s & 255}` }], sans: [] });
    for (const x of list) writeWorkloadUpsert(w, x);
    writeHeader(w.buf, { kind: KIND_FULL, epoch: 1, base: 0, version: 1, workloadIdLimit: workloads, serviceIdLimit: services, recordCount: workloads + services }, w.pos);
    runs.push(performance.now() - t);
    const c1 = process.cpuUsage(c0);
    cpu.push((c1.user + c1.system) / 1000);
    if (process.env.BENCH_DEBUG) console.error(r, runs[r], cpu[r]);
    size = w.pos;
  }
  // Wall time on a shared machine includes waiting for a core; the process's CPU time does not.
  const ms = Math.min(...runs);
  const cpuMs = Math.min(...cpu);
  emit({ figure: "feed_wire_encode", workloads, services, bytes: size, bytesPerWorkload: +(size / workloads).toFixed(1), ms: round(ms), medianMs: round(percentile(runs, 50)), cpuMs: round(cpuMs), mbPerCpuSecond: +(size / 1e6 / (cpuMs / 1000)).toFixed(0) });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  wireEncode();
  const sizes = process.argv.includes("--quick") ? [1000, 10_000] : [1000, 10_000, 100_000];
  for (const n of sizes) deltaCosts(n);
}

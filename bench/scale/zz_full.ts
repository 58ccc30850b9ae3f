import { MeshVm } from "./mesh_vm.ts";
import { Writer, writeService, writeWorkload, MAGIC, FORMAT_VERSION, KIND } from "../../tests/support/mesh_wire.ts";
for (const pods of [100_000, 1_000_000]) {
  const services = pods / 100;
  const body = new Writer();
  for (let s = 0; s < services; s++) writeService(body, { id: s, hostname: `svc${s}.ns.svc.cluster.local`, ports: [[80, 8080]], vips: [{ address: `10.200.${(s >> 8) & 255}.${s & 255}` }] });
  for (let i = 0; i < pods; i++) writeWorkload(body, { id: i, istio: true, identity: `spiffe://cluster.local/ns/ns${i % 50}/sa/sa${i % 1000}`, locality: `region/zone${i % 3}/sub${i % 7}`, addresses: [`10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`], memberships: [{ service: Math.floor(i / 100) }] });
  const rec = body.done();
  const out = new Writer();
  out.u32(MAGIC).u16(FORMAT_VERSION).u16(KIND.full).u64(1n).u64(0).u64(1).u32(pods * 1.25).u32(services).u32(services + pods).u32(rec.length).u64(0).bytes(rec);
  const msg = out.done();
  const vm = await MeshVm.create();
  const c0 = process.cpuUsage(); const t0 = performance.now();
  const e = vm.apply(msg);
  const c = process.cpuUsage(c0);
  vm.collect();
  console.log(pods, e, "wall", (performance.now() - t0).toFixed(0), "cpu", ((c.user + c.system) / 1000).toFixed(0), "B/pod", (vm.memoryBytes() / pods).toFixed(1), "retained", (vm.retainedBytes() / pods).toFixed(1));
}

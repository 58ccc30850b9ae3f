import { MeshVm } from "./mesh_vm.ts";
import { Writer, writeService, writeWorkload } from "../../tests/support/mesh_wire.ts";
import { assembleFull } from "../../feed/src/delta/wire_full.ts";
const pods = Number(process.argv[2] ?? 1_000_000);
function* recs(services: number) {
  const w = new Writer(256);
  for (let s = 0; s < services; s++) { w.reset(); writeService(w, { id: s, hostname: `svc${s}.ns${s % 50}.svc.cluster.local`, ports: [[80, 8080]], vips: [{ address: `10.200.${(s >> 8) & 255}.${s & 255}` }] }); yield w.view(); }
  for (let i = 0; i < pods; i++) { w.reset(); writeWorkload(w, { id: i, istio: true, identity: `spiffe://cluster.local/ns/ns${i % 50}/sa/sa${i % 1000}`, locality: `region/zone${i % 3}/sub${i % 7}`, addresses: [`10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`], memberships: [{ service: Math.floor(i / 100) }] }); yield w.view(); }
}
const services = Math.ceil(pods / 100);
let t = process.cpuUsage();
const inline = process.argv[4] === "inline";
const msg = inline ? (() => { const parts: Buffer[] = [Buffer.alloc(64)]; let n = 0; for (const r of recs(services)) { parts.push(Buffer.from(r)); n++; } const b = Buffer.concat(parts); b.writeUInt32LE(0x3148534d, 0); b.writeUInt16LE(2, 4); b.writeUInt16LE(1, 6); b.writeUInt32LE(1, 8); b.writeUInt32LE(1, 24); b.writeUInt32LE(Math.ceil(pods * 1.25), 32); b.writeUInt32LE(services, 36); b.writeUInt32LE(n, 40); b.writeUInt32LE(b.length - 56, 44); return b; })() : assembleFull({ epoch: 1, base: 0, version: 1, workloadIdLimit: Math.ceil(pods * 1.25), serviceIdLimit: services }, [recs(services)]);
let u = process.cpuUsage(t); console.log("encode ms", (u.user + u.system) / 1000, "bytes", msg.length, "B/pod", msg.length / pods);
const vm = await MeshVm.create();
for (let k = 0; k < Number(process.argv[3] ?? 3); k++) {
t = process.cpuUsage();
const err = vm.apply(new Uint8Array(msg.buffer, msg.byteOffset, msg.length));
u = process.cpuUsage(t); console.log("load ms", (u.user + u.system) / 1000, JSON.stringify(err), "mem/pod", vm.memoryBytes() / pods, "retained/pod", vm.retainedBytes() / pods);
}

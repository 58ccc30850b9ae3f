// The format-v2 encoder (feed/src/delta/wire.ts) against the test's own decoder, field by
// field; the ids; the compiled filter in the feed's shadow VM refusing bad versions in its own words.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FilterShadow } from "../../feed/src/delta/filter_shadow.js";
import { ensureBuilt } from "../host/helpers.js";
import { CanonicalIds, keyHash, sizeFor } from "../../feed/src/delta/ids.js";
import { wireService, wireWorkload } from "../../feed/src/delta/records.js";
import {
  assemble,
  HEADER_BYTES,
  KIND_DELTA,
  KIND_FULL,
  KIND_NO_CHANGE,
  RECORD_SERVICE_REMOVE,
  RECORD_WORKLOAD_REMOVE,
  WireWriter,
  writeRemove,
  writeServiceUpsert,
  writeWorkloadUpsert,
  type WireService,
  type WireWorkload,
} from "../../feed/src/delta/wire.js";
import { assembleFull, FullAssembler, MAX_TABLE_REFS, MAX_TABLE_TEXTS, RECORD_WORKLOAD_COMPACT } from "../../feed/src/delta/wire_full.js";
import { MeshVm } from "../../bench/scale/mesh_vm.js";
import { readFileSync } from "node:fs";
import { decodeMessage } from "./delta_wire_decode.js";

function rec(write: (w: WireWriter) => void): Buffer {
  const w = new WireWriter(16);
  write(w);
  return w.copyFrom(0);
}

const workloadA: WireWorkload = {
  id: 7,
  flags: 1 | 2 | 4,
  network: "net1",
  identity: "spiffe://cluster.local/ns/default/sa/app",
  locality: "us-east1/us-east1-b/rack-ü",
  waypoint: { hostname: "waypoint.default.svc.cluster.local", port: 15008 },
  addresses: ["10.1.2.3", "2001:db8::17"],
  memberships: [
    { service: 0, overrides: [] },
    { service: 3, overrides: [[80, 8080], [443, 8443]] },
  ],
};
const workloadRemote: WireWorkload = {
  id: 70000,
  flags: 2 | 8,
  network: "net2",
  identity: "",
  locality: "",
  gateway: { address: "192.168.9.1", port: 15009 },
  addresses: [],
  memberships: [],
};
const serviceS: WireService = {
  id: 3,
  hostname: "app.default.svc.cluster.local",
  flags: 1 | 2 | 4 | 8,
  cluster: "outbound|80||custom",
  lbPrefs: 0x030201,
  ports: [[80, 8080], [443, 8443]],
  vips: [{ network: "net1", address: "10.96.0.5" }, { network: "", address: "fd00::5" }],
  waypoint: { address: "10.0.0.9", port: 15008 },
  sans: ["spiffe://cluster.local/ns/default/sa/app", "spiffe://other/ns/x/sa/y"],
};

describe("feed delta: format v2 encoder", () => {
  it("writes the header and every field of every record type, as the layout says", () => {
    const records = [
      rec((w) => writeRemove(w, RECORD_WORKLOAD_REMOVE, 5)),
      rec((w) => writeRemove(w, RECORD_SERVICE_REMOVE, 9)),
      rec((w) => writeServiceUpsert(w, serviceS)),
      rec((w) => writeWorkloadUpsert(w, workloadA)),
      rec((w) => writeWorkloadUpsert(w, workloadRemote)),
    ];
    const epoch = 1764626400123;
    const msg = assemble({ kind: KIND_DELTA, epoch, base: 41, version: 2 ** 40 + 1, workloadIdLimit: 70001, serviceIdLimit: 10 }, records);
    // Header bytes at their offsets.
    assert.equal(msg.readUInt32LE(0), 0x3148534d);
    assert.equal(msg.subarray(0, 4).toString("latin1"), "MSH1");
    assert.equal(msg.length, HEADER_BYTES + records.reduce((n, r) => n + r.length, 0));
    const d = decodeMessage(msg);
    assert.deepEqual({ ...d, records: undefined }, { kind: 2, epoch, base: 41, version: 2 ** 40 + 1, workloadIdLimit: 70001, serviceIdLimit: 10, records: undefined });
    assert.deepEqual(d.records[0], { type: "workloadRemove", id: 5 });
    assert.deepEqual(d.records[1], { type: "serviceRemove", id: 9 });
    assert.deepEqual(d.records[2], { type: "service", ...serviceS });
    assert.deepEqual(d.records[3], { type: "workload", ...workloadA });
    assert.deepEqual(d.records[4], { type: "workload", ...workloadRemote });
  });

  it("writes a full message as tables + compact workload records that say what the v1 records say, each text once", async () => {
    const epoch = 1764626400123;
    // 300 pods sharing two identities, one locality, two networks and one waypoint.
    const pods: WireWorkload[] = Array.from({ length: 300 }, (_, i) => ({
      ...workloadA,
      id: i,
      identity: `spiffe://cluster.local/ns/default/sa/app${i % 2}`,
      network: i % 3 === 0 ? "net2" : "net1",
      addresses: [`10.1.${i >> 8}.${i & 255}`],
    }));
    const service0 = { ...serviceS, id: 0, hostname: "zero.default.svc.cluster.local", vips: [] };
    const services = [rec((w) => writeServiceUpsert(w, service0)), rec((w) => writeServiceUpsert(w, serviceS))];
    const v1 = pods.map((p) => rec((w) => writeWorkloadUpsert(w, p)));
    const msg = assembleFull({ epoch, base: 0, version: 9, workloadIdLimit: 70001, serviceIdLimit: 4 }, [services, [...v1, rec((w) => writeWorkloadUpsert(w, workloadRemote))]]);
    assert.equal(msg.readUInt16LE(4), 3, "format 3");
    assert.equal(msg.readUInt16LE(6), KIND_FULL);
    assert.equal(msg.readUInt32LE(40), 303, "record count: services + workloads, tables not counted");
    // Tables right after the header: 2 networks + 2 identities + 1 locality + "" (the remote's texts), then 2 references.
    assert.equal(msg.readUInt32LE(HEADER_BYTES), 6);
    const d = decodeMessage(msg);
    assert.equal(d.records.length, 303);
    assert.deepEqual(d.records[1], { type: "service", ...serviceS });
    pods.forEach((p, i) => assert.deepEqual(d.records[2 + i], { type: "workload", ...p }, `pod ${i}`));
    assert.deepEqual(d.records[302], { type: "workload", ...workloadRemote });
    // Every workload record is compact, and the whole message is far smaller than the v1 records.
    const at = msg.indexOf(Buffer.from([RECORD_WORKLOAD_COMPACT, 0, 0, 0, 0]));
    assert.ok(at > HEADER_BYTES);
    const v1Bytes = v1.reduce((n, r) => n + r.length, 0);
    const compactBytes = msg.length - at;
    assert.ok(compactBytes * 3 < v1Bytes, `compact workloads ${compactBytes} B vs v1 ${v1Bytes} B`);
    const vm = await MeshVm.create();
    assert.equal(vm.apply(new Uint8Array(msg)), "", "the filters' decoder takes the compact full");
  });

  it("writes workloads inline once the tables are at the filters' limits, and the limits are the filters'", () => {
    const pods: WireWorkload[] = Array.from({ length: 20 }, (_, i) => ({ ...workloadA, id: i, memberships: [], identity: `spiffe://cluster.local/ns/default/sa/app${i}`, addresses: [`10.1.0.${i}`] }));
    const msg = assembleFull({ epoch: 5, base: 0, version: 1, workloadIdLimit: 20, serviceIdLimit: 1 }, [pods.map((p) => rec((w) => writeWorkloadUpsert(w, p)))], { texts: 10, refs: 3 });
    const types: number[] = [];
    const d = decodeMessage(msg, types);
    assert.ok(types.includes(RECORD_WORKLOAD_COMPACT) && types.includes(1), `both kinds: ${types.join(",")}`);
    assert.ok(msg.readUInt32LE(HEADER_BYTES) <= 10, "the text table within the limit");
    pods.forEach((p, i) => assert.deepEqual(d.records[i], { type: "workload", ...p }));
    // The filters' decoder refuses tables past these limits (assembly/mesh/wire_layout.ts).
    const source = readFileSync("assembly/mesh/wire_layout.ts", "utf8");
    assert.equal(Number(eval(source.match(/MAX_TABLE_TEXTS: i32 = ([^;]+);/)![1])), MAX_TABLE_TEXTS);
    assert.equal(Number(eval(source.match(/MAX_TABLE_REFS: i32 = ([^;]+);/)![1])), MAX_TABLE_REFS);
  });

  it("takes records written one after another into one reused buffer (each copied as it comes)", () => {
    const pods = Array.from({ length: 3 }, (_, i) => ({ ...workloadA, id: i, memberships: [], addresses: [`10.2.0.${i}`] }));
    const { waypoint: _w, cluster: _c, ...plain } = serviceS;
    const service = { ...plain, id: 0, flags: 0 };
    function* reused(): Generator<Buffer> {
      const w = new WireWriter(16);
      w.reset();
      writeServiceUpsert(w, service);
      yield w.view();
      for (const p of pods) {
        w.reset();
        writeWorkloadUpsert(w, p);
        yield w.view();
      }
    }
    const d = decodeMessage(assembleFull({ epoch: 5, base: 0, version: 1, workloadIdLimit: 3, serviceIdLimit: 1 }, [reused()]));
    assert.deepEqual(d.records, [{ type: "service", ...service }, ...pods.map((p) => ({ type: "workload", ...p }))]);
  });

  it("keeps each workload's compact record across full messages of one channel; a changed workload is transcoded again, old texts stay in the table", async () => {
    const assembler = new FullAssembler();
    const a = { ...workloadA, id: 0, memberships: [], addresses: ["10.1.0.1"] };
    const b = { ...workloadA, id: 1, memberships: [], addresses: ["10.1.0.2"] };
    const recA = rec((w) => writeWorkloadUpsert(w, a));
    const recB = rec((w) => writeWorkloadUpsert(w, b));
    const h = { epoch: 5, base: 0, workloadIdLimit: 2, serviceIdLimit: 1 };
    const first = assembler.build({ ...h, version: 1 }, [[recA, recB]]);
    const changed = { ...b, identity: "spiffe://cluster.local/ns/default/sa/renamed" };
    const second = assembler.build({ ...h, version: 2 }, [[recA, rec((w) => writeWorkloadUpsert(w, changed))]]);
    assert.deepEqual(decodeMessage(second).records, [{ type: "workload", ...a }, { type: "workload", ...changed }]);
    // The table grew by the new identity; the old one is still in it, unused.
    assert.equal(second.readUInt32LE(HEADER_BYTES), first.readUInt32LE(HEADER_BYTES) + 1);
    // The filters' decoder takes a table with unused texts, and reads the same model.
    const vm = await MeshVm.create();
    assert.equal(vm.apply(new Uint8Array(second)), "");
    const fresh = await MeshVm.create();
    assert.equal(fresh.apply(new Uint8Array(assembleFull({ ...h, version: 2 }, [[recA, rec((w) => writeWorkloadUpsert(w, changed))]]))), "");
    assert.equal(vm.digest(), fresh.digest());
  });

  it("converts the JSON model's objects: flags, default ports, lb prefs, sorted ports and overrides", () => {
    const w = wireWorkload(2, { uid: "u", addresses: ["10.0.0.1"], identity: "spiffe://td/ns/a/sa/b", tlsMode: "istio", healthy: false, networkGateway: { hostname: "gw.example", hboneMtlsPort: 15443 } }, []);
    assert.equal(w.flags, 1 | 8);
    assert.deepEqual(w.gateway, { hostname: "gw.example", port: 15443 });
    const s = wireService(4, { hostname: "h.ns.svc.cluster.local", ports: { "443": 8443, "80": 8080 }, loadBalancing: { routingPreference: ["zone", "network"], mode: "standard" }, waypoint: { address: "10.0.0.2" } });
    assert.deepEqual(s.ports, [[80, 8080], [443, 8443]]);
    assert.equal(s.lbPrefs, 0x0103);
    assert.equal(s.flags, 2 | 4);
    assert.deepEqual(s.waypoint, { address: "10.0.0.2", port: 15008 });
    assert.equal(wireService(5, { hostname: "x.y.svc.cluster.local" }).lbPrefs, 0x04030201);
  });

  it("refuses values its count fields cannot hold, naming the field", () => {
    const many = { ...workloadA, addresses: Array.from({ length: 256 }, (_, i) => `10.0.${i >> 8}.${i & 255}`) };
    assert.throws(() => rec((w) => writeWorkloadUpsert(w, many)), /workload 7\.addresses: 256 entries \(at most 255\)/);
    assert.throws(() => rec((w) => writeWorkloadUpsert(w, { ...workloadA, addresses: ["10.0.0.256"] })), /workload 7\.addresses: not an IP address/);
    assert.throws(() => rec((w) => writeServiceUpsert(w, { ...serviceS, hostname: "h".repeat(70000) })), /service 3\.hostname: 70000 bytes/);
  });

  it("parses IPv6 spellings into the same 16 bytes (compressed, full, embedded IPv4)", () => {
    const enc = (a: string) => rec((w) => w.address(a, "a"));
    assert.deepEqual(enc("2001:db8::1"), enc("2001:0db8:0:0:0:0:0:0001"));
    assert.deepEqual(enc("::ffff:10.0.0.1").subarray(13), Buffer.from([10, 0, 0, 1]));
    assert.deepEqual(enc("::"), Buffer.from([6, ...new Array(16).fill(0)]));
    for (const bad of ["1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", ":1::", "01.2.3.4", "1.2.3", "g::1"]) assert.throws(() => enc(bad), /not an IP address/, bad);
  });
});

describe("feed delta: ids (ids.ts)", () => {
  /** The canonical layout of a key set, computed from its definition: sorted by (home, hash, key), each at max(home, previous + 1). */
  const reference = (keys: Iterable<string>, load: number): Map<string, number> => {
    const list = [...keys];
    const size = sizeFor(list.length, load);
    const sorted = list.map((k) => ({ k, h: keyHash(k) })).sort((a, b) => (a.h % size) - (b.h % size) || a.h - b.h || (a.k < b.k ? -1 : 1));
    const out = new Map<string, number>();
    let last = -1;
    for (const { k, h } of sorted) {
      last = Math.max(h % size, last + 1);
      out.set(k, last);
    }
    return out;
  };
  const layout = (ids: CanonicalIds, keys: Iterable<string>) => new Map([...keys].map((k) => [k, ids.get(k)!]));

  it("depend only on the key set: random adds and removes in any order give the layout computed from scratch", () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    for (const load of [0.8, 0.5]) {
      const ids = new CanonicalIds(load);
      const live = new Set<string>();
      let moved = 0;
      for (let step = 0; step < 400; step++) {
        // Batches of adds and removes, so sizes grow and shrink across several steps of sizeFor.
        const removed: string[] = [];
        const added: string[] = [];
        const grow = step < 250 ? 6 : 1;
        for (let i = rand(8); i > 0; i--) if (live.size > 0 && rand(grow + 4) < 4) removed.push([...live][rand(live.size)]);
        for (let i = rand(2 * grow); i > 0; i--) {
          const k = `uid-${rand(100_000)}`;
          if (!removed.includes(k)) added.push(k);
        }
        const before = layout(ids, live);
        const moves = ids.change(removed, added);
        for (const k of removed) live.delete(k);
        for (const k of added) live.add(k);
        const want = reference(live, load);
        assert.deepEqual(layout(ids, live), want, `step ${step}`);
        // The moves are exactly the keys whose id changed.
        for (const k of new Set([...before.keys(), ...live])) {
          const b = before.get(k) ?? -1;
          const a = want.get(k) ?? -1;
          if (a !== b) {
            assert.deepEqual(moves.get(k), { before: b, after: a }, `step ${step} key ${k}`);
            if (a >= 0 && b >= 0) moved++;
          } else assert.equal(moves.has(k), false, `step ${step} key ${k} did not move`);
        }
        assert.equal(ids.limit, Math.max(0, ...want.values()) + (want.size > 0 ? 1 : 0));
        assert.ok(ids.limit <= ids.tableSize + live.size, "ids stay below the table size plus the overflow");
      }
      assert.ok(moved > 0, "some adds and removes moved other keys (the test exercised the runs)");
      // Undo is the inverse change: the same set, so the same layout.
      const snapshot = layout(ids, live);
      ids.change(["uid-1", [...live][0]], ["x", "y"]);
      ids.change(["x", "y"], [[...live][0]]);
      assert.deepEqual(layout(ids, live), snapshot);
    }
  });

  it("two tables fed the same keys in different orders agree; 100,000 keys stay within 1.31x ids", () => {
    const keys = Array.from({ length: 100_000 }, (_, i) => `0f0e${i.toString(16)}-pod`);
    const a = new CanonicalIds(0.8);
    a.change([], keys);
    const b = new CanonicalIds(0.8);
    for (let i = keys.length - 1; i >= 0; i -= 1000) b.change([], keys.slice(Math.max(0, i - 999), i + 1));
    assert.deepEqual(layout(a, keys), layout(b, keys));
    assert.equal(a.tableSize, 131_072);
    assert.ok(a.limit <= 131_072 + 64, `limit ${a.limit}`);
  });
});

describe("feed delta: the filter's decoder refuses before publishing (filter_shadow.ts)", () => {
  // The inputs the feed's checks must refuse, judged by the compiled passthrough_mtls in the
  // feed's shadow VM: the refusal is the filter's own line, naming the record and the field.
  const epoch = 17;
  const svc = (over: Partial<WireService> = {}) => rec((w) => writeServiceUpsert(w, { ...serviceS, id: 0, flags: 0, cluster: undefined, waypoint: undefined, ...over }));
  const wl = (over: Partial<WireWorkload> = {}) => rec((w) => writeWorkloadUpsert(w, { ...workloadA, id: 0, flags: 1 | 2, waypoint: undefined, memberships: [{ service: 0, overrides: [] }], ...over }));
  const full = (records: Buffer[], w = 4, s = 4) => assembleFull({ epoch, base: 0, version: 1, workloadIdLimit: w, serviceIdLimit: s }, [records]);
  const delta = (base: number, records: Buffer[], w = 4, s = 4) => assemble({ kind: KIND_DELTA, epoch, base, version: base + 1, workloadIdLimit: w, serviceIdLimit: s }, records);
  const wasm = new Uint8Array(readFileSync(ensureBuilt("passthrough_mtls")));
  /** A channel at version 1 holding `published` (what FilterShadow asks of its DeltaChannel). */
  const at1 = (published: Buffer) => ({
    version: 1,
    full: () => published,
    noChange: () => assemble({ kind: KIND_NO_CHANGE, epoch, base: 0, version: 1, workloadIdLimit: 4, serviceIdLimit: 4 }, []),
  });
  const shadowOf = () => new FilterShadow({ name: "mesh", filter: "passthrough_mtls", network: "net1", config: {} }, () => wasm);

  it("takes a valid compact full message, then deltas from its version only", () => {
    const shadow = shadowOf();
    const source = at1(full([svc(), wl()]));
    assert.equal(shadow.check(delta(1, [wl({ locality: "r" })]), source), "");
    shadow.reset();
    assert.match(shadow.check(delta(0, [wl()]), source), /^passthrough_mtls refuses it: delta from epoch 17 version 0, but this VM is at epoch 17 version 1$/);
    shadow.reset();
  });

  it("refuses, naming the record and field: identity, locality, hostname, SAN, limits, memberships, addresses, VIPs", () => {
    const shadow = shadowOf();
    const source = at1(full([svc(), wl()]));
    const cases: Array<[Buffer, RegExp]> = [
      [delta(1, [wl({ identity: "" })]), /^passthrough_mtls refuses it: record 0 \(workload upsert id 0\)\.identity: required/],
      [delta(1, [wl({ identity: "spiffe://Bad/ns/a/sa/b" })]), /^passthrough_mtls refuses it: record 0 \(workload upsert id 0\)\.identity: not a SPIFFE identity/],
      [delta(1, [wl({ locality: "a//b" })]), /^passthrough_mtls refuses it: record 0 \(workload upsert id 0\)\.locality: not a locality/],
      [delta(1, [svc({ id: 1, hostname: "bad|host", vips: [] })]), /^passthrough_mtls refuses it: record 0 \(service upsert id 1\)\.hostname: not a hostname/],
      [delta(1, [svc({ id: 1, hostname: "b.svc", vips: [], sans: ["a,b"] })]), /^passthrough_mtls refuses it: record 0 \(service upsert id 1\)\.subjectAltNames\[0\]: must not contain ','/],
      [delta(1, [wl({ id: 4 })]), /^passthrough_mtls refuses it: record 0 \(workload upsert id 4\)\.id: not below the workload id limit 4/],
      [delta(1, [wl({ id: 1, addresses: ["10.8.8.8"], memberships: [{ service: 2, overrides: [] }] })]), /^passthrough_mtls refuses it: record 0 \(workload upsert id 1\)\.memberships\[0\]\.service: service 2 is not live/],
      [delta(1, [rec((w) => writeRemove(w, RECORD_SERVICE_REMOVE, 0)), wl({ id: 1, addresses: ["10.9.9.9"] })]), /^passthrough_mtls refuses it: record 1 \(workload upsert id 1\)\.memberships\[0\]\.service: service 0 is not live/],
      [delta(1, [wl({ id: 1 })]), /^passthrough_mtls refuses it: record 0 \(workload upsert id 1\)\.addresses\[0\]: address 10\.1\.2\.3 .* already used by workload 0/],
      [delta(1, [svc({ id: 1 })]), /^passthrough_mtls refuses it: record 0 \(service upsert id 1\)\.hostname: duplicate hostname/],
      [delta(1, [svc({ id: 1, hostname: "other.svc" })]), /^passthrough_mtls refuses it: record 0 \(service upsert id 1\)\.vips\[0\]\.address: VIP 10\.96\.0\.5 is already used by service 0/],
      [delta(1, [wl({ id: 1, flags: 2, identity: "", addresses: [] })]), /^passthrough_mtls refuses it: record 0 \(workload upsert id 1\)\.addresses: must not be empty unless networkGateway/],
    ];
    for (const [m, re] of cases) assert.match(shadow.check(m, source), re);
    // Claims move: the owner re-upserted without the address, or removed, frees it in the same message.
    assert.equal(shadow.check(delta(1, [rec((w) => writeRemove(w, RECORD_WORKLOAD_REMOVE, 0)), wl({ id: 1 })]), source), "");
    shadow.reset();
    assert.equal(shadow.check(delta(1, [wl({ id: 0, addresses: ["10.7.7.7"] }), wl({ id: 1 })]), source), "");
    shadow.reset();
    // Truncated and trailing bytes.
    const good = delta(1, [wl({ locality: "r" })]);
    const cut = Buffer.from(good.subarray(0, good.length - 3));
    cut.writeUInt32LE(cut.length - HEADER_BYTES, 44);
    assert.match(shadow.check(cut, source), /^passthrough_mtls refuses it: record 0 \(workload upsert id 0\)\.memberships/);
    const longer = Buffer.concat([good, Buffer.from([0])]);
    // (Format 3: bytes after the body are the bucket trailer, and one byte is not a trailer.)
    assert.match(shadow.check(longer, source), /^passthrough_mtls refuses it: trailer: 1 bytes/);
    longer.writeUInt32LE(longer.length - HEADER_BYTES, 44);
    assert.match(shadow.check(longer, source), /^passthrough_mtls refuses it: .*1 byte/);
    // Every refusal left the VM at version 1: it came back with a no-change, never a full load.
    assert.deepEqual([shadow.rebuilds, shadow.resyncs], [3, 0]);
    assert.ok(shadow.recoveries >= 12, `${shadow.recoveries} recoveries`);
    assert.equal(shadow.check(good, source), "");
    shadow.reset();
  });
});

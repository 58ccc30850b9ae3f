// Resync by difference (feed/docs/deltas.md, "Content versions"): two feed processes that hold
// the same mesh — built from the same objects listed in different orders, as two replicas or a
// restarted feed would — give every object the same id and the channel the same content digest,
// so a VM current with one gets a 56-byte no-change from the other instead of a full message.
// A filter built before format 3 (the committed fixture, tests/fixtures/wire_v2) declares no
// format and is served format 2 by the same feed; both converge on the same model. VMs are the
// compiled filters in the project's proxy-wasm host (tests/support/delta_vm.ts).
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { readFileSync } from "node:fs";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { MeshComputer, type MeshOptions } from "../../feed/src/compute.js";
import { DEFAULT_DELTA } from "../../feed/src/config.js";
import { DeltaChannel } from "../../feed/src/delta/channel.js";
import { asPreviousFormat } from "../../feed/src/delta/wire.js";
import { FilterShadow } from "../../feed/src/delta/filter_shadow.js";
import { NetworkView } from "../../feed/src/delta/network_view.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { ensureBuilt } from "../host/helpers.js";
import { ChannelVm } from "../support/delta_vm.js";
import { wireV2Filter } from "../support/wire_v2_fixture.js";
import { DecodedModel, decodeMessage, formatOf } from "./delta_wire_decode.js";
import { namespace, pod, service, slice } from "./fixtures.js";

const OPTIONS: MeshOptions = { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() };
const SERVICES = ["alpha", "beta", "gamma", "delta", "epsilon"];
const newFilter = new Uint8Array(readFileSync(ensureBuilt("passthrough_mtls")));

/** The mesh's objects: `pods` pods over the services, written in the given order. */
interface PodSpec {
  ip: string;
  sa: string;
  svc: string;
}

function podSpecs(n: number): Map<string, PodSpec> {
  const out = new Map<string, PodSpec>();
  for (let i = 0; i < n; i++) out.set(`p-${i}`, { ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, sa: `sa${i % 7}`, svc: SERVICES[i % SERVICES.length] });
  return out;
}

/** One feed process: its own objects (listed in its own order), compute, view and channel. */
class FeedProcess {
  readonly objects = new ClusterObjects("c1");
  readonly computer = new MeshComputer(OPTIONS);
  readonly view = new NetworkView("");
  readonly channel: DeltaChannel;

  constructor(epoch: number, pods: Map<string, PodSpec>, reverse: boolean) {
    this.channel = new DeltaChannel(epoch, DEFAULT_DELTA, [new FilterShadow({ name: "mesh", filter: "passthrough_mtls", network: "", config: {} }, () => newFilter)]);
    const c = this.objects;
    c.upsert("namespaces", namespace("default"));
    const services = reverse ? [...SERVICES].reverse() : SERVICES;
    for (const s of services) c.upsert("services", service("default", s, [{ name: "http", port: 80, targetPort: 8080 }], { clusterIP: `10.96.0.${SERVICES.indexOf(s) + 1}` }));
    const entries = [...pods.entries()];
    if (reverse) entries.reverse();
    for (const [name, p] of entries) this.setPod(name, p);
    this.writeSlices(pods);
    this.publish();
  }

  setPod(name: string, p: PodSpec): void {
    this.objects.upsert("pods", pod("default", name, { ip: p.ip, sa: p.sa, labels: { app: p.svc, "security.istio.io/tlsMode": "istio" } }));
  }

  removePod(name: string): void {
    this.objects.remove("pods", pod("default", name));
  }

  writeSlices(pods: Map<string, PodSpec>): void {
    for (const s of SERVICES) {
      const eps = [...pods.entries()].filter(([, p]) => p.svc === s).map(([name, p]) => ({ ip: p.ip, pod: name }));
      this.objects.upsert("endpointSlices", slice("default", s, `${s}-1`, [{ name: "http", port: 8080 }], eps));
    }
  }

  publish(): void {
    const { mesh, changes } = this.computer.update([this.objects]);
    const outcome = this.channel.publish(this.view, mesh, this.view.update(mesh, changes));
    assert.ok(!("error" in outcome && outcome.error), JSON.stringify(outcome));
  }

  /** What a client holding the full message has (records by content, ids included). */
  contents(): { workloads: string[]; services: string[] } {
    const m = new DecodedModel();
    m.apply(decodeMessage(this.channel.full()));
    return m.contents();
  }

  close(): void {
    this.channel.close();
  }
}

describe("feed delta: content versions and ids (resync by difference)", () => {
  const opened: Array<{ close(): void } | { dispose(): void }> = [];
  after(() => {
    for (const o of opened) ("close" in o ? o.close() : o.dispose());
  });

  it("two feed processes over the same mesh, listed in opposite orders, give the same ids and content digest", () => {
    const pods = podSpecs(600);
    const a = new FeedProcess(1001, pods, false);
    const b = new FeedProcess(2002, pods, true);
    opened.push(a, b);
    assert.notEqual(a.channel.contentDigest, 0n);
    assert.equal(a.channel.contentDigest, b.channel.contentDigest);
    for (const uid of a.view.workloads.keys()) assert.equal(b.channel.idOf(false, uid), a.channel.idOf(false, uid), uid);
    for (const h of a.view.services.keys()) assert.equal(b.channel.idOf(true, h), a.channel.idOf(true, h), h);
    assert.deepEqual(a.contents(), b.contents());
    // The header carries it, in format 3 only.
    assert.deepEqual(formatOf(a.channel.full()), { format: 3, digest: a.channel.contentDigest });
    // A caller of the previous format gets the same records without the trailer, written as a
    // header of its own and a view of the format-3 message (no copy), byte for byte the message
    // asPreviousFormat makes.
    const previous = a.channel.answer(0, 0, { format: 2 });
    assert.ok(previous.parts && previous.parts.records.buffer === a.channel.full().buffer, "the records are a view of the built message");
    assert.deepEqual(formatOf(previous.body), { format: 2, digest: 0n });
    assert.ok(previous.body.equals(asPreviousFormat(a.channel.full())), "head + records = the previous format's message");
    // The same changes on both, in different orders, keep them equal; a different change does not.
    for (const f of [a, b]) {
      const order = f === a ? ["p-3", "p-400"] : ["p-400", "p-3"];
      for (const name of order) f.removePod(name);
      f.setPod("p-9000", { ip: "10.9.9.9", sa: "sa1", svc: "beta" });
      const next = new Map(pods);
      next.delete("p-3");
      next.delete("p-400");
      next.set("p-9000", { ip: "10.9.9.9", sa: "sa1", svc: "beta" });
      f.writeSlices(next);
      f.publish();
    }
    assert.equal(a.channel.contentDigest, b.channel.contentDigest);
    assert.deepEqual(a.contents(), b.contents());
    b.setPod("p-1", { ip: "10.0.0.1", sa: "other", svc: "alpha" });
    b.publish();
    assert.notEqual(a.channel.contentDigest, b.channel.contentDigest);
  });

  it("a VM current with one process gets a no-change from the other (56 bytes); an old filter gets format 2 from both, and both models agree", () => {
    const pods = podSpecs(2000);
    const a = new FeedProcess(1001, pods, false);
    opened.push(a);
    const current = new ChannelVm(newFilter, "new");
    const old = new ChannelVm(wireV2Filter(), "old");
    opened.push(current, old);
    // The old build declares no format; the new one declares 3 (and, once it has a model, its digest).
    assert.equal(old.nextQuery().get("format"), null);
    assert.equal(current.nextQuery().get("format"), "3");
    const first = current.pump(a.channel);
    const firstOld = old.pump(a.channel);
    assert.equal(first.kind, 1);
    assert.equal(formatOf(first.body).format, 3);
    assert.equal(formatOf(firstOld.body).format, 2);
    assert.equal(current.metric("applied_full"), 1, current.warnings().join("\n"));
    assert.equal(old.metric("applied_full"), 1, old.warnings().join("\n"));
    // What each VM was sent, applied by the test's own decoder: the same model (format aside).
    const seen = new DecodedModel();
    const seenOld = new DecodedModel();
    seen.applyBody(first.body);
    seenOld.applyBody(firstOld.body);
    assert.deepEqual(seenOld.contents(), seen.contents());
    assert.equal(current.nextQuery().get("digest"), a.channel.contentDigest.toString(16).padStart(16, "0"));

    // "A restart": another process, the same mesh listed in another order, another epoch.
    const b = new FeedProcess(5005, pods, true);
    opened.push(b);
    const bytesBefore = current.bytes;
    const again = current.pump(b.channel);
    seen.applyBody(again.body);
    assert.equal(again.kind, 3, "a no-change");
    assert.equal(again.rebased, true);
    assert.equal(current.bytes - bytesBefore, 56, "the VM received the 56-byte header only");
    assert.equal(current.metric("applied_full"), 1, "no full load");
    assert.equal(current.metric("no_change"), 1);
    assert.equal(current.metric("refused"), 0, current.warnings().join("\n"));
    // It is now at b's epoch and version: the next poll is held (up to date), and b's next change is a delta.
    const q = current.nextQuery();
    assert.equal(q.get("epoch"), "5005");
    assert.equal(q.get("version"), String(b.channel.version));
    assert.ok(b.channel.upToDate(5005, b.channel.version));
    // The old filter, at a's epoch, gets a full message (format 2) from b: the previous behaviour.
    const oldAgain = old.pump(b.channel);
    seenOld.applyBody(oldAgain.body);
    assert.equal(oldAgain.kind, 1);
    assert.equal(formatOf(oldAgain.body).format, 2);
    assert.equal(old.metric("applied_full"), 2, old.warnings().join("\n"));

    // A change: both VMs follow b with deltas (format 3 and 2) and still agree.
    b.removePod("p-7");
    b.setPod("p-8", { ip: "10.77.0.8", sa: "sa-new", svc: "gamma" });
    const next = new Map(pods);
    next.delete("p-7");
    next.set("p-8", { ip: "10.77.0.8", sa: "sa-new", svc: "gamma" });
    b.writeSlices(next);
    b.publish();
    const d = current.pump(b.channel);
    const dOld = old.pump(b.channel);
    seen.applyBody(d.body);
    seenOld.applyBody(dOld.body);
    assert.equal(d.kind, 2);
    assert.equal(dOld.kind, 2);
    assert.equal(formatOf(dOld.body).format, 2);
    assert.equal(current.metric("applied_delta"), 1, current.warnings().join("\n"));
    assert.equal(old.metric("applied_delta"), 1, old.warnings().join("\n"));
    assert.deepEqual(seen.contents(), b.contents());
    assert.deepEqual(seenOld.contents(), b.contents());
    assert.equal(seen.digest, b.channel.contentDigest);
    assert.equal(current.metric("refused") + old.metric("refused"), 0);
  });

  /** `pods` with k changes: removals, new service accounts, additions (a third each). */
  function changed(pods: Map<string, PodSpec>, k: number): Map<string, PodSpec> {
    const out = new Map(pods);
    for (let i = 0; i < k; i++) {
      const name = `p-${(i * 97) % pods.size}`;
      if (i % 3 === 0) out.delete(name);
      else if (i % 3 === 1) out.set(name, { ...pods.get(name)!, sa: `moved-${i}` });
      else out.set(`new-${i}`, { ip: `10.200.${i >> 8}.${i & 255}`, sa: "sa2", svc: SERVICES[i % SERVICES.length] });
    }
    return out;
  }

  for (const k of [3, 30]) {
    it(`a VM that missed ${k} changes while the feed restarted gets their buckets only (ask, its digests, a repair), and the model a fresh full load gives`, () => {
      const pods = podSpecs(5000);
      const a = new FeedProcess(1001, pods, false);
      const vm = new ChannelVm(newFilter, `repair-${k}`);
      opened.push(a, vm);
      const seen = new DecodedModel();
      seen.applyBody(vm.pump(a.channel).body);
      assert.equal(vm.metric("applied_full"), 1, vm.warnings().join("\n"));
      const fullBytes = vm.bytes;

      // The restarted feed (or another replica) has the mesh after k changes the VM never saw.
      const b = new FeedProcess(7007, changed(pods, k), true);
      opened.push(b);
      const before = vm.bytes;
      const ask = vm.pump(b.channel);
      assert.equal(ask.kind, 5, "the feed asks for the bucket digests");
      assert.equal(ask.body.length, 56);
      const repair = vm.pump(b.channel);
      assert.deepEqual(vm.methods.slice(-2), ["GET", "POST"]);
      assert.equal(vm.sent, 8192 * 8, "the VM sent its 8192 bucket digests");
      assert.equal(repair.kind, 4, `a repair (got kind ${repair.kind}, reason ${repair.reason})`);
      seen.applyBody(repair.body);
      assert.equal(vm.metric("applied_repair"), 1, vm.warnings().join("\n"));
      assert.equal(vm.metric("applied_full"), 1, "no second full load");
      assert.equal(vm.metric("refused"), 0, vm.warnings().join("\n"));
      const received = vm.bytes - before;
      // O(k): each change touches a bucket or two (a removal or addition shifts the ids after it
      // in its run, which stay in the same range of 4 ids or the next few), and at 5,000 pods (an
      // id table of 8,192: 2,048 ranges of 4) a bucket holds ~2-3 records of ~90 bytes.
      assert.ok(repair.records <= 16 * k, `${repair.records} records for ${k} changes`);
      assert.ok(received < 56 + 1600 * k, `${received} bytes for ${k} changes (a full message: ${fullBytes})`);
      console.log(`repair after ${k} missed changes at 5,000 pods: ${received} bytes received (${repair.records} records), ${vm.sent} sent; full message ${fullBytes} bytes`);

      // The model is what a fresh full load of the restarted feed gives, ids included, and the
      // VM says so: its next poll names b's epoch, version and content digest.
      const fresh = new DecodedModel();
      fresh.applyBody(b.channel.full());
      assert.deepEqual(seen.records(), fresh.records());
      const q = vm.nextQuery();
      assert.equal(q.get("epoch"), "7007");
      assert.equal(q.get("version"), String(b.channel.version));
      assert.equal(q.get("digest"), b.channel.contentDigest.toString(16).padStart(16, "0"));
      // And it follows b with deltas from there.
      b.removePod("p-1");
      b.writeSlices((() => {
        const m = changed(pods, k);
        m.delete("p-1");
        return m;
      })());
      b.publish();
      const d = vm.pump(b.channel);
      assert.equal(d.kind, 2);
      assert.equal(vm.metric("applied_delta"), 1, vm.warnings().join("\n"));
    });
  }

  it("a VM whose digests' POST reaches no feed (a dead replica behind a round robin) sends them again, not a GET that the live replica answers with another ask; after a 4xx it starts over", () => {
    const pods = podSpecs(500);
    const a = new FeedProcess(1001, pods, false);
    const vm = new ChannelVm(newFilter, "repair-retry");
    opened.push(a, vm);
    vm.pump(a.channel);
    const b = new FeedProcess(7007, changed(pods, 3), true);
    opened.push(b);
    assert.equal(vm.pump(b.channel).kind, 5, "the live replica asks for the digests");
    assert.equal(vm.fail(503), "POST", "the digests go to the dead replica");
    // After the backoff, the digests again (to whichever replica the cluster picks next).
    assert.equal(vm.fail(503), "POST", "still the digests after a second failure");
    const repair = vm.pump(b.channel);
    assert.equal(repair.kind, 4, `a repair (got kind ${repair.kind})`);
    assert.deepEqual([vm.metric("applied_full"), vm.metric("applied_repair"), vm.metric("unavailable"), vm.metric("refused")], [1, 1, 2, 0], vm.warnings().join("\n"));
    // A feed that refuses the POST itself (4xx): the next poll is a GET with the model's digest.
    const c = new FeedProcess(9009, changed(pods, 6), false);
    opened.push(c);
    assert.equal(vm.pump(c.channel).kind, 5);
    assert.equal(vm.fail(400), "POST");
    const q = vm.nextQuery();
    assert.equal(vm.fail(503), "GET", "after a 4xx the client starts over");
    assert.equal(q.get("repair"), null);
    assert.equal(q.get("epoch"), "7007");
  });

  it("a VM refuses a malformed repair whole (trailer, buckets, record kinds) and asks for a full model; its model stays", () => {
    const pods = podSpecs(300);
    const a = new FeedProcess(1001, pods, false);
    const b = new FeedProcess(7007, changed(pods, 6), true);
    opened.push(a, b);
    const good = (() => {
      const probe = new ChannelVm(newFilter, "probe");
      opened.push(probe);
      probe.pump(a.channel);
      probe.pump(b.channel);
      const r = probe.pump(b.channel);
      assert.equal(r.kind, 4);
      return r.body;
    })();
    const end = 56 + good.readUInt32LE(44);
    const count = good.readUInt32LE(end);
    assert.ok(count >= 2 && good.readUInt32LE(40) >= 1, "the repair lists buckets and carries records");
    const mutate = (f: (m: Buffer) => Buffer) => f(Buffer.from(good));
    const cases: Array<[string, Buffer, RegExp]> = [
      ["no trailer", mutate((m) => {
        const out = Buffer.from(m.subarray(0, end));
        return out;
      }), /trailer: missing/],
      ["trailer count too large", mutate((m) => (m.writeUInt32LE(count + 1, end), m)), /trailer/],
      ["buckets out of order", mutate((m) => {
        const first = m.readUInt32LE(end + 4);
        m.writeUInt32LE(m.readUInt32LE(end + 16), end + 4);
        m.writeUInt32LE(first, end + 16);
        return m;
      }), /trailer\.buckets/],
      ["a bucket digest that does not add up", mutate((m) => (m.writeBigUInt64LE(m.readBigUInt64LE(end + 8) ^ 1n, end + 8), m)), /do not add up/],
      ["a record outside the listed buckets", mutate((m) => {
        // The first record's id moved to a bucket the trailer does not list (the digests still add up).
        const listed = new Set(Array.from({ length: count }, (_, i) => m.readUInt32LE(end + 4 + 12 * i)));
        const type = m[56];
        let id = m.readUInt32LE(57);
        do id += 1; while (listed.has((type === 3 ? 4096 : 0) + ((id >> 2) % 4096)));
        m.writeUInt32LE(id, 57);
        return m;
      }), /which the trailer does not list|not below/],
      ["a removal record", mutate((m) => {
        const out = Buffer.alloc(m.length + 5);
        m.copy(out, 0, 0, 56);
        out[56] = 2;
        out.writeUInt32LE(1, 57);
        m.copy(out, 61, 56);
        out.writeUInt32LE(out.readUInt32LE(40) + 1, 40);
        out.writeUInt32LE(out.readUInt32LE(44) + 5, 44);
        return out;
      }), /repair carries workload and service upserts only/],
      ["a body cut short", mutate((m) => (m.writeUInt32LE(m.readUInt32LE(44) - 3, 44), m)), /truncated|bytes follow|trailer/],
    ];
    for (const [name, body, why] of cases) {
      const vm = new ChannelVm(newFilter, `bad-${name}`);
      opened.push(vm);
      vm.pump(a.channel);
      const digestBefore = vm.nextQuery().get("digest");
      assert.equal(vm.pump(b.channel).kind, 5, name);
      assert.equal(vm.respond(body), "POST", name);
      assert.equal(vm.metric("refused"), 1, `${name}: refused`);
      assert.equal(vm.metric("applied_repair"), 0, name);
      const line = vm.warnings().join("\n");
      assert.match(line, why, `${name}: ${line}`);
      // The model in force stays (the next full load replaces it; until then it decides).
      const q = vm.nextQuery();
      assert.equal(q.get("epoch"), "0", `${name}: a refused message asks for a full model`);
      assert.equal(vm.host.pendingHttpCalls[0].method, "GET");
      void digestBefore;
      assert.equal(vm.metric("version"), a.channel.version, `${name}: still at a's version`);
    }
  });
});

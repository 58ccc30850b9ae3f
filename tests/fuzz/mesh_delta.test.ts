// The fuzzer extended to the mesh feed's binary messages: structure-aware deltas
// (valid ones built from a reference state, then byte-level damage: flips, inserts, deletes,
// truncations, duplicated runs) and full messages, applied to the model-only VM
// (bench/scale/mesh_vm.ts). Oracles, per case:
//   - no input traps the VM (the module's abort throws, which fails the test);
//   - a refusal is one line naming the record (or the header) and the field, and leaves the
//     model exactly as it was (its digest is unchanged);
//   - an accepted message leaves a consistent model: every address, VIP and hostname the
//     digest lists looks up to its owner, every membership is in its service's endpoints;
//   - an undamaged delta is accepted and gives the model a full load of the same state gives;
//   - VM memory does not keep growing over the run.
// One case in ten sends, instead of the delta, the repair (format 3, kind 4) that states the
// buckets the delta touched exactly as the reference state has them (wire_repair.ts): the same
// oracles, and an undamaged repair gives the model the full load of the same state gives.
// Every 300 cases it also feeds one of the crafted messages of mesh_corpus.ts (the largest
// lists, maximum declared limits, a dangling membership), whole and damaged, to a second VM:
// the whole one decodes or is refused as the corpus says, a damaged one never traps and is
// refused with a named field or applied, and that VM's memory stays bounded.
// The seed is fixed (MESH_FUZZ_SEED / MESH_FUZZ_CASES override it to explore further).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MeshVm } from "../../bench/scale/mesh_vm.js";
import { encodeMessage, KIND, WireRecord, WireService, WireWorkload } from "../support/mesh_wire.js";
import { caseSeed, Rng } from "./rng.js";
import { damageBytes } from "./properties.js";
import { craftedCorpus } from "./mesh_corpus.js";
import { KIND_REPAIR, withBuckets } from "../../feed/src/delta/wire.js";

/** The repair from `before` to `after`: every id whose object differs, its bucket listed and stated exactly. */
function repairMessage(before: { workloads: Map<number, WireWorkload>; services: Map<number, WireService> }, after: State): Uint8Array {
  const records: WireRecord[] = [];
  const buckets = new Map<number, bigint>();
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  // Buckets are ranges of 4 ids (digest.ts): a listed bucket states every object in it.
  for (let id = 0; id < LIMITS.services; id++) if (!same(before.services.get(id), after.services.get(id))) buckets.set(4096 + (id >> 2), 0n);
  for (let id = 0; id < LIMITS.workloads; id++) if (!same(before.workloads.get(id), after.workloads.get(id))) buckets.set(id >> 2, 0n);
  for (const [id, s] of after.services) if (buckets.has(4096 + (id >> 2))) records.push({ service: s });
  for (const [id, w] of after.workloads) if (buckets.has(id >> 2)) records.push({ workload: w });
  const body = Buffer.from(encodeMessage({ kind: KIND.delta, epoch: 3, baseVersion: 0n, version: after.version, workloadIdLimit: LIMITS.workloads, serviceIdLimit: LIMITS.services, records }));
  body.writeUInt16LE(KIND_REPAIR, 6);
  body.writeBigUInt64LE(0n, 16);
  const out = withBuckets(body, buckets);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

const SEED = process.env.MESH_FUZZ_SEED !== undefined ? Number(process.env.MESH_FUZZ_SEED) : 20261202;
const CASES = process.env.MESH_FUZZ_CASES !== undefined ? Number(process.env.MESH_FUZZ_CASES) : 6_000;
const LIMITS = { workloads: 24, services: 8 };
const REFUSAL = /^(header|tables|record \d+ \((workload upsert|workload remove|service upsert|service remove|type \d+)( id \d+)?\))(\.[A-Za-z]+(\[\d+\])?(\.[A-Za-z]+(\[\d+\])?)*)?: \S/;

class State {
  workloads = new Map<number, WireWorkload>();
  services = new Map<number, WireService>();
  version = 1n;
  private nextIp = 1;

  constructor(private rng: Rng) {}

  ip(): string {
    const n = this.nextIp++;
    return this.rng.chance(0.15) ? `fd00::${n.toString(16)}` : `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
  }

  workload(id: number): WireWorkload {
    const rng = this.rng;
    const live = [...this.services.keys()];
    const memberships = live.filter(() => rng.chance(0.3)).map((service) => ({ service, ...(rng.chance(0.2) ? { overrides: [[80, rng.range(1, 65535)] as [number, number]] } : {}) }));
    const gateway = rng.chance(0.1);
    const istio = rng.chance(0.5);
    return {
      id,
      istio,
      healthy: rng.chance(0.9),
      identity: istio || rng.chance(0.3) ? `spiffe://td/ns/n${rng.int(3)}/sa/s${rng.int(4)}` : "",
      network: rng.pick(["", "", "west", "east"]),
      locality: rng.pick(["", "r", "r/z", "r/z/s", "q/y"]),
      ...(rng.chance(0.1) ? { waypoint: rng.chance(0.5) ? { hostname: "wp.ns.svc", port: 15008 } : { address: "10.250.0.1", port: 15009 } } : {}),
      ...(gateway ? { gateway: { address: "192.0.2.9", port: 15443 } } : {}),
      addresses: gateway && rng.chance(0.5) ? [] : Array.from({ length: rng.range(1, 2) }, () => this.ip()),
      memberships,
    };
  }

  service(id: number): WireService {
    const rng = this.rng;
    return {
      id,
      hostname: `s${id}-${rng.int(1000)}.ns.svc`,
      headless: rng.chance(0.3),
      lbStandard: rng.chance(0.3),
      ...(rng.chance(0.2) ? { cluster: `c${id}` } : {}),
      ports: rng.chance(0.8) ? [[80, rng.range(1, 9000)]] : [[80, 80], [443, 8443]],
      vips: rng.chance(0.7) ? [{ address: this.ip() }] : [],
      ...(rng.chance(0.2) ? { waypoint: { hostname: "wp.ns.svc", port: 15008 } } : {}),
      sans: rng.chance(0.3) ? [`spiffe://td/ns/n/sa/s${id}`] : [],
    };
  }

  full(): Uint8Array {
    const records: WireRecord[] = [...[...this.services.values()].map((service) => ({ service })), ...[...this.workloads.values()].map((workload) => ({ workload }))];
    return encodeMessage({ kind: KIND.full, epoch: 3, version: this.version, workloadIdLimit: LIMITS.workloads, serviceIdLimit: LIMITS.services, records });
  }

  /** A valid delta of a few changes, applied to this reference state. */
  delta(): Uint8Array {
    const rng = this.rng;
    const records: WireRecord[] = [];
    for (let n = rng.range(1, 6); n > 0; n--) {
      const op = rng.int(10);
      if (op < 5) {
        const w = this.workload(rng.int(LIMITS.workloads));
        this.workloads.set(w.id, w);
        records.push({ workload: w });
      } else if (op < 7) {
        const id = rng.int(LIMITS.workloads);
        this.workloads.delete(id);
        records.push({ removeWorkload: id });
      } else if (op < 9) {
        const s = this.service(rng.int(LIMITS.services));
        this.services.set(s.id, s);
        records.push({ service: s });
      } else {
        const id = rng.int(LIMITS.services);
        this.services.delete(id);
        records.push({ removeService: id });
        // Copies, not in place: a refused case restores the maps, and must find the old objects.
        for (const [k, w] of this.workloads) this.workloads.set(k, { ...w, memberships: (w.memberships ?? []).filter((m) => m.service !== id) });
      }
    }
    // The model's rule: a workload's last record in the message is its state, with memberships
    // of the services live after the message (the records are made to name only those).
    const lastOf = new Map<number, WireWorkload | undefined>();
    for (const r of records) {
      if ("workload" in r) {
        r.workload.memberships = (r.workload.memberships ?? []).filter((m) => this.services.has(m.service));
        lastOf.set(r.workload.id, r.workload);
      } else if ("removeWorkload" in r) lastOf.set(r.removeWorkload, undefined);
    }
    for (const [id, w] of lastOf) if (w !== undefined) this.workloads.set(id, w);
    const base = this.version;
    this.version += 1n;
    return encodeMessage({ kind: KIND.delta, epoch: 3, baseVersion: base, version: this.version, workloadIdLimit: LIMITS.workloads, serviceIdLimit: LIMITS.services, records });
  }
}

/** What is wrong with the digest's own lookups, or undefined. */
function inconsistency(digest: string): string | undefined {
  for (const line of digest.split("\n")) {
    if (line === "") continue;
    const id = Number(/^[ws](\d+)/.exec(line)?.[1]);
    if (line.startsWith("w")) {
      for (const m of line.matchAll(/ [0-9a-f:.]+->(-?\d+)/g)) if (Number(m[1]) !== id) return `address of w${id} looks up to ${m[1]}: ${line}`;
      if (/ in\d+!/.test(line)) return `membership of w${id} not in its service: ${line}`;
    } else {
      const by = /by=(-?\d+)/.exec(line)?.[1];
      if (Number(by) !== id) return `hostname of s${id} looks up to ${by}`;
      for (const m of line.matchAll(/ vip=[^ ]+->(-?\d+)/g)) if (Number(m[1]) !== id) return `VIP of s${id} looks up to ${m[1]}: ${line}`;
    }
  }
  return undefined;
}

describe("mesh feed messages (fuzz)", () => {
  it(`${CASES} cases with seed ${SEED}: no trap, refusals name the field and change nothing, accepted models stay consistent`, async (t) => {
    const vm = await MeshVm.create();
    const oracle = await MeshVm.create();
    const side = await MeshVm.create();
    const corpus = craftedCorpus();
    let craftedFed = 0;
    let sideMemoryFirstRound = 0;
    let state = new State(new Rng(SEED));
    let applied = 0;
    let refused = 0;
    let repairs = 0;
    const reasons = new Set<string>();
    let memoryAfterWarmup = 0;
    for (let i = 0; i < CASES; i++) {
      const rng = new Rng(caseSeed(SEED, i));
      if (i % 200 === 0) {
        // A fresh reference state now and then, loaded by a (possibly damaged) full message.
        state = new State(rng);
        for (let k = 0; k < 3; k++) state.services.set(k, state.service(k));
        for (let k = 0; k < 12; k++) state.workloads.set(k, state.workload(k));
        const full = state.full();
        const damaged = damageBytes(rng, full);
        vm.reset();
        const error = vm.apply(damaged);
        if (error !== "") assert.match(error, REFUSAL, `case ${i}: full refusal ${error}`);
        vm.reset();
        assert.equal(vm.apply(full), "", `case ${i}: the undamaged full message`);
      }
      if (i % 300 === 150) {
        // A crafted case, whole then damaged (the corpus comes round again every
        // corpus.length × 300 cases).
        const crafted = corpus[Math.floor(i / 300) % corpus.length]!;
        for (const input of [crafted.message, damageBytes(rng, crafted.message)]) {
          side.reset();
          if (crafted.base !== undefined) assert.equal(side.apply(crafted.base), "", `case ${i}: ${crafted.name}: the base loads`);
          const error = side.apply(input);
          if (input === crafted.message) {
            if (crafted.expect === "") assert.equal(error, "", `case ${i}: ${crafted.name}`);
            else assert.match(error, crafted.expect, `case ${i}: ${crafted.name}`);
          } else if (error !== "") assert.match(error, REFUSAL, `case ${i}: ${crafted.name}, damaged: ${error}`);
          craftedFed++;
        }
        side.collect();
        if (craftedFed === 2 * corpus.length) sideMemoryFirstRound = side.memoryBytes();
      }
      const before = vm.digest();
      const snapshot = { workloads: new Map(state.workloads), services: new Map(state.services), version: state.version };
      const delta = state.delta();
      const repair = rng.chance(0.1);
      const message = repair ? repairMessage(snapshot, state) : delta;
      if (repair) repairs++;
      const damage = rng.chance(0.7);
      const input = damage ? damageBytes(rng, message) : message;
      const error = vm.apply(input);
      if (error !== "") {
        refused++;
        assert.ok(damage, `case ${i}: an undamaged ${repair ? "repair" : "delta"} was refused: ${error}`);
        assert.match(error, REFUSAL, `case ${i}: refusal does not name a record and field: ${error}`);
        reasons.add(error.replace(/\d+/g, "N").replace(/"[^"]*"/g, "S"));
        assert.equal(vm.digest(), before, `case ${i}: a refused message changed the model: ${error}`);
        // The reference state did not move either.
        state.workloads = snapshot.workloads;
        state.services = snapshot.services;
        state.version = snapshot.version;
        continue;
      }
      applied++;
      const digest = vm.digest();
      const problem = inconsistency(digest);
      assert.equal(problem, undefined, `case ${i}: ${problem}`);
      if (!damage || Buffer.compare(Buffer.from(input), Buffer.from(message)) === 0) {
        oracle.reset();
        assert.equal(oracle.apply(state.full()), "");
        assert.equal(digest, oracle.digest(), `case ${i}: delta and full load disagree`);
      } else {
        // A damaged message that is still valid moved the model somewhere else: resync the VM
        // (as the feed client would on the next full message) from the reference state.
        vm.reset();
        assert.equal(vm.apply(state.full()), "");
      }
      if (i === 1000) {
        vm.collect();
        memoryAfterWarmup = vm.memoryBytes();
      }
    }
    vm.collect();
    t.diagnostic(`${applied} applied, ${refused} refused (${repairs} repairs among them), ${reasons.size} distinct refusal shapes; VM memory ${vm.memoryBytes()} bytes`);
    assert.ok(repairs > CASES / 20, "repairs are exercised");
    t.diagnostic(`${craftedFed} crafted inputs (${corpus.length} cases, whole and damaged); their VM's memory ${side.memoryBytes()} bytes`);
    assert.ok(craftedFed >= 2 * Math.min(corpus.length, Math.floor(CASES / 300)), "the crafted corpus is fed");
    // The whole corpus once round leaves the crafted VM at its high-water mark: later rounds
    // (same inputs, other damage) must not keep growing it.
    if (sideMemoryFirstRound > 0) assert.ok(side.memoryBytes() <= sideMemoryFirstRound * 2, `crafted VM memory grew from ${sideMemoryFirstRound} to ${side.memoryBytes()}`);
    assert.ok(applied > CASES / 10 && refused > CASES / 10, "both outcomes are exercised");
    assert.ok(reasons.size > 30, `refusals reach many checks (${reasons.size})`);
    if (memoryAfterWarmup > 0) assert.ok(vm.memoryBytes() <= memoryAfterWarmup * 2, `VM memory grew from ${memoryAfterWarmup} to ${vm.memoryBytes()}`);
  });
});

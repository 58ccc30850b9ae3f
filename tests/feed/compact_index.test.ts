// The feed's compact indexes (memory at 100k pods): a key with one member holds it without a
// Set or Map, and goes back to that form when a second member leaves, so an index updated step
// by step equals one built from scratch (the incremental compute is compared with a compute
// from scratch whole); the intern table is bounded.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { addTo, membersOf, removeFrom, type SetIndex } from "../../feed/src/compute_index.js";
import { Interner } from "../../feed/src/intern.js";
import { MembershipIndex } from "../../feed/src/memberships.js";

describe("feed: compact indexes", () => {
  it("SetIndex: one member as itself, a Set from the second, back to itself; order kept", () => {
    const index: SetIndex = new Map();
    addTo(index, "k", "a");
    assert.equal(index.get("k"), "a");
    addTo(index, "k", "a");
    assert.equal(index.get("k"), "a", "adding the same member again changes nothing");
    addTo(index, "k", "b");
    addTo(index, "k", "c");
    assert.deepEqual([...membersOf(index, "k")], ["a", "b", "c"]);
    removeFrom(index, "k", "a");
    removeFrom(index, "k", "c");
    assert.equal(index.get("k"), "b");
    removeFrom(index, "k", "x");
    assert.equal(index.get("k"), "b", "removing a non-member changes nothing");
    removeFrom(index, "k", "b");
    assert.equal(index.has("k"), false);
    assert.deepEqual([...membersOf(index, "k")], []);
  });

  it("MembershipIndex: back to one membership equals one built with it alone", () => {
    const stepwise = new MembershipIndex();
    stepwise.set("w", "a.ns.svc", undefined);
    stepwise.set("w", "b.ns.svc", { "80": 8080 });
    assert.equal(stepwise.count("w"), 2);
    assert.deepEqual([...stepwise.of("w")], [["a.ns.svc", undefined], ["b.ns.svc", { "80": 8080 }]]);
    stepwise.delete("w", "a.ns.svc");
    const fresh = new MembershipIndex();
    fresh.set("w", "b.ns.svc", { "80": 8080 });
    assert.deepEqual(stepwise, fresh);
    assert.equal(stepwise.has("w", "b.ns.svc"), true);
    assert.equal(stepwise.has("w", "a.ns.svc"), false);
    stepwise.set("w", "b.ns.svc", undefined);
    assert.deepEqual([...stepwise.of("w")], [["b.ns.svc", undefined]], "a membership set again replaces its overrides");
    stepwise.delete("w", "b.ns.svc");
    assert.equal(stepwise.size, 0);
    assert.deepEqual([...stepwise.of("w")], []);
  });

  it("Interner: one instance per text, bounded in entries and in text length", () => {
    const interner = new Interner(3, 8);
    const a = interner.of("bench".slice(0));
    assert.equal(interner.of(["ben", "ch"].join("")), a);
    for (const t of ["x", "y", "z"]) interner.of(t);
    assert.ok(interner.size <= 3, "emptied when full");
    const before = interner.size;
    interner.of("a-very-long-text");
    assert.equal(interner.size, before, "a text over the length bound is not kept");
    assert.equal(interner.of(7), 7, "not a string: returned as it is");
  });
});

// A mutated configuration must depend on its seed alone: that is what lets `--first` and
// `--replay` rerun a case exactly, and what keeps a long run's memory flat. The mutator once
// put objects of its shared value tables into documents; later edits wrote into them, so each
// case inherited the damage of the cases before it in the process, until one case emitted a
// 70 KB string 20,000 times and the worker died of a JS heap OOM (docs/fuzzing.md). This test
// generates the same seeds in two orders in one process and compares the bytes.
// Run: node --import tsx --test tests/fuzz/config_mutate.test.ts
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import { mutateConfig } from "./config_mutate.js";
import { caseSeed, Rng } from "./rng.js";
import { CONFIG_SNAPSHOT, TARGETS } from "./targets.js";

// 3,000 mutations in all: with the old mutator, 54 of them differed.
const SEEDS_PER_TARGET = 600;
const SEED = 20261129;

describe("mutateConfig", () => {
  it("gives the same bytes for a seed whatever was generated before it in the process", () => {
    const bases = TARGETS.map((t) => ({ name: t.name, base: t.baseConfig(CONFIG_SNAPSHOT) }));
    const baseTexts = bases.map((b) => JSON.stringify(b.base));
    const digest = (base: Record<string, unknown>, i: number) =>
      createHash("sha1").update(mutateConfig(new Rng(caseSeed(SEED, i)), base).bytes).digest("hex");

    const forward = bases.map((b) => Array.from({ length: SEEDS_PER_TARGET }, (_, i) => digest(b.base, i)));
    const differing: string[] = [];
    for (let t = bases.length - 1; t >= 0; t--) {
      for (let i = SEEDS_PER_TARGET - 1; i >= 0; i--) {
        if (digest(bases[t]!.base, i) !== forward[t]![i]) differing.push(`${bases[t]!.name} case ${i}`);
      }
    }
    assert.deepEqual(differing.slice(0, 10), [], `${differing.length} mutations changed with the order they ran in`);
    assert.deepEqual(bases.map((b) => JSON.stringify(b.base)), baseTexts, "the base configurations are left as they were");
  });
});

import { ContextTable } from "../runtime/context_table";

class Ctx {
  constructor(readonly id: u32) {}
}

let seed: u32 = 12345;
function next(n: u32): u32 {
  seed = seed * 1103515245 + 12345;
  return (seed >> 8) % n;
}

describe("ContextTable (connection dispatch)", () => {
  it("agrees with a Map over random opens and closes, including ids that collide and wrap", () => {
    const table = new ContextTable<Ctx>();
    const oracle = new Map<u32, Ctx>();
    let mismatches = 0;
    for (let step = 0; step < 20000; step++) {
      // Ids from a small range collide often; some near u32's top wrap the probe sequence.
      const id = next(4) == 0 ? 0xffffff00 + next(200) : next(300) * 64 + 1;
      if (next(3) == 0) {
        const ctx = new Ctx(id);
        table.set(id, ctx);
        oracle.set(id, ctx);
      } else {
        const removed = table.delete(id);
        const expected = oracle.has(id) ? oracle.get(id) : null;
        if (removed !== expected) mismatches++;
        oracle.delete(id);
      }
      if (table.size != oracle.size) mismatches++;
    }
    const keys = oracle.keys();
    for (let i = 0; i < keys.length; i++) {
      if (table.get(keys[i]) !== oracle.get(keys[i])) mismatches++;
    }
    expect(mismatches).toBe(0);
    expect(table.get(7)).toBeNull();
  });

  it("answers null for unknown ids and keeps working after it grows", () => {
    const table = new ContextTable<Ctx>();
    for (let id: u32 = 1; id <= 1000; id++) table.set(id, new Ctx(id));
    expect(table.size).toBe(1000);
    for (let id: u32 = 1; id <= 1000; id += 2) expect(table.delete(id)).not.toBeNull();
    expect(table.size).toBe(500);
    let found = 0;
    for (let id: u32 = 1; id <= 1000; id++) {
      const ctx = table.get(id);
      if (ctx !== null && ctx.id == id) found++;
    }
    expect(found).toBe(500);
    expect(table.get(1)).toBeNull();
    expect(table.delete(1)).toBeNull();
  });
});

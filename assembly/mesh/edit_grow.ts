// Growing the model's flat columns (edit.ts, edit_members.ts): a copy into a larger array.

/** Next power-of-two-ish capacity covering `need` (doubling from `current`). */
export function grown(current: i32, need: i32): i32 {
  let cap = max(current, 8);
  while (cap < need) cap = cap << 1;
  return cap;
}

export function growU32(a: StaticArray<u32>, n: i32): StaticArray<u32> {
  const next = new StaticArray<u32>(n);
  memory.copy(changetype<usize>(next), changetype<usize>(a), <usize>min(a.length, n) << 2);
  return next;
}

export function growU16(a: StaticArray<u16>, n: i32): StaticArray<u16> {
  const next = new StaticArray<u16>(n);
  memory.copy(changetype<usize>(next), changetype<usize>(a), <usize>min(a.length, n) << 1);
  return next;
}

export function growU8(a: StaticArray<u8>, n: i32): StaticArray<u8> {
  const next = new StaticArray<u8>(n);
  memory.copy(changetype<usize>(next), changetype<usize>(a), <usize>min(a.length, n));
  return next;
}

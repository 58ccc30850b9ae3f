// What every open-addressing table here shares: the hash finalisers, the capacity rules (at
// most 2/3 full; a power of two or an exact size with a multiply-shift home slot), the insert
// results, and the address-table entry that packs an owner with its network.

/** Per-object overhead of the incremental runtime (block + object header), for accounting. */
export const OBJECT_OVERHEAD: i64 = 20;

/** murmur3's 32-bit finaliser: sequential pod IPs spread over the whole table. */
// @ts-ignore: decorator
@inline export function mix32(x: u32): u32 {
  x ^= x >> 16;
  x *= 0x85ebca6b;
  x ^= x >> 13;
  x *= 0xc2b2ae35;
  x ^= x >> 16;
  return x;
}

/** murmur3's 64-bit finaliser. */
// @ts-ignore: decorator
@inline export function mix64(x: u64): u64 {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccd;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53;
  x ^= x >> 33;
  return x;
}

/** Smallest power of two >= 8 that holds `expected` entries at a load of at most 2/3. */
export function tableCapacity(expected: i32): i32 {
  const need = <i64>expected + (<i64>expected >> 1) + 1;
  let cap: i64 = 8;
  while (cap < need) cap <<= 1;
  return <i32>cap;
}

/**
 * Slots for `expected` entries at a load of exactly 2/3 (at least 8): for the per-pod tables,
 * whose power-of-two size would cost up to 2x the memory. Probed from slotOf, not a mask.
 */
export function exactCapacity(expected: i32): i32 {
  const need = <i64>expected + (<i64>expected >> 1) + 1;
  return <i32>max<i64>(need, 8);
}

/** A hash's home slot in [0, capacity): the multiply-shift range reduction (no modulo). */
// @ts-ignore: decorator
@inline export function slotOf(hash: u32, capacity: u32): u32 {
  return <u32>((<u64>hash * <u64>capacity) >> 32);
}

/** Result of an insert that added the entry. Any value >= 0 is the clashing existing owner. */
export const ADDED: i32 = -1;
/** Result of an insert into a full table (cannot happen when sized with the expected count). */
export const FULL: i32 = -2;

// An address-table entry packs the owner and its network into one u32, so a probe touches a
// single cache line: bits 0..20 hold owner + 1 (0 = empty slot), bits 21..31 the network id.
export const OWNER_BITS: u32 = 21;
export const OWNER_MASK: u32 = (1 << OWNER_BITS) - 1;

/** Owners (workloads, VIPs) an address table can name: 2^21 - 2. */
export const MAX_OWNERS: i32 = <i32>OWNER_MASK - 1;
/** Network ids an address table can hold: 2^11. */
export const MAX_TABLE_NETWORKS: i32 = 1 << (32 - <i32>OWNER_BITS);

// @ts-ignore: decorator
@inline export function pack(owner: i32, network: i32): u32 {
  return (<u32>network << OWNER_BITS) | (<u32>owner + 1);
}

// @ts-ignore: decorator
@inline export function fits(owner: i32, network: i32): bool {
  return <u32>owner < <u32>MAX_OWNERS && <u32>network < <u32>MAX_TABLE_NETWORKS;
}


// Open-addressing hash tables in flat arrays: no object per entry, no Map.
//
// All use linear probing kept at most 2/3 full, and store `value + 1` so a zero slot means
// "empty" (the arrays start zeroed). The per-pod IPv4 table has an exact capacity (a
// multiply-shift picks the home slot); the others a power of two (a mask does). Lookups never
// allocate and never index out of bounds: every probe index is reduced or masked, and the
// probe count is bounded.
//
// The address tables hash the IP only and keep the owner's network in the entry, so the same
// IP on two networks is two entries in one probe chain, told apart without leaving the slot.
//
// This file gathers them for importers: the shared hashing and capacity rules are in
// table_hash.ts, the address tables in table_addr.ts, SparseColumn in table_sparse.ts and
// U64Table in table_u64.ts, the services' HostnameIndex in table_hostname.ts.
export {
  ADDED,
  exactCapacity,
  FULL,
  MAX_OWNERS,
  MAX_TABLE_NETWORKS,
  mix32,
  mix64,
  OBJECT_OVERHEAD,
  slotOf,
  tableCapacity,
} from "./table_hash";
export { AddrTable4, AddrTable6 } from "./table_addr";
export { SparseColumn } from "./table_sparse";
export { U64Table } from "./table_u64";
export { HostnameIndex } from "./table_hostname";

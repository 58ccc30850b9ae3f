// The memberships part of the in-place changes (edit.ts): a workload in a service, kept both in
// the workload's chain (Mesh.mem, MEM_NEXT) and in the service's member list (sMembers, which
// holds membership ids). Every change is O(1) per membership: the swap-remove that fills a
// removed member's place reads the moved membership from the list, and a delta's service
// removes walk each affected workload's chain once (dropMembersOfServices).
import { grown, growU32 } from "./edit_grow";
import { M_OVERRIDES, M_POS_MASK, MEM_NEXT, MEM_POS, MEM_SERVICE, MEM_STRIDE, MEM_WORKLOAD, Mesh, S_HEADLESS } from "./model";
import { IdMarks } from "./wire_marks";

/** Room for `n` more membership ids. */
// @ts-ignore: decorator
@inline export function ensureMemberships(m: Mesh, extra: i32, exact: bool = false): void {
  if (m.memTotal + extra > m.memCapacity()) growMemberships(m, extra, exact);
}

function growMemberships(m: Mesh, extra: i32, exact: bool): void {
  const need = m.memTotal + extra;
  const have = m.memCapacity();
  const cap = exact ? need : grown(have, need);
  m.mem = growU32(m.mem, cap * MEM_STRIDE);
}

// ==================================================================== memberships

/**
 * Adds workload w as an endpoint of service s (at the end of s's member list); the membership
 * id. `overrides` are (service port << 16 | target port) words.
 */
export function addMembership(m: Mesh, w: i32, s: i32, overrides: Array<u32> | null = null): i32 {
  if (w < 0 || w >= m.workloadCapacity() || s < 0 || s >= m.sFlags.length) return -1;
  let g = m.memFree - 1;
  if (g >= 0 && g < m.memCapacity()) {
    m.memFree = <i32>m.mem3(g, MEM_NEXT);
  } else {
    ensureMemberships(m, 1);
    g = m.memTotal++;
  }
  // Append g to s's member list: [count, membership ids...], doubling the chunk when full.
  const pool = m.sMembers;
  let at = pool.offset(s);
  let cap = pool.capacityAt(at);
  let count = at < 0 ? 0 : <i32>pool.word(at);
  if (count + 1 >= cap) {
    at = pool.resize(s, max(4, cap * 2), m.sFlags.length);
    if (cap == 0) pool.setWord(at, 0);
  }
  pool.setWord(at + 1 + count, <u32>g);
  pool.setWord(at, <u32>(count + 1));
  m.setMem(g, MEM_SERVICE, <u32>s + 1);
  m.setMem(g, MEM_POS, <u32>count);
  m.setMem(g, MEM_NEXT, m.wChain(w));
  m.setMem(g, MEM_WORKLOAD, <u32>w);
  m.setWChain(w, <u32>g + 1);
  if ((unchecked(m.sFlags[s]) & S_HEADLESS) != 0) markHeadless(m, w);
  m.memLive++;
  if (overrides !== null && overrides.length > 0) {
    const o = m.memOverrides;
    const oat = o.alloc(g, overrides.length, m.memCapacity());
    for (let i = 0; i < overrides.length; i++) o.setWord(oat + i, unchecked(overrides[i]));
    m.setMem(g, MEM_POS, m.mem3(g, MEM_POS) | M_OVERRIDES);
  }
  return g;
}

/**
 * The build's form: service s's member list gets exactly `count` slots up front (the JSON
 * build knows each service's endpoints before adding them), so no doubling garbage.
 */
export function reserveMembers(m: Mesh, s: i32, count: i32): void {
  if (s < 0 || s >= m.sFlags.length) return;
  const at = m.sMembers.alloc(s, count + 1, m.sFlags.length);
  m.sMembers.setWord(at, 0);
}

/**
 * Returns membership g's id to the free list (already unlinked from its workload's chain, and
 * out of its service's member list or the list is going whole).
 */
// @ts-ignore: decorator
@inline function releaseMembership(m: Mesh, g: i32): void {
  if ((m.mem3(g, MEM_POS) & M_OVERRIDES) != 0) m.memOverrides.free(g);
  m.setMem(g, MEM_SERVICE, 0);
  m.setMem(g, MEM_POS, 0);
  m.setMem(g, MEM_NEXT, <u32>m.memFree);
  m.memFree = g + 1;
  m.memLive--;
}

/** Frees membership g (already unlinked from its workload's chain): swap-remove from s. */
function freeMembership(m: Mesh, g: i32): void {
  const s = <i32>m.mem3(g, MEM_SERVICE) - 1;
  const pos = <i32>(m.mem3(g, MEM_POS) & M_POS_MASK);
  const pool = m.sMembers;
  const at = pool.offset(s);
  if (at >= 0) {
    const count = <i32>pool.word(at);
    const last = count - 1;
    if (pos < last) {
      // The list holds membership ids: the moved one's position is fixed in O(1).
      const moved = <i32>pool.word(at + 1 + last);
      pool.setWord(at + 1 + pos, <u32>moved);
      if (moved >= 0 && moved < m.memCapacity()) m.setMem(moved, MEM_POS, (m.mem3(moved, MEM_POS) & M_OVERRIDES) | <u32>pos);
    }
    if (count > 0) pool.setWord(at, <u32>last);
  }
  releaseMembership(m, g);
}

/** Sets w's bit in wHeadless (model_columns.ts): w may be an endpoint of a headless service. */
function markHeadless(m: Mesh, w: i32): void {
  const word = w >> 5;
  if (w < 0 || word >= m.wHeadless.length) return;
  unchecked((m.wHeadless[word] |= <u32>1 << (<u32>w & 31)));
}

/**
 * Marks every current member of service s in wHeadless: for a service that is (or just became)
 * headless while members joined it before (a service upsert keeps its members; the JSON build
 * adds endpoints before it writes the service's flags).
 */
export function markHeadlessMembers(m: Mesh, s: i32): void {
  const pool = m.sMembers;
  const at = pool.offset(s);
  if (at < 0) return;
  const count = min(<i32>pool.word(at), pool.capacityAt(at) - 1);
  const capacity = m.memCapacity();
  for (let i = 0; i < count; i++) {
    const g = <i32>pool.word(at + 1 + i);
    if (g >= 0 && g < capacity) markHeadless(m, <i32>m.mem3(g, MEM_WORKLOAD));
  }
}

/** Drops every membership of workload w. */
export function dropMemberships(m: Mesh, w: i32): void {
  let g = <i32>m.wChain(w) - 1;
  m.setWChain(w, 0);
  // No memberships left, so no headless one: the only place the hint is cleared.
  const word = w >> 5;
  if (word < m.wHeadless.length) unchecked((m.wHeadless[word] &= ~(<u32>1 << (<u32>w & 31))));
  for (let guard = 0; g >= 0 && g < m.memTotal && guard < m.memTotal; guard++) {
    const next = <i32>m.mem3(g, MEM_NEXT) - 1;
    // Unlinked already (the whole chain goes), so the swap-remove's membershipOf on other
    // workloads is unaffected.
    freeMembership(m, g);
    g = next;
  }
}

/** Drops every membership in service s (a service remove). */
export function dropServiceMembers(m: Mesh, s: i32): void {
  const pool = m.sMembers;
  while (true) {
    const at = pool.offset(s);
    if (at < 0) break;
    const count = <i32>pool.word(at);
    if (count <= 0) break;
    const g = <i32>pool.word(at + count); // the last one: its removal moves nothing
    if (g < 0 || g >= m.memTotal || m.mem3(g, MEM_SERVICE) != <u32>s + 1) {
      pool.setWord(at, <u32>(count - 1)); // inconsistent entry: drop it
      continue;
    }
    unlink(m, <i32>m.mem3(g, MEM_WORKLOAD), g);
    freeMembership(m, g);
  }
  pool.free(s);
}

// A delta's service removes, dropped together (dropMembersOfServices).
const goneServices = new IdMarks();
const touchedWorkloads = new IdMarks();
const touched = new Array<i32>();

/**
 * Drops every membership of the first `count` services in `removed` (a delta's service removes)
 * and frees their member lists, with one walk of each affected workload's chain. Unlinking
 * member by member, service by service, walks a workload's chain once per removed service: a
 * pod in 65,535 services whose services all go took O(65,535²). A membership of a removed
 * service is only unlinked from its workload and released: its service's list goes whole, so
 * the swap-remove that keeps a list dense is skipped. The services' other columns stay for
 * removeService.
 */
export function dropMembersOfServices(m: Mesh, removed: StaticArray<i32>, count: i32): void {
  const pool = m.sMembers;
  const capacity = m.memCapacity();
  const services = m.sFlags.length;
  const workloads = m.workloadCapacity();
  touched.length = 0;
  const n = min(count, removed.length);
  for (let i = 0; i < n; i++) {
    const s = unchecked(removed[i]);
    if (s < 0 || s >= services || !goneServices.mark(<u32>s)) continue;
    const at = pool.offset(s);
    if (at < 0) continue;
    const members = min(<i32>pool.word(at), pool.capacityAt(at) - 1);
    for (let k = 0; k < members; k++) {
      const g = <i32>pool.word(at + 1 + k);
      if (g < 0 || g >= capacity) continue;
      const w = <i32>m.mem3(g, MEM_WORKLOAD);
      if (w >= 0 && w < workloads && touchedWorkloads.mark(<u32>w)) touched.push(w);
    }
    // Nothing below allocates in this pool, so the list can go now.
    pool.freeAt(s, at);
  }
  const total = m.memTotal;
  for (let i = 0; i < touched.length; i++) {
    const w = unchecked(touched[i]);
    touchedWorkloads.unmark(<u32>w);
    let prev = -1;
    let g = <i32>m.wChain(w) - 1;
    for (let guard = 0; g >= 0 && g < total && guard < total; guard++) {
      const next = m.mem3(g, MEM_NEXT);
      if (goneServices.has(m.mem3(g, MEM_SERVICE) - 1)) {
        if (prev < 0) m.setWChain(w, next);
        else m.setMem(prev, MEM_NEXT, next);
        releaseMembership(m, g);
      } else prev = g;
      g = <i32>next - 1;
    }
  }
  for (let i = 0; i < n; i++) {
    const s = unchecked(removed[i]);
    if (s >= 0 && s < services) goneServices.unmark(<u32>s);
  }
}

/** Removes g from w's chain. */
function unlink(m: Mesh, w: i32, g: i32): void {
  let prev = -1;
  let cur = <i32>m.wChain(w) - 1;
  for (let guard = 0; cur >= 0 && cur < m.memTotal && guard < m.memTotal; guard++) {
    const next = m.mem3(cur, MEM_NEXT);
    if (cur == g) {
      if (prev < 0) m.setWChain(w, next);
      else m.setMem(prev, MEM_NEXT, next);
      return;
    }
    prev = cur;
    cur = <i32>next - 1;
  }
}

// In-place changes to the Mesh: the primitives the JSON build (parse.ts), the binary full load
// and the delta apply (wire_apply.ts) share, so there is one model and one way to fill it.
//
// Nothing here validates: callers have checked everything first (a refused message must
// leave the model untouched). Every primitive still bounds its indexes, so a caller's mistake
// cannot trap the VM. Costs are O(what changes): a workload upsert / remove touches its
// columns, its address-table slots and its memberships (each an O(1) swap-remove from the
// service's member list: edit_members.ts); a service remove also drops each of its memberships.
import { Address, FAMILY_V4 } from "./ip";
import { grown, growU16, growU32, growU8 } from "./edit_grow";
import { dropMemberships, dropServiceMembers, markHeadlessMembers } from "./edit_members";
export { addMembership, dropMembersOfServices, ensureMemberships, markHeadlessMembers, reserveMembers } from "./edit_members";
import {
  DEFAULT_CLUSTER,
  IDENTITY_MASK,
  Mesh,
  portKey,
  PORTS_SCANNED,
  S_HEADLESS,
  S_LIVE,
  VIP_WORDS,
  W_EXTRA,
  W_LIVE,
  W_V4,
} from "./model";

// ==================================================================== capacity

/** Columns for workload ids < n: exactly n when `exact` (a build), else by doubling. */
export function ensureWorkloads(m: Mesh, n: i32, exact: bool = false): void {
  const have = m.workloadCapacity();
  if (n > have) {
    const cap = exact ? n : grown(have, n);
    m.wCols = growU32(m.wCols, cap << 2);
    m.wHeadless = growU32(m.wHeadless, (cap + 31) >> 5);
  }
}

/** Columns for service ids < n. */
export function ensureServices(m: Mesh, n: i32, exact: bool = false): void {
  const have = m.sFlags.length;
  if (n > have) {
    const cap = exact ? n : grown(have, n);
    m.sFlags = growU8(m.sFlags, cap);
    m.sWaypoint = growU32(m.sWaypoint, cap);
    m.sLbPrefs = growU32(m.sLbPrefs, cap);
  }
  while (m.sHostname.length < n) m.sHostname.push("");
}

/** Room for `n` more port slots. */
function ensureSlots(m: Mesh, extra: i32): void {
  const need = m.slotTotal + extra;
  const have = m.slotPort.length;
  if (need > have) {
    const cap = grown(have, need);
    m.slotPort = growU16(m.slotPort, cap);
    m.slotTarget = growU16(m.slotTarget, cap);
  }
  // The names' cache to the same capacity, in one step (pushed one by one it reallocates ~13
  // times for 65,535 ports; setting its length reallocates exactly, so only on a doubling).
  const names = m.slotCluster;
  if (need > names.length) {
    const from = names.length;
    const size = max(need, m.slotPort.length);
    names.length = size;
    for (let i = from; i < size; i++) unchecked((names[i] = DEFAULT_CLUSTER));
  }
}

/** Preallocates slot columns for a build that knows its count. */
export function reserveSlots(m: Mesh, n: i32): void {
  if (n > m.slotPort.length) {
    m.slotPort = growU16(m.slotPort, n);
    m.slotTarget = growU16(m.slotTarget, n);
  }
}

// ==================================================================== workloads

/**
 * Marks id w live with its identity/flags word (W_* bits, identity id), network and locality.
 * Addresses, references and memberships are set separately.
 */
export function setWorkload(m: Mesh, w: i32, info: u32, network: i32, locality: i32): void {
  if (w < 0 || w >= m.workloadCapacity()) return;
  const before = m.wInfo(w);
  if ((before & W_LIVE) == 0) m.liveWorkloads++;
  // Keep the address bits: setAddresses owns them.
  const keep = before & (W_V4 | W_EXTRA);
  m.setWInfo(w, (info & ~(W_V4 | W_EXTRA)) | keep | W_LIVE);
  m.setWPlace(w, <u32>network, <u32>locality);
  if (w >= m.workloadTotal) m.workloadTotal = w + 1;
}

/**
 * Stores w's addresses (IPv4 first, IPv6 as [hi, lo] pairs), replacing any it had; does not
 * touch the address tables (insertAddresses / the build's fillV4Table do).
 */
export function setAddresses(m: Mesh, w: i32, v4: Array<u32>, v6: Array<u64>): void {
  if (w < 0 || w >= m.workloadCapacity()) return;
  let info = m.wInfo(w) & ~(W_V4 | W_EXTRA);
  const n4 = v4.length;
  const n6 = v6.length >> 1;
  let from = 0;
  if (n4 > 0) {
    info |= W_V4;
    m.setWIp4(w, unchecked(v4[0]));
    from = 1;
  }
  const extra4 = n4 - from;
  if (extra4 > 0 || n6 > 0) {
    info |= W_EXTRA;
    const pool = m.wExtra;
    const at = pool.alloc(w, 1 + extra4 + n6 * 4, m.workloadCapacity());
    pool.setWord(at, <u32>extra4);
    for (let i = 0; i < extra4; i++) pool.setWord(at + 1 + i, unchecked(v4[from + i]));
    const base = at + 1 + extra4;
    for (let i = 0; i < n6; i++) {
      const hi = unchecked(v6[i << 1]);
      const lo = unchecked(v6[(i << 1) + 1]);
      pool.setWord(base + i * 4, <u32>(hi >> 32));
      pool.setWord(base + i * 4 + 1, <u32>hi);
      pool.setWord(base + i * 4 + 2, <u32>(lo >> 32));
      pool.setWord(base + i * 4 + 3, <u32>lo);
    }
  } else {
    m.wExtra.free(w);
  }
  m.setWInfo(w, info);
}

/** setAddresses for the common case of one IPv4 address (no lists to fill). */
export function setSingleV4(m: Mesh, w: i32, ip: u32): void {
  if (w < 0 || w >= m.workloadCapacity()) return;
  const info = (m.wInfo(w) & ~W_EXTRA) | W_V4;
  m.setWIp4(w, ip);
  if ((m.wInfo(w) & W_EXTRA) != 0) m.wExtra.free(w);
  m.setWInfo(w, info);
}

const scratchAddress = new Address();

/** Inserts w's stored addresses into the tables (growing them); the first clash's owner, or -1. */
export function insertAddresses(m: Mesh, w: i32): i32 {
  const n = m.workloadAddressCount(w);
  if (n == 0) return -1;
  const net = m.workloadNetwork(w);
  m.v4Table.ensureRoom(n);
  m.v6Table.ensureRoom(n);
  const a = scratchAddress;
  for (let i = 0; i < n; i++) {
    if (!m.workloadAddress(w, i, a)) continue;
    const clash = a.family == FAMILY_V4 ? m.v4Table.insert(a.v4, w, net) : m.v6Table.insert(a.hi, a.lo, w, net);
    if (clash >= 0 && clash != w) return clash;
  }
  return -1;
}

/** Removes w's addresses from the tables (only the entries w owns). */
function removeAddresses(m: Mesh, w: i32): void {
  const n = m.workloadAddressCount(w);
  const net = m.workloadNetwork(w);
  const a = scratchAddress;
  for (let i = 0; i < n; i++) {
    if (!m.workloadAddress(w, i, a)) continue;
    if (a.family == FAMILY_V4) m.v4Table.remove(a.v4, w, net);
    else m.v6Table.remove(a.hi, a.lo, w, net);
  }
}

/** Removes workload w entirely: addresses, references, memberships; the id becomes free. */
export function removeWorkload(m: Mesh, w: i32): void {
  if (!m.workloadLive(w)) return;
  removeAddresses(m, w);
  m.wExtra.free(w);
  m.wWaypoint.remove(w);
  m.wGateway.remove(w);
  dropMemberships(m, w);
  m.setWInfo(w, 0);
  m.setWPlace(w, 0, 0);
  m.setWIp4(w, 0);
  m.liveWorkloads--;
}

/** Clears w for an upsert: same as a remove (the upsert then sets everything again). */
export function clearWorkload(m: Mesh, w: i32): void {
  removeWorkload(m, w);
}

/** Sets w's waypoint / gateway reference ids (-1 = none). */
export function setWorkloadRefs(m: Mesh, w: i32, waypoint: i32, gateway: i32): void {
  const span = m.workloadCapacity();
  m.wWaypoint.put(w, <u32>(waypoint + 1), span);
  m.wGateway.put(w, <u32>(gateway + 1), span);
}

// ==================================================================== services

/** Marks s live with its flags, waypoint reference id (-1 none) and routing preference. */
export function setService(m: Mesh, s: i32, flags: u8, waypoint: i32, lbPrefs: u32): void {
  if (s < 0 || s >= m.sFlags.length) return;
  if ((unchecked(m.sFlags[s]) & S_LIVE) == 0) m.liveServices++;
  unchecked((m.sFlags[s] = flags | S_LIVE));
  unchecked((m.sWaypoint[s] = <u32>(waypoint + 1)));
  unchecked((m.sLbPrefs[s] = lbPrefs));
  if (s >= m.serviceTotal) m.serviceTotal = s + 1;
  if ((flags & S_HEADLESS) != 0) markHeadlessMembers(m, s);
}

/** Sets s's hostname (free of other owners: checked by the caller). */
export function setHostname(m: Mesh, s: i32, hostname: string): void {
  if (s < 0 || s >= m.sHostname.length) return;
  unchecked((m.sHostname[s] = hostname));
  m.hostnames.add(hostname, s);
}

/**
 * Sets s's ports: `ports` are (port << 16 | target) words in order; `cluster` is the service's
 * explicit UTF-8 cluster name, or DEFAULT_CLUSTER (each port's "outbound|<port>||<hostname>",
 * built on first use: Mesh.slotClusterName). Replaces any ports s had.
 */
export function setPorts(m: Mesh, s: i32, ports: Array<u32>, cluster: ArrayBuffer): void {
  clearPorts(m, s);
  const n = ports.length;
  if (n == 0 || s < 0 || s >= m.sFlags.length) return;
  ensureSlots(m, n);
  const pool = m.sPorts;
  const at = pool.alloc(s, n, m.sFlags.length);
  const indexed = n > PORTS_SCANNED;
  if (indexed) m.portIndex.reserve(n);
  for (let i = 0; i < n; i++) {
    let slot: i32;
    if (m.slotFree.length > 0) slot = m.slotFree.pop();
    else slot = m.slotTotal++;
    const entry = unchecked(ports[i]);
    unchecked((m.slotPort[slot] = <u16>(entry >> 16)));
    unchecked((m.slotTarget[slot] = <u16>entry));
    if (slot < m.slotCluster.length) unchecked((m.slotCluster[slot] = cluster));
    else m.slotCluster.push(cluster);
    pool.setWord(at + i, <u32>slot);
    if (indexed) m.portIndex.add(portKey(s, <i32>(entry >> 16)), slot);
  }
}

// @ts-ignore: decorator
@inline function clearPorts(m: Mesh, s: i32): void {
  const clusters = m.slotCluster;
  clearPortsNamed(m, s, clusters, clusters.length);
}

/**
 * clearPorts with the slots' names and their count at hand (`named`: a managed array's length
 * and element reads are calls, so a loop over many services reads the length once).
 */
// @ts-ignore: decorator
@inline function clearPortsNamed(m: Mesh, s: i32, clusters: Array<ArrayBuffer>, named: i32): void {
  const pool = m.sPorts;
  const at = pool.offset(s);
  if (at < 0) return;
  const n = pool.capacityAt(at);
  const indexed = n > PORTS_SCANNED;
  const total = m.slotTotal;
  const names = clusters.dataStart;
  for (let i = 0; i < n; i++) {
    const slot = <i32>pool.word(at + i);
    if (slot < 0 || slot >= total) continue;
    if (indexed) m.portIndex.remove(portKey(s, <i32>unchecked(m.slotPort[slot])));
    // Most slots never built a name: no store (and no write barrier) for them. The check
    // reads the slot's word as a raw pointer (below `named`, so inside the array).
    if (slot < named && load<usize>(names + (<usize>slot << alignof<usize>())) != changetype<usize>(DEFAULT_CLUSTER)) {
      unchecked((clusters[slot] = DEFAULT_CLUSTER));
    }
    m.slotFree.push(slot);
  }
  pool.freeAt(s, at);
}

/** Sets s's VIPs: VIP_WORDS words each ([network << 8 | family, 4 address words]); inserts them. */
export function setVips(m: Mesh, s: i32, words: Array<u32>, insert: bool = true): void {
  clearVips(m, s);
  const n = words.length / VIP_WORDS;
  if (n == 0 || s < 0 || s >= m.sFlags.length) return;
  const pool = m.sVips;
  const at = pool.alloc(s, n * VIP_WORDS, m.sFlags.length);
  for (let i = 0; i < n * VIP_WORDS; i++) pool.setWord(at + i, unchecked(words[i]));
  if (!insert) return; // the JSON build inserted each as it read it (for its clash messages)
  m.vipTable4.ensureRoom(n);
  m.vipTable6.ensureRoom(n);
  for (let i = 0; i < n; i++) {
    const head = unchecked(words[i * VIP_WORDS]);
    const net = <i32>(head >> 8);
    if ((head & 0xff) == FAMILY_V4) {
      m.vipTable4.insert(unchecked(words[i * VIP_WORDS + 1]), s, net);
    } else {
      const hi = (<u64>unchecked(words[i * VIP_WORDS + 1]) << 32) | <u64>unchecked(words[i * VIP_WORDS + 2]);
      const lo = (<u64>unchecked(words[i * VIP_WORDS + 3]) << 32) | <u64>unchecked(words[i * VIP_WORDS + 4]);
      m.vipTable6.insert(hi, lo, s, net);
    }
  }
}

// @ts-ignore: decorator
@inline function clearVips(m: Mesh, s: i32): void {
  const pool = m.sVips;
  const at = pool.offset(s);
  if (at < 0) return;
  const n = pool.capacityAt(at) / VIP_WORDS;
  for (let i = 0; i < n; i++) {
    const k = at + i * VIP_WORDS;
    const head = pool.word(k);
    const net = <i32>(head >> 8);
    if ((head & 0xff) == FAMILY_V4) {
      m.vipTable4.remove(pool.word(k + 1), s, net);
    } else {
      const hi = (<u64>pool.word(k + 1) << 32) | <u64>pool.word(k + 2);
      const lo = (<u64>pool.word(k + 3) << 32) | <u64>pool.word(k + 4);
      m.vipTable6.remove(hi, lo, s, net);
    }
  }
  pool.freeAt(s, at);
}

/** Sets s's subject alt names. */
export function setSans(m: Mesh, s: i32, names: Array<string>): void {
  clearSans(m, s);
  const n = names.length;
  if (n == 0 || s < 0 || s >= m.sFlags.length) return;
  const pool = m.sSans;
  const at = pool.alloc(s, n, m.sFlags.length);
  for (let i = 0; i < n; i++) {
    let slot: i32;
    if (m.sanFree.length > 0) {
      slot = m.sanFree.pop();
      unchecked((m.sans[slot] = unchecked(names[i])));
    } else {
      slot = m.sans.length;
      m.sans.push(unchecked(names[i]));
    }
    pool.setWord(at + i, <u32>slot);
  }
}

// @ts-ignore: decorator
@inline function clearSans(m: Mesh, s: i32): void {
  const pool = m.sSans;
  const at = pool.offset(s);
  if (at < 0) return;
  const n = pool.capacityAt(at);
  for (let i = 0; i < n; i++) {
    const slot = <i32>pool.word(at + i);
    if (slot < 0 || slot >= m.sans.length) continue;
    unchecked((m.sans[slot] = ""));
    m.sanFree.push(slot);
  }
  pool.freeAt(s, at);
}

/**
 * Clears what a service upsert replaces: hostname, ports, VIPs, SANs, flags. Its members stay
 * (memberships live on the workloads).
 */
export function clearServiceContent(m: Mesh, s: i32): void {
  if (s < 0 || s >= m.sFlags.length) return;
  // The text goes now, which ends every lookup of it; the index entry is reclaimed by a later
  // message (HostnameIndex.retire), or dropped when s is given a hostname again.
  const names = m.sHostname;
  if (s < names.length && unchecked(names[s]).length > 0) {
    unchecked((names[s] = ""));
    m.hostnames.retire(s);
  }
  clearPorts(m, s);
  clearVips(m, s);
  clearSans(m, s);
}

/**
 * Removes service s: its content and every membership in it; the id becomes free.
 * `membersDropped`: dropMembersOfServices has already dropped them (a delta's removes).
 */
export function removeService(m: Mesh, s: i32, membersDropped: bool = false): void {
  if (!m.serviceLive(s)) {
    // Members may have joined a not-yet-live id earlier in the same message: drop them too.
    if (s >= 0 && s < m.sFlags.length && !membersDropped) dropServiceMembers(m, s);
    return;
  }
  clearServiceContent(m, s);
  if (!membersDropped) dropServiceMembers(m, s);
  unchecked((m.sFlags[s] = 0));
  unchecked((m.sWaypoint[s] = 0));
  unchecked((m.sLbPrefs[s] = 0));
  m.liveServices--;
}

/**
 * Removes the first `count` services in `ids` whose memberships dropMembersOfServices has
 * already dropped (a delta's removes), as removeService(m, s, true) would one by one, in record
 * order. One loop rather than a call chain per service: a delta of 65,535 removes (5 bytes
 * each) spent most of its time in the calls themselves.
 */
export function removeServicesWithoutMembers(m: Mesh, ids: StaticArray<i32>, count: i32): void {
  const n = min(count, ids.length);
  const flags = m.sFlags;
  const live = min(m.serviceTotal, flags.length);
  const names = m.sHostname;
  const named = names.length;
  const clusters = m.slotCluster;
  const clustered = clusters.length;
  const vips = m.sVips;
  const sans = m.sSans;
  const retired = m.retiredServices;
  let removed = 0;
  for (let i = 0; i < n; i++) {
    const s = unchecked(ids[i]);
    if (s < 0 || s >= live || (unchecked(flags[s]) & S_LIVE) == 0) continue;
    // clearServiceContent's steps, inlined. A live service always has a hostname (required,
    // never empty), so its text is not read: cleared, and its index entry retired.
    if (s < named) {
      unchecked((names[s] = ""));
      m.hostnames.retire(s);
    }
    clearPortsNamed(m, s, clusters, clustered);
    // Its VIPs and SANs stop answering with its liveness (below); a few are left for a later
    // message to release (RetiredServices), a longer list goes now (a release is bounded by
    // RETIRED_VIPS + RETIRED_SANS entries per id, so a later message's share stays bounded).
    const vipAt = vips.offset(s);
    const sanAt = sans.offset(s);
    if (vipAt >= 0 || sanAt >= 0) {
      if (vips.capacityAt(vipAt) <= RETIRED_VIPS * VIP_WORDS && sans.capacityAt(sanAt) <= RETIRED_SANS) {
        retired.add(s);
      } else {
        clearVips(m, s);
        clearSans(m, s);
      }
    }
    unchecked((flags[s] = 0));
    unchecked((m.sWaypoint[s] = 0));
    unchecked((m.sLbPrefs[s] = 0));
    removed++;
  }
  m.liveServices -= removed;
}

/** The most VIPs / SANs a removed service may keep until a later message releases them. */
export const RETIRED_VIPS: i32 = 4;
export const RETIRED_SANS: i32 = 4;

/**
 * Releases the VIPs and SANs a removed service s kept (its VIP table entries it still owns, its
 * SAN slots, both chunks). Before s is upserted again, so that its new VIPs are the only
 * entries it owns; nothing when s is live (it released them when it was made live).
 */
export function releaseRetired(m: Mesh, s: i32): void {
  if (s < 0 || m.serviceLive(s)) return;
  clearVips(m, s);
  clearSans(m, s);
}

/**
 * Releases up to `budget` retired services' VIPs and SANs (RETIRED_VIPS + RETIRED_SANS entries
 * each at most), the last removed first; an id live again since is only dequeued.
 */
export function reclaimRetiredServices(m: Mesh, budget: i32): void {
  const retired = m.retiredServices;
  while (budget-- > 0 && retired.length > 0) releaseRetired(m, retired.pop());
}

/** IDENTITY_MASK re-exported for the apply path. */
export { IDENTITY_MASK };

/**
 * Interns the region / zone / subzone prefixes of a locality just interned and records them
 * under its id (`localityParts`), so scope comparisons are one integer compare.
 */
export function addLocalityParts(m: Mesh, text: string): void {
  const parts = text.split("/");
  const n = parts.length;
  const region = m.localityPrefixes.intern(unchecked(parts[0]));
  const zone = n > 1 ? m.localityPrefixes.intern(unchecked(parts[0]) + "/" + unchecked(parts[1])) : 0;
  const subzone = n > 2 ? m.localityPrefixes.intern(text) : 0;
  m.localityParts.push(region);
  m.localityParts.push(zone);
  m.localityParts.push(subzone);
}

/** The locality id of `text` (a valid locality), interned with its region / zone prefixes. */
export function internLocality(m: Mesh, text: string): i32 {
  const known = m.localities.find(text);
  if (known >= 0) return known;
  const id = m.localities.intern(text);
  addLocalityParts(m, text);
  return id;
}

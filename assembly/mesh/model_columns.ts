// The mesh model's storage: every column, table and pool of the model (the base of Mesh), and
// the inline accessors of a workload's and a membership's packed words. No lookups here.
import { StringTable } from "./intern";
import { FreeIds } from "./free_ids";
import { ChunkPool } from "./pool";
import { RetiredServices } from "./retired_services";
import { AddrTable4, AddrTable6, HostnameIndex, SparseColumn, U64Table } from "./table";
import { MEM_STRIDE, Ref, W_CHAIN, W_INFO, W_IP4, W_PLACE } from "./model_layout";

/**
 * The columns of a Mesh (model.ts). Public so the builders (parse_*.ts, wire_*.ts, edit.ts) can
 * fill them; filters only read, through Mesh's accessors.
 */
export class MeshColumns {
  // ---- Interned texts ----
  networks: StringTable = new StringTable();
  identities: StringTable = new StringTable();
  /** Whole locality strings, "region/zone/subzone". */
  localities: StringTable = new StringTable();
  /**
   * Locality prefixes "r", "r/z", "r/z/s": equal zone ids mean same region AND zone, so scope
   * comparisons are one integer compare.
   */
  localityPrefixes: StringTable = new StringTable();
  /** Per locality id: region, zone and subzone prefix ids. */
  localityParts: Array<i32> = [0, 0, 0];

  /** Bumped by every applied change: references resolve again lazily (Ref.generation). */
  generation: u32 = 0;
  /**
   * The service ids the last applied delta named (upserted or removed), for what a filter
   * derives per service (texts): refreshed for these alone, so a change costs O(its records),
   * not O(services). Emptied at the start of every delta; a full load makes a new Mesh (the
   * filter derives everything for it once).
   */
  changedServices: Array<i32> = new Array<i32>();
  /** The feed's epoch and version this model is at (0, 0: built from JSON, or empty). */
  epoch: u64 = 0;
  version: u64 = 0;
  /**
   * The feed's content digest of this model (format 3 messages carry it; digestKnown is false
   * after a format-2 message or a JSON load): a no-change naming it is taken from any epoch.
   */
  digest: u64 = 0;
  digestKnown: bool = false;

  // ---- Workloads (ids < workloadTotal; capacity = workloadCapacity()) ----
  workloadTotal: i32 = 0;
  liveWorkloads: i32 = 0;
  /**
   * Per workload id, four words side by side (W_INFO: identity id in bits 0..23 and the W_*
   * flags, 0 = no workload at this id; W_PLACE: network id | locality id << 16; W_IP4: the
   * first IPv4 address when W_V4; W_CHAIN: first membership id + 1 of its chain, 0 = none):
   * a lookup or an update of one workload touches one cache line rather than five arrays.
   */
  wCols: StaticArray<u32> = new StaticArray<u32>(0);
  /**
   * Bit w (word w >> 5): w may be an endpoint of a headless service. Set whenever w has a
   * membership in a service that is headless (edit.ts: addMembership, markHeadlessMembers);
   * cleared only when all of w's memberships go, so it can be stale-true (a walk for nothing),
   * never stale-false. headlessMatch reads it first: the ~98% of pods in no headless service
   * then skip the membership walk, whose membership loads miss the cache at 1M pods
   * (+0.5 us of guest code per passthrough_mtls connection measured against the configure-time
   * index this replaced, bench/scale/README.md). 1 bit per pod.
   */
  wHeadless: StaticArray<u32> = new StaticArray<u32>(0);
  /**
   * Reference id + 1; 0 = none. Dense only when many workloads have one (a service waypoint is
   * the common case; a workload's own waypoint or gateway is rare), so a mesh without them pays
   * nothing per pod, and one with a few gateway-fronted workloads pays only for those.
   */
  wWaypoint: SparseColumn = new SparseColumn();
  wGateway: SparseColumn = new SparseColumn();
  /** Addresses beyond the inline IPv4 one: [n4, v4 x n4, (hi hi, hi lo, lo hi, lo lo) x n6]. */
  wExtra: ChunkPool = new ChunkPool();
  v4Table: AddrTable4 = new AddrTable4(0);
  v6Table: AddrTable6 = new AddrTable6(0);

  // ---- Memberships (a workload in a service: one "endpoint"; ids < memTotal) ----
  memTotal: i32 = 0;
  memLive: i32 = 0;
  /** Free membership ids, chained through memNext (head + 1; 0 = none). */
  memFree: i32 = 0;
  /**
   * Per membership, four words side by side (MEM_SERVICE: service id + 1, 0 = a free id;
   * MEM_POS: position in the service's member list | M_OVERRIDES when it has port overrides;
   * MEM_NEXT: next membership of the same workload + 1, 0 ends the chain; MEM_WORKLOAD: the
   * workload), so an update that touches a membership touches one cache line rather than four
   * arrays. A service's member list holds membership ids, so the swap-remove that fills a gap
   * finds the moved member's membership at once (a walk of that workload's memberships, once
   * per removed membership, made removing a pod in thousands of services quadratic).
   */
  mem: StaticArray<u32> = new StaticArray<u32>(0);
  /** Per-membership target-port overrides: words (service port << 16 | target port). */
  memOverrides: ChunkPool = new ChunkPool();

  /** Workload ids the columns have room for. */
  // @ts-ignore: decorator
  @inline workloadCapacity(): i32 {
    return this.wCols.length >> 2;
  }

  // Workload w's words (w within capacity: callers check).
  // @ts-ignore: decorator
  @inline wInfo(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_INFO]);
  }

  // @ts-ignore: decorator
  @inline setWInfo(w: i32, v: u32): void {
    unchecked((this.wCols[(w << 2) + W_INFO] = v));
  }

  // @ts-ignore: decorator
  @inline wNet(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_PLACE]) & 0xffff;
  }

  // @ts-ignore: decorator
  @inline setWNet(w: i32, v: u32): void {
    const at = (w << 2) + W_PLACE;
    unchecked((this.wCols[at] = (unchecked(this.wCols[at]) & 0xffff0000) | (v & 0xffff)));
  }

  // @ts-ignore: decorator
  @inline wLoc(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_PLACE]) >>> 16;
  }

  // @ts-ignore: decorator
  @inline setWLoc(w: i32, v: u32): void {
    const at = (w << 2) + W_PLACE;
    unchecked((this.wCols[at] = (unchecked(this.wCols[at]) & 0xffff) | (v << 16)));
  }

  /** Network and locality in one store. */
  // @ts-ignore: decorator
  @inline setWPlace(w: i32, network: u32, locality: u32): void {
    unchecked((this.wCols[(w << 2) + W_PLACE] = (network & 0xffff) | (locality << 16)));
  }

  // @ts-ignore: decorator
  @inline wIp4(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_IP4]);
  }

  // @ts-ignore: decorator
  @inline setWIp4(w: i32, v: u32): void {
    unchecked((this.wCols[(w << 2) + W_IP4] = v));
  }

  // @ts-ignore: decorator
  @inline wChain(w: i32): u32 {
    return unchecked(this.wCols[(w << 2) + W_CHAIN]);
  }

  // @ts-ignore: decorator
  @inline setWChain(w: i32, v: u32): void {
    unchecked((this.wCols[(w << 2) + W_CHAIN] = v));
  }

  /** Membership g's word `field` (g within capacity: callers check). */
  // @ts-ignore: decorator
  @inline mem3(g: i32, field: i32): u32 {
    return unchecked(this.mem[g * MEM_STRIDE + field]);
  }

  // @ts-ignore: decorator
  @inline setMem(g: i32, field: i32, value: u32): void {
    unchecked((this.mem[g * MEM_STRIDE + field] = value));
  }

  /** Membership ids the columns have room for. */
  // @ts-ignore: decorator
  @inline memCapacity(): i32 {
    return this.mem.length / MEM_STRIDE;
  }

  // ---- Services (ids < serviceTotal; capacity = sFlags.length) ----
  serviceTotal: i32 = 0;
  liveServices: i32 = 0;
  sHostname: Array<string> = new Array<string>();
  /** Hostname → service id (its texts are sHostname's). */
  hostnames: HostnameIndex = new HostnameIndex();
  sFlags: StaticArray<u8> = new StaticArray<u8>(0);
  sWaypoint: StaticArray<u32> = new StaticArray<u32>(0);
  /** Routing preference, one Scope per byte from the lowest, 0 ends the list. */
  sLbPrefs: StaticArray<u32> = new StaticArray<u32>(0);
  /** Per service: its port slot ids, in configuration order. */
  sPorts: ChunkPool = new ChunkPool();
  slotPort: StaticArray<u16> = new StaticArray<u16>(0);
  slotTarget: StaticArray<u16> = new StaticArray<u16>(0);
  slotCluster: Array<ArrayBuffer> = new Array<ArrayBuffer>();
  slotTotal: i32 = 0;
  slotFree: FreeIds = new FreeIds();
  /** (service, service port) → port slot. */
  portIndex: U64Table = new U64Table();
  /** Per service: [count, workload id x count] (swap-remove order after a change). */
  sMembers: ChunkPool = new ChunkPool();
  /** Per service: SAN slot ids into `sans`. */
  sSans: ChunkPool = new ChunkPool();
  sans: Array<string> = new Array<string>();
  sanFree: FreeIds = new FreeIds();
  /** Per service: VIP_WORDS words per VIP. */
  sVips: ChunkPool = new ChunkPool();
  /** VIP → service id (owner), per network. */
  vipTable4: AddrTable4 = new AddrTable4(0);
  vipTable6: AddrTable6 = new AddrTable6(0);
  /**
   * Removed services whose VIPs and SANs are still in sVips / sSans and the VIP tables (no
   * lookup answers them: their service is not live); released by later deltas or when the id
   * is upserted again (edit.ts reclaimRetiredServices / releaseRetired).
   */
  retiredServices: RetiredServices = new RetiredServices();

  // ---- References ----
  refs: Array<Ref> = new Array<Ref>();
}

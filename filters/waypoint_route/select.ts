// Choosing among instances, addresses and identities for waypoint_route's decision: pure lookups
// on the mesh model that allocate nothing per connection (the candidate buffers live per root).
import { Address, Mesh, Scope } from "../../assembly/mesh";
import { ByteText } from "../../assembly/runtime/text";
import { WaypointConfig } from "./config";

/** Lower is better: network first (always), then the service's locality preference. */
function rank(mesh: Mesh, s: i32, source: i32, candidate: i32): i32 {
  const remote = mesh.workloadNetwork(candidate) != mesh.workloadNetwork(source) ? 1 : 0;
  let locality = 0;
  for (let i = 0, n = mesh.lbPreferenceCount(s); i < n; i++) {
    const scope = mesh.lbPreference(s, i);
    if (scope == Scope.Network) continue;
    if (!mesh.sameScope(scope, source, candidate)) break;
    locality++;
  }
  return remote * 16 + (8 - locality);
}

/** Reusable candidate buffer (per root): no allocation per connection below its size. */
export class Scratch {
  candidates: StaticArray<i32> = new StaticArray<i32>(64);
  endpointOf: StaticArray<i32> = new StaticArray<i32>(64);
  ensure(n: i32): void {
    if (n <= this.candidates.length) return;
    const room = max(n, this.candidates.length * 2);
    this.candidates = new StaticArray<i32>(room);
    this.endpointOf = new StaticArray<i32>(room);
  }
}

/**
 * Which endpoints of a service can be candidates. A remote "proxy" workload (no address) is
 * reachable only through its network's gateway, so it counts only when remote and with a gateway
 * (ztunnel's load_balance: WDS sends the gateway even for a same-network proxy, never use it).
 */
function reachable(mesh: Mesh, w: i32, network: i32): bool {
  if (w < 0) return false;
  if (mesh.workloadAddressCount(w) > 0) return true;
  return mesh.workloadNetwork(w) != network && mesh.workloadGateway(w) >= 0;
}

/**
 * Fills scratch with the candidate endpoints of service s (rules 2 and 7): every reachable
 * endpoint, whatever its tunnel support (a local one without HBONE is reached by plain TCP, a
 * remote one through its gateway). With `hboneOnly` (waypoint instances: a waypoint terminates
 * HBONE, so an instance without it could only fail later), addressed instances without HBONE are
 * left out. Returns the count.
 */
export function candidatesOf(config: WaypointConfig, s: i32, hboneOnly: bool, scratch: Scratch): i32 {
  const mesh = config.mesh;
  const n = mesh.endpointCount(s);
  scratch.ensure(n);
  let count = 0;
  for (let e = 0; e < n; e++) {
    const w = mesh.endpointWorkload(s, e);
    if (!reachable(mesh, w, config.network)) continue;
    if (hboneOnly && !mesh.workloadIstio(w) && mesh.workloadAddressCount(w) > 0) continue;
    unchecked((scratch.candidates[count] = w));
    unchecked((scratch.endpointOf[count] = e));
    count++;
  }
  return count;
}

/**
 * Index into scratch of the best healthy candidate (the best rank under service s's preference
 * wins, ties go to configuration order), or -1.
 */
export function bestOf(mesh: Mesh, s: i32, source: i32, scratch: Scratch, count: i32): i32 {
  let best = -1;
  let bestRank = i32.MAX_VALUE;
  for (let i = 0; i < count; i++) {
    const w = unchecked(scratch.candidates[i]);
    if (w < 0 || !mesh.workloadHealthy(w)) continue;
    const r = rank(mesh, s, source, w);
    if (r < bestRank) {
      best = i;
      bestRank = r;
    }
  }
  return best;
}

/**
 * Writes into `out` the address of workload w to dial for a connection whose family and address
 * come from `like` (rule 9, ztunnel's pick_workload_destination): `like` itself when it is one of
 * w's addresses, else w's first address of the same family, else its first. Port -1. False when
 * w has no address.
 */
export function addressLike(mesh: Mesh, w: i32, like: Address, out: Address): bool {
  const n = mesh.workloadAddressCount(w);
  let sameFamily = -1;
  for (let i = 0; i < n; i++) {
    if (!mesh.workloadAddress(w, i, out)) continue;
    if (out.sameIp(like)) return true;
    if (sameFamily < 0 && out.family == like.family) sameFamily = i;
  }
  return mesh.workloadAddress(w, sameFamily >= 0 ? sameFamily : 0, out);
}

/** True when the comma-separated list holds exactly `item`. */
function listHas(list: ByteText, item: ArrayBuffer): bool {
  const n = item.byteLength;
  const base = list.ptr;
  const end = list.length;
  let start = 0;
  while (start <= end) {
    let stop = start;
    while (stop < end && load<u8>(base + <usize>stop) != 0x2c) stop++;
    if (stop - start == n && memory.compare(base + <usize>start, changetype<usize>(item), <usize>n) == 0) return true;
    start = stop + 1;
  }
  return false;
}

/**
 * The identities a hop may present, as ztunnel's workload_and_services_san: service s's subject
 * alt names (s = -1: none) and workload w's own identity, comma-separated, each once.
 */
export function sansOf(config: WaypointConfig, s: i32, w: i32, out: ByteText): ByteText {
  out.clear().buffer(config.serviceSans(s));
  const own = config.mesh.workloadIdentityUtf8(w);
  if (own.byteLength == 0 || listHas(out, own)) return out;
  if (out.length > 0) out.byte(0x2c);
  return out.buffer(own);
}

/**
 * The inner identities of double HBONE (ztunnel's final_sans: the service's SANs), falling back to
 * the remote instance's own identity when the service lists none.
 */
export function innerSansOf(config: WaypointConfig, s: i32, w: i32, out: ByteText): ByteText {
  const sans = config.serviceSans(s);
  return out.clear().buffer(sans.byteLength > 0 ? sans : config.mesh.workloadIdentityUtf8(w));
}

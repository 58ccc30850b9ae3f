// Identical waypoint / gateway references share one id (hostname + port, or address + port +
// network), as in the JSON build. The update path finds or adds them here. References are
// kept for the model's life (a full load starts a new model): their number is bounded by the
// distinct references the feed has sent since the last full load.
import { Address, FAMILY_V4 } from "./ip";
import { Mesh, Ref, RefTarget } from "./model";
import { mix32, mix64 } from "./table";

function textHash(text: string): u32 {
  let h: u32 = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = (h ^ <u32>text.charCodeAt(i)) * 0x01000193;
  return mix32(h);
}

function refHash(hostname: string, a: Address, port: i32, network: i32): u32 {
  if (hostname.length > 0) return mix32(textHash(hostname) ^ mix32(<u32>port + 0x9e3779b9));
  const key = a.family == FAMILY_V4 ? <u64>a.v4 : a.hi ^ mix64(a.lo);
  return <u32>mix64(key ^ ((<u64>port << 40) | (<u64>network << 8) | <u64>a.family));
}

export class RefTable {
  private slots: StaticArray<u32> = new StaticArray<u32>(32); // [hash, id + 1]
  private mask: i32 = 15;
  private used: i32 = 0;

  constructor(private mesh: Mesh) {
    const refs = mesh.refs;
    for (let i = 0; i < refs.length; i++) {
      const r = unchecked(refs[i]);
      this.place(refHash(r.hostname, r.address, r.port, r.network), i);
    }
  }

  /** The id of the reference (a hostname one when `hostname` is not empty), added when new. */
  findOrAdd(hostname: string, a: Address, port: i32, network: i32): i32 {
    const refs = this.mesh.refs;
    const hash = refHash(hostname, a, port, network);
    let i = <i32>hash & this.mask;
    for (let probes = 0; probes <= this.mask; probes++) {
      const entry = unchecked(this.slots[(i << 1) + 1]);
      if (entry == 0) break;
      if (unchecked(this.slots[i << 1]) == hash) {
        const id = <i32>entry - 1;
        if (id < refs.length) {
          const r = unchecked(refs[id]);
          if (r.port == port) {
            if (hostname.length > 0 ? r.hostname == hostname : r.hostname.length == 0 && r.network == network && r.address.sameIp(a)) return id;
          }
        }
      }
      i = (i + 1) & this.mask;
    }
    const ref = new Ref();
    ref.hostname = hostname;
    if (hostname.length == 0) ref.address.copyFrom(a);
    ref.port = port;
    ref.network = network;
    ref.target = RefTarget.Unresolved;
    ref.generation = this.mesh.generation - 1; // resolved on first use
    const id = refs.length;
    refs.push(ref);
    this.place(hash, id);
    return id;
  }

  private place(hash: u32, id: i32): void {
    if ((this.used + 1) * 2 > this.mask + 1) this.grow();
    let i = <i32>hash & this.mask;
    while (unchecked(this.slots[(i << 1) + 1]) != 0) i = (i + 1) & this.mask;
    unchecked((this.slots[i << 1] = hash));
    unchecked((this.slots[(i << 1) + 1] = <u32>id + 1));
    this.used++;
  }

  private grow(): void {
    const old = this.slots;
    const capacity = (this.mask + 1) << 1;
    this.slots = new StaticArray<u32>(capacity << 1);
    this.mask = capacity - 1;
    this.used = 0;
    for (let k = 0; k + 1 < old.length; k += 2) {
      const entry = unchecked(old[k + 1]);
      if (entry == 0) continue;
      let i = <i32>unchecked(old[k]) & this.mask;
      while (unchecked(this.slots[(i << 1) + 1]) != 0) i = (i + 1) & this.mask;
      unchecked((this.slots[i << 1] = old[k]));
      unchecked((this.slots[(i << 1) + 1] = entry));
      this.used++;
    }
  }
}

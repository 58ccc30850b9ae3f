// Which services each workload is an endpoint of (uid → hostname → that endpoint's port
// overrides): what a workload's delta record lists. Almost every workload is in one service,
// so one membership is kept as a small object and a Map only from the second on: a Map per
// workload was ~175 bytes at 100k pods, the small object ~30. Canonical: a workload back to one
// membership goes back to the small object, so an incremental model equals one computed from
// scratch (tests/feed/incremental.test.ts compares them whole).

/** A workload's entry in a service's endpoints: the per-port target overrides (or none). */
export type Membership = Record<string, number> | undefined;

interface OneMembership {
  hostname: string;
  ports: Membership;
}

type Held = OneMembership | Map<string, Membership>;

const NONE: ReadonlyArray<[string, Membership]> = [];

export class MembershipIndex {
  private readonly byUid = new Map<string, Held>();

  /** Workloads with at least one membership. */
  get size(): number {
    return this.byUid.size;
  }

  uids(): IterableIterator<string> {
    return this.byUid.keys();
  }

  /** How many services `uid` is an endpoint of. */
  count(uid: string): number {
    const held = this.byUid.get(uid);
    return held === undefined ? 0 : held instanceof Map ? held.size : 1;
  }

  /** Whether `uid` is an endpoint of `hostname`. */
  has(uid: string, hostname: string): boolean {
    const held = this.byUid.get(uid);
    return held === undefined ? false : held instanceof Map ? held.has(hostname) : held.hostname === hostname;
  }

  /** `uid`'s memberships as [hostname, overrides] pairs. */
  of(uid: string): Iterable<[string, Membership]> {
    const held = this.byUid.get(uid);
    if (held === undefined) return NONE;
    return held instanceof Map ? held.entries() : [[held.hostname, held.ports]];
  }

  set(uid: string, hostname: string, ports: Membership): void {
    const held = this.byUid.get(uid);
    if (held === undefined || (!(held instanceof Map) && held.hostname === hostname)) this.byUid.set(uid, { hostname, ports });
    else if (held instanceof Map) held.set(hostname, ports);
    else
      this.byUid.set(
        uid,
        new Map([
          [held.hostname, held.ports],
          [hostname, ports],
        ]),
      );
  }

  delete(uid: string, hostname: string): void {
    const held = this.byUid.get(uid);
    if (held === undefined) return;
    if (!(held instanceof Map)) {
      if (held.hostname === hostname) this.byUid.delete(uid);
      return;
    }
    held.delete(hostname);
    if (held.size === 1) {
      const [only, ports] = held.entries().next().value as [string, Membership];
      this.byUid.set(uid, { hostname: only, ports });
    } else if (held.size === 0) this.byUid.delete(uid);
  }
}

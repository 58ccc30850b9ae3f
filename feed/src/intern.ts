// One string instance per distinct text for the values that repeat across a mesh's objects
// (namespaces, label keys and values, service accounts, node names, phases, zones, identities).
// JSON.parse gives every occurrence its own string: at 100k pods "bench", "istio", "Running",
// "Ready" and "True" alone are half a million strings of ~32 bytes each. A bounded table: once
// it holds `limit` texts it is emptied (texts gone from the mesh cannot grow it; a text kept
// before the clear stays valid, it is only no longer shared with later copies). Texts longer
// than `maxLength` (the longest label key Kubernetes allows is 317) are never kept, so the table
// holds at most limit × maxLength characters whatever the objects carry.
export class Interner {
  private readonly kept = new Map<string, string>();

  constructor(
    private readonly limit = 65_536,
    private readonly maxLength = 320,
  ) {}

  /** The kept instance of `s` (itself the first time, or when too long). Anything that is not a string is returned as is. */
  of<T>(s: T): T {
    if (typeof s !== "string" || s.length > this.maxLength) return s;
    const kept = this.kept.get(s);
    if (kept !== undefined) return kept as T;
    if (this.kept.size >= this.limit) this.kept.clear();
    this.kept.set(s, s);
    return s;
  }

  get size(): number {
    return this.kept.size;
  }
}

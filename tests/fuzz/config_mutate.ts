// Plugin configurations, mutated from a valid snapshot: structure-aware edits of each field of
// the mesh schema and of each filter's own fields (wrong types, absurd numbers, duplicate and
// unknown keys, deep nesting, huge values, per-field bad values), then text-level damage of the
// serialized bytes (truncation, byte flips and insertions, invalid UTF-8, stray tokens).
import { Rng } from "./rng.js";

/** JSON text emitted verbatim (numbers JS cannot hold, lone-surrogate escapes, ...). */
export class Raw {
  constructor(readonly text: string) {}
}

/** An object whose key `key` is written twice (the second time with `value`). */
export class DuplicateKey {
  constructor(
    readonly object: Record<string, unknown>,
    readonly key: string,
    readonly value: unknown,
  ) {}
}

function hasSpecial(value: unknown): boolean {
  if (value instanceof Raw || value instanceof DuplicateKey) return true;
  if (value === null || typeof value !== "object") return false;
  for (const v of Array.isArray(value) ? value : Object.values(value)) if (hasSpecial(v)) return true;
  return false;
}

/** Serializes a value that may contain Raw and DuplicateKey nodes. */
export function emit(value: unknown): string {
  if (value instanceof Raw) return value.text;
  if (value instanceof DuplicateKey) {
    const body = Object.entries(value.object).map(([k, v]) => `${JSON.stringify(k)}:${emit(v)}`);
    body.push(`${JSON.stringify(value.key)}:${emit(value.value)}`);
    return `{${body.join(",")}}`;
  }
  if (Array.isArray(value)) return `[${value.map(emit).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${emit(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * The value tables below are shared by every case of a process, so an edit must never put one
 * of their objects into a document: a later edit of the same case may write into it, and every
 * later case would start from the changed table. (WRONG_TYPES' `[null]` once grew to 101 items,
 * one of them a 70,000-character string, over 20,000 cases; a "huge array" edit then put it
 * 20,000 times in one document, and emitting that took 1.4 GB of JS heap: the worker OOM of
 * docs/fuzzing.md. It also made a case depend on the cases run before it in the process.)
 * The tables are frozen, so such a write throws instead of leaking into later cases, and
 * their objects go into documents as copies (copy()).
 */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * A deep copy that keeps Raw and DuplicateKey nodes what they are (structuredClone would turn
 * them into plain objects, emitted as `{"text": ...}`); Raw is immutable and shared.
 */
function copy<T>(value: T): T {
  if (value === null || typeof value !== "object" || value instanceof Raw) return value;
  if (value instanceof DuplicateKey) return new DuplicateKey(copy(value.object), value.key, copy(value.value)) as T;
  if (Array.isArray(value)) return value.map(copy) as T;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copy(v)])) as T;
}

const ABSURD_NUMBERS = [
  "0", "-0", "-1", "1.5", "65536", "65535", "1e2", "1E400", "-1e400", "1e-400", "4294967296", "2147483648",
  "9007199254740993", "123456789012345678901234567890123456789", "0.0000000000000000000001", "80.0", "8e1",
];

const WRONG_TYPES: readonly unknown[] = deepFreeze([null, true, false, 0, -1, "", "x", [], {}, [null], { "": 0 }, 1.5]);

const ODD_STRINGS = [
  "", " ", "é", "\u2028", "\u0000", "💥", "a\nb", "\"", "\\", "%", "..", "-", "*", "a".repeat(300),
];

/** Bad (and borderline) values per field name of the mesh schema and the filters' own fields. */
const FIELD_VALUES: Record<string, readonly unknown[]> = {
  addresses: [
    ["10.0.0.300"], ["fe80::1%eth0"], ["::ffff:10.1.0.1"], ["FD00:0::3:1"], ["::"], ["0.0.0.0"], ["1.2.3"], ["10.1.0.1", "10.1.0.1"],
    ["10.1.0.1"], ["fd00::3:1"], [""], ["10.1.0.01"], ["[fd00::1]"], ["10.1.0.1:80"], [], ["1:2:3:4:5:6:7:8:9"],
  ],
  address: ["10.0.0.300", "fe80::1%eth0", "::ffff:10.9.0.1", "10.9.0.1", "172.16.2.1", "fd00:3::1", "", "x", "10.1.0.1:80"],
  localWorkload: ["10.1.0.0", "10.1.0.1", "fd00::3:1", "::ffff:10.1.0.0", "10.200.0.9", "172.16.2.1", "fe80::1%eth0", "", "10.1.0.0:80"],
  identity: [
    "spiffe://cluster.local/ns/a/sa/b", "spiffe://td/ns/n", "spiffe://TD/ns/a/sa/b", "spiffe://td/ns/./sa/b", "spiffe://td/ns/a/sa/..",
    "spiffe://td/ns/a/sa/b/c", "http://td/ns/a/sa/b", "spiffe://", "spiffe://t d/ns/a/sa/b", "spiffe://td/ns//sa/b",
  ],
  tlsMode: ["istio", "disabled", "ISTIO", "mtls", ""],
  locality: ["r", "r/z", "r/z/s", "r/z/s/x", "r//z", "/z", "r/", ""],
  network: ["", "net1", "net2", "net9", "é"],
  localNetwork: ["", "net1", "net2", "nope", "é", "x".repeat(300), "\u0000"],
  uid: ["pod-0", "pod-1", "wp-local", "", "new"],
  workload: ["pod-0", "nope", "", "wp-remote", "ew3"],
  hostname: [
    "svc-0.default.svc.cluster.local", "*.example.com", "a..b", "-a", "a_b", "x".repeat(254), "a".repeat(64) + ".b", "waypoint.default.svc.cluster.local", "",
  ],
  port: [0, 1, 15008, 65535, 65536, -1, "15008"],
  hboneMtlsPort: [0, 1, 15008, 15443, 65535, 65536, "15008"],
  ports: [{ "0": 80 }, { "080": 80 }, { "+80": 80 }, { "65536": 80 }, { "80": 0 }, { "80": 65536 }, { "80": "8080" }, { "80 ": 80 }, {}, { "81": 9376 }],
  vips: [[{ address: "10.96.0.1" }, { address: "10.96.0.1" }], [{ network: "net1" }], [{ address: "fd00:96::1", network: "net2" }], [{}]],
  endpoints: [[{ workload: "pod-0" }, { workload: "pod-0" }], [{ workload: "pod-0", ports: { "81": 1 } }], [{ ports: {} }], [{ workload: "nope" }]],
  waypoint: [{ address: "10.9.0.1", hostname: "w" }, {}, { port: 15008 }, { address: "10.9.0.99" }, { hostname: "nope.example" }, { address: "10.9.0.1", port: 0 }],
  networkGateway: [{ address: "172.16.2.1", hostname: "g" }, {}, { hostname: "eastwest.istio-system.svc.cluster.local", hboneMtlsPort: 0 }, { address: "10.255.0.1" }],
  subjectAltNames: [[""], ["a", ""], [1], "spiffe://x"],
  routingPreference: [["network", "network"], ["planet"], [], ["subzone", "zone", "region", "network"], "network"],
  mode: ["failover", "standard", "subset", "direct", "bogus", ""],
  role: ["client", "server", "both", "", "CLIENT"],
  unknownDestination: ["passthrough", "refuse", "drop", ""],
  routes: [{ "10.0.0.1": "" }, { "10.0.0.300": "a" }, { "": "a" }, { "fd00::1": "b" }, { "[fd00::1]": "b" }, { "10.0.0.1": 5 }, {}],
  healthy: [true, false, "true", 1, null],
  headless: [true, false, "false", 0],
};
const CLUSTER_FIELDS = ["cluster", "mtlsCluster", "subsetCluster", "tunnelCluster", "appCluster", "hboneCluster", "doubleHboneCluster", "default_cluster"];
for (const field of CLUSTER_FIELDS) FIELD_VALUES[field] = ["", "ok_cluster", "outbound|80||x", "é", "a\u0000b", "x".repeat(10000), "with space"];
deepFreeze(FIELD_VALUES);

type Path = (string | number)[];

function children(value: unknown): (string | number)[] {
  if (Array.isArray(value)) return value.map((_, i) => i);
  if (value !== null && typeof value === "object" && !(value instanceof Raw) && !(value instanceof DuplicateKey)) return Object.keys(value);
  return [];
}

/**
 * A random node below the root: a walk down from the root that stops at each level with
 * probability 1/4 (so fields deep inside workloads[] and services[] are reached as often as
 * the top-level ones). Undefined when the root has no children.
 */
function randomPath(rng: Rng, root: unknown): Path | undefined {
  const path: Path = [];
  let node = root;
  for (;;) {
    const next = children(node);
    if (next.length === 0 || (path.length > 0 && rng.chance(0.25))) break;
    const step = rng.pick(next);
    path.push(step);
    node = (node as Record<string | number, unknown>)[step];
  }
  return path.length ? path : undefined;
}

function parentOf(root: unknown, path: Path): Record<string | number, unknown> {
  let node = root as Record<string | number, unknown>;
  for (const step of path.slice(0, -1)) node = node[step] as Record<string | number, unknown>;
  return node;
}

/** Name of the schema field a path is in (the last string segment). */
function fieldName(path: Path): string | undefined {
  for (let i = path.length - 1; i >= 0; i--) if (typeof path[i] === "string") return path[i] as string;
  return undefined;
}

function nested(depth: number, open: string, close: string, inner = "0"): Raw {
  return new Raw(open.repeat(depth) + inner + close.repeat(depth));
}

/** One structure-aware edit of `doc` (a deep copy is edited in place). */
function mutateStructure(rng: Rng, doc: Record<string, unknown>): void {
  const path = randomPath(rng, doc);
  if (path === undefined) {
    doc[rng.pick(["workloads", "services", "x"])] = copy(rng.pick(WRONG_TYPES));
    return;
  }
  const parent = parentOf(doc, path);
  const key = path[path.length - 1]!;
  const field = fieldName(path);
  // the costly shapes (deep nesting, huge strings and arrays, many keys) are rarer
  let op = rng.int(14);
  if ((op === 8 || op === 9 || op === 10 || op === 13) && !rng.chance(0.25)) op = rng.int(8);
  switch (op) {
    case 0: // delete
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete parent[key];
      break;
    case 1:
      parent[key] = copy(rng.pick(WRONG_TYPES));
      break;
    case 2:
      parent[key] = new Raw(rng.pick(ABSURD_NUMBERS));
      break;
    case 3:
    case 4:
    case 5: {
      const values = field !== undefined ? FIELD_VALUES[field] : undefined;
      parent[key] = values ? copy(rng.pick(values)) : rng.pick(ODD_STRINGS);
      break;
    }
    case 6: // unknown field next to known ones
      if (!Array.isArray(parent)) parent[rng.pick(["x", "Workloads", "uid ", "", "\u00e9", "localnetwork"])] = 1;
      else parent.push(copy(parent[key as number]));
      break;
    case 7: { // duplicate an array element (uids, addresses, hostnames collide) or an object key
      if (Array.isArray(parent)) {
        parent.splice(key as number, 0, copy(parent[key as number]));
        break;
      }
      const dup = new DuplicateKey(parent as Record<string, unknown>, String(key), rng.chance(0.5) ? parent[key] : copy(rng.pick(WRONG_TYPES)));
      if (path.length === 1) pendingRoot = dup;
      else parentOf(doc, path.slice(0, -1))[path[path.length - 2]!] = dup;
      break;
    }
    case 8: // deep nesting around the limit (64) and far beyond it
      parent[key] = nested(rng.chance(0.9) ? rng.pick([62, 63, 64, 65, 200]) : 100000, rng.chance(0.5) ? "[" : '{"a":', rng.chance(0.5) ? "]" : "}");
      break;
    case 9: // huge string
      parent[key] = "a".repeat(rng.chance(0.9) ? rng.pick([1000, 70000]) : 300000);
      break;
    case 10: { // huge array: repeat an element
      const target = Array.isArray(parent) ? parent : parent[key];
      if (Array.isArray(target) && target.length > 0) {
        const item = target[rng.int(target.length)];
        // bounded so that edits stacked on each other stay within a few times MAX_CONFIG_BYTES
        const size = hasSpecial(item) ? MAX_CONFIG_BYTES : (JSON.stringify(item) ?? "").length + 1;
        const n = Math.min(rng.chance(0.9) ? 100 : 3000, Math.floor(MAX_CONFIG_BYTES / size));
        for (let i = 0; i < n; i++) target.push(copy(item));
      } else {
        // one copy per item: fill() would alias one object 20,000 times, and a later edit of
        // this case writing into it would be emitted 20,000 times
        const n = rng.chance(0.9) ? 100 : 20000;
        const item = rng.pick(WRONG_TYPES);
        parent[key] = Array.from({ length: n }, () => copy(item));
      }
      break;
    }
    case 11: { // swap with another subtree
      const other = randomPath(rng, doc) ?? path;
      const otherParent = parentOf(doc, other);
      const a = parent[key];
      parent[key] = copy(otherParent[other[other.length - 1]!]);
      if (!other.slice(0, path.length).every((s, i) => s === path[i])) otherParent[other[other.length - 1]!] = a;
      break;
    }
    case 12: // strings JSON allows but text checks must survive
      parent[key] = new Raw(rng.pick(['"\\ud800"', '"\\udc00x"', '"\\u0000"', '"a\\u0000b"', '"\\uDBFF\\uDFFF"', '"\\/"', '"\\u00e9"']));
      break;
    default: // many keys in one object
      if (!Array.isArray(parent)) {
        const many: Record<string, number> = {};
        for (let i = 0, n = rng.chance(0.9) ? rng.pick([17, 100]) : 5000; i < n; i++) many[`k${i}`] = i;
        parent[key] = many;
      }
  }
}

/** A duplicate key at the top level replaces the whole document when it is emitted. */
let pendingRoot: DuplicateKey | undefined;

const INVALID_UTF8 = [[0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf5, 0x80, 0x80, 0x80], [0xff], [0x80], [0xe2, 0x82], [0xf0, 0x9f, 0x92]];
const TOKENS = ["{", "}", "[", "]", ",", ":", '"', "\\", "null", "1e999", "-", "\t", "\u0000", "//", "/*", "'", "NaN", "Infinity"];

/** `bytes` with `count` bytes at `at` replaced by `insert`. */
function splice(bytes: Uint8Array, at: number, count: number, insert: ArrayLike<number> = []): Uint8Array {
  at = Math.min(at, bytes.length);
  count = Math.min(count, bytes.length - at);
  const out = new Uint8Array(bytes.length - count + insert.length);
  out.set(bytes.subarray(0, at), 0);
  out.set(insert, at);
  out.set(bytes.subarray(at + count), at + insert.length);
  return out;
}

/** Text-level damage of serialized JSON. */
function mutateText(rng: Rng, bytes: Uint8Array): Uint8Array {
  const at = rng.int(bytes.length + 1);
  switch (rng.int(8)) {
    case 0:
      return bytes.subarray(0, at);
    case 1: {
      const out = bytes.slice();
      if (out.length) out[Math.min(at, out.length - 1)]! ^= 1 << rng.int(8);
      return out;
    }
    case 2:
      return splice(bytes, at, 0, [rng.u32() & 0xff]);
    case 3:
      return splice(bytes, at, 0, rng.pick(INVALID_UTF8));
    case 4:
      return splice(bytes, at, 0, new TextEncoder().encode(rng.pick(TOKENS)));
    case 5:
      return splice(bytes, at, rng.range(1, 16));
    case 6: // trailing data, BOM, whitespace padding
      return rng.chance(0.5)
        ? splice(bytes, bytes.length, 0, new TextEncoder().encode(rng.pick([" x", "{}", "\n\n", "0"])))
        : splice(bytes, 0, 0, rng.pick([[0xef, 0xbb, 0xbf], [0x20], [0x0a]]));
    default: // duplicate a slice in place
      return splice(bytes, at, 0, bytes.slice(at, at + rng.range(1, 40)));
  }
}

const baseTexts = new WeakMap<object, string>();

/** Byte cap for a mutated configuration: large enough for the limits tests, small enough to run a million. */
export const MAX_CONFIG_BYTES = 1 << 20;

/**
 * A mutated configuration of `base`: 1-3 structure edits, then (30%) text damage.
 * Returns the bytes and a short note of what was done (for saved cases).
 */
export function mutateConfig(rng: Rng, base: Record<string, unknown>): { bytes: Uint8Array; note: string } {
  const baseText = baseTexts.get(base) ?? JSON.stringify(base);
  baseTexts.set(base, baseText);
  const doc = JSON.parse(baseText) as Record<string, unknown>; // a deep copy, faster than structuredClone
  pendingRoot = undefined;
  const edits = rng.range(0, 3);
  for (let i = 0; i < edits; i++) mutateStructure(rng, doc);
  const root = pendingRoot ?? doc;
  pendingRoot = undefined; // the document is garbage once emitted: keep no reference to it
  let text: string;
  try {
    text = edits === 0 ? baseText : hasSpecial(root) ? emit(root) : JSON.stringify(root);
  } catch {
    text = baseText; // stacked huge edits beyond what a JS string holds: keep the case, drop the edits
  }
  let note = `${edits} structure edit(s)`;
  if (rng.chance(0.02)) {
    text = rng.pick(["", " ", "null", "[]", "0", '"x"', "{}", "{", "[".repeat(100000), "{\"a\":".repeat(70) + "1" + "}".repeat(70)]);
    note = "whole-document replacement";
  }
  let bytes: Uint8Array = new TextEncoder().encode(text);
  if (rng.chance(0.3)) {
    const damage = rng.range(1, 3);
    for (let i = 0; i < damage; i++) bytes = mutateText(rng, bytes);
    note += `, ${damage} text edit(s)`;
  }
  if (bytes.length > MAX_CONFIG_BYTES) bytes = bytes.subarray(0, MAX_CONFIG_BYTES);
  return { bytes, note };
}

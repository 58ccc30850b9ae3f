// Values the host hands the filters per connection, good and bad: `destination.address`, the
// filter state tunnel_port's server reads (`io.tunnel_port.service_port`,
// `io.tunnel_port.peer_principal`) and the dynamic metadata its client reads
// (`metadata.filter_metadata.tunnel_port.service_port`). Each value comes with what the README
// promises about it: "valid" (Envoy could send it and the filter must use it), "invalid" (the
// README says the filter must treat it as missing) or "unsure" (random bytes: only the generic
// oracles apply).
import { Rng } from "./rng.js";

export type Validity = "valid" | "invalid" | "unsure";

export interface GeneratedValue {
  /** undefined: the property is absent (NOT_FOUND). */
  readonly bytes: Uint8Array | undefined;
  readonly validity: Validity;
  /** For a valid value, its canonical text (equivalent spellings share it). */
  readonly canonical?: string;
  /** What kind of value this is, for reports. */
  readonly label: string;
}

const utf8 = new TextEncoder();
const text = (s: string) => utf8.encode(s);

const valid = (s: string, label: string, canonical = s): GeneratedValue => ({ bytes: text(s), validity: "valid", canonical, label });
const invalid = (bytes: Uint8Array | undefined, label: string): GeneratedValue => ({ bytes, validity: "invalid", label });
const unsure = (bytes: Uint8Array | undefined, label: string): GeneratedValue => ({ bytes, validity: "unsure", label });

/** Envoy's StringValue serialization of a filter-state string: field 1, length-delimited. */
export function protoString(value: Uint8Array, lengthDelta = 0): Uint8Array {
  const n = value.length + lengthDelta;
  const header = n < 0x80 ? [0x0a, n & 0x7f] : [0x0a, (n & 0x7f) | 0x80, (n >> 7) & 0x7f];
  const out = new Uint8Array(header.length + value.length);
  out.set(header, 0);
  out.set(value, header.length);
  return out;
}

function int64le(value: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigInt64(0, value, true);
  return out;
}

/** Byte-level damage to a value: flip, insert, delete, truncate, duplicate. */
export function damageBytes(rng: Rng, input: Uint8Array): Uint8Array {
  const bytes = Array.from(input);
  const edits = rng.range(1, 4);
  for (let e = 0; e < edits; e++) {
    const at = rng.int(bytes.length + 1);
    switch (rng.int(6)) {
      case 0:
        if (bytes.length) bytes[Math.min(at, bytes.length - 1)]! ^= 1 << rng.int(8);
        break;
      case 1:
        bytes.splice(at, 0, rng.u32() & 0xff);
        break;
      case 2:
        bytes.splice(at, 0, ...text(rng.pick([":", "[", "]", "%", ".", "0", "9", "::", "\0", "\u00ff"])));
        break;
      case 3:
        bytes.splice(at, 1);
        break;
      case 4:
        bytes.length = at;
        break;
      default:
        bytes.splice(at, 0, ...bytes.slice(at, at + rng.range(1, 8)));
    }
  }
  return Uint8Array.from(bytes);
}

const INVALID_DESTINATIONS = [
  "",
  "10.1.0.1",
  "10.1.0.1:",
  ":80",
  ":",
  "[]:80",
  "[::1]",
  "[fd00::3:1:8080",
  "fd00::3:1:8080",
  "10.1.0.1:65536",
  "10.1.0.1:99999999999999999999",
  "10.1.0.1:-1",
  "10.1.0.1:8a",
  "10.1.0.1:80x",
  "1.2.3:80",
  "1.2.3.4.5:80",
  "256.1.1.1:80",
  "10.1.0.1.:80",
  "[fe80::1%eth0]:80",
  "[fd00::3:1%25lo]:8080",
  "[fe80::1%]:80",
  "[::ffff:10.1.0.300]:80",
  "[1:2:3:4:5:6:7:8:9]:80",
  "[1::2::3]:80",
  "[::1]:65536",
  "[::1]80",
  "pipe:/tmp/socket",
  "envoy://internal_client_address/",
  "localhost:80",
  "hello",
  " 10.1.0.1:8080",
  "10.1.0.1:8080 ",
  "10.1.0.1:8080\n",
  "10.1.0.1\u00008080",
];

/** IPv6 spellings Envoy does not print but the model normalises: outcomes must equal the canonical. */
function respell(rng: Rng, address: string): string | undefined {
  const v6 = /^\[([0-9a-f:]+)\]:(\d+)$/.exec(address);
  if (v6) {
    const [, ip, port] = v6;
    return rng.chance(0.5) ? `[${ip!.toUpperCase()}]:${port}` : `[${expand(ip!)}]:${port}`;
  }
  const v4 = /^(\d+\.\d+\.\d+\.\d+):(\d+)$/.exec(address);
  if (v4) return `[::ffff:${v4[1]}]:${v4[2]}`;
  return undefined;
}

function expand(ip: string): string {
  const [head, tail] = ip.split("::") as [string, string | undefined];
  if (tail === undefined) return ip;
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const zeros = new Array(8 - left.length - right.length).fill("0");
  return [...left, ...zeros, ...right].join(":");
}

/** A `destination.address` value: known and unknown destinations, respellings, garbage. */
export function destinationValue(rng: Rng, known: readonly string[], ports: readonly number[]): GeneratedValue {
  const roll = rng.int(100);
  if (roll < 30) return valid(rng.pick(known), "known");
  if (roll < 38) {
    const ip = `10.${rng.int(256)}.${rng.int(256)}.${rng.int(256)}`;
    return valid(`${ip}:${rng.pick(ports)}`, "random IPv4");
  }
  if (roll < 42) {
    const ip = `fd00:${rng.int(0x10000).toString(16)}::${rng.int(0x10000).toString(16)}`;
    return valid(`[${ip}]:${rng.range(1, 65535)}`, "random IPv6");
  }
  if (roll < 50) {
    const canonical = rng.pick(known);
    const spelled = respell(rng, canonical);
    return spelled === undefined ? valid(canonical, "known") : valid(spelled, "respelled", canonical);
  }
  if (roll < 54) return invalid(undefined, "missing");
  if (roll < 72) return invalid(text(rng.pick(INVALID_DESTINATIONS)), "malformed");
  if (roll < 75) return invalid(text(`10.1.0.1:${"9".repeat(rng.range(6, 5000))}`), "huge port");
  if (roll < 77) return invalid(text("[" + "1:".repeat(rng.range(8, 20000)) + "1]:80"), "huge IPv6");
  if (roll < 79) return invalid(protoString(text(rng.pick(known))), "StringValue-wrapped");
  if (roll < 81) return unsure(int64le(BigInt(rng.u32())), "int64");
  if (roll < 85) return unsure(rng.bytes(rng.range(1, 64)), "random bytes");
  return unsure(damageBytes(rng, text(rng.pick(known))), "damaged known");
}

/** A port as the filter state / metadata carries it: text, StringValue-wrapped, or worse. */
export function portValue(rng: Rng, ports: readonly number[]): GeneratedValue & { readonly port?: number } {
  const roll = rng.int(100);
  if (roll < 35) {
    const port = rng.pick(ports);
    return { ...valid(String(port), "port"), port };
  }
  if (roll < 50) {
    const port = rng.pick(ports);
    return { bytes: protoString(text(String(port))), validity: "valid", canonical: String(port), label: "StringValue port", port };
  }
  if (roll < 55) {
    const port = rng.range(1, 65535);
    return { ...valid(String(port), "random port"), port };
  }
  if (roll < 60) return invalid(undefined, "missing");
  if (roll < 78)
    return invalid(
      text(rng.pick(["", "0", "65536", "-80", "abc", "8O", "1e2", "0x50", "99999999999999999999", "80.0", "-", "800000"])),
      "malformed port",
    );
  if (roll < 82) return invalid(int64le(BigInt(rng.pick(ports))), "int64 port");
  if (roll < 84) return invalid(text("9".repeat(rng.range(6, 100000))), "huge port");
  // Not canonical (README: ASCII decimal 1-65535 only): an RBAC rule on the exact text and the
  // filter would read these differently, so the filter refuses them.
  if (roll < 86) return invalid(text(rng.pick(["+80", "080", " 80", "80 ", "00080", "081", "0x50", "80a"])), "odd spelling");
  // A repeated header, as the termination shares it: every value joined by ",".
  if (roll < 88) return invalid(text(`${rng.pick(ports)},${rng.pick(ports)}`), "repeated header");
  if (roll < 92) return unsure(protoString(text(String(rng.pick(ports))), rng.range(-3, 3)), "StringValue, wrong length");
  return unsure(rng.bytes(rng.range(1, 16)), "random bytes");
}

/** `io.tunnel_port.peer_principal`: %DOWNSTREAM_PEER_URI_SAN% as the termination shares it. */
export function peerValue(rng: Rng): GeneratedValue {
  const roll = rng.int(100);
  if (roll < 50) return valid(`spiffe://cluster.local/ns/default/sa/sa-${rng.int(5)}`, "SPIFFE");
  if (roll < 60) return { bytes: protoString(text("spiffe://cluster.local/ns/client/sa/sleep")), validity: "valid", label: "StringValue SPIFFE" };
  if (roll < 65) return invalid(undefined, "missing");
  if (roll < 80) return invalid(text(rng.pick(["", "-", "http://cluster.local/ns/a/sa/b", "cluster.local/ns/a/sa/b", "spiffe", "SPIFFE:/x"])), "not SPIFFE");
  if (roll < 83) return unsure(text("spiffe://" + "a".repeat(rng.range(0, 200000))), "huge SPIFFE");
  if (roll < 88) return unsure(text(rng.pick(["spiffe://", "spiffe:/", "spiffe://a", "spiffe:///", "SPIFFE://cluster.local/ns/a/sa/b"])), "edge SPIFFE");
  if (roll < 92) return unsure(protoString(text("spiffe://cluster.local/ns/a/sa/b"), rng.range(-3, 3)), "StringValue, wrong length");
  return unsure(rng.bytes(rng.range(1, 80)), "random bytes");
}

/** Envoy's `IP:PORT` text → { ip, port } for values marked valid (canonical spellings only). */
export function splitAddress(address: string): { ip: string; port: number } | undefined {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(address) ?? /^([^:]+):(\d+)$/.exec(address);
  return m ? { ip: m[1]!, port: Number(m[2]) } : undefined;
}

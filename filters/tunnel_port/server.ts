// Server side: what arrived through the tunnel must be something this workload serves. Pure
// checks; the caller reads the values from Envoy and acts on the verdict.
import { Address, Mesh } from "../../assembly/mesh";
import { TunnelConfig } from "./config";

export enum ServerVerdict {
  Accept,
  /** No authenticated mTLS peer identity came with the tunnel. */
  NoPeer,
  /** The CONNECT carried no service port (absent or empty), or there is no destination. */
  MissingPort,
  /**
   * The service port is present but not exactly one canonical decimal 1..65535: a leading zero,
   * a sign, a space, any other byte, or a second header (the termination shares every value
   * joined by ",", as RBAC's matcher input sees them).
   */
  MalformedPort,
  /**
   * The CONNECT's :authority text is not the canonical spelling of the destination Envoy parsed
   * from it ("<ip>:09376", "[::ffff:<ip>]:9376", a non-RFC 5952 IPv6): a rule on the text and
   * this filter's decision on the parsed address could disagree.
   */
  MalformedAuthority,
  /**
   * The model in force has no workload at this server's localWorkload address (a model from the
   * feed without it: the pod is going away, or not in the feed yet): nothing can be checked
   * against what it serves, so every tunnel is refused until a model has it again.
   */
  NoLocalWorkload,
  /** The authority names an address that is not this workload. */
  ForeignAuthority,
  /** The target port is not one this workload serves. */
  UnservedPort,
  /** The service port does not map to that target port for this workload. */
  PortMismatch,
}

/** How the CONNECT's :authority text relates to the destination Envoy restored from it. */
export enum AuthorityText {
  /** Not shared by the termination. */
  Absent,
  /** Byte for byte the canonical spelling of the destination. */
  Canonical,
  /** Anything else. */
  Other,
}

/**
 * `servicePort`: 1..65535, PORT_ABSENT or PORT_MALFORMED (what parseCanonicalPort returns).
 * Rules in order: peer, presence (destination, service port, authority), canonical service
 * port, canonical authority, then what this workload serves.
 */
export function checkServer(config: TunnelConfig, dst: Address, servicePort: i32, peerIdentityLength: i32, authority: AuthorityText): ServerVerdict {
  if (peerIdentityLength <= 0) return ServerVerdict.NoPeer;
  if (dst.port <= 0 || servicePort == PORT_ABSENT || authority == AuthorityText.Absent) return ServerVerdict.MissingPort;
  if (servicePort <= 0 || servicePort > 65535) return ServerVerdict.MalformedPort;
  if (authority != AuthorityText.Canonical) return ServerVerdict.MalformedAuthority;
  const mesh: Mesh = config.mesh;
  const w = config.localWorkload;
  if (w < 0) return ServerVerdict.NoLocalWorkload;
  if (mesh.workloadByAddress(config.localNetwork, dst) != w) return ServerVerdict.ForeignAuthority;
  // What w serves, read from the model's own memberships (per-endpoint overrides applied):
  // O(w's memberships), current after every delta, nothing derived to go stale.
  if (mesh.servicePortForTarget(w, dst.port) < 0) return ServerVerdict.UnservedPort;
  if (!mesh.mapsPort(w, servicePort, dst.port)) return ServerVerdict.PortMismatch;
  return ServerVerdict.Accept;
}

/** Whether `len` bytes at `ptr` are exactly `text`'s bytes. */
export function sameBytes(ptr: usize, len: i32, text: usize, textLength: i32): bool {
  return len == textLength && memory.compare(ptr, text, <usize>len) == 0;
}

/** No value at all (absent filter state, or an empty one). */
export const PORT_ABSENT: i32 = 0;
/** A value that is not one canonical port. */
export const PORT_MALFORMED: i32 = -1;

/**
 * A port from raw bytes (an Envoy string value), accepted only in canonical form: ASCII decimal
 * 1..65535, no leading zero, sign, space or any other byte. Anything Envoy's matchers could read
 * differently from this filter ("081", "+80", " 80", "81,80") is PORT_MALFORMED, so the value
 * the filter routes on is the very text an exact-match RBAC rule saw. PORT_ABSENT when empty.
 */
export function parseCanonicalPort(ptr: usize, len: i32): i32 {
  if (len <= 0) return PORT_ABSENT;
  if (len > 5) return PORT_MALFORMED;
  const first = <i32>load<u8>(ptr);
  if (first < 49 || first > 57) return PORT_MALFORMED; // '1'..'9': no leading zero, no "0"
  let value = first - 48;
  for (let i = 1; i < len; i++) {
    const c = <i32>load<u8>(ptr + <usize>i);
    if (c < 48 || c > 57) return PORT_MALFORMED;
    value = value * 10 + (c - 48);
  }
  return value <= 65535 ? value : PORT_MALFORMED;
}

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
  /** The authority names an address that is not this workload. */
  ForeignAuthority,
  /** The target port is not one this workload serves. */
  UnservedPort,
  /** The service port does not map to that target port for this workload. */
  PortMismatch,
}

/** `servicePort`: 1..65535, PORT_ABSENT or PORT_MALFORMED (what parseCanonicalPort returns). */
export function checkServer(config: TunnelConfig, dst: Address, servicePort: i32, peerIdentityLength: i32): ServerVerdict {
  if (peerIdentityLength <= 0) return ServerVerdict.NoPeer;
  if (dst.port <= 0 || servicePort == PORT_ABSENT) return ServerVerdict.MissingPort;
  if (servicePort <= 0 || servicePort > 65535) return ServerVerdict.MalformedPort;
  const mesh: Mesh = config.mesh;
  if (mesh.workloadByAddress(config.localNetwork, dst) != config.localWorkload) return ServerVerdict.ForeignAuthority;
  if (!config.servedTargets.has(dst.port)) return ServerVerdict.UnservedPort;
  if (!config.servedPairs.has((<u32>servicePort << 16) | <u32>dst.port)) return ServerVerdict.PortMismatch;
  return ServerVerdict.Accept;
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

// Server side: what arrived through the tunnel must be something this workload serves. Pure
// checks; the caller reads the values from Envoy and acts on the verdict.
import { Address, Mesh } from "../../assembly/mesh";
import { TunnelConfig } from "./config";

export enum ServerVerdict {
  Accept,
  /** No authenticated mTLS peer identity came with the tunnel. */
  NoPeer,
  /** The CONNECT carried no (or an unparsable) service port, or no destination. */
  MissingPort,
  /** The authority names an address that is not this workload. */
  ForeignAuthority,
  /** The target port is not one this workload serves. */
  UnservedPort,
  /** The service port does not map to that target port for this workload. */
  PortMismatch,
}

export function checkServer(config: TunnelConfig, dst: Address, servicePort: i32, peerIdentityLength: i32): ServerVerdict {
  if (peerIdentityLength <= 0) return ServerVerdict.NoPeer;
  if (dst.port <= 0 || servicePort <= 0 || servicePort > 65535) return ServerVerdict.MissingPort;
  const mesh: Mesh = config.mesh;
  if (mesh.workloadByAddress(config.localNetwork, dst) != config.localWorkload) return ServerVerdict.ForeignAuthority;
  if (!config.servedTargets.has(dst.port)) return ServerVerdict.UnservedPort;
  if (!config.servedPairs.has((<u32>servicePort << 16) | <u32>dst.port)) return ServerVerdict.PortMismatch;
  return ServerVerdict.Accept;
}

/** Decimal port from raw bytes (an Envoy string value); -1 unless 1..65535 digits only. */
export function parsePortBytes(ptr: usize, len: i32): i32 {
  if (len <= 0 || len > 5) return -1;
  let value = 0;
  for (let i = 0; i < len; i++) {
    const c = <i32>load<u8>(ptr + <usize>i);
    if (c < 48 || c > 57) return -1;
    value = value * 10 + (c - 48);
  }
  return value >= 1 && value <= 65535 ? value : -1;
}

// The connection's original destination, parsed straight from the host's value: no string, no
// allocation. Every filter that decides by destination starts here.
import { fetchProperty, hostValuePtr, hostValueSize, releaseHostValue, WasmResult } from "../runtime";
import { DESTINATION_ADDRESS } from "../runtime/envoy_state";
import { Address, formatAddress, parseSocketAddress } from "./ip";

/** Reads `destination.address` into `out`; false when the host has none or it is not IP:PORT. */
export function readDestination(out: Address): bool {
  const found = fetchProperty(DESTINATION_ADDRESS) == WasmResult.Ok &&
    parseSocketAddress(hostValuePtr(), <i32>hostValueSize(), out);
  releaseHostValue();
  return found;
}

/** The destination for a log line (call it only once a line is going to be written). */
export function destinationText(found: bool, dst: Address): string {
  return found ? formatAddress(dst) : "a connection without destination";
}

// This proxy's own network, for every filter: the plugin configuration's `localNetwork` when it
// pins one, else the node metadata `NETWORK` that Istio sets on every proxy, else the default
// network "". One WasmPlugin / EnvoyFilter then serves proxies on every network: each picks its
// own network's pod.
//
// How Envoy serves it (measured in Envoy 1.40.0, from proxy_on_configure of the canary VM, the
// main-thread VM and each worker's VM alike): the path `xds\0node\0metadata\0NETWORK` descends
// into the Node message and its metadata Struct, and a string value comes back raw (UTF-8, no
// framing; "" as an empty value). A number comes back as an 8-byte double, a bool as one byte,
// a null as SERIALIZATION_FAILURE, a missing key as NOT_FOUND. The old top-level
// `node\0metadata\0NETWORK` is NOT_FOUND. Reading the sub-field is also far cheaper than
// decoding `xds\0node` (the whole Node message: ~60 KB with Envoy's extension list), so the
// Node is read only when the value is ambiguous: 8 bytes that are all text ("network1", or a
// number whose double happens to be printable) are checked against the Value's kind in the
// Node (node_value_kind.ts); a number refuses the configuration like any non-text NETWORK.
// (A JSON bootstrap, as Istio's, keeps such a number a number; Envoy's YAML loader turns a
// non-integer or large number into the text of its digits before any filter sees it:
// tests/envoy/node_metadata_kind.test.ts.)
import { ConfigReader, JsonValue } from "../json";
import { findInvalidUtf8At } from "../json/utf8";
import { fetchProperty, hostValuePtr, hostValueSize, propertyPath, releaseHostValue, WasmResult } from "../runtime";
import { nodeMetadataKind, VALUE_NUMBER, VALUE_STRING } from "./node_value_kind";

export const NODE_NETWORK_PATH = propertyPath(["xds", "node", "metadata", "NETWORK"]);
const NODE_PATH = propertyPath(["xds", "node"]);
/** Envoy serves a number as exactly this many bytes: only then can a text be a number. */
const NUMBER_BYTES = 8;
/** The plugin configuration field that pins the network, in every filter. */
export const LOCAL_NETWORK_FIELD = "localNetwork";
/** Longer than any Kubernetes label value (63) or DNS name (253): not a network name. */
const MAX_NETWORK_NAME_BYTES = 253;

export enum NetworkSource {
  /** Neither the configuration nor the node metadata names one: the default network "". */
  Default = 0,
  /** The plugin configuration's `localNetwork`. */
  Pinned = 1,
  /** The proxy's node metadata `NETWORK`. */
  NodeMetadata = 2,
}

/** What the node metadata says about the network (read once per configuration). */
export class NodeNetwork {
  constructor(
    /** NETWORK is set (possibly to ""). */
    readonly present: bool,
    readonly name: string,
    /** Non-empty when NETWORK is set but is not a network name (a number, a list, control bytes...). */
    readonly error: string,
  ) {}

  static absent(): NodeNetwork {
    return new NodeNetwork(false, "", "");
  }

  /** A node whose metadata says NETWORK = name (tests, and the host read below). */
  static of(name: string): NodeNetwork {
    return new NodeNetwork(true, name, "");
  }
}

/**
 * Reads the node metadata NETWORK from the host. Never traps: every status and every byte
 * string has an outcome. Call it from the root context (onConfigure / onConfigureSource).
 */
export function readNodeNetwork(): NodeNetwork {
  const status = fetchProperty(NODE_NETWORK_PATH);
  const size = <i32>hostValueSize();
  const result = nodeNetworkFromHost(status, hostValuePtr(), size);
  releaseHostValue();
  if (status != WasmResult.Ok || size != NUMBER_BYTES || result.error.length > 0) return result;
  // Eight printable bytes: a name, or a number's double. The Node's Value says which.
  const nodeStatus = fetchProperty(NODE_PATH);
  const kind = nodeStatus == WasmResult.Ok ? nodeMetadataKind(hostValuePtr(), <i32>hostValueSize(), "NETWORK") : -1;
  releaseHostValue();
  return networkOfKind(result, kind);
}

/** An 8-byte NETWORK checked against its Value kind in the Node (pure: unit-tested on its own). */
export function networkOfKind(read: NodeNetwork, kind: i32): NodeNetwork {
  if (kind == VALUE_STRING) return read;
  if (kind == VALUE_NUMBER) return new NodeNetwork(true, "", "is a number, not a network name");
  return new NodeNetwork(true, "", "could not be told apart from a number (xds.node did not show its type)");
}

/** readNodeNetwork's decision over a host status and value (pure: unit-tested on its own). */
export function nodeNetworkFromHost(status: u32, ptr: usize, size: i32): NodeNetwork {
  // A null NETWORK (or one Envoy cannot serialize) is set but unusable.
  if (status == WasmResult.SerializationFailure) return new NodeNetwork(true, "", "is not a string");
  // NOT_FOUND: not set. Any other status: this host does not serve node metadata.
  if (status != WasmResult.Ok) return NodeNetwork.absent();
  if (ptr == 0 || size <= 0) return NodeNetwork.of("");
  if (size > MAX_NETWORK_NAME_BYTES) {
    return new NodeNetwork(true, "", "is " + size.toString() + " bytes long (at most " + MAX_NETWORK_NAME_BYTES.toString() + ")");
  }
  // Envoy serves a number as 8 raw bytes and a bool as one: control bytes say it was no string.
  for (let i = 0; i < size; i++) {
    const b = load<u8>(ptr + <usize>i);
    if (b < 0x20 || b == 0x7f) return new NodeNetwork(true, "", "is not a network name (byte " + i.toString() + " is 0x" + (<u32>b).toString(16) + ")");
  }
  if (findInvalidUtf8At(ptr, size) >= 0) return new NodeNetwork(true, "", "is not UTF-8 text");
  return NodeNetwork.of(String.UTF8.decodeUnsafe(ptr, <usize>size));
}

/** The network a filter runs with, and where the name came from. */
export class LocalNetwork {
  constructor(readonly name: string, readonly source: NetworkSource) {}

  /** `"west"`, or `"west" (from node metadata NETWORK)`: for log lines. */
  describe(): string {
    return "\"" + this.name + "\"" + (this.source == NetworkSource.NodeMetadata ? " (from node metadata NETWORK)" : "");
  }

  /** `` when pinned or default, ` (network "west", from node metadata NETWORK)` otherwise: for refusals. */
  origin(): string {
    return this.source == NetworkSource.NodeMetadata ? " (network \"" + this.name + "\", from node metadata NETWORK)" : "";
  }
}

/**
 * The local network for a filter's configuration object `own`: a `localNetwork` field (a string;
 * "" pins the default network) wins; otherwise the node metadata's NETWORK; otherwise "".
 * A bad `localNetwork`, or an unusable NETWORK when nothing is pinned, is recorded in `reader`
 * (one line naming the field) and the default network is returned.
 */
export function resolveLocalNetwork(reader: ConfigReader, own: JsonValue, node: NodeNetwork): LocalNetwork {
  const field = own.isObject() ? own.get(LOCAL_NETWORK_FIELD) : null;
  if (field !== null && !field.isNull()) {
    const pinned = reader.optionalString(own, LOCAL_NETWORK_FIELD, "", "");
    return new LocalNetwork(pinned, reader.failed() ? NetworkSource.Default : NetworkSource.Pinned);
  }
  if (!node.present) return new LocalNetwork("", NetworkSource.Default);
  if (node.error.length > 0) {
    reader.fail(LOCAL_NETWORK_FIELD, "not set, and the node metadata NETWORK " + node.error + ": set localNetwork or fix the proxy's NETWORK");
    return new LocalNetwork("", NetworkSource.Default);
  }
  return new LocalNetwork(node.name, NetworkSource.NodeMetadata);
}

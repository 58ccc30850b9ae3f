// The proxy's Node message (property `xds.node`) and its sub-fields, served the way Envoy 1.40.0
// serves them (measured with a probe module in the real Envoy; see assembly/mesh/local_network.ts):
// - `xds\0node` is the serialized envoy.config.core.v3.Node;
// - a longer path descends into the message: `xds\0node\0id` is the string raw,
//   `xds\0node\0metadata\0NETWORK` a metadata Struct value;
// - a Struct value: string raw, number as an 8-byte little-endian double, bool as one byte, null
//   SERIALIZATION_FAILURE; a Struct or list as proxy-wasm pairs (a list's elements are the keys,
//   with empty values); a missing field or key NOT_FOUND.
// Node fields resolved here: id, cluster, metadata, locality (message bytes), user_agent_name;
// any other field is NOT_FOUND in this host. Bytes that do not decode as a Node are NOT_FOUND too.
import protobuf from "protobufjs";
import { WasmResult } from "./abi.js";
import type { PropertyResult } from "./context.js";

/** A JSON value as node metadata holds it (google.protobuf.Value). */
export type MetadataValue = string | number | boolean | null | MetadataValue[] | { [key: string]: MetadataValue };

export interface NodeInput {
  readonly id?: string;
  readonly cluster?: string;
  /** The node metadata Struct, e.g. { NETWORK: "west" } as Istio sets it. */
  readonly metadata?: Record<string, MetadataValue>;
}

const schema = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Struct: { fields: { fields: { keyType: "string", type: "Value", id: 1 } } },
            Value: {
              oneofs: { kind: { oneof: ["nullValue", "numberValue", "stringValue", "boolValue", "structValue", "listValue"] } },
              fields: {
                nullValue: { type: "int32", id: 1 },
                numberValue: { type: "double", id: 2 },
                stringValue: { type: "string", id: 3 },
                boolValue: { type: "bool", id: 4 },
                structValue: { type: "Struct", id: 5 },
                listValue: { type: "ListValue", id: 6 },
              },
            },
            ListValue: { fields: { values: { rule: "repeated", type: "Value", id: 1 } } },
          },
        },
      },
    },
    Locality: { fields: { region: { type: "string", id: 1 }, zone: { type: "string", id: 2 }, subZone: { type: "string", id: 3 } } },
    Node: {
      fields: {
        id: { type: "string", id: 1 },
        cluster: { type: "string", id: 2 },
        metadata: { type: "google.protobuf.Struct", id: 3 },
        locality: { type: "Locality", id: 4 },
        userAgentName: { type: "string", id: 6 },
      },
    },
  },
});
const NodeType = schema.lookupType("Node");
const LocalityType = schema.lookupType("Locality");

interface ValueMessage {
  kind?: string;
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: StructMessage;
  listValue?: { values?: ValueMessage[] };
}
interface StructMessage {
  fields?: Record<string, ValueMessage>;
}

function toValue(value: MetadataValue): ValueMessage {
  if (value === null) return { nullValue: 0 };
  if (typeof value === "string") return { stringValue: value };
  if (typeof value === "number") return { numberValue: value };
  if (typeof value === "boolean") return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  return { structValue: toStruct(value) };
}

function toStruct(fields: Record<string, MetadataValue>): StructMessage {
  return { fields: Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, toValue(v)])) };
}

/** Serializes a Node the way Envoy holds it (what `xds.node` returns). */
export function encodeNode(node: NodeInput): Uint8Array {
  const message: Record<string, unknown> = {};
  if (node.id !== undefined) message.id = node.id;
  if (node.cluster !== undefined) message.cluster = node.cluster;
  if (node.metadata !== undefined) message.metadata = toStruct(node.metadata);
  return NodeType.encode(NodeType.fromObject(message)).finish();
}

const utf8 = new TextEncoder();
const FAILED = Symbol("serialization failure");

/** proxy-wasm pairs: u32 count, (u32 key size, u32 value size) each, then key\0 value\0 each. */
function pairs(entries: [Uint8Array, Uint8Array][]): Uint8Array {
  let size = 4 + entries.length * 8;
  for (const [k, v] of entries) size += k.length + 1 + v.length + 1;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint32(0, entries.length, true);
  let at = 4;
  for (const [k, v] of entries) {
    view.setUint32(at, k.length, true);
    view.setUint32(at + 4, v.length, true);
    at += 8;
  }
  for (const [k, v] of entries) {
    out.set(k, at);
    at += k.length + 1;
    out.set(v, at);
    at += v.length + 1;
  }
  return out;
}

function serializeValue(value: ValueMessage): Uint8Array | typeof FAILED {
  switch (value.kind) {
    case "stringValue":
      return utf8.encode(value.stringValue ?? "");
    case "numberValue": {
      const out = new Uint8Array(8);
      new DataView(out.buffer).setFloat64(0, value.numberValue ?? 0, true);
      return out;
    }
    case "boolValue":
      return Uint8Array.of(value.boolValue ? 1 : 0);
    case "structValue":
      return serializeStruct(value.structValue ?? {});
    case "listValue": {
      const entries: [Uint8Array, Uint8Array][] = [];
      for (const element of value.listValue?.values ?? []) {
        const bytes = serializeValue(element);
        if (bytes === FAILED) return FAILED;
        entries.push([bytes, new Uint8Array(0)]);
      }
      return pairs(entries);
    }
    default: // null, or no kind at all
      return FAILED;
  }
}

function serializeStruct(struct: StructMessage): Uint8Array | typeof FAILED {
  const entries: [Uint8Array, Uint8Array][] = [];
  for (const key of Object.keys(struct.fields ?? {}).sort()) {
    const bytes = serializeValue(struct.fields![key]!);
    if (bytes === FAILED) return FAILED;
    entries.push([utf8.encode(key), bytes]);
  }
  return pairs(entries);
}

const NOT_FOUND: PropertyResult = { status: WasmResult.NotFound };

function result(bytes: Uint8Array | typeof FAILED): PropertyResult {
  return bytes === FAILED ? { status: WasmResult.SerializationFailure } : { status: WasmResult.Ok, bytes };
}

/** A sub-field of the Node in `nodeBytes` at `segments` (below `xds.node`). Never throws. */
export function nodeSubProperty(nodeBytes: Uint8Array, segments: readonly string[]): PropertyResult {
  let node: { id?: string; cluster?: string; metadata?: StructMessage; locality?: object; userAgentName?: string };
  try {
    node = NodeType.toObject(NodeType.decode(nodeBytes), { oneofs: true, defaults: false }) as typeof node;
  } catch {
    return NOT_FOUND;
  }
  const [field, ...rest] = segments;
  const scalar = (text: string | undefined) => (rest.length > 0 ? NOT_FOUND : result(utf8.encode(text ?? "")));
  switch (field) {
    case "id":
      return scalar(node.id);
    case "cluster":
      return scalar(node.cluster);
    case "user_agent_name":
      return scalar(node.userAgentName);
    case "locality":
      return rest.length > 0 ? NOT_FOUND : result(LocalityType.encode(LocalityType.fromObject(node.locality ?? {})).finish());
    case "metadata": {
      let value: ValueMessage = { kind: "structValue", structValue: node.metadata ?? {} };
      for (const key of rest) {
        if (value.kind !== "structValue") return NOT_FOUND;
        const next = value.structValue?.fields?.[key];
        if (next === undefined) return NOT_FOUND;
        value = next;
      }
      return result(serializeValue(value));
    }
    default:
      return NOT_FOUND;
  }
}

// The kind of a node metadata value in the serialized Node (assembly/mesh/node_value_kind.ts):
// the only way to tell an 8-byte text NETWORK from a number's 8 bytes, since Envoy serves both
// raw. The bytes here are protobuf wire format written by hand; the real Envoy's Node is read in
// tests/mesh/node_network.test.ts.
import { networkOfKind, NodeNetwork } from "../mesh";
import { nodeMetadataKind, VALUE_ABSENT, VALUE_BOOL, VALUE_NUMBER, VALUE_STRING, VALUE_UNREADABLE } from "../mesh/node_value_kind";

function ascii(text: string): u8[] {
  const out = new Array<u8>();
  for (let i = 0; i < text.length; i++) out.push(<u8>text.charCodeAt(i));
  return out;
}

/** A length-delimited field: tag, varint length (< 128 here), bytes. */
function len(field: u8, body: u8[]): u8[] {
  const out: u8[] = [<u8>((field << 3) | 2), <u8>body.length];
  return out.concat(body);
}

/** A Value holding a number: field 2, wire type 1, the 8 bytes of `text` as the double. */
function numberValue(text: string): u8[] {
  const out: u8[] = [0x11];
  return out.concat(ascii(text));
}

function stringValue(text: string): u8[] {
  return len(3, ascii(text));
}

function entry(key: string, value: u8[]): u8[] {
  return len(1, len(1, ascii(key)).concat(len(2, value)));
}

/** A Node: id "x", then metadata (field 3) made of `entries`, then user_agent_name (field 6). */
function node(entries: u8[]): u8[] {
  return len(1, ascii("x")).concat(len(3, entries)).concat(len(6, ascii("envoy")));
}

function kindIn(bytes: u8[], key: string = "NETWORK"): i32 {
  const buffer = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) buffer[i] = bytes[i];
  return nodeMetadataKind(buffer.dataStart, bytes.length, key);
}

describe("node metadata value kind", () => {
  it("tells a text from a number with the same 8 bytes", () => {
    expect(kindIn(node(entry("NETWORK", stringValue("network1"))))).toBe(VALUE_STRING);
    expect(kindIn(node(entry("NETWORK", numberValue("network1"))))).toBe(VALUE_NUMBER);
  });

  it("finds the key among others and reports a bool or an absent key", () => {
    const others = entry("CLUSTER_ID", stringValue("c1")).concat(entry("NETWORK", [0x20, 0x01])).concat(entry("MESH_ID", stringValue("m")));
    expect(kindIn(node(others))).toBe(VALUE_BOOL);
    expect(kindIn(node(entry("CLUSTER_ID", stringValue("c1"))))).toBe(VALUE_ABSENT);
    expect(kindIn(len(1, ascii("x")))).toBe(VALUE_ABSENT);
  });

  it("takes the last entry of a key, as protobuf merges a map", () => {
    expect(kindIn(node(entry("NETWORK", numberValue("network1")).concat(entry("NETWORK", stringValue("network1")))))).toBe(VALUE_STRING);
  });

  it("never traps on malformed bytes", () => {
    const good = node(entry("NETWORK", stringValue("network1")));
    for (let cut = 1; cut < good.length; cut++) {
      // Cut before the metadata's end: unreadable or absent; at or after it: the string it holds.
      const kind = kindIn(good.slice(0, cut));
      expect(kind == VALUE_UNREADABLE || kind == VALUE_ABSENT || kind == VALUE_STRING).toBe(true);
    }
    expect(kindIn([0x1a, 0x7f, 0x00])).toBe(VALUE_UNREADABLE); // a length past the end
    expect(kindIn([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])).toBe(VALUE_UNREADABLE); // an endless varint
    expect(kindIn([0x0b])).toBe(VALUE_UNREADABLE); // a group
    expect(kindIn([])).toBe(VALUE_UNREADABLE);
  });

  it("refuses an 8-byte NETWORK unless the Node says it is a string", () => {
    const read = NodeNetwork.of("network1");
    expect(networkOfKind(read, VALUE_STRING).name).toBe("network1");
    expect(networkOfKind(read, VALUE_STRING).error).toBe("");
    expect(networkOfKind(read, VALUE_NUMBER).error).toBe("is a number, not a network name");
    expect(networkOfKind(read, VALUE_UNREADABLE).error).toBe("could not be told apart from a number (xds.node did not show its type)");
    expect(networkOfKind(read, VALUE_ABSENT).error.length > 0).toBe(true);
  });
});

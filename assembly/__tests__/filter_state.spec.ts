// The set_envoy_filter_state argument must be a valid protobuf message
// {1: path string, 2: value string, 3: span enum}; Envoy decodes it with the real protobuf.
import { encodeFilterStateArguments, encodedFilterStateSize } from "../runtime/filter_state";
import { FilterStateSpan } from "../runtime/types";

function encode(key: string, value: string, span: FilterStateSpan): Array<u8> {
  const k = String.UTF8.encode(key);
  const v = String.UTF8.encode(value);
  const size = encodedFilterStateSize(<u32>k.byteLength, <u32>v.byteLength);
  const out = new ArrayBuffer(<i32>size);
  const end = encodeFilterStateArguments(
    changetype<usize>(out), changetype<usize>(k), <u32>k.byteLength,
    changetype<usize>(v), <u32>v.byteLength, span,
  );
  const bytes = new Array<u8>(0);
  for (let at = changetype<usize>(out); at < end; at++) bytes.push(load<u8>(at));
  return bytes;
}

describe("set_envoy_filter_state argument encoding", () => {
  it("writes tag, length and bytes for path and value, then the span as a varint", () => {
    const bytes = encode("ab", "xyz", FilterStateSpan.DownstreamConnection);
    const expected: u8[] = [0x0a, 2, 0x61, 0x62, 0x12, 3, 0x78, 0x79, 0x7a, 0x18, 2];
    expect(bytes.length).toBe(expected.length);
    for (let i = 0; i < expected.length; i++) expect(bytes[i]).toBe(expected[i]);
  });

  it("encodes a length of 128 or more as a two-byte varint", () => {
    const bytes = encode("k", "v".repeat(200), FilterStateSpan.FilterChain);
    // 200 = 0b1_1001000 → low 7 bits with the continuation bit, then 1.
    expect(bytes[3]).toBe(0x12);
    expect(bytes[4]).toBe(0xc8);
    expect(bytes[5]).toBe(0x01);
    expect(bytes.length).toBe(1 + 1 + 1 + 1 + 2 + 200 + 2);
  });

  it("predicts the encoded size exactly", () => {
    expect(encodedFilterStateSize(23, 127)).toBe(1 + 1 + 23 + 1 + 1 + 127 + 2);
    expect(encodedFilterStateSize(23, 128)).toBe(1 + 1 + 23 + 1 + 2 + 128 + 2);
  });
});

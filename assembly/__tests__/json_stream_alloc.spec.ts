// JsonStream allocates nothing per token. Its own spec file, so it runs on a fresh heap: until
// the first garbage collection nothing is freed, so TLSF carves every block from one free tail
// and the probe blocks below sit between live spacers (a freed probe cannot merge).
import { JsonNames, JsonStream, JsonToken } from "../json";

/**
 * True when `run` allocated anything (heap or GC object) of up to ~240 bytes: TLSF serves a
 * request from the head of its size class's free list and a freed block goes to the head, so
 * one freed probe per small class is handed back at the same address only if nothing took it.
 */
function allocates(run: () => void): bool {
  const classes = 15;
  const probes = new StaticArray<usize>(classes);
  const spacers = new StaticArray<usize>(classes + 1);
  spacers[0] = heap.alloc(16);
  for (let k = 0; k < classes; k++) {
    probes[k] = heap.alloc(<usize>(16 * k + 1));
    spacers[k + 1] = heap.alloc(16);
  }
  for (let k = 0; k < classes; k++) heap.free(probes[k]);
  run();
  let moved = false;
  for (let k = 0; k < classes; k++) {
    const again = heap.alloc(<usize>(16 * k + 1));
    if (again != probes[k]) moved = true;
    probes[k] = again;
  }
  for (let k = 0; k < classes; k++) heap.free(probes[k]);
  for (let k = 0; k <= classes; k++) heap.free(spacers[k]);
  return moved;
}

// 2000 objects like {"uid":"pod-0001","n":1001,"ok":true,"x":null,"l":[1.5,"\u00e9"],"k\u0041":-3},
// written byte by byte (no garbage strings before the checks).
const OBJECTS = 2000;
const PART1 = '{"uid":"pod-';
const PART2 = '","n":';
const PART3 = ',"ok":true,"x":null,"l":[1.5,"\\u00e9"],"k\\u0041":-3}';

function put(out: Uint8Array, at: i32, text: string): i32 {
  for (let i = 0; i < text.length; i++) out[at + i] = <u8>text.charCodeAt(i);
  return at + text.length;
}

function document(): ArrayBuffer {
  const size = 2 + OBJECTS * (PART1.length + 4 + PART2.length + 4 + PART3.length + 1);
  const out = new Uint8Array(size);
  let at = 0;
  out[at++] = 0x5b;
  for (let i = 0; i < OBJECTS; i++) {
    if (i > 0) out[at++] = 0x2c;
    at = put(out, at, PART1);
    for (let d = 1000; d > 0; d /= 10) out[at++] = <u8>(0x30 + (i / d) % 10);
    at = put(out, at, PART2);
    for (let d = 1000; d > 0; d /= 10) out[at++] = <u8>(0x30 + ((i + 1000) / d) % 10);
    at = put(out, at, PART3);
  }
  out[at++] = 0x5d;
  return out.buffer.slice(0, at);
}

const names = new JsonNames(["uid", "n", "kA"]);
const stream = new JsonStream(document());
let sum: f64 = 0;

/** Reads the document through, using every accessor that must not allocate. */
function walk(): void {
  const s = stream;
  s.valueAt(0);
  while (true) {
    const t = s.next();
    if (t == JsonToken.End || t == JsonToken.Error) break;
    if (t == JsonToken.Key) {
      sum += <f64>(names.find(s) + <i32>s.stringEquals("ok") + <i32>s.stringEquals("k\u0041"));
      sum += <f64>s.stringHash() + <f64>s.stringByteLength() + <f64><i32>s.stringEscaped();
    } else if (t == JsonToken.String) {
      sum += <f64>s.stringHash() + <f64><i32>s.sameStringAt(2);
    } else if (t == JsonToken.Number) {
      // 1.5 is not a plain integer: asking for its value is allowed to allocate, so only
      // plain ones are asked here; every number is still read and range-checked.
      if (s.numberEnd() - s.tokenOffset() <= 4 && s.numberIsInteger()) sum += <f64>s.numberInteger();
    } else if (t == JsonToken.BeginArray && s.depth() == 3) {
      s.skip(t);
    }
  }
}

function decodeStrings(): void {
  const s = stream;
  s.valueAt(0);
  while (true) {
    const t = s.next();
    if (t == JsonToken.End || t == JsonToken.Error) break;
    if (t == JsonToken.String) sum += <f64>s.stringValue().length;
  }
}

describe("JsonStream: allocation", () => {
  it("allocates nothing per token while reading, skipping, comparing and hashing", () => {
    expect(allocates(walk)).toBe(false);
    expect(stream.error()).toBe("");
    expect(sum).toBeGreaterThan(0.0);
  });

  it("allocates when asked for a string (the check can see allocations)", () => {
    expect(allocates(decodeStrings)).toBe(true);
  });
});

import {
  hashBytes,
  JsonNames,
  JsonStream,
  JsonToken,
  JsonValue,
  MemorySource,
  MAX_DEPTH,
  parseJson,
  parseJsonString,
  writeJson,
} from "../json";

// ---- helpers ----

const NAMES = [
  "Error",
  "End",
  "BeginObject",
  "EndObject",
  "BeginArray",
  "EndArray",
  "Key",
  "String",
  "Number",
  "True",
  "False",
  "Null",
];

/** Every token of `text` as "Name" or "Name@offset", space separated, up to End or Error. */
function tokens(text: string, offsets: bool = false): string {
  const s = JsonStream.fromString(text);
  const out = new Array<string>();
  for (let guard = 0; guard < 10000; guard++) {
    const t = s.next();
    let word = NAMES[<i32>t];
    if (t == JsonToken.Key || t == JsonToken.String) word += ":" + s.stringValue();
    if (t == JsonToken.Number) word += ":" + s.numberValue().toString();
    if (offsets) word += "@" + s.tokenOffset().toString();
    out.push(word);
    if (t == JsonToken.End || t == JsonToken.Error) break;
  }
  return out.join(" ");
}

/** A windowed reader over `bytes` whose tiny windows make tokens cross window boundaries. */
function windowedOver(bytes: ArrayBuffer, window: i32, margin: i32): JsonStream {
  return JsonStream.windowed(new MemorySource(bytes), window, margin);
}

/** Reads every token of `bytes`; the error ("" when the document is valid). */
function streamErrorOf(bytes: ArrayBuffer, window: i32 = 0, margin: i32 = 0): string {
  const s = window > 0 ? windowedOver(bytes, window, margin) : new JsonStream(bytes);
  // Bounded: every token consumes at least one byte.
  for (let guard = 0; guard <= bytes.byteLength + 2; guard++) {
    const t = s.next();
    if (t == JsonToken.End) return s.error();
    if (t == JsonToken.Error) {
      expect(s.error().length).toBeGreaterThan(0);
      return s.error();
    }
  }
  return "<no end>";
}

function streamError(text: string): string {
  return streamErrorOf(String.UTF8.encode(text));
}

function bytesOf(list: u8[]): ArrayBuffer {
  const out = new Uint8Array(list.length);
  for (let i = 0; i < list.length; i++) out[i] = list[i];
  return out.buffer;
}

/** The stream and parseJson agree on `bytes`: same error, or same tree. */
function agrees(bytes: ArrayBuffer): bool {
  const expected = parseJson(bytes);
  const got = streamErrorOf(bytes);
  if (got != expected.error) {
    expect(got).toBe(expected.error);
    return false;
  }
  // The windowed reader, as a filter reads the host's configuration, must say the same.
  const windows: i32[] = [16, 3, 24, 1, 40, 7];
  for (let k = 0; k < windows.length; k += 2) {
    const windowed = streamErrorOf(bytes, windows[k], windows[k + 1]);
    if (windowed != expected.error) {
      expect("windowed " + windows[k].toString() + ": " + windowed).toBe("windowed " + windows[k].toString() + ": " + expected.error);
      return false;
    }
  }
  const tree = expected.value;
  if (tree === null) return true;
  for (let k = -2; k < windows.length; k += 2) {
    const s = k < 0 ? new JsonStream(bytes) : windowedOver(bytes, windows[k], windows[k + 1]);
    const built = s.readValue();
    if (built === null || s.next() != JsonToken.End) {
      expect(s.error()).toBe("");
      return false;
    }
    if (writeJson(built) != writeJson(tree)) {
      expect(writeJson(built)).toBe(writeJson(tree));
      return false;
    }
  }
  return true;
}

function agreesText(text: string): bool {
  return agrees(String.UTF8.encode(text));
}

function nested(open: string, close: string, depth: i32): string {
  return open.repeat(depth) + close.repeat(depth);
}

/** An object with keys k0..k<n-1>, then `extra` keys appended. */
function wideObject(n: i32, extra: string): string {
  const parts = new Array<string>();
  for (let i = 0; i < n; i++) parts.push('"k' + i.toString() + '":' + i.toString());
  if (extra.length > 0) parts.push(extra);
  return "{" + parts.join(",") + "}";
}

// A document with every kind of value; shared by several tests.
const RICH = '{"a":[1,-2.5e3,"x\\u00e9\\ud83d\\ude00 \u00e9",true,false,null],"b":{"c":{}},"d":[[],[{}]],"e":""}';

// ---- tokens ----

describe("JsonStream: tokens", () => {
  it("reads every kind of value in document order", () => {
    expect(tokens('{"a":[1,"x",true,false,null,{},[]],"b":{"c":2.5}}')).toBe(
      "BeginObject Key:a BeginArray Number:1.0 String:x True False Null BeginObject EndObject " +
        "BeginArray EndArray EndArray Key:b BeginObject Key:c Number:2.5 EndObject EndObject End",
    );
  });

  it("reads scalars at the top level", () => {
    expect(tokens("  42 ")).toBe("Number:42.0 End");
    expect(tokens('"s"')).toBe("String:s End");
    expect(tokens("true")).toBe("True End");
    expect(tokens("null")).toBe("Null End");
  });

  it("gives each token's byte offset", () => {
    expect(tokens('{"k": [10, "v"]}', true)).toBe(
      "BeginObject@0 Key:k@1 BeginArray@6 Number:10.0@7 String:v@11 EndArray@14 EndObject@15 End@15",
    );
  });

  it("tracks the depth", () => {
    const s = JsonStream.fromString('[{"a":[]}]');
    const depths = new Array<i32>();
    while (true) {
      const t = s.next();
      if (t == JsonToken.End || t == JsonToken.Error) break;
      depths.push(s.depth());
    }
    expect(depths.join(",")).toBe("1,2,2,3,2,1,0");
  });

  it("keeps answering End after the end, and Error after an error", () => {
    const s = JsonStream.fromString("[]");
    s.next();
    s.next();
    expect(s.next()).toBe(JsonToken.End);
    expect(s.next()).toBe(JsonToken.End);
    const bad = JsonStream.fromString("[,");
    bad.next();
    expect(bad.next()).toBe(JsonToken.Error);
    expect(bad.next()).toBe(JsonToken.Error);
    expect(bad.error()).toBe("byte 1: unexpected character ','");
    expect(bad.errorOffset()).toBe(1);
    expect(bad.errorReason()).toBe("unexpected character ','");
    expect(bad.failed()).toBe(true);
  });
});

// ---- strings ----

describe("JsonStream: strings", () => {
  it("decodes escapes, surrogate pairs and raw UTF-8 only when asked", () => {
    const s = JsonStream.fromString('["a\\"b\\\\c\\/d\\b\\f\\n\\r\\t", "\\u00e9\\ud83d\\ude00", "\u00e9\u20ac", "plain"]');
    s.next();
    expect(s.next()).toBe(JsonToken.String);
    expect(s.stringEscaped()).toBe(true);
    expect(s.stringValue()).toBe('a"b\\c/d\b\f\n\r\t');
    s.next();
    expect(s.stringValue()).toBe("\u00e9\ud83d\ude00");
    s.next();
    expect(s.stringEscaped()).toBe(false);
    expect(s.stringByteLength()).toBe(5);
    expect(s.stringValue()).toBe("\u00e9\u20ac");
    s.next();
    expect(String.UTF8.decodeUnsafe(s.stringPtr(), s.stringByteLength())).toBe("plain");
  });

  it("compares with a string without decoding, escapes and non-ASCII included", () => {
    const s = JsonStream.fromString('["abc", "\\u0061bc", "\u00e9t\u00e9", "\\ud83d\\ude00", "ab"]');
    s.next();
    s.next();
    expect(s.stringEquals("abc")).toBe(true);
    expect(s.stringEquals("abd")).toBe(false);
    expect(s.stringEquals("ab")).toBe(false);
    expect(s.stringEquals("abcd")).toBe(false);
    s.next();
    expect(s.stringEquals("abc")).toBe(true);
    s.next();
    expect(s.stringEquals("\u00e9t\u00e9")).toBe(true);
    expect(s.stringEquals("ete")).toBe(false);
    expect(s.stringEquals("\u00e9t\u00e8")).toBe(false);
    s.next();
    expect(s.stringEquals("\ud83d\ude00")).toBe(true);
    expect(s.stringEquals("\ud83d")).toBe(false);
    s.next();
    expect(s.stringEquals("abc")).toBe(false);
    s.next(); // EndArray
    expect(s.stringEquals("")).toBe(false);
  });

  it("hashes the decoded text, as hashBytes hashes its UTF-8", () => {
    const s = JsonStream.fromString('["\u00e9a", "\\u00e9\\u0061", "\\ud83d\\ude00", "\ud83d\ude00"]');
    s.next();
    s.next();
    const plain = s.stringHash();
    const utf8 = String.UTF8.encode("\u00e9a");
    expect(plain).toBe(hashBytes(changetype<usize>(utf8), utf8.byteLength));
    s.next();
    expect(s.stringHash()).toBe(plain);
    s.next();
    const escapedPair = s.stringHash();
    s.next();
    expect(s.stringHash()).toBe(escapedPair);
  });

  it("compares with another string literal of the document by offset", () => {
    const s = JsonStream.fromString('["pod-1", "pod-2", "pod\\u002d1", "pod-1"]');
    s.next();
    s.next();
    const first = s.tokenOffset();
    s.next();
    expect(s.sameStringAt(first)).toBe(false);
    s.next();
    expect(s.sameStringAt(first)).toBe(true);
    s.next();
    expect(s.sameStringAt(first)).toBe(true);
    expect(s.sameStringAt(first + 1)).toBe(false); // not a quote
    expect(s.sameStringAt(-5)).toBe(false);
    expect(s.sameStringAt(100000)).toBe(false);
  });

  it("matches a fixed list of names by their bytes", () => {
    const names = new JsonNames(["uid", "addresses", "\u00e9t\u00e9", ""]);
    const s = JsonStream.fromString('{"addresses":["uid","\\u0075id","\u00e9t\u00e9","","nope",1]}');
    s.next();
    s.next();
    const found = new Array<i32>();
    found.push(names.find(s));
    s.next();
    while (s.next() != JsonToken.EndArray) found.push(names.find(s));
    expect(found.join(",")).toBe("1,0,0,2,3,-1,-1");
    expect(names.length).toBe(4);
  });
});

// ---- numbers ----

describe("JsonStream: numbers", () => {
  it("gives the value and the exact integer, as parseJson does", () => {
    const texts = ["80", "8e1", "80.0", "-0", "0", "-12", "9007199254740993", "1.5", "12345678901234567890",
      "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1e-7", "2.5e-3",
      "1.7976931348623157e308", "5e-324", "123456789012345678"];
    for (let i = 0; i < texts.length; i++) {
      const tree = parseJsonString(texts[i]).value;
      const s = JsonStream.fromString(texts[i]);
      expect(s.next()).toBe(JsonToken.Number);
      if (tree === null) continue;
      expect(s.numberValue()).toBe(tree.asNumber(), texts[i]);
      expect(s.numberIsInteger()).toBe(tree.isInteger(), texts[i]);
      expect(s.numberInteger()).toBe(tree.asInteger(), texts[i]);
      expect(s.numberEnd()).toBe(texts[i].length);
    }
  });

  it("keeps -0 negative", () => {
    const s = JsonStream.fromString("-0");
    s.next();
    expect(1.0 / s.numberValue()).toBe(-Infinity);
  });

  it("answers neutral values for tokens that are not numbers, strings or booleans", () => {
    const s = JsonStream.fromString("[true]");
    s.next();
    expect(s.numberValue()).toBe(0.0);
    expect(s.numberIsInteger()).toBe(false);
    expect(s.numberInteger()).toBe(0);
    expect(s.stringValue()).toBe("");
    expect(s.stringByteLength()).toBe(0);
    expect(s.stringHash()).toBe(0);
    s.next();
    expect(s.boolValue()).toBe(true);
  });

  it("range-checks without the slow path below 1e308 and refuses beyond", () => {
    expect(streamError("1e308")).toBe("");
    expect(streamError("1.7976931348623157e308")).toBe("");
    expect(streamError("1.7976931348623159e308")).toBe("byte 0: number out of range");
    expect(streamError("[0.00000000000000000000001e330]")).toBe("");
    expect(streamError("[1e309]")).toBe("byte 1: number out of range");
    expect(streamError("-1e99999999999")).toBe("byte 0: number out of range");
    expect(streamError("1e-99999999999")).toBe("");
    expect(streamError("0e99999")).toBe("");
    expect(streamError("1" + "0".repeat(400))).toBe("byte 0: number out of range");
  });
});

// ---- the same validation as parseJson ----

describe("JsonStream: validation is parseJson's", () => {
  it("agrees on valid documents of every kind", () => {
    const docs = [RICH, "{}", "[]", "0", "-0.0e-0", '""', '"\\u0000"', " \t\n\r[ 1 , 2 ] ",
      '{"a":{"a":{"a":1}},"b":[{"a":1},{"a":1}]}', nested("[", "]", 64), wideObject(100, "")];
    for (let i = 0; i < docs.length; i++) expect(agreesText(docs[i])).toBe(true, docs[i]);
  });

  it("agrees on every kind of malformed document, message and offset", () => {
    const docs = ["", " ", "{", "[", '{"a"', '{"a":', '{"a":1', "[1", "[1,", '"abc', '"\\', "tru", "nul", "nulL",
      "True", "{} x", "1 2", "truex", "[1]]", "[1,]", '{"a":1,}', '{"a" 1}', "{a:1}", "[1 2]", '{"a":1 "b":2}',
      "[,1]", "{,}", "// c\n1", "'a'", "[1] // c", "01", "-", "- 1", "1.", "1.e3", "1e", "1e+", ".5", "+1",
      "-01", "0x10", "NaN", "Infinity", "[-]", '"\\x"', '"\\u12"', '"\\u12g4"', '"\\ud800"', '"\\udc00"',
      '"\\ud800\\u0041"', '"\\ud800x"', '"a\nb"', '"a\tb"', '"\\u"', '"\\', '["a" "b"]', '{"a":1}{', "[[[]]",
      '{"x":1,"x":2}', '{"a":{"b":1,"c":2,"b":3}}', '{"a":1,"\\u0061":2}', '{"a\\nb\\"":1,"a\\nb\\"":2}',
      '["\\x", 1 2]', '{"a":1,"a"', nested("[", "]", 65), "[".repeat(100000), '{"a":'.repeat(2000),
      "1e400", "[1e309]", '"\\ud83d\\ude00', '{"k":"\\uD83D\\uDE00"}'];
    for (let i = 0; i < docs.length; i++) expect(agreesText(docs[i])).toBe(true, docs[i]);
  });

  it("agrees on invalid UTF-8 and unprintable bytes", () => {
    const docs: u8[][] = [
      [0x22, 0xc3, 0x28, 0x22],
      [0x22, 0xe0, 0x80, 0x80, 0x22],
      [0x22, 0xed, 0xa0, 0x80, 0x22],
      [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22],
      [0x22, 0xc3],
      [0x5b, 0x31, 0x5d, 0xff],
      [0x01],
      [0xef, 0xbb, 0xbf, 0x31],
      [0x31, 0x00],
      [0x22, 0xf4, 0x8f, 0xbf, 0xbf, 0x22],
      [0x22, 0x00, 0x22],
    ];
    for (let i = 0; i < docs.length; i++) expect(agrees(bytesOf(docs[i]))).toBe(true, i.toString());
  });

  it("agrees on every truncation of a rich document", () => {
    const full = Uint8Array.wrap(String.UTF8.encode(RICH));
    for (let len = 0; len <= full.length; len++) {
      expect(agrees(full.slice(0, len).buffer)).toBe(true, len.toString());
    }
  });

  it("agrees on thousands of randomly corrupted documents (and never traps)", () => {
    const base = Uint8Array.wrap(String.UTF8.encode(RICH));
    const interesting: u8[] = [0x00, 0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x30, 0x2d, 0x65, 0x2e,
      0x75, 0x80, 0xc3, 0xed, 0xf4, 0xff, 0x20, 0x61, 0x31, 0x0a];
    let seed: u32 = 12345;
    let failures = 0;
    for (let round = 0; round < 4000; round++) {
      const copy = base.slice(0);
      const edits = 1 + <i32>(round % 3);
      for (let e = 0; e < edits; e++) {
        seed = seed * 1103515245 + 12345;
        const at = <i32>((seed >> 8) % <u32>copy.length);
        seed = seed * 1103515245 + 12345;
        copy[at] = interesting[<i32>((seed >> 8) % <u32>interesting.length)];
      }
      if (!agrees(copy.buffer)) failures++;
    }
    expect(failures).toBe(0);
  });

  it("never traps on random bytes, nor on accessors and seeks at random places", () => {
    let seed: u32 = 777;
    for (let round = 0; round < 500; round++) {
      seed = seed * 1103515245 + 12345;
      const len = <i32>((seed >> 8) % 64);
      const bytes = new Uint8Array(len);
      for (let i = 0; i < len; i++) {
        seed = seed * 1103515245 + 12345;
        // Mostly JSON punctuation and ASCII, some high bytes.
        bytes[i] = <u8>((seed >> 16) % 5 == 0 ? (seed >> 8) & 0xff : 0x20 + ((seed >> 8) % 0x5e));
      }
      agrees(bytes.buffer);
      const s = new JsonStream(bytes.buffer);
      const fork = s.fork(true);
      for (let k = 0; k < 40; k++) {
        seed = seed * 1103515245 + 12345;
        const action = (seed >> 8) % 8;
        if (action == 0) s.skipValue();
        else if (action == 1) s.stringValue();
        else if (action == 2) s.numberValue();
        else if (action == 3) s.sameStringAt(<i32>((seed >> 12) % <u32>(len + 4)) - 2);
        else if (action == 4) fork.valueAt(<i32>((seed >> 12) % <u32>(len + 4)) - 2);
        else if (action == 5) fork.readValue();
        else if (action == 6) fork.stringValue();
        else s.next();
        fork.next();
      }
    }
    expect(true).toBe(true);
  });
});

// ---- depth, duplicates, offsets ----

describe("JsonStream: nesting limit", () => {
  it("accepts 64 levels and refuses the 65th at its bracket", () => {
    expect(streamError(nested("[", "]", MAX_DEPTH))).toBe("");
    expect(streamError(nested("[", "]", 65))).toBe("byte 64: nesting deeper than 64");
    let doc = "";
    for (let i = 0; i < 64; i++) doc += '{"a":';
    expect(streamError(doc + "{}" + "}".repeat(64))).toBe("byte 320: nesting deeper than 64");
  });

  it("refuses absurd depth without recursing", () => {
    expect(streamError("[".repeat(100000))).toBe("byte 64: nesting deeper than 64");
  });
});

describe("JsonStream: duplicate keys", () => {
  it("refuses a repeated key at the repeat's offset, after decoding escapes", () => {
    expect(streamError('{"x":1,"x":2}')).toBe('byte 7: duplicate key "x"');
    expect(streamError('{"a":1,"\\u0061":2}')).toBe('byte 7: duplicate key "a"');
    expect(streamError('{"\u00e9":1,"\\u00e9":2}')).toBe('byte 8: duplicate key "\u00e9"');
    expect(agreesText('{"\u00e9":1,"\\u00e9":2}')).toBe(true);
  });

  it("allows the same key in different and nested objects", () => {
    expect(streamError('{"x":{"x":1},"y":{"x":2},"z":[{"x":1},{"x":1}]}')).toBe("");
  });

  it("finds repeats in objects too large for the linear scan, through every index growth", () => {
    expect(streamError(wideObject(17, ""))).toBe("");
    expect(streamError(wideObject(10000, ""))).toBe("");
    for (let n = 15; n <= 70; n++) {
      const doc = wideObject(n, '"k' + (n >> 1).toString() + '":0');
      expect(agreesText(doc)).toBe(true, n.toString());
      expect(streamError(doc).includes("duplicate key")).toBe(true, n.toString());
    }
    expect(streamError(wideObject(5000, '"k\\u0034\\u0039\\u0039\\u0039":0'))).toBe(
      'byte ' + (wideObject(5000, "").length).toString() + ': duplicate key "k4999"',
    );
  });

  it("keeps each open object's keys apart when large objects nest", () => {
    const inner = wideObject(40, "");
    const doc = '{"k1":' + inner + ',"k2":' + inner + ',"k1":0}';
    expect(agreesText(doc)).toBe(true);
    expect(streamError(doc).includes('duplicate key "k1"')).toBe(true);
  });

  it("does not check keys again in a trusted fork", () => {
    const s = JsonStream.fromString('{"x":1,"x":2}');
    const fork = s.fork(true);
    fork.valueAt(0);
    expect(fork.skipValue()).toBe(true);
    const strict = s.fork();
    strict.valueAt(0);
    expect(strict.skipValue()).toBe(false);
    expect(strict.error()).toBe('byte 7: duplicate key "x"');
  });
});

// ---- skipping, trees, seeking ----

describe("JsonStream: skipping and seeking", () => {
  it("skips whole values, validating them", () => {
    const s = JsonStream.fromString('{"skip":{"a":[1,{"b":null}]},"keep":7}');
    s.next();
    s.next();
    expect(s.skipValue()).toBe(true);
    expect(s.next()).toBe(JsonToken.Key);
    expect(s.stringValue()).toBe("keep");
    expect(s.next()).toBe(JsonToken.Number);
    const bad = JsonStream.fromString('[{"a":[1,}]');
    bad.next();
    expect(bad.skipValue()).toBe(false);
    expect(bad.error()).toBe("byte 9: unexpected character '}'");
    expect(JsonStream.fromString("]").skipValue()).toBe(false);
  });

  it("builds the tree of a value as parseJson does", () => {
    const s = JsonStream.fromString(RICH);
    const tree = s.readValue();
    const expected = parseJsonString(RICH).value;
    expect(tree).not.toBeNull();
    if (tree === null || expected === null) return;
    expect(writeJson(tree)).toBe(writeJson(expected));
    expect(s.next()).toBe(JsonToken.End);
  });

  it("reads a value at a recorded offset with a fork, leaving the original in place", () => {
    const s = JsonStream.fromString('{"list":[1,2,3],"name":"n\\u0031","after":true}');
    s.next();
    s.next();
    s.next();
    const listAt = s.tokenOffset();
    s.skip(JsonToken.BeginArray);
    s.next();
    s.next();
    const nameAt = s.tokenOffset();
    const fork = s.fork();
    fork.valueAt(nameAt);
    expect(fork.next()).toBe(JsonToken.String);
    expect(fork.stringValue()).toBe("n1");
    expect(fork.next()).toBe(JsonToken.End); // what follows the value is not looked at
    fork.valueAt(listAt);
    const list = fork.readValue();
    expect(list !== null && list.items().length == 3).toBe(true);
    expect(s.next()).toBe(JsonToken.Key);
    expect(s.stringValue()).toBe("after");
  });

  it("stays failed: a seek does not clear an error, a failed reader forks failed", () => {
    const s = JsonStream.fromString("[1,]");
    while (s.next() != JsonToken.Error) {}
    s.valueAt(0);
    expect(s.next()).toBe(JsonToken.Error);
    expect(s.fork().next()).toBe(JsonToken.Error);
    const invalid = new JsonStream(bytesOf([0x22, 0xff, 0x22]));
    expect(invalid.next()).toBe(JsonToken.Error);
    expect(invalid.error()).toBe("byte 1: invalid UTF-8");
  });
});

// ---- writeJson ----

describe("writeJson", () => {
  it("writes back what parseJson read", () => {
    const text = '{"a":[1,-2500,1.5,"x\\"\\\\\\n\\u0001\u00e9\ud83d\ude00",true,false,null],"b":{}}';
    const tree = parseJsonString(text).value;
    expect(tree).not.toBeNull();
    if (tree === null) return;
    const written = writeJson(tree);
    expect(written).toBe('{"a":[1,-2500,1.5,"x\\"\\\\\\u000a\\u0001\u00e9\ud83d\ude00",true,false,null],"b":{}}');
    const again = parseJsonString(written).value;
    expect(again !== null && writeJson(again) == written).toBe(true);
  });

  it("keeps exact integers exact and other numbers round-tripping", () => {
    const texts = ["9007199254740993", "-0", "8e1", "0.1", "1e300", "5e-324", "123456789.125", "1e21"];
    for (let i = 0; i < texts.length; i++) {
      const tree = parseJsonString(texts[i]).value;
      if (tree === null) continue;
      const back = parseJsonString(writeJson(tree)).value;
      expect(back).not.toBeNull();
      if (back === null) continue;
      expect(back.asNumber()).toBe(tree.asNumber(), texts[i]);
      expect(back.isInteger()).toBe(tree.isInteger(), texts[i]);
      expect(back.asInteger()).toBe(tree.asInteger(), texts[i]);
    }
  });

  it("escapes lone surrogates so a re-parse refuses them", () => {
    const s = String.fromCharCode(0xd800);
    expect(writeJson(JsonValue.fromString(s))).toBe('"\\ud800"');
    expect(parseJsonString(writeJson(JsonValue.fromString(s))).ok()).toBe(false);
    expect(writeJson(JsonValue.fromNumber(NaN))).toBe("null");
  });
});

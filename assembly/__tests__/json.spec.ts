import { JsonKind, JsonValue, parseJson, parseJsonString } from "../json";

// ---- helpers ----

/** The parsed value; a fresh null value when parsing failed (the test then fails on kind). */
function parse(text: string): JsonValue {
  const r = parseJsonString(text);
  const v = r.value;
  return v === null ? JsonValue.fromNull() : v;
}

/** The error message for `text` ("" if it unexpectedly parsed). */
function err(text: string): string {
  return parseJsonString(text).error;
}

function bytesOf(list: u8[]): ArrayBuffer {
  const out = new Uint8Array(list.length);
  for (let i = 0; i < list.length; i++) out[i] = list[i];
  return out.buffer;
}

function errBytes(list: u8[]): string {
  return parseJson(bytesOf(list)).error;
}

function nested(open: string, close: string, depth: i32): string {
  return open.repeat(depth) + close.repeat(depth);
}

// ---- valid documents ----

describe("parseJson: valid documents", () => {
  it("parses the literals null, true and false", () => {
    expect(parse("null").kind).toBe(JsonKind.Null);
    expect(parse("null").isNull()).toBe(true);
    expect(parse("true").isBool()).toBe(true);
    expect(parse("true").asBool()).toBe(true);
    expect(parse("false").asBool()).toBe(false);
    expect(parse("false").kind).toBe(JsonKind.Bool);
  });

  it("parses numbers of every RFC 8259 form", () => {
    expect(parse("0").asNumber()).toBe(0.0);
    expect(parse("-0").asNumber()).toBe(0.0);
    expect(parse("80").asNumber()).toBe(80.0);
    expect(parse("-12").asNumber()).toBe(-12.0);
    expect(parse("3.25").asNumber()).toBe(3.25);
    expect(parse("1e3").asNumber()).toBe(1000.0);
    expect(parse("1E+2").asNumber()).toBe(100.0);
    expect(parse("2.5e-3").asNumber()).toBe(0.0025);
    expect(parse("0.1").asNumber()).toBe(0.1);
    expect(parse("1.7976931348623157e308").asNumber()).toBe(1.7976931348623157e308);
    expect(parse("5e-324").asNumber()).toBe(5e-324);
    expect(parse("80").kind).toBe(JsonKind.Number);
    expect(parse("80").isNumber()).toBe(true);
  });

  it("rounds every literal to the nearest double, ties to even", () => {
    // AssemblyScript's own parseFloat returns about -1.1e38 for this one.
    expect(parse("-5.5188722593483196e+42").asNumber()).toBe(-5.5188722593483196e42);
    expect(parse("2.939108593807162e+49").asNumber()).toBe(2.939108593807162e49);
    expect(parse("9007199254740993").asNumber()).toBe(9007199254740992.0);
    expect(parse("1.7976931348623158e308").asNumber()).toBe(f64.MAX_VALUE);
    expect(parse("2.2250738585072011e-308").asNumber()).toBe(2.225073858507201e-308);
    expect(parse("2.4703282292062328e-324").asNumber()).toBe(5e-324);
    expect(parse("2.4703282292062327e-324").asNumber()).toBe(0.0);
    expect(parse("0." + "0".repeat(400) + "1").asNumber()).toBe(0.0);
    expect(parse("1" + "0".repeat(308)).asNumber()).toBe(1e308);
  });

  it("keeps digits past the 800th in mind when they break an exact tie", () => {
    // Exactly halfway between 1 and the next double: ties to even (1.0) ...
    const half = "1.00000000000000011102230246251565404236316680908203125";
    expect(parse(half).asNumber()).toBe(1.0);
    // ... but any nonzero digit after it, however far out, rounds up.
    expect(parse(half + "0".repeat(1000) + "1").asNumber()).toBe(1.0000000000000002);
    expect(parse("1." + "0".repeat(2000)).asInteger()).toBe(1);
  });

  it("decides integer-ness from the exact decimal value, not the rounded double", () => {
    expect(parse("80").isInteger()).toBe(true);
    expect(parse("80").asInteger()).toBe(80);
    expect(parse("8e1").asInteger()).toBe(80);
    expect(parse("80.0").asInteger()).toBe(80);
    expect(parse("1.5e1").asInteger()).toBe(15);
    expect(parse("-0.000").isInteger()).toBe(true);
    expect(parse("80.5").isInteger()).toBe(false);
    expect(parse("1e-5").isInteger()).toBe(false);
    expect(parse("80.00000000000000001").isInteger()).toBe(false);
    expect(parse("9007199254740993").asInteger()).toBe(9007199254740993);
    expect(parse("9223372036854775807").asInteger()).toBe(i64.MAX_VALUE);
    expect(parse("-9223372036854775808").asInteger()).toBe(i64.MIN_VALUE);
    // Too big for i64: still a valid number, just not an integer the reader will accept.
    expect(parse("9223372036854775808").isInteger()).toBe(false);
    expect(parse("9223372036854775808").isNumber()).toBe(true);
    expect(parse("1e19").isInteger()).toBe(false);
    expect(parse("1e18").asInteger()).toBe(1000000000000000000);
  });

  it("parses plain and raw UTF-8 strings", () => {
    expect(parse('""').asString()).toBe("");
    expect(parse('"abc"').asString()).toBe("abc");
    expect(parse('"abc"').isString()).toBe(true);
    expect(parse('"héllo ✓ 😀"').asString()).toBe("héllo ✓ 😀");
    expect(parse('"😀"').asString().length).toBe(2);
  });

  it("decodes every simple escape", () => {
    expect(parse('"\\"\\\\\\/\\b\\f\\n\\r\\t"').asString()).toBe("\"\\/\b\f\n\r\t");
    expect(parse('"a\\nb"').asString()).toBe("a\nb");
  });

  it("decodes \\u escapes, including surrogate pairs and U+0000", () => {
    expect(parse('"\\u0041\\u00e9\\u20AC"').asString()).toBe("Aé€");
    const emoji = parse('"x\\ud83d\\ude00y"').asString();
    expect(emoji).toBe("x😀y");
    expect(emoji.charCodeAt(1)).toBe(0xd83d);
    expect(emoji.charCodeAt(2)).toBe(0xde00);
    const nul = parse('"\\u0000"').asString();
    expect(nul.length).toBe(1);
    expect(nul.charCodeAt(0)).toBe(0);
  });

  it("mixes escapes with raw multi-byte UTF-8 in one string", () => {
    expect(parse('"é\\n😀\\u00e9€"').asString()).toBe("é\n😀é€");
  });

  it("parses arrays, empty and nested, keeping element order", () => {
    expect(parse("[]").isArray()).toBe(true);
    expect(parse("[]").items().length).toBe(0);
    const a = parse('[1, "a", null, true, [2, []], {}]');
    expect(a.kind).toBe(JsonKind.Array);
    const items = a.items();
    expect(items.length).toBe(6);
    expect(items[0].asNumber()).toBe(1.0);
    expect(items[1].asString()).toBe("a");
    expect(items[2].isNull()).toBe(true);
    expect(items[3].asBool()).toBe(true);
    expect(items[4].items()[0].asNumber()).toBe(2.0);
    expect(items[5].isObject()).toBe(true);
  });

  it("parses objects, keeping keys in document order", () => {
    expect(parse("{}").isObject()).toBe(true);
    expect(parse("{}").keys().length).toBe(0);
    const o = parse('{"z": 1, "a": {"inner": "v"}, "m": [true]}');
    expect(o.kind).toBe(JsonKind.Object);
    const keys = o.keys();
    expect(keys.length).toBe(3);
    expect(keys[0]).toBe("z");
    expect(keys[1]).toBe("a");
    expect(keys[2]).toBe("m");
    expect(o.has("a")).toBe(true);
    expect(o.has("nope")).toBe(false);
    const inner = o.get("a");
    expect(inner).not.toBeNull();
    if (inner !== null) {
      const v = inner.get("inner");
      expect(v !== null && v.asString() == "v").toBe(true);
    }
    expect(o.get("nope")).toBeNull();
  });

  it("accepts all four whitespace bytes around every token", () => {
    const o = parse(' \t\n\r{ "a" :\n[ 1 ,\t2 ] , "b":"c"\r} \n');
    expect(o.isObject()).toBe(true);
    const a = o.get("a");
    expect(a !== null && a.items().length == 2).toBe(true);
  });

  it("parses raw bytes handed over as an ArrayBuffer", () => {
    // {"k":"é"} with é as C3 A9
    const r = parseJson(bytesOf([0x7b, 0x22, 0x6b, 0x22, 0x3a, 0x22, 0xc3, 0xa9, 0x22, 0x7d]));
    expect(r.ok()).toBe(true);
    expect(r.error).toBe("");
    expect(r.offset).toBe(-1);
    const v = r.value;
    const k: JsonValue | null = v === null ? null : v.get("k");
    expect(k !== null && k.asString() == "é").toBe(true);
  });

  it("accepts exactly 64 levels of nesting", () => {
    expect(parseJsonString(nested("[", "]", 64)).ok()).toBe(true);
    let doc = "";
    for (let i = 0; i < 63; i++) doc += '{"a":';
    doc += "{}" + "}".repeat(63);
    expect(parseJsonString(doc).ok()).toBe(true);
  });
});

describe("JsonValue accessors on the wrong kind", () => {
  it("answer neutral values instead of trapping", () => {
    const n = parse("5");
    const s = parse('"5"');
    const a = parse("[1]");
    const o = parse('{"a":1}');
    const z = parse("null");
    expect(n.asString()).toBe("");
    expect(n.asBool()).toBe(false);
    expect(s.asNumber()).toBe(0.0);
    expect(s.asInteger()).toBe(0);
    expect(s.isInteger()).toBe(false);
    expect(s.items().length).toBe(0);
    expect(o.items().length).toBe(0);
    expect(a.keys().length).toBe(0);
    expect(a.get("a")).toBeNull();
    expect(a.has("a")).toBe(false);
    expect(z.get("a")).toBeNull();
    expect(z.asBool()).toBe(false);
    expect(o.isArray()).toBe(false);
    expect(a.isObject()).toBe(false);
    expect(parse("80.5").asInteger()).toBe(0);
  });
});

// ---- malformed input ----

describe("parseJson: truncated input", () => {
  it("reports the end of input with its offset", () => {
    expect(err("")).toBe("byte 0: unexpected end of input");
    expect(err("  ")).toBe("byte 2: unexpected end of input");
    expect(err('{"a": [1, 2')).toBe("byte 11: unexpected end of input");
    expect(err('{"a"')).toBe("byte 4: unexpected end of input");
    expect(err('{"a":')).toBe("byte 5: unexpected end of input");
    expect(err('{"a":1,')).toBe("byte 7: unexpected end of input");
    expect(err("[1,")).toBe("byte 3: unexpected end of input");
    expect(err("tru")).toBe("byte 3: unexpected end of input");
    expect(err("-")).toBe("byte 1: unexpected end of input");
    expect(err("1.")).toBe("byte 2: unexpected end of input");
    expect(err("1e")).toBe("byte 2: unexpected end of input");
    expect(err("1e+")).toBe("byte 3: unexpected end of input");
  });

  it("reports an unterminated string at its opening quote", () => {
    expect(err('"abc')).toBe("byte 0: unterminated string");
    expect(err('["ab\\"]')).toBe("byte 1: unterminated string");
    expect(err('"\\')).toBe("byte 0: unterminated string");
    expect(err('"\\u12')).toBe("byte 0: unterminated string");
  });

  it("fails cleanly on every prefix of a valid document", () => {
    const doc = '{"a":[1,-2.5e3,"x\\u00e9\\ud83d\\ude00",true,false,null],"b":{"c":{}}}';
    expect(parseJsonString(doc).ok()).toBe(true);
    const full = Uint8Array.wrap(String.UTF8.encode(doc));
    for (let len = 0; len < full.length; len++) {
      const r = parseJson(full.slice(0, len).buffer);
      expect(r.ok()).toBe(false, "prefix of length " + len.toString());
      expect(r.error.length > 0).toBe(true);
    }
  });
});

describe("parseJson: invalid UTF-8", () => {
  it("rejects malformed sequences with the offset of the bad sequence", () => {
    expect(errBytes([0x22, 0xc3, 0x28, 0x22])).toBe("byte 1: invalid UTF-8"); // bad continuation
    expect(errBytes([0x22, 0x80, 0x22])).toBe("byte 1: invalid UTF-8"); // lone continuation
    expect(errBytes([0x22, 0xc0, 0x80, 0x22])).toBe("byte 1: invalid UTF-8"); // overlong NUL
    expect(errBytes([0x22, 0xe0, 0x80, 0xaf, 0x22])).toBe("byte 1: invalid UTF-8"); // overlong '/'
    expect(errBytes([0x22, 0xed, 0xa0, 0x80, 0x22])).toBe("byte 1: invalid UTF-8"); // surrogate
    expect(errBytes([0x22, 0xf4, 0x90, 0x80, 0x80, 0x22])).toBe("byte 1: invalid UTF-8"); // > U+10FFFF
    expect(errBytes([0x22, 0xff, 0x22])).toBe("byte 1: invalid UTF-8");
    expect(errBytes([0x22, 0x61, 0xe2, 0x82])).toBe("byte 2: invalid UTF-8"); // truncated at end
  });

  it("rejects a lone surrogate smuggled in through an AssemblyScript string", () => {
    // String.UTF8.encode writes WTF-8 (ED A0 80) for an unpaired surrogate.
    expect(err('"' + String.fromCharCode(0xd800) + '"')).toBe("byte 1: invalid UTF-8");
  });

  it("accepts the largest code point and the edges of each sequence length", () => {
    expect(parseJson(bytesOf([0x22, 0xf4, 0x8f, 0xbf, 0xbf, 0x22])).ok()).toBe(true);
    expect(parseJson(bytesOf([0x22, 0xc2, 0x80, 0xdf, 0xbf, 0x22])).ok()).toBe(true);
    expect(parseJson(bytesOf([0x22, 0xe0, 0xa0, 0x80, 0xef, 0xbf, 0xbf, 0x22])).ok()).toBe(true);
    expect(parseJson(bytesOf([0x22, 0xf0, 0x90, 0x80, 0x80, 0x22])).ok()).toBe(true);
  });
});

describe("parseJson: bad strings", () => {
  it("rejects raw control characters inside strings", () => {
    expect(err('"a\nb"')).toBe("byte 2: control character in string");
    expect(err('"\t"')).toBe("byte 1: control character in string");
    expect(errBytes([0x22, 0x00, 0x22])).toBe("byte 1: control character in string");
    expect(errBytes([0x22, 0x1f, 0x22])).toBe("byte 1: control character in string");
  });

  it("rejects unknown escapes", () => {
    expect(err('"\\x"')).toBe("byte 1: invalid escape");
    expect(err("\"\\'\"")).toBe("byte 1: invalid escape");
    expect(err('"ab\\U0041"')).toBe("byte 3: invalid escape");
    expect(err('"\\\n"')).toBe("byte 1: invalid escape");
  });

  it("rejects malformed \\u escapes", () => {
    expect(err('"\\u12G4"')).toBe("byte 1: invalid \\u escape");
    expect(err('"\\u12"')).toBe("byte 1: invalid \\u escape");
    expect(err('"\\u"')).toBe("byte 1: invalid \\u escape");
  });

  it("rejects lone surrogates in \\u escapes", () => {
    expect(err('"\\ud800"')).toBe("byte 1: lone surrogate in \\u escape");
    expect(err('"\\udc00"')).toBe("byte 1: lone surrogate in \\u escape");
    expect(err('"a\\ud800\\u0041"')).toBe("byte 2: lone surrogate in \\u escape");
    expect(err('"\\ud800x"')).toBe("byte 1: lone surrogate in \\u escape");
    expect(err('"\\ud800\\ud800"')).toBe("byte 1: lone surrogate in \\u escape");
    expect(err('"\\ude00\\ud83d"')).toBe("byte 1: lone surrogate in \\u escape");
    expect(err('"\\ud800\\u"')).toBe("byte 1: lone surrogate in \\u escape");
  });
});

describe("parseJson: bad numbers", () => {
  it("rejects numbers outside the double range", () => {
    expect(err("1e400")).toBe("byte 0: number out of range");
    expect(err("-1e400")).toBe("byte 0: number out of range");
    expect(err("[1e99999999999999]")).toBe("byte 1: number out of range");
    expect(err("1" + "0".repeat(400))).toBe("byte 0: number out of range");
    expect(err("1.7976931348623159e308")).toBe("byte 0: number out of range");
  });

  it("rejects NaN and Infinity literals", () => {
    expect(err("NaN")).toBe("byte 0: unexpected character 'N'");
    expect(err("Infinity")).toBe("byte 0: unexpected character 'I'");
    expect(err("-Infinity")).toBe("byte 1: expected a digit after '-'");
    expect(err("[1, NaN]")).toBe("byte 4: unexpected character 'N'");
  });

  it("rejects leading zeros", () => {
    expect(err("0123")).toBe("byte 1: leading zero in number");
    expect(err("-01")).toBe("byte 2: leading zero in number");
    expect(err("00")).toBe("byte 1: leading zero in number");
    expect(parseJsonString("0.5").ok()).toBe(true);
  });

  it("rejects the other non-JSON number spellings", () => {
    expect(err("+1")).toBe("byte 0: unexpected character '+'");
    expect(err(".5")).toBe("byte 0: unexpected character '.'");
    expect(err("1.e3")).toBe("byte 2: expected a digit after '.'");
    expect(err("1ea")).toBe("byte 2: expected a digit in exponent");
    expect(err("0x10")).toBe("byte 1: unexpected data after JSON value");
    expect(err("- 1")).toBe("byte 1: expected a digit after '-'");
  });
});

describe("parseJson: bad structure", () => {
  it("rejects trailing garbage after the value", () => {
    expect(err("{} x")).toBe("byte 3: unexpected data after JSON value");
    expect(err("1 2")).toBe("byte 2: unexpected data after JSON value");
    expect(err("truex")).toBe("byte 4: unexpected data after JSON value");
    expect(err("[1]]")).toBe("byte 3: unexpected data after JSON value");
    expect(errBytes([0x31, 0x00])).toBe("byte 1: unexpected data after JSON value");
  });

  it("rejects trailing commas, missing separators and unquoted keys", () => {
    expect(err("[1,]")).toBe("byte 3: unexpected character ']'");
    expect(err('{"a":1,}')).toBe("byte 7: expected a string key");
    expect(err('{"a" 1}')).toBe("byte 5: expected ':' after key");
    expect(err("{a:1}")).toBe("byte 1: expected a string key");
    expect(err("[1 2]")).toBe("byte 3: expected ',' or ']'");
    expect(err('{"a":1 "b":2}')).toBe("byte 7: expected ',' or '}'");
    expect(err("[,1]")).toBe("byte 1: unexpected character ','");
    expect(err("{,}")).toBe("byte 1: expected a string key");
  });

  it("rejects misspelt literals, comments and single quotes", () => {
    expect(err("nul")).toBe("byte 3: unexpected end of input");
    expect(err("nulL")).toBe("byte 3: invalid literal");
    expect(err("True")).toBe("byte 0: unexpected character 'T'");
    expect(err("[1] // c")).toBe("byte 4: unexpected data after JSON value");
    expect(err("// c\n1")).toBe("byte 0: unexpected character '/'");
    expect(err("'a'")).toBe("byte 0: unexpected character '''");
  });

  it("names unprintable bytes by value, including a byte-order mark", () => {
    expect(errBytes([0x01])).toBe("byte 0: unexpected byte 0x01");
    expect(errBytes([0xef, 0xbb, 0xbf, 0x31])).toBe("byte 0: unexpected byte 0xef");
    expect(err("\u00a0 1")).toBe("byte 0: unexpected byte 0xc2");
  });

  it("reports the offset separately and keeps the message on one line", () => {
    const r = parseJsonString('{"a":\n\n  tx}');
    expect(r.ok()).toBe(false);
    expect(r.value).toBeNull();
    expect(r.offset).toBe(10);
    expect(r.error).toBe("byte 10: invalid literal");
    expect(r.error.includes("\n")).toBe(false);
  });
});

describe("parseJson: nesting limit", () => {
  it("refuses the 65th level of arrays with the offset of its bracket", () => {
    expect(err(nested("[", "]", 65))).toBe("byte 64: nesting deeper than 64");
  });

  it("refuses the 65th level of objects", () => {
    let doc = "";
    for (let i = 0; i < 64; i++) doc += '{"a":';
    doc += "{}" + "}".repeat(64);
    expect(err(doc)).toBe("byte 320: nesting deeper than 64");
  });

  it("refuses absurd depth without recursing into it", () => {
    expect(err("[".repeat(100000))).toBe("byte 64: nesting deeper than 64");
    expect(err('{"a":'.repeat(100000))).toBe("byte 320: nesting deeper than 64");
  });
});

describe("parseJson: duplicate keys", () => {
  it("rejects a repeated key at the repeat's offset", () => {
    expect(err('{"x":1,"x":2}')).toBe('byte 7: duplicate key "x"');
    expect(err('{"a":{"b":1,"c":2,"b":3}}')).toBe('byte 18: duplicate key "b"');
  });

  it("compares keys after decoding escapes", () => {
    expect(err('{"a":1,"\\u0061":2}')).toBe('byte 7: duplicate key "a"');
  });

  it("escapes awkward keys in the message so it stays on one line", () => {
    expect(err('{"a\\nb\\"":1,"a\\nb\\"":2}')).toBe('byte 12: duplicate key "a\\nb\\""');
  });

  it("allows the same key in different objects", () => {
    expect(parseJsonString('{"x":{"x":1},"y":{"x":2}}').ok()).toBe(true);
  });
});

describe("parseJson: robustness", () => {
  it("never traps on randomly corrupted documents", () => {
    const doc = '{"a":[1,-2.5e3,"x\\u00e9\\ud83d\\ude00 é",true,false,null],"b":{"c":{}}}';
    const base = Uint8Array.wrap(String.UTF8.encode(doc));
    const interesting: u8[] = [0x00, 0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x30, 0x2d,
      0x65, 0x2e, 0x75, 0x80, 0xc3, 0xed, 0xf4, 0xff, 0x20];
    let seed: u32 = 12345;
    let failures = 0;
    for (let round = 0; round < 3000; round++) {
      const copy = base.slice(0);
      // Corrupt 1-3 bytes.
      const edits = 1 + <i32>(round % 3);
      for (let e = 0; e < edits; e++) {
        seed = seed * 1103515245 + 12345;
        const at = <i32>((seed >> 8) % <u32>copy.length);
        seed = seed * 1103515245 + 12345;
        copy[at] = interesting[<i32>((seed >> 8) % <u32>interesting.length)];
      }
      const r = parseJson(copy.buffer);
      // Either a value, or an error with a reason; never both, never neither.
      expect(r.ok() != (r.error.length > 0)).toBe(true);
      if (!r.ok()) failures++;
    }
    expect(failures > 0).toBe(true);
  });
});

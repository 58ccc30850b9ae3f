import { ConfigReader, JsonValue, parseJsonString } from "../json";

const DOC = `{
  "name": "mesh",
  "port": 15001,
  "eighty": 8e1,
  "ratio": 0.5,
  "huge": 10000000000000000000,
  "negative": -3,
  "debug": true,
  "mode": "strict",
  "nothing": null,
  "list": [1, 2],
  "routes": {"x": 5, "y": "ok"},
  "workloads": [
    {"name": "a", "addresses": ["10.0.0.1", "bad"]},
    null
  ]
}`;

function doc(): JsonValue {
  const v = parseJsonString(DOC).value;
  return v === null ? JsonValue.fromNull() : v;
}

function obj(text: string): JsonValue {
  const v = parseJsonString(text).value;
  return v === null ? JsonValue.fromNull() : v;
}

describe("ConfigReader paths", () => {
  it("formats root keys, nested keys and array indexes", () => {
    const r = new ConfigReader();
    expect(r.childPath("", "routes")).toBe("routes");
    expect(r.childPath("routes", "x")).toBe("routes.x");
    expect(r.indexPath("workloads", 3)).toBe("workloads[3]");
    const p = r.indexPath(r.childPath(r.indexPath("workloads", 3), "addresses"), 0);
    expect(p).toBe("workloads[3].addresses[0]");
    expect(r.childPath("", "x-forwarded_for9")).toBe("x-forwarded_for9");
  });

  it("quotes keys that would be ambiguous or break the line", () => {
    const r = new ConfigReader();
    expect(r.childPath("routes", "a b")).toBe('routes["a b"]');
    expect(r.childPath("routes", "a.b")).toBe('routes["a.b"]');
    expect(r.childPath("", "")).toBe('[""]');
    expect(r.childPath("m", 'a\n"b')).toBe('m["a\\n\\"b"]');
    expect(r.childPath("m", "k".repeat(100))).toBe('m["' + "k".repeat(64) + '"...]');
  });
});

describe("ConfigReader.fail", () => {
  it("starts clean", () => {
    const r = new ConfigReader();
    expect(r.failed()).toBe(false);
    expect(r.error()).toBe("");
  });

  it("records the first error only", () => {
    const r = new ConfigReader();
    r.fail("workloads[3].addresses[0]", "not an IP address");
    r.fail("other", "ignored");
    expect(r.failed()).toBe(true);
    expect(r.error()).toBe("workloads[3].addresses[0]: not an IP address");
  });

  it("names the root and keeps messages on one line", () => {
    const a = new ConfigReader();
    a.fail("", "expected an object");
    expect(a.error()).toBe("(root): expected an object");
    const b = new ConfigReader();
    b.fail("x", "bad\nvalue\r\t" + String.fromCharCode(0x2028));
    expect(b.error()).toBe("x: bad\\nvalue\\r\\t\\u2028");
  });
});

describe("ConfigReader objects and arrays", () => {
  it("requireObject returns the object", () => {
    const r = new ConfigReader();
    const routes = r.requireObject(doc(), "routes", "");
    expect(routes !== null && routes.has("x")).toBe(true);
    expect(r.failed()).toBe(false);
  });

  it("requireObject reports a missing field, a null field and a wrong type", () => {
    const a = new ConfigReader();
    expect(a.requireObject(doc(), "absent", "")).toBeNull();
    expect(a.error()).toBe("absent: missing required field");
    const b = new ConfigReader();
    expect(b.requireObject(doc(), "nothing", "")).toBeNull();
    expect(b.error()).toBe("nothing: missing required field");
    const c = new ConfigReader();
    expect(c.requireObject(doc(), "name", "")).toBeNull();
    expect(c.error()).toBe("name: expected an object");
  });

  it("optionalObject returns null without failing when absent or null", () => {
    const r = new ConfigReader();
    expect(r.optionalObject(doc(), "absent", "")).toBeNull();
    expect(r.optionalObject(doc(), "nothing", "")).toBeNull();
    expect(r.failed()).toBe(false);
    expect(r.optionalObject(doc(), "routes", "")).not.toBeNull();
    expect(r.optionalObject(doc(), "list", "")).toBeNull();
    expect(r.error()).toBe("list: expected an object");
  });

  it("requireArray returns the array or names the field", () => {
    const r = new ConfigReader();
    const list = r.requireArray(doc(), "list", "");
    expect(list !== null && list.items().length == 2).toBe(true);
    expect(r.requireArray(doc(), "routes", "")).toBeNull();
    expect(r.error()).toBe("routes: expected an array");
    const b = new ConfigReader();
    b.requireArray(doc(), "absent", "");
    expect(b.error()).toBe("absent: missing required field");
  });

  it("optionalArray returns null when absent and fails on a wrong type", () => {
    const r = new ConfigReader();
    expect(r.optionalArray(doc(), "absent", "")).toBeNull();
    expect(r.failed()).toBe(false);
    expect(r.optionalArray(doc(), "list", "")).not.toBeNull();
    expect(r.optionalArray(doc(), "port", "")).toBeNull();
    expect(r.error()).toBe("port: expected an array");
  });

  it("reports a parent that is not an object at the parent's path", () => {
    const a = new ConfigReader();
    a.requireString(obj("[1]"), "x", "list");
    expect(a.error()).toBe("list: expected an object");
    const b = new ConfigReader();
    b.requireString(null, "x", "svc");
    expect(b.error()).toBe("svc: expected an object");
    const c = new ConfigReader();
    c.optionalString(obj("5"), "x", "", "d");
    expect(c.error()).toBe("(root): expected an object");
  });
});

describe("ConfigReader strings", () => {
  it("requireString returns the value", () => {
    const r = new ConfigReader();
    expect(r.requireString(doc(), "name", "")).toBe("mesh");
    expect(r.failed()).toBe(false);
  });

  it("requireString names nested fields in its errors", () => {
    const r = new ConfigReader();
    const routes = r.requireObject(doc(), "routes", "");
    expect(r.requireString(routes, "x", "routes")).toBe("");
    expect(r.error()).toBe("routes.x: expected a string");
    const b = new ConfigReader();
    b.requireString(routes, "z", "routes");
    expect(b.error()).toBe("routes.z: missing required field");
  });

  it("optionalString falls back when absent or null and fails on a wrong type", () => {
    const r = new ConfigReader();
    expect(r.optionalString(doc(), "absent", "", "dflt")).toBe("dflt");
    expect(r.optionalString(doc(), "nothing", "", "dflt")).toBe("dflt");
    expect(r.optionalString(doc(), "name", "", "dflt")).toBe("mesh");
    expect(r.failed()).toBe(false);
    expect(r.optionalString(doc(), "port", "", "dflt")).toBe("dflt");
    expect(r.error()).toBe("port: expected a string");
  });
});

describe("ConfigReader integers", () => {
  it("requireInteger accepts exact integers in range", () => {
    const r = new ConfigReader();
    expect(r.requireInteger(doc(), "port", "", 1, 65535)).toBe(15001);
    expect(r.requireInteger(doc(), "eighty", "", 1, 65535)).toBe(80);
    expect(r.requireInteger(doc(), "negative", "", -10, 10)).toBe(-3);
    expect(r.requireInteger(doc(), "port", "", 15001, 15001)).toBe(15001);
    expect(r.failed()).toBe(false);
  });

  it("requireInteger rejects fractions with the range in the message", () => {
    const r = new ConfigReader();
    expect(r.requireInteger(doc(), "ratio", "", 0, 100)).toBe(0);
    expect(r.error()).toBe("ratio: expected an integer in [0, 100]");
  });

  it("requireInteger rejects out-of-range values with the range in the message", () => {
    const a = new ConfigReader();
    a.requireInteger(doc(), "port", "", 1, 1024);
    expect(a.error()).toBe("port: expected an integer in [1, 1024]");
    const b = new ConfigReader();
    b.requireInteger(doc(), "huge", "", i64.MIN_VALUE, i64.MAX_VALUE);
    expect(b.error()).toBe("huge: expected an integer in [-9223372036854775808, 9223372036854775807]");
  });

  it("requireInteger rejects non-numbers and missing fields", () => {
    const a = new ConfigReader();
    a.requireInteger(doc(), "name", "", 0, 9);
    expect(a.error()).toBe("name: expected an integer in [0, 9]");
    const b = new ConfigReader();
    b.requireInteger(doc(), "absent", "", 0, 9);
    expect(b.error()).toBe("absent: missing required field");
  });

  it("optionalInteger falls back when absent and fails when out of range", () => {
    const r = new ConfigReader();
    expect(r.optionalInteger(doc(), "absent", "", 1, 65535, 8080)).toBe(8080);
    expect(r.optionalInteger(doc(), "port", "", 1, 65535, 8080)).toBe(15001);
    expect(r.failed()).toBe(false);
    expect(r.optionalInteger(doc(), "negative", "", 0, 65535, 8080)).toBe(8080);
    expect(r.error()).toBe("negative: expected an integer in [0, 65535]");
  });
});

describe("ConfigReader booleans", () => {
  it("optionalBool reads the value or falls back", () => {
    const r = new ConfigReader();
    expect(r.optionalBool(doc(), "debug", "", false)).toBe(true);
    expect(r.optionalBool(doc(), "absent", "", true)).toBe(true);
    expect(r.optionalBool(doc(), "nothing", "", false)).toBe(false);
    expect(r.failed()).toBe(false);
  });

  it("optionalBool rejects non-booleans", () => {
    const r = new ConfigReader();
    expect(r.optionalBool(doc(), "mode", "", true)).toBe(true);
    expect(r.error()).toBe("mode: expected a boolean");
  });

  it("requireBool reads the value or names the field", () => {
    const r = new ConfigReader();
    expect(r.requireBool(doc(), "debug", "")).toBe(true);
    expect(r.requireBool(doc(), "absent", "")).toBe(false);
    expect(r.error()).toBe("absent: missing required field");
  });
});

describe("ConfigReader enums", () => {
  it("requireEnum accepts an allowed value", () => {
    const r = new ConfigReader();
    expect(r.requireEnum(doc(), "mode", "", ["permissive", "strict"])).toBe("strict");
    expect(r.failed()).toBe(false);
  });

  it("requireEnum lists the allowed values on a mismatch or a wrong type", () => {
    const a = new ConfigReader();
    expect(a.requireEnum(doc(), "mode", "", ["off", "on"])).toBe("");
    expect(a.error()).toBe("mode: expected one of: off, on");
    const b = new ConfigReader();
    b.requireEnum(doc(), "port", "", ["off", "on"]);
    expect(b.error()).toBe("port: expected one of: off, on");
  });

  it("optionalEnum falls back when absent and on a mismatch", () => {
    const r = new ConfigReader();
    expect(r.optionalEnum(doc(), "absent", "", ["off", "on"], "off")).toBe("off");
    expect(r.optionalEnum(doc(), "mode", "", ["strict"], "off")).toBe("strict");
    expect(r.failed()).toBe(false);
    expect(r.optionalEnum(doc(), "mode", "", ["off", "on"], "off")).toBe("off");
    expect(r.error()).toBe("mode: expected one of: off, on");
  });
});

describe("ConfigReader.onlyKnownFields", () => {
  it("accepts an object whose keys are all known", () => {
    const r = new ConfigReader();
    expect(r.onlyKnownFields(obj('{"x":1,"y":2}'), "routes", ["x", "y", "z"])).toBe(true);
    expect(r.failed()).toBe(false);
  });

  it("names the first unknown key and lists the known ones", () => {
    const a = new ConfigReader();
    expect(a.onlyKnownFields(obj('{"a":1,"extra":2,"more":3}'), "", ["a", "b", "c"])).toBe(false);
    expect(a.error()).toBe("extra: unknown field (known: a, b, c)");
    const b = new ConfigReader();
    b.onlyKnownFields(obj('{"x":1,"y":2}'), "routes", ["x"]);
    expect(b.error()).toBe("routes.y: unknown field (known: x)");
    const c = new ConfigReader();
    c.onlyKnownFields(obj('{"bad key\\n":1}'), "", ["a"]);
    expect(c.error()).toBe('["bad key\\n"]: unknown field (known: a)');
  });

  it("rejects a non-object", () => {
    const r = new ConfigReader();
    expect(r.onlyKnownFields(obj("[1]"), "list", ["a"])).toBe(false);
    expect(r.error()).toBe("list: expected an object");
  });
});

describe("ConfigReader element checks", () => {
  it("expect* check values taken from arrays", () => {
    const r = new ConfigReader();
    const list = obj('["a", 7, true, {}, [], "on"]').items();
    expect(r.expectString(list[0], "l[0]")).toBe("a");
    expect(r.expectInteger(list[1], "l[1]", 0, 10)).toBe(7);
    expect(r.expectBool(list[2], "l[2]")).toBe(true);
    expect(r.expectObject(list[3], "l[3]")).not.toBeNull();
    expect(r.expectArray(list[4], "l[4]")).not.toBeNull();
    expect(r.expectEnum(list[5], "l[5]", ["off", "on"])).toBe("on");
    expect(r.failed()).toBe(false);
  });

  it("a null element fails the type check and a null reference is missing", () => {
    const a = new ConfigReader();
    a.expectObject(obj("[null]").items()[0], "workloads[1]");
    expect(a.error()).toBe("workloads[1]: expected an object");
    const b = new ConfigReader();
    b.expectString(null, "x");
    expect(b.error()).toBe("x: missing required field");
  });
});

describe("ConfigReader after a failure", () => {
  it("turns every later call into a no-op returning neutral values or fallbacks", () => {
    const r = new ConfigReader();
    r.fail("first", "broken");
    const d = doc();
    expect(r.requireObject(d, "routes", "")).toBeNull();
    expect(r.optionalObject(d, "routes", "")).toBeNull();
    expect(r.requireArray(d, "list", "")).toBeNull();
    expect(r.optionalArray(d, "list", "")).toBeNull();
    expect(r.requireString(d, "name", "")).toBe("");
    expect(r.optionalString(d, "name", "", "fb")).toBe("fb");
    expect(r.requireInteger(d, "port", "", 1, 65535)).toBe(0);
    expect(r.optionalInteger(d, "port", "", 1, 65535, 7)).toBe(7);
    expect(r.optionalBool(d, "debug", "", false)).toBe(false);
    expect(r.requireEnum(d, "mode", "", ["strict"])).toBe("");
    expect(r.optionalEnum(d, "mode", "", ["strict"], "fb")).toBe("fb");
    expect(r.onlyKnownFields(d, "", ["name"])).toBe(false);
    expect(r.error()).toBe("first: broken");
  });

  it("lets a caller read a whole config and check failed() once", () => {
    const r = new ConfigReader();
    const root = doc();
    const workloads = r.requireArray(root, "workloads", "");
    const wPath = r.childPath("", "workloads");
    const items = workloads === null ? new Array<JsonValue>() : workloads.items();
    for (let i = 0; i < items.length; i++) {
      const p = r.indexPath(wPath, i);
      const w = r.expectObject(items[i], p);
      r.requireString(w, "name", p);
      const addresses = r.requireArray(w, "addresses", p);
      const aPath = r.childPath(p, "addresses");
      const list = addresses === null ? new Array<JsonValue>() : addresses.items();
      for (let j = 0; j < list.length; j++) {
        const text = r.expectString(list[j], r.indexPath(aPath, j));
        if (!r.failed() && !text.startsWith("10.")) r.fail(r.indexPath(aPath, j), "not an IP address");
      }
    }
    expect(r.failed()).toBe(true);
    expect(r.error()).toBe("workloads[0].addresses[1]: not an IP address");
  });
});

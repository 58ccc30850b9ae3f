// JsonValue → JSON text: the inverse of parseJson for the trees it builds.
//
// Used to hand a subtree of an already parsed document to a streaming consumer (the mesh
// parser reads only JsonStream), so a tree-based API and the streaming one share one
// implementation. Re-parsing the output gives back an equal tree: strings keep their text,
// exact integers are written as integers and other numbers in a form that rounds back to the
// same double. Not for large documents: it builds the whole text.

import { JsonKind, JsonValue } from "./value";

const HEX = "0123456789abcdef";

function writeString(text: string, out: Array<string>): void {
  out.push('"');
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = <i32>text.charCodeAt(i);
    let esc: string | null = null;
    if (c == 0x22) esc = '\\"';
    else if (c == 0x5c) esc = "\\\\";
    else if (c < 0x20) {
      esc = "\\u00" + HEX.charAt(c >> 4) + HEX.charAt(c & 15);
    } else if (c >= 0xd800 && c <= 0xdfff) {
      // A lone surrogate has no UTF-8 form; written as an escape, a re-parse refuses it.
      const pair =
        c <= 0xdbff && i + 1 < text.length && text.charCodeAt(i + 1) >= 0xdc00 && text.charCodeAt(i + 1) <= 0xdfff;
      if (pair) {
        i++;
        continue;
      }
      esc = "\\u" + HEX.charAt(c >> 12) + HEX.charAt((c >> 8) & 15) + HEX.charAt((c >> 4) & 15) + HEX.charAt(c & 15);
    }
    if (esc === null) continue;
    out.push(text.substring(from, i));
    out.push(esc);
    from = i + 1;
  }
  out.push(text.substring(from));
  out.push('"');
}

function writeNumber(value: JsonValue, out: Array<string>): void {
  if (value.isInteger()) {
    out.push(value.asInteger().toString());
    return;
  }
  const n = value.asNumber();
  // JSON has no NaN or Infinity (parseJson never produces them).
  out.push(isFinite(n) ? n.toString() : "null");
}

function writeValue(value: JsonValue, out: Array<string>): void {
  const kind = value.kind;
  if (kind == JsonKind.Null) out.push("null");
  else if (kind == JsonKind.Bool) out.push(value.asBool() ? "true" : "false");
  else if (kind == JsonKind.Number) writeNumber(value, out);
  else if (kind == JsonKind.String) writeString(value.asString(), out);
  else if (kind == JsonKind.Array) {
    const items = value.items();
    out.push("[");
    for (let i = 0; i < items.length; i++) {
      if (i > 0) out.push(",");
      writeValue(unchecked(items[i]), out);
    }
    out.push("]");
  } else {
    const keys = value.keys();
    out.push("{");
    for (let i = 0; i < keys.length; i++) {
      const key = unchecked(keys[i]);
      const field = value.get(key);
      if (i > 0) out.push(",");
      writeString(key, out);
      out.push(":");
      if (field === null) out.push("null");
      else writeValue(field, out);
    }
    out.push("}");
  }
}

/** The JSON text of `value`. */
export function writeJson(value: JsonValue): string {
  const out = new Array<string>();
  writeValue(value, out);
  return out.join("");
}

// Envoy's x-forwarded-client-cert header (XFCC), as an Istio inbound sidecar sets it: elements
// separated by `,`, each a list of `key=value` pairs separated by `;`, a value in double quotes
// when it holds `,` `;` or `=` (a `\` escapes the next character inside quotes). Istio gives a
// sidecar's inbound HTTP chains APPEND_FORWARD with Subject, URI and DNS: the header the caller
// sent (anything it likes) is kept and the element for the certificate the sidecar verified is
// appended last. So only the last element is the sidecar's word, and only if the header parses
// whole: a caller that leaves a quote open would otherwise swallow the sidecar's element into a
// value of its own and make a parser that splits naively and one that honours quotes disagree.
// One pass over the text: linear in its size (Node caps a request's headers at 16 KiB).

export type XfccElement = [key: string, value: string][];

export type XfccParse = { ok: true; elements: XfccElement[] } | { ok: false; detail: string };

/** Parses the whole header; refuses an unclosed quote, a pair without `=`, an empty key. */
export function parseXfcc(header: string): XfccParse {
  const elements: XfccElement[] = [];
  let pairs: XfccElement = [];
  let key = "";
  let value = "";
  let inKey = true;
  let quoted = false;
  let sawEquals = false;
  const endPair = (): string => {
    const k = key.trim();
    if (!sawEquals) return k === "" && value === "" ? "" : `a pair without "=" (${JSON.stringify(k.slice(0, 40))})`;
    if (k === "") return "a pair without a key";
    pairs.push([k, value.trim()]);
    key = "";
    value = "";
    inKey = true;
    sawEquals = false;
    return "";
  };
  for (let i = 0; i < header.length; i++) {
    const c = header[i];
    if (quoted) {
      if (c === "\\" && i + 1 < header.length) value += header[++i];
      else if (c === '"') quoted = false;
      else value += c;
      continue;
    }
    if (c === '"' && !inKey) {
      quoted = true;
    } else if (c === "=" && inKey) {
      inKey = false;
      sawEquals = true;
    } else if (c === ";" || c === ",") {
      const problem = endPair();
      if (problem) return { ok: false, detail: problem };
      if (c === ",") {
        elements.push(pairs);
        pairs = [];
      }
    } else if (inKey) {
      key += c;
    } else {
      value += c;
    }
  }
  if (quoted) return { ok: false, detail: "a quoted value is never closed" };
  const problem = endPair();
  if (problem) return { ok: false, detail: problem };
  elements.push(pairs);
  return { ok: true, elements };
}

/** The values of one key in an element (XFCC keys are case-insensitive). */
export function valuesOf(element: XfccElement, key: string): string[] {
  const k = key.toLowerCase();
  return element.filter(([name]) => name.toLowerCase() === k).map(([, v]) => v);
}

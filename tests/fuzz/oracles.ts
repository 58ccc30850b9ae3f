// The fuzz oracles, each a function returning a problem description or undefined:
// - a refused configuration logs exactly one line `invalid plugin configuration: <where>: ...`
//   where <where> is `byte N` (N within the document) or a path that exists in the document
//   (all of it but the last step, which may be a missing required field);
// - an accepted configuration is strict JSON (valid UTF-8, parses);
// - a connection bumps exactly one outcome counter, its fate (closed or continued) is the one
//   the README documents for that outcome, and it logs at most the one line a closing outcome
//   writes (nothing on a continuing one at info level).
import type { Target } from "./targets.js";

const PREFIX = "invalid plugin configuration: ";

type Step = { key: string; prefix?: boolean } | { index: number };

/**
 * Splits ConfigReader's path (`workloads[3].addresses[0]`, `routes["10.0.0.1"]`, `(root)`) off
 * the front of `text`. Returns the steps and the rest of the text, or undefined when `text`
 * does not start with a path followed by ": ".
 */
export function parsePath(text: string): { steps: Step[]; rest: string } | undefined {
  if (text.startsWith("(root): ")) return { steps: [], rest: text.slice(8) };
  const steps: Step[] = [];
  let i = 0;
  const plain = /^[A-Za-z0-9_-]+/;
  while (i < text.length) {
    if (text.startsWith(": ", i) && steps.length > 0) return { steps, rest: text.slice(i + 2) };
    if (text[i] === "[") {
      if (text[i + 1] === '"') {
        // a quoted key: JSON-style escapes, cut to 64 code units + "..." when longer
        let j = i + 2;
        let raw = "";
        while (j < text.length && text[j] !== '"') {
          if (text[j] === "\\") {
            raw += text.slice(j, j + 2);
            if (text[j + 1] === "u") {
              raw += text.slice(j + 2, j + 6);
              j += 6;
              continue;
            }
            j += 2;
            continue;
          }
          raw += text[j];
          j++;
        }
        let key: string;
        try {
          key = JSON.parse(`"${raw}"`) as string;
        } catch {
          return undefined;
        }
        j++; // closing quote
        const cut = text.startsWith("...", j);
        if (cut) j += 3;
        if (text[j] !== "]") return undefined;
        steps.push({ key, prefix: cut });
        i = j + 1;
        continue;
      }
      const m = /^\[(\d+)\]/.exec(text.slice(i));
      if (!m) return undefined;
      steps.push({ index: Number(m[1]) });
      i += m[0].length;
      continue;
    }
    if (steps.length > 0) {
      if (text[i] !== ".") return undefined;
      i++;
    }
    const m = plain.exec(text.slice(i));
    if (!m) return undefined;
    steps.push({ key: m[0] });
    i += m[0].length;
  }
  return undefined;
}

/** Does `steps` name a node of `doc` (the last step may be a missing field of an existing object)? */
function pathExists(doc: unknown, steps: Step[]): boolean {
  let node: unknown = doc;
  for (let s = 0; s < steps.length; s++) {
    const step = steps[s]!;
    const last = s === steps.length - 1;
    if ("index" in step) {
      if (!Array.isArray(node) || step.index >= node.length) return false;
      node = node[step.index];
      continue;
    }
    if (node === null || typeof node !== "object" || Array.isArray(node)) return false;
    const obj = node as Record<string, unknown>;
    const key = step.prefix ? Object.keys(obj).find((k) => k.startsWith(step.key)) : Object.hasOwn(obj, step.key) ? step.key : undefined;
    if (key === undefined) return last; // a missing (required) field, named by its parent's path
    node = obj[key];
  }
  return true;
}

/** The document as strict JSON, or undefined (invalid UTF-8 or JSON syntax). */
export function strictJson(bytes: Uint8Array): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes)) };
  } catch {
    return undefined;
  }
}

/** Oracle for a refused configuration: one line, naming a byte in range or a path in the document. */
export function checkRefusal(lines: readonly string[], bytes: Uint8Array): string | undefined {
  if (lines.length !== 1) return `refused configuration logged ${lines.length} lines (expected exactly one): ${JSON.stringify(lines.slice(0, 3))}`;
  const line = lines[0]!;
  if (!line.startsWith(PREFIX)) return `refusal line does not start with "${PREFIX}": ${JSON.stringify(line.slice(0, 200))}`;
  const what = line.slice(PREFIX.length);
  const byte = /^byte (\d+): ./.exec(what);
  if (byte) {
    const n = Number(byte[1]);
    return n <= bytes.length ? undefined : `refusal names byte ${n} of a ${bytes.length}-byte document`;
  }
  const parsed = parsePath(what);
  if (!parsed || parsed.rest.length === 0) return `refusal line names no field: ${JSON.stringify(line.slice(0, 200))}`;
  const json = strictJson(bytes);
  if (!json) return `refusal names a field (${JSON.stringify(what.slice(0, 120))}) of a document that is not valid JSON`;
  if (!pathExists(json.value, parsed.steps)) return `refusal names a path that is not in the document: ${JSON.stringify(line.slice(0, 200))}`;
  return undefined;
}

/** Oracle for an accepted configuration: only strict JSON may be accepted. */
export function checkAccepted(bytes: Uint8Array): string | undefined {
  const json = strictJson(bytes);
  if (!json) return "accepted a configuration that is not valid UTF-8 JSON";
  if (json.value === null || typeof json.value !== "object" || Array.isArray(json.value)) return "accepted a configuration whose root is not an object";
  return undefined;
}

export interface ConnectionObservation {
  /** Counter deltas of this connection (suffix after `<filter>.` → delta). */
  readonly deltas: ReadonlyMap<string, number>;
  readonly status: string;
  readonly closed: boolean;
  readonly closeReason: string | undefined;
  /** Main-VM log lines of this connection at the level the case ran with. */
  readonly lines: readonly string[];
  readonly debug: boolean;
}

/** Generic connection oracle: one outcome, its documented fate, its log lines. Returns [problem, outcome]. */
export function checkConnection(target: Target, seen: ConnectionObservation): [string | undefined, string | undefined] {
  const bumped = [...seen.deltas].filter(([, d]) => d !== 0);
  const outcomes = bumped.filter(([name]) => target.outcomes.includes(name));
  const strange = bumped.filter(([name, d]) => (!target.outcomes.includes(name) && !target.extras.includes(name)) || d !== 1);
  if (strange.length) return [`unexpected counter changes ${JSON.stringify(strange)}`, undefined];
  if (outcomes.length !== 1) return [`${outcomes.length} outcome counters bumped (${JSON.stringify(bumped)}), expected exactly one`, undefined];
  const outcome = outcomes[0]![0];
  const closes = bumped.some(([name]) => target.closing.includes(name));
  if (closes) {
    if (!seen.closed || seen.closeReason !== "filter" || seen.status !== "StopIteration") {
      return [`outcome ${outcome} must close the connection (closed=${seen.closed}, reason=${seen.closeReason}, status=${seen.status})`, outcome];
    }
    if (!seen.debug && seen.lines.length !== 1) return [`closing outcome ${outcome} logged ${seen.lines.length} lines, expected one`, outcome];
  } else {
    if (seen.closed || seen.status !== "Continue") return [`outcome ${outcome} must continue (closed=${seen.closed}, status=${seen.status})`, outcome];
    if (!seen.debug && seen.lines.length !== 0) return [`continuing outcome ${outcome} logged at info level: ${JSON.stringify(seen.lines.slice(0, 2))}`, outcome];
  }
  return [undefined, outcome];
}

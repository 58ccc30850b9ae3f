// A request's query string, read as URLSearchParams reads it, for the channel's polls: a poll's
// query is a handful of plain `name=value` pairs (epoch, version, wait, format, digest), and
// URLSearchParams builds a list of decoded pairs for every one of them (7% of what the feed
// allocated under the fan-out bench's churn). A query with nothing to decode is read in place;
// any other (a `%` escape, a `+`, a leading `?`) goes to URLSearchParams itself, so both read
// every query the same (tests/feed/query.test.ts compares them).

/** What the handlers read of a query: URLSearchParams satisfies it. */
export interface QueryParams {
  /** The first value of `name` ("" for a bare name), null when absent. */
  get(name: string): string | null;
}

/** A query without escapes: each get() scans the string for its name; nothing is built but the value. */
class PlainQuery implements QueryParams {
  constructor(private readonly text: string) {}

  get(name: string): string | null {
    const t = this.text;
    // A pair's name ends at its first "=": a name holding one is never a pair's (read as URLSearchParams would).
    if (name.includes("=")) return new URLSearchParams(t).get(name);
    // Each pair is looked at from its start only (never searched past its "&"): linear in the query.
    let at = 0;
    while (at < t.length) {
      let end = t.indexOf("&", at);
      if (end < 0) end = t.length;
      if (end > at && t.startsWith(name, at)) {
        const after = at + name.length;
        if (after === end) return "";
        if (after < end && t.charCodeAt(after) === 0x3d) return t.slice(after + 1, end);
      }
      at = end + 1;
    }
    return null;
  }
}

/** Something URLSearchParams would decode or strip: then it reads the query itself. */
const NEEDS_DECODING = /[%+]|^\?/;

/** The query after a request target's `?` ("" when it has none). */
export function parseQuery(text: string): QueryParams {
  return NEEDS_DECODING.test(text) ? new URLSearchParams(text) : new PlainQuery(text);
}

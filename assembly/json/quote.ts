// Making document text safe to put in an error message.
//
// Error messages end up as single Envoy log lines. Keys and values come from the config, so
// they may hold newlines or be huge; echoing them raw would split or flood the log.

/** Longest piece of document text echoed in a message, in UTF-16 code units. */
export const MAX_QUOTED = 64;

const HEX = "0123456789abcdef";

function hex4(c: i32): string {
  return (
    "\\u" +
    HEX.charAt((c >> 12) & 15) +
    HEX.charAt((c >> 8) & 15) +
    HEX.charAt((c >> 4) & 15) +
    HEX.charAt(c & 15)
  );
}

/** The escape for a code unit that would break a log line, or null when it is fine as is. */
function controlEscape(c: i32): string | null {
  if (c == 0x0a) return "\\n";
  if (c == 0x0d) return "\\r";
  if (c == 0x09) return "\\t";
  if (c < 0x20 || c == 0x7f || c == 0x2028 || c == 0x2029) return hex4(c);
  return null;
}

/** `text` with control characters and line separators escaped, so it stays on one line. */
export function oneLine(text: string): string {
  let parts: Array<string> | null = null;
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const esc = controlEscape(text.charCodeAt(i));
    if (esc === null) continue;
    // Collect pieces and join once: repeated `+=` would be quadratic on long paths.
    if (parts === null) parts = new Array<string>();
    parts.push(text.substring(from, i));
    parts.push(esc);
    from = i + 1;
  }
  if (parts === null) return text;
  parts.push(text.substring(from));
  return parts.join("");
}

/**
 * `text` as a JSON-style double-quoted literal for messages: quotes, backslashes and control
 * characters escaped, and cut to 64 code units followed by "..." when longer.
 */
export function quoteForMessage(text: string): string {
  let end = text.length;
  let cut = false;
  if (end > MAX_QUOTED) {
    end = MAX_QUOTED;
    // Do not split a surrogate pair: half of one is not valid text.
    const last = text.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
    cut = true;
  }
  const parts = new Array<string>();
  parts.push('"');
  let from = 0;
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    let esc = controlEscape(c);
    if (esc === null && (c == 0x22 || c == 0x5c)) esc = c == 0x22 ? '\\"' : "\\\\";
    if (esc === null) continue;
    parts.push(text.substring(from, i));
    parts.push(esc);
    from = i + 1;
  }
  parts.push(text.substring(from, end));
  parts.push(cut ? '"...' : '"');
  return parts.join("");
}

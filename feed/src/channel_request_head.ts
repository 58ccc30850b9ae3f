// The head of a request on the channel (channel_http.ts): its request line and header lines,
// read from the bytes as they came, or the refusal naming the field. What it takes is the narrow
// HTTP/1.1 that Envoy and the filters speak; anything two parsers could read two ways is refused
// (the list is in channel_http.ts). It runs for every poll, thousands a second after a version,
// so it builds no string but the method, the target and the values of the headers it reads:
// reading the head as text, split into lines, each trimmed and lowercased, was 12% of what the
// feed allocated under the fan-out bench's churn (bench/feed/FANOUT.md).
export const MAX_HEADER_BYTES = 16 << 10;
/** Envoy's own default (max_headers_count). */
export const MAX_HEADER_LINES = 100;

export interface ChannelHeaders {
  "if-none-match"?: string;
  /** Several lines are joined with "," (Envoy appends its element to what it received). */
  "x-forwarded-client-cert"?: string;
}

export interface Head {
  method: string;
  url: string;
  contentLength: number;
  close: boolean;
  headers: ChannelHeaders;
}

export interface HeadError {
  status: number;
  text: string;
}

/** TCHAR[b]: byte b may be in a token (a method, a header name: RFC 9110's tchar). */
const TCHAR = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") TCHAR[c.charCodeAt(0)] = 1;
const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HT = 0x09;
const COLON = 0x3a;
/** The header names read, lowercase: a name is matched by its bytes, in any case, with no string built. */
const HOST = Buffer.from("host");
const CONTENT_LENGTH = Buffer.from("content-length");
const TRANSFER_ENCODING = Buffer.from("transfer-encoding");
const CONNECTION = Buffer.from("connection");
const XFCC = Buffer.from("x-forwarded-client-cert");
const IF_NONE_MATCH = Buffer.from("if-none-match");
/** The methods the channel serves, one string each (any other is read from the bytes). */
const METHODS = ["GET", "HEAD", "POST"].map((m) => ({ name: m, bytes: Buffer.from(m) }));
const HTTP_1 = Buffer.from("HTTP/1.1");
const BARE_LF: HeadError = Object.freeze({ status: 400, text: "request head: a line ends in LF without CR" });

/** Whether data[from, from + name.length) is `name` (lowercase) in any case. */
function nameIs(data: Buffer, from: number, length: number, name: Buffer): boolean {
  if (length !== name.length) return false;
  for (let i = 0; i < length; i++) {
    const b = data[from + i];
    if ((b >= 0x41 && b <= 0x5a ? b + 0x20 : b) !== name[i]) return false;
  }
  return true;
}

/** Whether data[from, to) holds a control character other than the tab (CR and LF included): never inside a field value. */
function hasControl(data: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const b = data[i];
    if ((b < SP && b !== HT) || b === 0x7f) return true;
  }
  return false;
}

const CLOSE = Buffer.from("close");

/** `connection`'s value, data[from, to), holds the token "close" (any case, among commas): one pass over it. */
function saysClose(data: Buffer, from: number, to: number): boolean {
  let at = from;
  while (at <= to) {
    let end = at;
    while (end < to && data[end] !== 0x2c) end++;
    let s = at;
    let e = end;
    while (s < e && (data[s] === SP || data[s] === HT)) s++;
    while (e > s && (data[e - 1] === SP || data[e - 1] === HT)) e--;
    if (nameIs(data, s, e - s, CLOSE)) return true;
    at = end + 1;
  }
  return false;
}

const MALFORMED_REQUEST_LINE: HeadError = Object.freeze({ status: 400, text: "request line: expected METHOD SP request-target SP HTTP/1.1, ending in CRLF" });

/** The request line `METHOD SP target SP HTTP/1.1` in data[0, end), or the refusal. */
function requestLine(data: Buffer, end: number): { method: string; url: string } | HeadError {
  let i = 0;
  while (i < end && TCHAR[data[i]] === 1) i++;
  if (i === 0 || i >= end || data[i] !== SP) return MALFORMED_REQUEST_LINE;
  const methodEnd = i++;
  const urlStart = i;
  while (i < end && data[i] >= 0x21 && data[i] <= 0x7e) i++;
  if (i === urlStart || i >= end || data[i] !== SP) return MALFORMED_REQUEST_LINE;
  const urlEnd = i++;
  // HTTP/<digit>.<digit>, exactly.
  if (end - i !== 8 || data.compare(HTTP_1, 0, 5, i, i + 5) !== 0 || data[i + 6] !== 0x2e) return MALFORMED_REQUEST_LINE;
  const major = data[i + 5];
  const minor = data[i + 7];
  if (major < 0x30 || major > 0x39 || minor < 0x30 || minor > 0x39) return MALFORMED_REQUEST_LINE;
  if (major !== 0x31 || minor !== 0x31) return { status: 505, text: `request line: HTTP/${major - 0x30}.${minor - 0x30}, the channel speaks HTTP/1.1` };
  let method: string | undefined;
  for (const m of METHODS) if (m.bytes.length === methodEnd && data.compare(m.bytes, 0, methodEnd, 0, methodEnd) === 0) method = m.name;
  return { method: method ?? data.toString("latin1", 0, methodEnd), url: data.toString("latin1", urlStart, urlEnd) };
}

/**
 * The request line and header lines in data[0, end) (the head without its final CRLF CRLF), or
 * the refusal. Read from the bytes, as they came: nothing is built but the method, the target
 * and the values of the headers read (this runs for every poll). Exported for its unit tests;
 * channel_http.ts's connection is its only caller.
 */
export function parseHead(data: Buffer, end: number, maxBodyBytes: number): Head | HeadError {
  // Every line end is CRLF (a bare LF is refused first), and there are not too many of them.
  let lines = 0;
  for (let i = data.indexOf(LF, 0); i >= 0 && i < end; i = data.indexOf(LF, i + 1)) {
    if (i === 0 || data[i - 1] !== CR) return BARE_LF;
    lines++;
  }
  if (lines > MAX_HEADER_LINES) return { status: 431, text: `request head: more than ${MAX_HEADER_LINES} header lines` };
  let lineEnd = lineEndOf(data, 0, end);
  const line = requestLine(data, lineEnd);
  if ("status" in line) return line;
  const headers: ChannelHeaders = {};
  let hosts = 0;
  let contentLength = -1;
  let close = false;
  for (let at = lineEnd + 2; at <= end && lineEnd < end; at = lineEnd + 2) {
    lineEnd = lineEndOf(data, at, end);
    const first = data[at];
    if (at < lineEnd && (first === SP || first === HT)) return { status: 400, text: "request head: a folded header line (a line may not start with a space or tab)" };
    let colon = at;
    while (colon < lineEnd && TCHAR[data[colon]] === 1) colon++;
    if (colon === at || colon >= lineEnd || data[colon] !== COLON) {
      const named = data.indexOf(COLON, at);
      const name = data.toString("latin1", at, named >= 0 && named < lineEnd ? named : lineEnd);
      return { status: 400, text: `request head: ${JSON.stringify(name.slice(0, 40))} is no header name followed by a colon` };
    }
    const nameLength = colon - at;
    let from = colon + 1;
    let to = lineEnd;
    while (from < to && (data[from] === SP || data[from] === HT)) from++;
    while (to > from && (data[to - 1] === SP || data[to - 1] === HT)) to--;
    if (hasControl(data, from, to)) return { status: 400, text: `${data.toString("latin1", at, colon).toLowerCase()}: a control character in the value (a line ends in CRLF only)` };
    if (nameIs(data, at, nameLength, HOST)) hosts++;
    else if (nameIs(data, at, nameLength, CONTENT_LENGTH)) {
      if (contentLength >= 0) return { status: 400, text: "content-length: more than one" };
      if (to === from || to - from > 15) return { status: 400, text: "content-length: expected digits" };
      let n = 0;
      for (let i = from; i < to; i++) {
        const d = data[i] - 0x30;
        if (d < 0 || d > 9) return { status: 400, text: "content-length: expected digits" };
        n = n * 10 + d;
      }
      contentLength = n;
    } else if (nameIs(data, at, nameLength, TRANSFER_ENCODING)) {
      return { status: 501, text: "transfer-encoding: not taken by the channel (send the body with content-length)" };
    } else if (nameIs(data, at, nameLength, CONNECTION)) {
      if (saysClose(data, from, to)) close = true;
    } else if (nameIs(data, at, nameLength, XFCC)) {
      const value = data.toString("latin1", from, to);
      const had = headers["x-forwarded-client-cert"];
      headers["x-forwarded-client-cert"] = had === undefined ? value : `${had},${value}`;
    } else if (nameIs(data, at, nameLength, IF_NONE_MATCH)) {
      const value = data.toString("latin1", from, to);
      const had = headers["if-none-match"];
      headers["if-none-match"] = had === undefined ? value : `${had}, ${value}`;
    }
  }
  if (hosts !== 1) return { status: 400, text: hosts === 0 ? "host: missing" : "host: more than one" };
  const length = contentLength < 0 ? 0 : contentLength;
  if (length > maxBodyBytes) return { status: 413, text: `content-length: ${length} bytes, the channel takes at most ${maxBodyBytes}` };
  return { method: line.method, url: line.url, contentLength: length, close, headers };
}

/**
 * Where the line starting at `from` ends: the CR of its CRLF (parseHead has refused bare LFs),
 * or `end` for the head's last line. A CR not followed by LF stays inside the line, where it is
 * refused as a control character.
 */
function lineEndOf(data: Buffer, from: number, end: number): number {
  const lf = data.indexOf(LF, from);
  return lf < 0 || lf >= end ? end : lf - 1;
}

/** Whether `data` from `from` on holds an LF not preceded by CR (a bare LF line end). */
export function bareLf(data: Buffer, from: number): boolean {
  for (let i = data.indexOf(LF, from); i >= 0; i = data.indexOf(LF, i + 1)) if (i === 0 || data[i - 1] !== CR) return true;
  return false;
}

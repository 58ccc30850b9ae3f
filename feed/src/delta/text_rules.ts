// The model's text rules, as the filters apply them (assembly/mesh/validate.ts, mirrored here
// for the feed's check of every delta before it is published, check.ts).

function isLower(c: number): boolean {
  return c >= 0x61 && c <= 0x7a;
}
function isUpper(c: number): boolean {
  return c >= 0x41 && c <= 0x5a;
}
function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function segmentEnd(text: string, from: number, trustDomain: boolean): number {
  let i = from;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x2f) break;
    const ok = trustDomain ? isLower(c) || isDigit(c) || c === 0x2e || c === 0x2d || c === 0x5f : isLower(c) || isUpper(c) || isDigit(c) || c === 0x2e || c === 0x2d || c === 0x5f;
    if (!ok) return -1;
    i++;
  }
  const n = i - from;
  if (n === 0) return -1;
  if (!trustDomain && text.charCodeAt(from) === 0x2e && (n === 1 || (n === 2 && text.charCodeAt(from + 1) === 0x2e))) return -1;
  return i;
}

export const SPIFFE_SHAPE = "spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>";

export function isSpiffeIdentity(text: string): boolean {
  if (text.length > 2048 || !text.startsWith("spiffe://")) return false;
  let i = segmentEnd(text, 9, true);
  if (i < 0 || !text.startsWith("/ns/", i)) return false;
  i = segmentEnd(text, i + 4, false);
  if (i < 0 || !text.startsWith("/sa/", i)) return false;
  i = segmentEnd(text, i + 4, false);
  return i === text.length;
}

export function isHostname(text: string): boolean {
  if (text.length === 0 || text.length > 253) return false;
  let label = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2e) {
      if (label === 0) return false;
      label = 0;
      continue;
    }
    const wildcard = c === 0x2a && i === 0 && (text.length === 1 || text.charCodeAt(1) === 0x2e);
    if (!(wildcard || isLower(c) || isUpper(c) || isDigit(c) || c === 0x2d || c === 0x5f)) return false;
    label++;
  }
  return label > 0;
}

export function isLocality(text: string): boolean {
  let parts = 1;
  let len = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2f) {
      if (len === 0 || ++parts > 3) return false;
      len = 0;
      continue;
    }
    if (c < 0x20) return false;
    len++;
  }
  return text.length === 0 || len > 0;
}

/** The longest network name the filters accept (assembly/mesh/local_network.ts). */
export const MAX_NETWORK_BYTES = 253;

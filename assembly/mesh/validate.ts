// Shape checks for configuration texts. Configure time only (these may allocate).

function isLower(c: i32): bool {
  return c >= 0x61 && c <= 0x7a;
}

function isUpper(c: i32): bool {
  return c >= 0x41 && c <= 0x5a;
}

function isDigit(c: i32): bool {
  return c >= 0x30 && c <= 0x39;
}

/** SPIFFE trust-domain characters: lowercase letters, digits, '.', '-', '_'. */
function isTrustDomainChar(c: i32): bool {
  return isLower(c) || isDigit(c) || c == 0x2e || c == 0x2d || c == 0x5f;
}

/** SPIFFE path-segment characters: letters, digits, '.', '-', '_'. */
function isSegmentChar(c: i32): bool {
  return isLower(c) || isUpper(c) || isDigit(c) || c == 0x2e || c == 0x2d || c == 0x5f;
}

/** End of the path segment starting at `from` (the next '/' or the end), or -1 if it is bad. */
function segmentEnd(text: string, from: i32, trustDomain: bool): i32 {
  let i = from;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c == 0x2f) break;
    if (trustDomain ? !isTrustDomainChar(c) : !isSegmentChar(c)) return -1;
    i++;
  }
  const n = i - from;
  if (n == 0) return -1;
  // "." and ".." are not segments (they would normalise away).
  if (!trustDomain && text.charCodeAt(from) == 0x2e && (n == 1 || (n == 2 && text.charCodeAt(from + 1) == 0x2e))) {
    return -1;
  }
  return i;
}

/** True when `text` continues at `at` with exactly `word`. */
function hasAt(text: string, at: i32, word: string): bool {
  if (at + word.length > text.length) return false;
  for (let k = 0; k < word.length; k++) {
    if (text.charCodeAt(at + k) != word.charCodeAt(k)) return false;
  }
  return true;
}

export const SPIFFE_SHAPE = "spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>";

/**
 * Istio's SPIFFE identity: spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>.
 * Scans in place (no split/substring): it runs once per pod at configure time.
 */
export function isSpiffeIdentity(text: string): bool {
  if (text.length > 2048 || !hasAt(text, 0, "spiffe://")) return false;
  let i = segmentEnd(text, 9, true);
  if (i < 0 || !hasAt(text, i, "/ns/")) return false;
  i = segmentEnd(text, i + 4, false);
  if (i < 0 || !hasAt(text, i, "/sa/")) return false;
  i = segmentEnd(text, i + 4, false);
  return i == text.length;
}

/**
 * A DNS-style hostname: 1..253 characters, non-empty dot-separated labels of letters, digits,
 * '-', '_' (a leading "*" label is allowed for wildcard service entries). Anything else -
 * notably '|', ':' and '/' - would corrupt the derived cluster name or the :authority.
 */
export function isHostname(text: string): bool {
  if (text.length == 0 || text.length > 253) return false;
  let labelLength = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c == 0x2e) {
      if (labelLength == 0) return false;
      labelLength = 0;
      continue;
    }
    const wildcard = c == 0x2a && i == 0 && (text.length == 1 || text.charCodeAt(1) == 0x2e);
    if (!(wildcard || isLower(c) || isUpper(c) || isDigit(c) || c == 0x2d || c == 0x5f)) return false;
    labelLength++;
  }
  return labelLength > 0;
}

export const LOCALITY_SHAPE = "region[/zone[/subzone]]";

/** "", "region", "region/zone" or "region/zone/subzone": parts non-empty, no control characters. */
export function isLocality(text: string): bool {
  let parts = 1;
  let partLength = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c == 0x2f) {
      if (partLength == 0 || ++parts > 3) return false;
      partLength = 0;
      continue;
    }
    if (c < 0x20) return false;
    partLength++;
  }
  return text.length == 0 || partLength > 0;
}

/** A port written as an object key ("80"): 1..65535, decimal, no sign or leading zero; else -1. */
export function parsePortKey(key: string): i32 {
  if (key.length == 0 || key.length > 5) return -1;
  if (key.length > 1 && key.charCodeAt(0) == 0x30) return -1;
  let port = 0;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (!isDigit(c)) return -1;
    port = port * 10 + (c - 0x30);
  }
  return port >= 1 && port <= 65535 ? port : -1;
}

/** Why a subject alt name may not hold a comma (see isSanText). */
export const SAN_COMMA = "must not contain ',' (Envoy splits envoy.network.upstream_subject_alt_names on commas, so one entry would accept two identities)";

/**
 * A subject alt name the filters can hand to Envoy as one entry of a comma-separated filter-state
 * list: no ','. Measured on Envoy 1.40.0: "a,b" in envoy.network.upstream_subject_alt_names is
 * the two SANs a and b, so a comma inside one configured name would widen what is accepted.
 */
export function isSanText(text: string): bool {
  return text.indexOf(",") < 0;
}

// Who may read which target on the channel. Each target lists its readers as Istio's
// AuthorizationPolicy lists `principals`: the caller's SPIFFE id without `spiffe://`
// (`<trust domain>/ns/<namespace>/sa/<service account>`), matched exactly, or with one `*` as a
// prefix or suffix (`cluster.local/ns/payments/sa/*`, `*/sa/sleep`), or `*` alone (any caller
// with a mesh identity). A target without readers is read by nobody: refusing is the default,
// so a target added to the configuration is never readable by accident.

const SPIFFE = "spiffe://";

/** Why a reader pattern is unusable, or "" when it is fine (checked once, by config.ts). */
export function principalPatternProblem(pattern: string): string {
  if (pattern === "") return "expected a principal, not an empty string";
  if (pattern.startsWith(SPIFFE)) return `write the principal without ${SPIFFE} (as in Istio's AuthorizationPolicy): ${JSON.stringify(pattern.slice(SPIFFE.length))}`;
  const stars = pattern.split("*").length - 1;
  if (stars > 1 || (stars === 1 && pattern !== "*" && !pattern.startsWith("*") && !pattern.endsWith("*"))) {
    return "a * may only stand first or last (prefix or suffix match), once";
  }
  if (/[\s\x00-\x1f\x7f]/.test(pattern)) return "contains whitespace or a control character";
  return "";
}

/** Whether the principal (a SPIFFE id without `spiffe://`) matches one pattern. */
function matches(pattern: string, principal: string): boolean {
  if (pattern === "*") return true;
  if (pattern.endsWith("*")) return principal.startsWith(pattern.slice(0, -1));
  if (pattern.startsWith("*")) return principal.endsWith(pattern.slice(1));
  return principal === pattern;
}

/** Whether the caller with this SPIFFE id (`spiffe://...`) may read a target with these readers. */
export function mayRead(readers: readonly string[], spiffeId: string): boolean {
  if (!spiffeId.startsWith(SPIFFE)) return false;
  const principal = spiffeId.slice(SPIFFE.length);
  return readers.some((p) => matches(p, principal));
}

// The optional `meshFeed` object of a filter's plugin configuration: where the VM's root context
// long-polls the mesh feed for changes (feed_client.ts). Read with the filters' ConfigReader,
// so a bad value is one line naming the field (`meshFeed.waitSeconds: expected an integer in
// [1, 300]`) and the configuration is refused as a whole; unknown fields are refused too.
import { ConfigReader, JsonValue } from "../json";

export const MESH_FEED_FIELD = "meshFeed";
const FEED_FIELDS = ["cluster", "authority", "target", "path", "waitSeconds", "startupWaitMs", "maxWaitingConnections", "noModelPolicy"];
export const DEFAULT_WAIT_SECONDS: i64 = 25;
/** How long new connections wait for a first model: a feed on the same cluster answers in milliseconds. */
export const DEFAULT_STARTUP_WAIT_MS: i64 = 5000;
export const MAX_STARTUP_WAIT_MS: i64 = 60000;
/** Held connections per VM and filter; more are decided by the policy at once. */
export const DEFAULT_MAX_WAITING: i64 = 1024;
export const MAX_MAX_WAITING: i64 = 65536;
export const POLICY_CLOSE = "close";
export const POLICY_PASSTHROUGH = "passthrough";
/** An Envoy cluster name or an :authority is short; a longer one is a mistake. */
const MAX_NAME = 253;

export class FeedConfig {
  constructor(
    /** Envoy cluster that points at the feed (UTF-8, handed to proxy_http_call as is). */
    readonly cluster: string,
    /** :authority of every request (default: the cluster name). */
    readonly authority: string,
    /** The feed's name for this proxy's view (the `<target>` of /delta/<target>). */
    readonly target: string,
    /** Request path before the query (default /delta/<target>). */
    readonly path: string,
    /** How long the feed may hold a request with no change (the call's timeout is this + 5 s). */
    readonly waitSeconds: u32,
    /** How long after configuration new connections wait for a first model (0: none wait). */
    readonly startupWaitMs: u32 = <u32>DEFAULT_STARTUP_WAIT_MS,
    /** At most this many connections wait at once (per VM); the next ones follow the policy at once. */
    readonly maxWaitingConnections: u32 = <u32>DEFAULT_MAX_WAITING,
    /** Without a model (or with one that lacks this proxy's network): pass through plain, or close (default). */
    readonly noModelPassthrough: bool = false,
  ) {}
}

/** One URL path segment of unreserved characters (RFC 3986): nothing to escape, nothing to misread. */
function isSegment(text: string): bool {
  if (text.length == 0 || text.length > MAX_NAME) return false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x2e || c == 0x5f || c == 0x7e;
    if (!ok) return false;
  }
  return true;
}

/** Visible ASCII only (no space, control or non-ASCII character): a header value or path as sent. */
function isVisibleAscii(text: string): bool {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

/**
 * Reads `meshFeed` from the configuration root: null when absent (no feed: the snapshot in the
 * configuration is the model) or when it is invalid (then `reader` has the error).
 */
export function readFeedConfig(reader: ConfigReader, root: JsonValue | null): FeedConfig | null {
  const feed = reader.optionalObject(root, MESH_FEED_FIELD, "");
  if (feed === null || reader.failed()) return null;
  const path = MESH_FEED_FIELD;
  if (!reader.onlyKnownFields(feed, path, FEED_FIELDS)) return null;
  const cluster = reader.requireString(feed, "cluster", path);
  const target = reader.requireString(feed, "target", path);
  const authority = reader.optionalString(feed, "authority", path, cluster);
  const requestPath = reader.optionalString(feed, "path", path, "/delta/" + target);
  const wait = reader.optionalInteger(feed, "waitSeconds", path, 1, 300, DEFAULT_WAIT_SECONDS);
  const startupWait = reader.optionalInteger(feed, "startupWaitMs", path, 0, MAX_STARTUP_WAIT_MS, DEFAULT_STARTUP_WAIT_MS);
  const maxWaiting = reader.optionalInteger(feed, "maxWaitingConnections", path, 0, MAX_MAX_WAITING, DEFAULT_MAX_WAITING);
  const policy = reader.optionalEnum(feed, "noModelPolicy", path, [POLICY_CLOSE, POLICY_PASSTHROUGH], POLICY_CLOSE);
  if (reader.failed()) return null;
  if (cluster.length == 0 || cluster.length > MAX_NAME || !isVisibleAscii(cluster)) {
    reader.fail(path + ".cluster", "expected an Envoy cluster name (1-253 visible ASCII characters)");
  } else if (!isSegment(target)) {
    reader.fail(path + ".target", "expected 1-253 of A-Z a-z 0-9 - . _ ~ (one URL path segment)");
  } else if (authority.length == 0 || authority.length > MAX_NAME || !isVisibleAscii(authority)) {
    reader.fail(path + ".authority", "expected a host[:port] (1-253 visible ASCII characters)");
  } else if (!requestPath.startsWith("/") || requestPath.length > 1024 || !isVisibleAscii(requestPath) || requestPath.includes("?") || requestPath.includes("#")) {
    reader.fail(path + ".path", "expected an absolute path without query or fragment (the client adds ?epoch=&version=&wait=)");
  }
  if (reader.failed()) return null;
  return new FeedConfig(cluster, authority, target, requestPath, <u32>wait, <u32>startupWait, <u32>maxWaiting, policy == POLICY_PASSTHROUGH);
}

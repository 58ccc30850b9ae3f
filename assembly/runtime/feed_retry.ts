// The feed client's timing: the one place these numbers live. The filters' client
// (feed_client.ts, AssemblyScript) and the fan-out bench's poller (bench/feed/fanout_poller.ts,
// TypeScript) both import this file, so it holds plain integer and string constants only, which
// read the same in both languages (tests/host/feed_retry.test.ts checks the two clients against
// these bounds).
//
// Why two backoffs (runtime README, "Live updates"):
//   unavailable  the feed could not be reached or answered 5xx (a restart, a replica gone, a
//                reset, Envoy's local 503 when the cluster has no endpoint). Envoy's own xDS
//                client retries such a failure after a fully jittered 500 ms doubling backoff;
//                here the cap is 5 s rather than xDS's 30 s: a feed that is down costs a retry
//                nothing at the feed (the connection is refused, or Envoy fails the call locally
//                when the Service has no ready endpoint), and a feed that comes back is found by
//                every VM within 5 s instead of up to 30 s.
//   refused      the feed answered, and its answer (a bad message) or its refusal of the request
//                (4xx) is the problem: each retry may be a full model, so it backs off to 30 s,
//                with equal jitter (never right after the failure).
// A feed that is stopping marks its last answers (STOPPING_HEADER, with `connection: close`):
// the client polls again within STOPPING_SPREAD_MS (uniform), on a new connection (another
// replica, or the restarted process), with the unavailable backoff starting from its first step.
// Marked answers in a row (the same process still stopping: a single replica whose stop takes a
// while) double that spread up to UNAVAILABLE_MAX_MS, so a feed slow to stop is not polled ever
// faster by every VM.

/** The root's tick while nothing is due (model-age gauge, watchdog). */
export const TICK_MS = 1000;
/** The tick within the last TICK_MS before a retry is due: retries land within this of their time. */
export const RETRY_TICK_MS = 100;
/** Unavailable: the first backoff, doubled per failure up to the cap; the wait is uniform in [0, backoff] (full jitter). */
export const UNAVAILABLE_FIRST_MS = 500;
export const UNAVAILABLE_MAX_MS = 5000;
/** Refused: the first backoff, doubled up to the cap; the wait is uniform in [backoff / 2, backoff] (equal jitter). */
export const REFUSED_FIRST_MS = 1000;
export const REFUSED_MAX_MS = 30000;
/** After an answer marked stopping: the next poll within [0, STOPPING_SPREAD_MS] (uniform); doubled per marked answer in a row, up to UNAVAILABLE_MAX_MS. */
export const STOPPING_SPREAD_MS = 1000;
/** The response header a stopping feed sets on its answers (value "1"). */
export const STOPPING_HEADER = "x-feed-stopping";
/** A no-change answered sooner than this after the request was not held: the next poll waits a tick. */
export const MIN_HOLD_MS = 500;
/** On top of `wait`: the call's timeout. */
export const CALL_MARGIN_MS = 5000;

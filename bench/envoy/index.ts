// The real-Envoy benchmark: A/B runs of each filter's topology with and without the filter (and
// Envoy's native equivalent where one exists), the 100k-pod passthrough_mtls load, and the same
// A/B counted in instructions under callgrind. Figures
// are JSON lines (bench/emit.ts). One failed topology emits an error figure; the others still run.
import { emit } from "../emit.js";
import type { AbTimings } from "./ab.js";
import { callgrindBench, callgrindTimings } from "./callgrind.js";
import { passthroughMtlsAb } from "./passthrough_mtls.js";
import { pods100k } from "./pods_100k.js";
import { tunnelPortAb } from "./tunnel_port.js";
import { waypointRouteAb } from "./waypoint_route.js";

function log(message: string): void {
  process.stderr.write(`[envoy-bench] ${message}\n`);
}

/**
 * quick (~1.5 min on 2 cores): one round, arms still back to back; a smoke run whose ratios are
 * single samples. full (~7-8 min): five rounds in ABBA order, ratios are medians of per-round ratios.
 */
function timings(quick: boolean): AbTimings {
  return quick
    ? { rounds: 1, rateSeconds: 1, ttfbSeconds: 1, bulkSeconds: 1, concurrency: 16 }
    : { rounds: 5, rateSeconds: 2, ttfbSeconds: 2, bulkSeconds: 2, concurrency: 16 };
}

async function guarded(figure: string, filter: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    log(`${filter}: ${message}`);
    emit({ figure, filter, error: message.slice(0, 2000) });
  }
}

export async function envoyBench(opts: { quick: boolean }): Promise<void> {
  const t = timings(opts.quick);
  log(`sidecar Envoys pinned to one worker (--concurrency 1); ${t.rounds} rounds, ${t.concurrency} connections`);
  await guarded("envoy_ab", "passthrough_mtls", () => passthroughMtlsAb(t, log));
  await guarded("envoy_ab", "tunnel_port", () => tunnelPortAb(t, log));
  await guarded("envoy_ab", "waypoint_route", () => waypointRouteAb(t, log));
  await guarded("envoy_100k_pods", "passthrough_mtls", () => pods100k(100_000, log));
  // The same topologies counted in instructions under callgrind: ratios that do not move with
  // the machine's load (callgrind.ts).
  await guarded("envoy_instructions", "callgrind", () => callgrindBench(callgrindTimings(opts.quick), log));
}

// Caps on what the feed forwards to the filters. Every object the filters decode costs every
// sidecar's VM memory and decode time, and any namespace user can write a Service with
// thousands of ports (Kubernetes allows ~20,000 within its object size limit). An object over
// a cap is left out of the model on its own, reported by name and counted, so the rest of the
// mesh keeps flowing; once it is back under the cap it is included again (the next compute of
// that object decides afresh).
//
// Defaults: far above any object a real mesh has (a Service's ports rarely pass a few dozen; a
// pod is in a handful of Services; Kubernetes names are at most 253 bytes, so no text built
// from them — SPIFFE ids, hostnames, uids — reaches 1 KiB), and low enough that the filters'
// decode of one object stays in the milliseconds.
import type { CappedObject, ComputedMesh, MeshChanges } from "./mesh_model.js";
import type { Metrics } from "./metrics.js";
import type { GatewayRef, Service, WaypointRef, Workload } from "./schema.js";

export interface FeedCaps {
  /** TCP ports one service forwards (after the multi-cluster merge). */
  maxPortsPerService: number;
  /** Services one workload is an endpoint of. */
  maxMembershipsPerWorkload: number;
  /** UTF-8 bytes of any one text forwarded: uid, network, identity, locality, hostname, SAN, reference. */
  maxTextBytes: number;
}

export const DEFAULT_CAPS: FeedCaps = { maxPortsPerService: 1024, maxMembershipsPerWorkload: 1024, maxTextBytes: 1024 };

/** A DNS name's limit, which the filters hold hostnames to whatever the text cap says. */
export const MAX_HOSTNAME_BYTES = 253;

/** The wire format counts ports and memberships in 16 bits: no cap may pass it. */
export const MAX_COUNT_CAP = 65_535;

function bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

function refTexts(ref: WaypointRef | GatewayRef | undefined): Array<[string, string | undefined]> {
  return ref ? [["address", ref.address], ["hostname", ref.hostname]] : [];
}

/** The first text over the cap, as `field: N bytes (cap M)`, or undefined. */
function firstOver(fields: Array<[string, string | undefined]>, textMax: number): string | undefined {
  for (const [field, text] of fields) {
    if (text === undefined) continue;
    const max = field.endsWith("hostname") ? Math.min(textMax, MAX_HOSTNAME_BYTES) : textMax;
    // Cheap bound first: a UTF-8 text has at most 3 bytes per UTF-16 unit.
    if (text.length * 3 <= max) continue;
    const n = bytes(text);
    if (n > max) return `${field} is ${n} bytes (cap ${max})`;
  }
  return undefined;
}

export function workloadTextOver(w: Workload, max: number): string | undefined {
  return firstOver(
    [
      ["uid", w.uid],
      ["network", w.network],
      ["identity", w.identity],
      ["locality", w.locality],
      ...refTexts(w.waypoint).map(([f, t]): [string, string | undefined] => [`waypoint.${f}`, t]),
      ...w.addresses.map((a, i): [string, string] => [`addresses[${i}]`, a]),
    ],
    max,
  );
}

export function serviceTextOver(s: Service, max: number): string | undefined {
  return firstOver(
    [
      ["hostname", s.hostname],
      ...refTexts(s.waypoint).map(([f, t]): [string, string | undefined] => [`waypoint.${f}`, t]),
      ...(s.vips ?? []).map((v, i): [string, string | undefined] => [`vips[${i}].network`, v.network]),
      ...(s.subjectAltNames ?? []).map((san, i): [string, string] => [`subjectAltNames[${i}]`, san]),
      ...(s.endpoints ?? []).map((e, i): [string, string] => [`endpoints[${i}].workload`, e.workload]),
    ],
    max,
  );
}

/** One log line for an object that is now left out, or back in (a key past 200 characters is cut: it may be the long text). */
export function capLine(key: string, capped: CappedObject | undefined): string {
  const name = key.length > 200 ? `${key.slice(0, 200)}... (${key.length} characters)` : key;
  return capped
    ? `${capped.kind} ${name} left out of the model: ${capped.detail}; the rest of the mesh is published without it`
    : `${name} is within the caps again and back in the model`;
}

export const CAPPED_METRIC = "feed_capped_objects";

/**
 * Says once per change of state that an object is left out or back in, and keeps the metric
 * `feed_capped_objects{kind,reason}` (objects left out now).
 */
export class CapReporter {
  private readonly reported = new Map<string, string>();

  constructor(private readonly metrics: Metrics, private readonly log: (level: "info" | "warn", message: string) => void) {
    metrics.declare(CAPPED_METRIC, "gauge", "objects left out of the model for passing a cap (ports per service, memberships per workload, text bytes), by kind and reason");
  }

  report(mesh: ComputedMesh, changes: MeshChanges): void {
    // Capped keys are workload uids, service hostnames, or (on a full compute) gateway uids.
    const keys = changes.full ? new Set([...this.reported.keys(), ...mesh.capped.keys()]) : [...changes.workloads, ...changes.services];
    let moved = changes.full;
    for (const key of keys) {
      const now = mesh.capped.get(key);
      const was = this.reported.get(key);
      const line = now ? capLine(key, now) : undefined;
      if (line === was) continue;
      moved = true;
      if (line) {
        this.reported.set(key, line);
        this.log("warn", line);
      } else {
        this.reported.delete(key);
        this.log("info", capLine(key, undefined));
      }
    }
    if (!moved) return;
    this.metrics.clear(CAPPED_METRIC);
    const counts = new Map<string, number>();
    for (const c of mesh.capped.values()) counts.set(`${c.kind}\n${c.reason}`, (counts.get(`${c.kind}\n${c.reason}`) ?? 0) + 1);
    for (const [k, n] of counts) {
      const [kind, reason] = k.split("\n");
      this.metrics.set(CAPPED_METRIC, { kind, reason }, n);
    }
  }
}

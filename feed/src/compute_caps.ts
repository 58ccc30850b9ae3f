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

/** The wire format counts ports and memberships in 16 bits: no cap may pass it. */
export const MAX_COUNT_CAP = 65_535;

export type CapKind = "workload" | "service" | "gateway";
export type CapReason = "ports" | "memberships" | "text";

/** An object left out of the model, and why (one log line, one metric label pair). */
export interface CappedObject {
  kind: CapKind;
  reason: CapReason;
  /** What was over the cap, e.g. `20000 TCP ports (cap 1024)`. */
  detail: string;
}

function bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

function refTexts(ref: WaypointRef | GatewayRef | undefined): Array<[string, string | undefined]> {
  return ref ? [["address", ref.address], ["hostname", ref.hostname]] : [];
}

/** The first text over the cap, as `field: N bytes (cap M)`, or undefined. */
function firstOver(fields: Array<[string, string | undefined]>, max: number): string | undefined {
  for (const [field, text] of fields) {
    if (text === undefined) continue;
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

/** One log line for an object that is now left out, or back in. */
export function capLine(key: string, capped: CappedObject | undefined): string {
  return capped
    ? `${capped.kind} ${key} left out of the model: ${capped.detail}; the rest of the mesh is published without it`
    : `${key} is within the caps again and back in the model`;
}

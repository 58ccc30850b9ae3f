// A process running a share of the fan-out bench's pollers (fanout_poller.ts), so that the
// pollers' own TLS and parsing are spread over a few processes instead of one event loop, and
// the driver (fanout.ts) only asks them questions over IPC:
//   start      build the pollers (the demo sidecar's certificate, trusting only the mesh CA and
//              checking the feed's SPIFFE id, as Envoy's mesh_feed cluster does) and start them
//              spread over `spreadMs`
//   counters   the pollers' counters summed (answers by kind, failures, bytes)
//   holding    how many pollers hold (epoch, version) in an answer taken at or after `after`,
//              and when the last of them first did
//   reach      for ascending versions of one epoch: per version, when the last poller of this
//              process first held it (null while one has not) and how many have not; the same
//              over the pollers that already held a model of that epoch at `after`
//   stop       stop every poller and exit
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import { Poller, zeroCounters, type PollerCounters } from "./fanout_poller.js";

export interface WorkerStart {
  type: "start";
  channel: string;
  target: string;
  pollers: number;
  waitSeconds: number;
  spreadMs: number;
  certFile: string;
  keyFile: string;
  caFile: string;
  /** The feed's SPIFFE id (URI SAN) the pollers require. */
  feedIdentity: string;
}

export type WorkerQuestion =
  | WorkerStart
  | { type: "counters" }
  | { type: "holding"; epoch: number; version: number; after: number }
  | { type: "reach"; epoch: number; versions: number[]; after: number }
  | { type: "stop" };

export interface HoldingAnswer {
  holding: number;
  latest: number;
  /** When each holding poller first did (the restart's spread after ready). */
  times: number[];
  /** When the request of each of those answers was sent (the same order). */
  sentAts: number[];
}

export interface ReachAnswer {
  latest: Array<number | null>;
  missing: number[];
  /** The same over the pollers that held a model of the epoch at `after` (`modelled` of them). */
  modelled: number;
  latestModelled: Array<number | null>;
}

let pollers: Poller[] = [];

function start(q: WorkerStart): void {
  const secureContext = createSecureContext({ ca: readFileSync(q.caFile), cert: readFileSync(q.certFile), key: readFileSync(q.keyFile) });
  const checkServerIdentity = (_host: string, cert: { subjectaltname?: string }) =>
    cert.subjectaltname?.split(", ").includes(`URI:${q.feedIdentity}`) ? undefined : new Error(`not the feed: ${cert.subjectaltname}`);
  const url = new URL(q.channel);
  pollers = Array.from({ length: q.pollers }, () => new Poller(url, q.target, q.waitSeconds, { secureContext, checkServerIdentity }));
  pollers.forEach((p) => p.start(Math.random() * q.spreadMs));
}

function counters(): PollerCounters {
  const sum = zeroCounters();
  for (const p of pollers) for (const k of Object.keys(sum) as Array<keyof PollerCounters>) sum[k] += p.counters[k];
  return sum;
}

function holding(epoch: number, version: number, after: number): HoldingAnswer {
  let n = 0;
  let latest = 0;
  const times: number[] = [];
  const sentAts: number[] = [];
  for (const p of pollers) {
    const a = p.firstHoldingAnswer(epoch, version, after);
    if (a === undefined) continue;
    n++;
    latest = Math.max(latest, a.t);
    times.push(a.t);
    sentAts.push(a.sentAt);
  }
  return { holding: n, latest, times, sentAts };
}

function reach(epoch: number, versions: number[], after: number): ReachAnswer {
  const last = (among: Poller[]) => {
    const latest = versions.map(() => 0);
    const missing = versions.map(() => 0);
    for (const p of among) {
      p.firstHoldingEach(epoch, versions, after).forEach((t, i) => {
        if (t === undefined) missing[i]++;
        else latest[i] = Math.max(latest[i], t);
      });
    }
    return { latest: latest.map((t, i) => (missing[i] > 0 ? null : t)), missing };
  };
  const modelled = pollers.filter((p) => p.heldEpochBy(epoch, after));
  return { ...last(pollers), modelled: modelled.length, latestModelled: last(modelled).latest };
}

// The driver gone (killed, crashed): so are its pollers.
process.on("disconnect", () => process.exit(0));

process.on("message", (message: { id: number; question: WorkerQuestion }) => {
  const { id, question: q } = message;
  let answer: unknown = null;
  if (q.type === "start") start(q);
  else if (q.type === "counters") answer = counters();
  else if (q.type === "holding") answer = holding(q.epoch, q.version, q.after);
  else if (q.type === "reach") answer = reach(q.epoch, q.versions, q.after);
  else {
    pollers.forEach((p) => p.stop());
    process.send?.({ id, answer: null }, () => process.exit(0));
    return;
  }
  process.send?.({ id, answer });
});

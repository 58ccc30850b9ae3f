// The real-Envoy A/B figures (bench/envoy/) reduced to one value per (filter, path, variant,
// metric): the bench emits one `envoy_ab` line per round (with `round`) and then the median
// (without `round`); the median line is used when present, else the median of the rounds.
// `path` names what was measured (e.g. plain passthrough, mTLS, HBONE); lines without one (the
// memory of a whole sidecar) apply to every path of that sidecar. An A/A control arm (a second
// sidecar with exactly the "without" config, `control: true`, filter "control") is kept apart.
import { measured, num, str, type Results } from "./results.js";

export interface EnvoyValue {
  readonly filter: string;
  readonly path: string;
  readonly variant: string;
  readonly metric: string;
  /** An A/A control arm: the same config as its baseline, run a second time. */
  readonly control: boolean;
  readonly value: number;
  /** How many rounds the value stands for. */
  readonly runs: number;
}

export const VARIANTS = ["without", "with", "native"];

/** How the report names the A/A control arm. */
export const CONTROL_LABEL = "control (A/A: the same config twice)";

/** Is this figure (envoy_ab, envoy_ab_ratio, envoy_noise_floor) from the A/A control arm? */
export function isControl(f: Readonly<Record<string, unknown>>): boolean {
  return f.control === true || f.filter === "control";
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export function envoyValues(results: Results): EnvoyValue[] {
  const groups = new Map<string, { key: Omit<EnvoyValue, "value" | "runs">; summary?: EnvoyValue; rounds: number[] }>();
  for (const f of measured(results, "envoy_ab")) {
    const value = num(f.value);
    if (value === undefined) continue;
    const key = { filter: str(f.filter), path: str(f.path), variant: str(f.variant), metric: str(f.metric), control: isControl(f) };
    const id = JSON.stringify(key);
    const group = groups.get(id) ?? { key, rounds: [] };
    groups.set(id, group);
    if (f.round === undefined) group.summary = { ...key, value, runs: num(f.runs) ?? 1 };
    else group.rounds.push(value);
  }
  return [...groups.values()].map((g) => g.summary ?? { ...g.key, value: median(g.rounds), runs: g.rounds.length });
}

// The command line both build comparisons share: two build directories (before, after) and
// --name value options. Node's own util.parseArgs does the reading; this adds the checks both
// need (integer ranges, the filter names) so a typo fails at once instead of after a long run.
import { parseArgs } from "node:util";
import { SUBJECTS, type Subject } from "./subjects.js";

export const BUILDS = ["before", "after", "before_again"] as const;
export type Build = (typeof BUILDS)[number];

export interface CompareArgs {
  /** The before build twice: its second copy is the A/A control. */
  readonly dirs: Record<Build, string>;
  readonly filters: readonly Subject[];
  readonly values: Readonly<Record<string, string | undefined>>;
}

/** Reads `BEFORE AFTER [--opt value]...`; `options` names every option the tool accepts. */
export function readCompareArgs(argv: readonly string[], usage: string, options: readonly string[]): CompareArgs {
  const spec = Object.fromEntries(["filters", ...options].map((name) => [name, { type: "string" as const }]));
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: spec, allowPositionals: true, strict: true });
  } catch (e) {
    throw new Error(`${(e as Error).message}\nusage: ${usage}`);
  }
  if (parsed.positionals.length !== 2) throw new Error(`usage: ${usage}`);
  const names = parsed.values.filters?.split(",");
  const filters = names === undefined ? SUBJECTS : SUBJECTS.filter((s) => names.includes(s.name));
  if (names !== undefined && filters.length !== names.length) throw new Error(`--filters: known are ${SUBJECTS.map((s) => s.name).join(", ")}`);
  const [before, after] = parsed.positionals as [string, string];
  return { dirs: { before, after, before_again: before }, filters, values: parsed.values };
}

/** An integer option at least `min`, or its default when absent. */
export function intOption(args: CompareArgs, name: string, fallback: number, min: number): number {
  const text = args.values[name];
  const n = text === undefined ? fallback : Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name}: an integer ≥ ${min}`);
  return n;
}

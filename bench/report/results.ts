// Reading build/bench/results.jsonl: one figure per line ({"figure": name, ...}), as bench/emit.ts
// writes them. A line that is not a JSON object is kept as a problem to show, never dropped.
import { readFileSync } from "node:fs";

export type Figure = Readonly<Record<string, unknown>> & { readonly figure: string };

export interface Results {
  readonly figures: readonly Figure[];
  /** Lines that could not be read, with their line numbers. */
  readonly unreadable: readonly string[];
}

export function readResults(file: string): Results {
  const figures: Figure[] = [];
  const unreadable: string[] = [];
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((line, index) => {
      if (line.trim() === "") return;
      try {
        const value: unknown = JSON.parse(line);
        if (typeof value === "object" && value !== null && typeof (value as Figure).figure === "string") figures.push(value as Figure);
        else unreadable.push(`line ${index + 1}: not a figure`);
      } catch {
        unreadable.push(`line ${index + 1}: not JSON`);
      }
    });
  return { figures, unreadable };
}

/** The figures named `name` (error figures included). */
export function named(results: Results, name: string): Figure[] {
  return results.figures.filter((f) => f.figure === name);
}

/** The measured figures named `name`: those without an `error`. */
export function measured(results: Results, name: string): Figure[] {
  return named(results, name).filter((f) => f.error === undefined);
}

export function num(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

export function str(value: unknown): string {
  return value === undefined || value === null ? "" : String(value);
}

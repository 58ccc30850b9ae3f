import { mkdirSync, mkdtempSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root, whatever the current directory. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export function buildPath(name: string): string {
  return resolve(REPO_ROOT, "build", name);
}

/** The git-ignored scratch folder of test runs (`.tmp/`), created when a fresh clone lacks it. */
export const SCRATCH_ROOT = join(REPO_ROOT, ".tmp");

/** A new directory `.tmp/<prefix>XXXXXX` (the folder `.tmp` is created if missing). */
export function scratchDir(prefix: string): string {
  mkdirSync(SCRATCH_ROOT, { recursive: true });
  return mkdtempSync(join(SCRATCH_ROOT, prefix));
}

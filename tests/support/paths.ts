import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root, whatever the current directory. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export function buildPath(name: string): string {
  return resolve(REPO_ROOT, "build", name);
}

// The feed as a deployment runs it, for tests and benches that measure the feed's own process:
// the esbuild bundle its image carries (not tsx, whose compiler and module cache add ~130 MB a
// deployed feed never has) under the chart's Node settings (values.yaml `node`: heap flags and
// MALLOC_ARENA_MAX), read from the chart itself so a figure is the one the Deployment is sized by.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { REPO_ROOT } from "./paths.js";

/** The bundle `npm run package:feed` writes and the image runs. */
export const FEED_BUNDLE = join(REPO_ROOT, "build", "feed-image", "app", "main.mjs");

/** Node's flags and environment as the chart's Deployment sets them. */
export interface NodeRuntime {
  args: string[];
  env: Record<string, string>;
}

export function chartRuntime(): NodeRuntime {
  const values = parse(readFileSync(join(REPO_ROOT, "charts", "mesh-feed", "values.yaml"), "utf8")) as { node: { maxOldSpaceMb: number; maxSemiSpaceMb: number; mallocArenas: number } };
  return { args: [`--max-old-space-size=${values.node.maxOldSpaceMb}`, `--max-semi-space-size=${values.node.maxSemiSpaceMb}`], env: { MALLOC_ARENA_MAX: String(values.node.mallocArenas) } };
}

/** Bundles the feed as its image does (esbuild, a few seconds), so what runs is the current code. */
export function bundleFeed(): void {
  execFileSync(process.execPath, [join(REPO_ROOT, "feed", "image", "bundle.mjs")], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"] });
  if (!existsSync(FEED_BUNDLE)) throw new Error(`${FEED_BUNDLE} was not written`);
}

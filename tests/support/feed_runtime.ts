// The feed as a deployment runs it, for tests and benches that measure the feed's own process:
// the esbuild bundle its image carries (not tsx, whose compiler and module cache add ~130 MB a
// deployed feed never has) under the chart's Node settings (values.yaml `node`: heap flags and
// MALLOC_CONF), read from the chart itself so a figure is the one the Deployment is sized by, and
// on the allocator the image preloads: jemalloc at the version feed/image/Dockerfile pins, from
// that version's Debian package (scripts/jemalloc-setup.sh), never the machine's own copy.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, realpathSync } from "node:fs";
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

/** "libjemalloc2=<version>" as feed/image/Dockerfile pins it (the one place the version is written). */
export function jemallocPin(): string {
  const pins = [...readFileSync(join(REPO_ROOT, "feed", "image", "Dockerfile"), "utf8").matchAll(/^ARG JEMALLOC_PACKAGE=(.*)$/gm)].map((m) => m[1]);
  if (pins.length !== 1 || !/^libjemalloc2=\d[\w.+:~-]*$/.test(pins[0])) throw new Error(`feed/image/Dockerfile: expected one 'ARG JEMALLOC_PACKAGE=libjemalloc2=<version>' line, found ${JSON.stringify(pins)}`);
  return pins[0];
}

/**
 * The pinned libjemalloc.so.2, unpacked from its .deb by scripts/jemalloc-setup.sh (which needs
 * Debian's mirror the first time: npm's test and bench scripts run it before entering the test
 * network namespace). Throws with the script's one-line reason when it cannot be had.
 */
export function jemallocLibrary(): string {
  try {
    return execFileSync("bash", [join(REPO_ROOT, "scripts", "jemalloc-setup.sh")], { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 300_000 }).trim();
  } catch (e) {
    const reason = String((e as { stderr?: string }).stderr ?? e).trim().split("\n").at(-1);
    throw new Error(`the feed's allocator is not available: ${reason}`);
  }
}

export function chartRuntime(): NodeRuntime {
  const values = parse(readFileSync(join(REPO_ROOT, "charts", "mesh-feed", "values.yaml"), "utf8")) as { node: { maxOldSpaceMb: number; maxSemiSpaceMb: number; mallocConf: string } };
  return {
    args: [`--max-old-space-size=${values.node.maxOldSpaceMb}`, `--max-semi-space-size=${values.node.maxSemiSpaceMb}`],
    env: { LD_PRELOAD: jemallocLibrary(), MALLOC_CONF: values.node.mallocConf },
  };
}

/**
 * Whether the process `pid` has `library` mapped (its /proc/<pid>/maps names the file). The
 * dynamic loader only warns on stderr when an LD_PRELOAD library cannot be loaded and runs the
 * program on glibc's malloc: a figure taken then would not be jemalloc's.
 */
export function hasLibraryMapped(pid: number, library: string): boolean {
  if (!existsSync(library)) return false;
  const file = realpathSync(library);
  return readFileSync(`/proc/${pid}/maps`, "utf8").split("\n").some((line) => line.endsWith(` ${file}`));
}

/**
 * Why process `pid`, started with `runtime`, is not on the allocator `runtime` preloads (the
 * dynamic loader only warns when a preload fails, and a figure taken then is glibc's);
 * undefined when it is, or when `runtime` preloads nothing.
 */
export function preloadMissing(pid: number, runtime: NodeRuntime | undefined): string | undefined {
  const preload = runtime?.env.LD_PRELOAD;
  return preload && !hasLibraryMapped(pid, preload) ? `the feed does not have ${preload} (LD_PRELOAD) mapped` : undefined;
}

/** Bundles the feed as its image does (esbuild, a few seconds), so what runs is the current code. */
export function bundleFeed(): void {
  execFileSync(process.execPath, [join(REPO_ROOT, "feed", "image", "bundle.mjs")], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"] });
  if (!existsSync(FEED_BUNDLE)) throw new Error(`${FEED_BUNDLE} was not written`);
}

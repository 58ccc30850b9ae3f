// Pushes the images of build/images/ with crane (the one built by scripts/images-setup.sh) and
// checks that the registry stored each under the digest the build recorded: the digest a rendered
// manifest pins is then the one the registry serves.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { IMAGES_DIR, readImageIndex, tool, type ImageIndex } from "./images.js";
import { checkRegistry } from "./render.js";

export interface Pushed {
  filter: string;
  /** `<registry>/<repository>:<tag>` as pushed. */
  tagged: string;
  /** `<registry>/<repository>@sha256:…` as crane printed it. */
  pinned: string;
}

/** Pushes the images of the index in `dir` (default build/images). */
export function pushImages(registry: string, dir = IMAGES_DIR, env: NodeJS.ProcessEnv = process.env): Pushed[] {
  const index: ImageIndex = readImageIndex(dir);
  checkRegistry(registry);
  const pushed: Pushed[] = [];
  for (const [filter, image] of Object.entries(index.images)) {
    const tagged = `${registry}/${image.repository}:${image.tag}`;
    const result = spawnSync(tool("crane"), ["push", join(dir, image.layout), tagged], { encoding: "utf8", env, timeout: 300_000 });
    if (result.status !== 0) throw new Error(`crane push ${tagged} failed: ${result.stderr.trim() || result.error?.message}`);
    const pinned = result.stdout.trim();
    const expected = `${registry}/${image.repository}@${image.digest}`;
    if (pinned !== expected) throw new Error(`push ${tagged}: the registry stored ${pinned}, the build recorded ${expected}`);
    pushed.push({ filter, tagged, pinned });
  }
  return pushed;
}

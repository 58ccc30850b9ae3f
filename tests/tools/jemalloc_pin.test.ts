// The feed's allocator is pinned once, in feed/image/Dockerfile, and three places read that pin:
// the image's own install, scripts/jemalloc-setup.sh (the library the tests and benches preload)
// and scripts/docker-images.sh (the stand-in base's apt repository). Each reads it its own way
// (a Dockerfile ARG, sed, a TypeScript regex), so this checks they land on the same package.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { jemallocLibrary, jemallocPin } from "../support/feed_runtime.js";
import { REPO_ROOT } from "../support/paths.js";

const read = (path: string) => readFileSync(join(REPO_ROOT, path), "utf8");

describe("the feed's jemalloc pin", () => {
  it("the image installs the package its ARG names and preloads it", () => {
    const dockerfile = read("feed/image/Dockerfile");
    assert.match(jemallocPin(), /^libjemalloc2=\d/);
    assert.match(dockerfile, /apt-get install [^\n]*"\$JEMALLOC_PACKAGE"/);
    assert.match(dockerfile, /^ENV LD_PRELOAD=\/usr\/local\/lib\/libjemalloc\.so\.2$/m);
  });

  it("the library the tests preload is unpacked from that version's .deb", () => {
    const library = jemallocLibrary();
    const version = jemallocPin().split("=")[1];
    assert.ok(library.includes(`/.cache/jemalloc/${version}/usr/lib/`), library);
    assert.deepEqual([...readFileSync(library).subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], `${library} is not an ELF file`);
    // The .deb it came from says which package and version it is.
    const deb = execFileSync("bash", ["-c", 'root="$1"; source "$root/scripts/lib/debs.sh"; deb_path "$(jemalloc_package)"', "-", REPO_ROOT], { encoding: "utf8" }).trim();
    const control = execFileSync("dpkg-deb", ["--field", deb, "Package", "Version"], { encoding: "utf8" });
    assert.equal(control.trim(), `Package: libjemalloc2\nVersion: ${version}`);
  });

  it("the stand-in base image's apt repository carries the same package", () => {
    const script = read("scripts/docker-images.sh");
    assert.match(script, /^jemalloc_deb="\$\(jemalloc_package\)"/m);
    assert.match(script, /^apt_repo_debs=\([^)]*"\$jemalloc_deb"/m);
  });
});

// Releases (docs/releases.md): `npm run release:notes` prints the digests build/images/index.json
// recorded, CHANGELOG.md keeps the release format (Unreleased on top, one section per release
// with every image's digest), and a version that has a release section builds into exactly the
// digests recorded there. build/images/ comes from `npm run package` (npm test runs it first).
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { IMAGES_DIR, PACKAGED_FILTERS, packageVersion, readImageIndex, repositoryOf } from "../../images/images.js";
import { changelogProblems, compareVersions, imageRows, sections } from "../../scripts/lib/changelog.js";
import { REPO_ROOT } from "../support/paths.js";

const PLUGINS = PACKAGED_FILTERS.map(repositoryOf);
const DIGEST = (c: string): string => `sha256:${c.repeat(64)}`;

function releaseNotes(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, ["--import", "tsx", "scripts/release-notes.ts", ...args], { cwd: REPO_ROOT, encoding: "utf8", timeout: 60_000 });
}

/** A release section as docs/releases.md defines it, for the format checks below. */
function release(version: string, date: string, repositories = PLUGINS, tag = version): string {
  const rows = repositories.map((r, i) => `| \`${r}\` | \`${tag}\` | \`${DIGEST(String(i))}\` | \`${"a".repeat(64)}\` |`);
  return [`## [${version}] - ${date}`, "### Fixed", "- a fix", "", "### Images", "| repository | tag | image digest | plugin.wasm sha256 |", "|---|---|---|---|", ...rows, ""].join("\n");
}

describe("npm run release:notes", () => {
  const index = readImageIndex(IMAGES_DIR);

  it("prints one row per image of build/images/index.json: its repository, the tag, the digest and the module's sha256", () => {
    const r = releaseNotes();
    assert.equal(r.status, 0, r.stderr);
    assert.equal(index.version, packageVersion(), "build/images was packaged at package.json's version");
    const { rows, bad } = imageRows(r.stdout);
    assert.deepEqual(bad, []);
    assert.equal(r.stdout.split("\n")[0], "### Images");
    const expected = Object.values(index.images).map((i) => ({ repository: i.repository, tag: i.tag, digest: i.digest, moduleSha256: i.moduleSha256 }));
    assert.deepEqual(rows, expected);
    assert.deepEqual(rows.map((x) => x.repository), PLUGINS, "every packaged filter");
    assert.ok(rows.every((x) => x.tag === packageVersion()));
  });

  it("adds the feed image's digest when given, and refuses one that is not sha256:<64 hex>", () => {
    const ok = releaseNotes("--feed-digest", DIGEST("f"));
    assert.equal(ok.status, 0, ok.stderr);
    assert.deepEqual(imageRows(ok.stdout).rows.at(-1), { repository: "mesh-feed", tag: index.version, digest: DIGEST("f"), moduleSha256: undefined });
    const bad = releaseNotes("--feed-digest", "sha256:abc");
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /^release-notes: --feed-digest: "sha256:abc" is not sha256:<64 hex>\n$/);
  });

  it("refuses a version the images were not packaged at, in one line naming both", () => {
    const r = releaseNotes("--version", "99.0.0");
    assert.equal(r.status, 1);
    assert.equal(r.stdout, "");
    assert.equal(r.stderr.trim().split("\n").length, 1);
    assert.match(r.stderr, new RegExp(`version ${index.version.replaceAll(".", "\\.")}, not 99\\.0\\.0`));
  });
});

describe("the CHANGELOG format check", () => {
  const head = "# Changelog\ntext\n\n## [Unreleased]\n### Added\n- x\n\n";

  it("accepts Unreleased on top and releases newest first, each with every plugin image", () => {
    assert.deepEqual(changelogProblems(head + release("0.2.0", "2027-02-01") + release("0.1.0", "2027-01-01"), PLUGINS), []);
  });

  it("finds each way a file can break it", () => {
    const cases: [string, RegExp][] = [
      [release("0.1.0", "2027-01-01"), /first section is not `## \[Unreleased\]`/],
      [head + release("0.1.0", "2027-01-01") + release("0.2.0", "2027-02-01"), /\[0\.2\.0\] is not older than the section above it \(\[0\.1\.0\]\)/],
      [head + release("0.1.0", "2027-01-01", PLUGINS.slice(1)), /no image digest recorded for passthrough-mtls/],
      [head + release("0.1.0", "2027-01-01", PLUGINS, "0.0.9"), /passthrough-mtls is tagged 0\.0\.9, not the release's version/],
      [head + "## [0.1.0]\n", /a release heading is "## \[X\.Y\.Z\] - YYYY-MM-DD"/],
      [head + "## [v1] - 2027-01-01\n", /a release heading is/],
      [head + "### Added\n- again\n", /"### Added" appears twice/],
      [head + "### Improvements\n", /unknown subsection "### Improvements"/],
      [head + "### Images\n", /unreleased work has no image digests yet/],
      [head + release("0.1.0", "2027-01-01").replace("| `probe` |", "| probe |"), /an Images row is not/],
    ];
    for (const [text, problem] of cases) {
      const found = changelogProblems(text, PLUGINS);
      assert.ok(found.some((p) => problem.test(p)), `${problem} in ${JSON.stringify(found)}`);
    }
  });

  it("orders versions as Semantic Versioning does", () => {
    assert.ok(compareVersions("0.10.0", "0.9.9") > 0);
    assert.ok(compareVersions("1.0.0", "1.0.0-dev") > 0);
    assert.ok(compareVersions("1.0.0-rc.10", "1.0.0-rc.9") > 0);
    assert.ok(compareVersions("1.0.0-alpha", "1.0.0-alpha.1") < 0);
    assert.equal(compareVersions("0.1.0", "0.1.0"), 0);
    assert.throws(() => compareVersions("0.1", "0.1.0"), /"0\.1" is not X\.Y\.Z/);
  });
});

describe("CHANGELOG.md", () => {
  const text = readFileSync(join(REPO_ROOT, "CHANGELOG.md"), "utf8");
  const released = sections(text).slice(1);

  it("keeps the release format of docs/releases.md", () => {
    assert.deepEqual(changelogProblems(text, PLUGINS), []);
  });

  it("has a section for every release tag of the repository", () => {
    const tags = execFileSync("git", ["tag", "--list", "v*"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
    for (const tag of tags) assert.ok(released.some((s) => `v${s.name}` === tag), `git tag ${tag} has no section ## [${tag.slice(1)}] in CHANGELOG.md`);
  });

  it("package.json's version is either released with the digests it builds into, or newer than every release", () => {
    const version = packageVersion();
    const section = released.find((s) => s.name === version);
    if (section === undefined) {
      for (const s of released) assert.ok(compareVersions(version, s.name) > 0, `package.json ${version} is not newer than the released ${s.name}`);
      return;
    }
    // Released: the images are reproducible, so this checkout must build exactly what was recorded;
    // a filter changed since the release needs package.json moved on first (docs/releases.md).
    const index = readImageIndex(IMAGES_DIR);
    const recorded = imageRows(section.body).rows.filter((r) => r.moduleSha256 !== undefined);
    const built = Object.values(index.images).map((i) => ({ repository: i.repository, tag: i.tag, digest: i.digest, moduleSha256: i.moduleSha256 }));
    assert.deepEqual(built, recorded, `the images built now differ from release ${version}'s: move package.json to the next version`);
  });
});

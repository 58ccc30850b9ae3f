// The release format of CHANGELOG.md (docs/releases.md): `## [Unreleased]` on top, then one
// `## [X.Y.Z] - YYYY-MM-DD` section per release, newest first, each with an `### Images` block
// that records the digest of every image published under that version. This file prints that
// block from build/images/index.json and reads it back, so the release script and the test that
// holds CHANGELOG.md to the format share one definition.
import type { ImageIndex } from "../../images/images.js";

/** Semantic version, with an optional pre-release (`0.2.0-dev`); no build metadata. */
export const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$/;

/** The `###` headings a section may have, each at most once (Keep a Changelog's, plus two). */
export const SUBSECTIONS = ["Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Known issues", "Images"] as const;

const SHA256 = /^sha256:[0-9a-f]{64}$/;
const HEX64 = /^[0-9a-f]{64}$/;

/** The feed's container image: built by Docker, so its digest comes from the push, not index.json. */
export const FEED_REPOSITORY = "mesh-feed";

/** <0, 0, >0 as `a` sorts before, with, after `b` (semver precedence; a pre-release sorts first). */
export function compareVersions(a: string, b: string): number {
  const pa = SEMVER.exec(a);
  const pb = SEMVER.exec(b);
  if (!pa || !pb) throw new Error(`version: "${pa ? b : a}" is not X.Y.Z or X.Y.Z-pre`);
  for (let i = 1; i <= 3; i++) {
    const d = Number(pa[i]) - Number(pb[i]);
    if (d !== 0) return d;
  }
  if (pa[4] === pb[4]) return 0;
  if (pa[4] === undefined) return 1;
  if (pb[4] === undefined) return -1;
  const ia = pa[4].split(".");
  const ib = pb[4].split(".");
  for (let i = 0; i < Math.max(ia.length, ib.length); i++) {
    if (ia[i] === undefined) return -1;
    if (ib[i] === undefined) return 1;
    const na = /^\d+$/.test(ia[i]!) ? Number(ia[i]) : NaN;
    const nb = /^\d+$/.test(ib[i]!) ? Number(ib[i]) : NaN;
    if (!Number.isNaN(na) && !Number.isNaN(nb) && na !== nb) return na - nb;
    if (Number.isNaN(na) !== Number.isNaN(nb)) return Number.isNaN(na) ? 1 : -1;
    if (ia[i] !== ib[i]) return ia[i]! < ib[i]! ? -1 : 1;
  }
  return 0;
}

/** One image row of an `### Images` block. */
export interface ImageRow {
  repository: string;
  tag: string;
  digest: string;
  /** sha256 of plugin.wasm (hex); undefined for the feed's container image. */
  moduleSha256?: string;
}

const TABLE_HEAD = ["| repository | tag | image digest | plugin.wasm sha256 |", "|---|---|---|---|"];

function row(r: ImageRow): string {
  return `| \`${r.repository}\` | \`${r.tag}\` | \`${r.digest}\` | ${r.moduleSha256 ? `\`${r.moduleSha256}\`` : "container image"} |`;
}

/**
 * The `### Images` block of release `version`, from build/images/index.json (and the feed image's
 * digest as the registry reported it, when given). Refuses an index built for another version.
 */
export function imagesBlock(index: ImageIndex, version: string, feedDigest?: string): string {
  if (!SEMVER.test(version)) throw new Error(`--version: "${version}" is not X.Y.Z or X.Y.Z-pre`);
  if (index.version !== version) {
    throw new Error(`index.json: version ${index.version}, not ${version}: run npm run package with package.json at ${version}`);
  }
  const rows: ImageRow[] = [];
  for (const [filter, image] of Object.entries(index.images)) {
    if (image.tag !== version) throw new Error(`index.json: images.${filter}.tag is ${image.tag}, not ${version}`);
    if (!SHA256.test(image.digest)) throw new Error(`index.json: images.${filter}.digest "${image.digest}" is not sha256:<64 hex>`);
    if (!HEX64.test(image.moduleSha256)) throw new Error(`index.json: images.${filter}.moduleSha256 is not 64 hex digits`);
    rows.push({ repository: image.repository, tag: image.tag, digest: image.digest, moduleSha256: image.moduleSha256 });
  }
  if (rows.length === 0) throw new Error("index.json: images is empty: run npm run package");
  if (feedDigest !== undefined) {
    if (!SHA256.test(feedDigest)) throw new Error(`--feed-digest: "${feedDigest}" is not sha256:<64 hex>`);
    rows.push({ repository: FEED_REPOSITORY, tag: version, digest: feedDigest });
  }
  return ["### Images", ...TABLE_HEAD, ...rows.map(row)].join("\n") + "\n";
}

/** The image rows of a section's `### Images` block (the rows that do not parse are in `bad`). */
export function imageRows(sectionBody: string): { rows: ImageRow[]; bad: string[] } {
  const rows: ImageRow[] = [];
  const bad: string[] = [];
  const start = sectionBody.split("\n").findIndex((l) => l === "### Images");
  if (start < 0) return { rows, bad };
  const lines = sectionBody.split("\n").slice(start + 1);
  for (const line of lines) {
    if (line.startsWith("### ")) break;
    if (!line.startsWith("|") || TABLE_HEAD.includes(line)) continue;
    const m = /^\| `([a-z0-9][a-z0-9._-]*)` \| `([^`]+)` \| `(sha256:[0-9a-f]{64})` \| (?:`([0-9a-f]{64})`|container image) \|$/.exec(line);
    if (m) rows.push({ repository: m[1]!, tag: m[2]!, digest: m[3]!, moduleSha256: m[4] });
    else bad.push(line);
  }
  return { rows, bad };
}

export interface Section {
  /** `Unreleased` or the version. */
  name: string;
  date?: string;
  /** 1-based line of the `##` heading. */
  line: number;
  headings: string[];
  body: string;
}

/** The `##` sections of a changelog, in order. */
export function sections(text: string): Section[] {
  const out: Section[] = [];
  const lines = text.split("\n");
  let current: { section: Omit<Section, "body">; body: string[] } | undefined;
  const close = (): void => {
    if (current) out.push({ ...current.section, body: current.body.join("\n") });
  };
  lines.forEach((line, i) => {
    if (line.startsWith("## ")) {
      close();
      const m = /^## \[([^\]]+)\](?: - (\S+))?\s*$/.exec(line);
      current = { section: { name: m ? m[1]! : line.slice(3), date: m?.[2], line: i + 1, headings: [] }, body: [] };
      return;
    }
    if (!current) return;
    if (line.startsWith("### ")) current.section.headings.push(line.slice(4));
    current.body.push(line);
  });
  close();
  return out;
}

/**
 * Everything in `text` that breaks the format of docs/releases.md, one line each; `packaged` are
 * the image repositories every release must record (the plugin images).
 */
export function changelogProblems(text: string, packaged: readonly string[]): string[] {
  const problems: string[] = [];
  const all = sections(text);
  if (all[0]?.name !== "Unreleased" || all[0].date !== undefined) problems.push("the first section is not `## [Unreleased]`");
  const released: Section[] = [];
  for (const s of all) {
    const where = `line ${s.line} [${s.name}]`;
    if (s !== all[0]) {
      if (!SEMVER.test(s.name) || !/^\d{4}-\d{2}-\d{2}$/.test(s.date ?? "")) {
        problems.push(`${where}: a release heading is "## [X.Y.Z] - YYYY-MM-DD"`);
        continue;
      }
      released.push(s);
    }
    const seen = new Set<string>();
    for (const h of s.headings) {
      if (!(SUBSECTIONS as readonly string[]).includes(h)) problems.push(`${where}: unknown subsection "### ${h}" (allowed: ${SUBSECTIONS.join(", ")})`);
      if (seen.has(h)) problems.push(`${where}: "### ${h}" appears twice`);
      seen.add(h);
    }
    if (s === all[0]) {
      if (s.headings.includes("Images")) problems.push(`${where}: unreleased work has no image digests yet`);
      continue;
    }
    const { rows, bad } = imageRows(s.body);
    for (const line of bad) problems.push(`${where}: an Images row is not | \`repository\` | \`tag\` | \`sha256:…\` | \`hex\` or container image |: ${line}`);
    for (const repository of packaged) {
      if (!rows.some((r) => r.repository === repository)) problems.push(`${where}: no image digest recorded for ${repository}`);
    }
    for (const r of rows) if (r.tag !== s.name) problems.push(`${where}: ${r.repository} is tagged ${r.tag}, not the release's version`);
  }
  for (let i = 1; i < released.length; i++) {
    if (compareVersions(released[i - 1]!.name, released[i]!.name) <= 0) {
      problems.push(`line ${released[i]!.line}: [${released[i]!.name}] is not older than the section above it ([${released[i - 1]!.name}])`);
    }
  }
  return problems;
}

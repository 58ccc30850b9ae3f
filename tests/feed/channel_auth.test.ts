// The feed's channel is mutual TLS and answers each caller only the targets it may read: the
// real feed (its mesh from a file), real TLS clients holding real certificates (tests/support/
// feed_tls.ts). A caller with no mesh identity (plain HTTP, TLS without a certificate, a
// certificate of another root, one without a SPIFFE id) gets nothing; a mesh identity gets
// only the targets that list it (403 otherwise, an unknown target the same); every refusal is
// counted by reason. The operator's port serves no /delta. The feed's certificate files are
// re-read when they change: new connections see the new certificate (or trust bundle), no
// restart; a broken set is refused, counted, and the previous one stays.
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { loadCa } from "../support/certs.js";
import { channelGet, FEED_IDENTITY, feedChannelFiles, IMPOSTOR_DIR, impostorCerts, meshCert, type ChannelAnswer } from "../support/feed_tls.js";
import { REPO_ROOT } from "../support/paths.js";
import type { PemPair } from "../support/certs.js";
import { decodeMessage } from "./delta_wire_decode.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";

const POD = `apiVersion: v1
kind: Pod
metadata: { namespace: default, name: httpbin-0, labels: { security.istio.io/tlsMode: istio } }
spec: { serviceAccountName: httpbin }
status: { phase: Running, podIP: 10.1.0.11, conditions: [{ type: Ready, status: "True" }] }
`;
const OTHER_PRINCIPAL = "cluster.local/ns/default/sa/not-the-feed";

describe("the feed's channel: mutual TLS, each caller only its targets", () => {
  let run: FeedRun;
  let dir: string;
  let impostors: Awaited<ReturnType<typeof impostorCerts>>;
  const files = { certFile: "", keyFile: "", caFile: "" };

  const refused = async (reason: string) => {
    const text = await (await fetch(`${run.base}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith(`feed_channel_refused_total{reason="${reason}"} `));
    return line ? Number(line.split(" ")[1]) : 0;
  };
  const as = (identity: PemPair | null, path = "/delta/mesh?epoch=0&version=0") => channelGet(run.channel + path, identity);

  before(async () => {
    impostors = await impostorCerts();
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "channel-auth-"));
    mkdirSync(join(dir, "mesh"));
    writeFileSync(join(dir, "mesh", "pod.yaml"), POD);
    // The feed's files in a directory of the test's own, so that rotating them touches nothing shared.
    const shipped = feedChannelFiles();
    for (const [k, from] of Object.entries(shipped)) {
      const to = join(dir, k.replace("File", ".pem"));
      copyFileSync(from, to);
      files[k as keyof typeof files] = to;
    }
    run = await runFeed(
      [{ id: "cluster1", files: join(dir, "mesh") }],
      [
        { name: "mesh", filter: "passthrough_mtls" },
        { name: "other", filter: "passthrough_mtls", readers: [OTHER_PRINCIPAL] },
      ],
      { channel: { ...files, reloadMs: 100 } },
    );
    await eventually("the first version", 20_000, async () => ((await as(meshCert("sidecar"))).status === 200 ? true : undefined), 100);
  });

  after(async () => {
    await run?.feed.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the mesh sidecar listed as the target's reader gets its full model and its snapshot", async () => {
    const a = await as(meshCert("sidecar"));
    assert.equal(a.status, 200);
    const m = decodeMessage(a.body);
    assert.equal(m.kind, 1);
    assert.ok(m.records.length >= 1, "the pod's workload");
    const snap = await as(meshCert("sidecar"), "/snapshot/mesh");
    assert.equal(snap.status, 200);
    assert.match(snap.body.toString(), /"addresses":\["10\.1\.0\.11"\]/);
  });

  it("plain HTTP to the channel gets nothing: the handshake fails, counted", async () => {
    const before = await refused("handshake");
    const port = new URL(run.channel).port;
    const answer = await fetch(`http://127.0.0.1:${port}/delta/mesh?epoch=0&version=0`).then(
      async (r) => `HTTP ${r.status} ${(await r.arrayBuffer()).byteLength} bytes`,
      (e: Error) => `failed: ${e.message}`,
    );
    assert.match(answer, /^failed/, answer);
    await eventually("the handshake refusal counted", 5_000, async () => ((await refused("handshake")) > before ? true : undefined));
  });

  for (const [what, pick, reason] of [
    ["TLS without a client certificate", () => null, "no_certificate"],
    ["a certificate of another root (carrying the sidecar's own SPIFFE id)", () => impostors.otherRootSidecar, "untrusted"],
    ["a certificate of the mesh root without a SPIFFE id", () => impostors.meshNoSpiffe, "no_spiffe_id"],
  ] as const) {
    it(`${what}: 403, nothing of the mesh, counted as ${reason}`, async () => {
      const before = await refused(reason);
      for (const path of ["/delta/mesh?epoch=0&version=0", "/snapshot/mesh", "/delta/other?epoch=0&version=0"]) {
        const a: ChannelAnswer = await as(pick(), path);
        assert.equal(a.status, 403, `${path}: ${a.body}`);
        assert.match(a.body.toString(), new RegExp(`^refused \\(${reason}\\)`));
        assert.doesNotMatch(a.body.toString(), /10\.1\.0\.11/);
      }
      assert.equal(await refused(reason), before + 3);
    });
  }

  it("a mesh identity reads only the targets that list it; another target (or one that does not exist) is 403, counted", async () => {
    const before = await refused("not_reader");
    // The sidecar may read "mesh", not "other"; the other workload the reverse.
    assert.equal((await as(meshCert("sidecar"), "/delta/other?epoch=0&version=0")).status, 403);
    assert.equal((await as(meshCert("sidecar"), "/snapshot/other")).status, 403);
    assert.equal((await as(impostors.meshOtherIdentity, "/delta/mesh?epoch=0&version=0")).status, 403);
    assert.equal((await as(impostors.meshOtherIdentity, "/delta/other?epoch=0&version=0")).status, 200);
    const unknown = await as(meshCert("sidecar"), "/delta/nope?epoch=0&version=0");
    assert.equal(unknown.status, 403);
    assert.match(unknown.body.toString(), /spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep may not read target "nope"/);
    assert.equal(await refused("not_reader"), before + 4);
  });

  it("a target has one spelling: encoded, dot-segment, absolute-form and nested spellings are 404, never another target's answer", async () => {
    // The other workload may read "other", not "mesh": no spelling of "mesh" reaches it.
    for (const path of ["/delta/%6Desh?epoch=0&version=0", "/delta/other/../mesh?epoch=0&version=0", "/delta/./mesh", "/delta//mesh", "/delta/other%2F..%2Fmesh", "/delta/mesh/"]) {
      const a = await channelGet(run.channel, impostors.meshOtherIdentity, {}, undefined, path);
      assert.equal(a.status, 404, `${path}: ${a.status} ${a.body.toString().slice(0, 80)}`);
    }
    // Nor does the sidecar reach "other" by another spelling, or "mesh" in absolute form.
    for (const path of ["/delta/%6Fther?epoch=0&version=0", "/snapshot/mesh/../other", "https://feed/delta/mesh?epoch=0&version=0"]) {
      const a = await channelGet(run.channel, meshCert("sidecar"), {}, undefined, path);
      assert.equal(a.status, 404, `${path}: ${a.status}`);
    }
    // The query is read as written: a wait that is not a number is refused by name.
    const bad = await as(meshCert("sidecar"), "/delta/mesh?epoch=0&version=0&wait=3%30x");
    assert.equal(bad.status, 400);
    assert.match(bad.body.toString(), /^wait: expected a non-negative integer/);
  });

  it("the operator's plain port serves every snapshot and the metrics, never /delta", async () => {
    assert.equal((await fetch(`${run.base}/delta/mesh?epoch=0&version=0`)).status, 404);
    assert.equal((await fetch(`${run.base}/snapshot/other`)).status, 200);
    assert.equal((await fetch(`${run.base}/healthz`)).status, 200);
  });

  it("rotated certificate files are served to new connections without a restart; a broken set is refused and the previous stays", async () => {
    const first = await as(meshCert("sidecar"));
    assert.equal(first.status, 200);
    const metrics = async (name: string) => Number(/\s(\d+)$/.exec((await (await fetch(`${run.base}/metrics`)).text()).split("\n").find((l) => l.startsWith(`${name} `)) ?? " 0")?.[1] ?? 0);
    // A half-written rotation: a new certificate whose key is not there yet.
    const ca = await loadCa(join(REPO_ROOT, "build/certs"), "ca", join(dir, "rotated"));
    const next = await ca.issue("feed", [FEED_IDENTITY]);
    const oldKey = readFileSync(files.keyFile);
    writeFileSync(files.certFile, next.cert);
    await eventually("the broken set refused", 5_000, async () => ((await metrics("feed_channel_tls_reload_errors_total")) >= 1 ? true : undefined), 50);
    const during = await as(meshCert("sidecar"));
    assert.equal(during.status, 200);
    assert.equal(during.peerFingerprint, first.peerFingerprint, "the previous set stays in force");
    // The key arrives: the new set is served to the next connection.
    writeFileSync(files.keyFile, next.key);
    const rotated = await eventually("the new certificate served", 5_000, async () => {
      const a = await as(meshCert("sidecar"));
      return a.peerFingerprint !== first.peerFingerprint ? a : undefined;
    }, 50);
    assert.equal(rotated.value.status, 200);
    assert.ok((await metrics("feed_channel_tls_reloads_total")) >= 1);
    assert.notDeepEqual(readFileSync(files.keyFile), oldKey);
  });

  it("a trust bundle re-read: a second root added to caFile is trusted by new connections (a root rotation), removed again it is not", async () => {
    const otherRoot = await as(impostors.otherRootSidecar);
    assert.equal(otherRoot.status, 403);
    const meshRoot = readFileSync(files.caFile, "utf8");
    writeFileSync(files.caFile, meshRoot + readFileSync(join(IMPOSTOR_DIR, "other-ca.crt"), "utf8"));
    await eventually("the second root trusted", 5_000, async () => ((await as(impostors.otherRootSidecar)).status === 200 ? true : undefined), 50);
    assert.equal((await as(meshCert("sidecar"))).status, 200, "the mesh root still trusted");
    writeFileSync(files.caFile, meshRoot);
    await eventually("the second root dropped", 5_000, async () => ((await as(impostors.otherRootSidecar)).status === 403 ? true : undefined), 50);
  });
});

// The channel behind the feed's own Istio sidecar (`channel.identityFrom: istio-sidecar`): the
// real feed serves plain HTTP and takes a request only from the sidecar's inbound source address
// (127.0.0.6 on loopback here, as Istio binds it) and the caller's identity only from the element
// the sidecar appends last to x-forwarded-client-cert. Here a test client plays the sidecar's
// part (source address, header); the real sidecar in front of the real feed is
// tests/istio/envoy_feed_channel.test.ts. A caller's own XFCC elements are never read; a header
// that does not parse whole (an open quote that would swallow the sidecar's element) is refused;
// every refusal is counted by reason; configuration mistakes are one line naming the field.
import assert from "node:assert/strict";
import { request } from "node:http";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseFeedConfig } from "../../feed/src/config.js";
import { parseXfcc, valuesOf } from "../../feed/src/xfcc.js";
import { SIDECAR_PRINCIPAL } from "../support/feed_tls.js";
import { REPO_ROOT } from "../support/paths.js";
import { decodeMessage } from "./delta_wire_decode.js";
import { eventually, runFeed, type FeedRun } from "./harness.js";

const POD = `apiVersion: v1
kind: Pod
metadata: { namespace: default, name: httpbin-0, labels: { security.istio.io/tlsMode: istio } }
spec: { serviceAccountName: httpbin }
status: { phase: Running, podIP: 10.1.0.11, conditions: [{ type: Ready, status: "True" }] }
`;
const FEED_SIDECAR = "spiffe://cluster.local/ns/mesh-feed/sa/mesh-feed";
const SIDECAR_ID = `spiffe://${SIDECAR_PRINCIPAL}`;
const OTHER_PRINCIPAL = "cluster.local/ns/default/sa/other-reader";
/** The element an Istio inbound sidecar appends (APPEND_FORWARD with Subject, URI and DNS). */
const sidecarElement = (uri: string) => `By=${FEED_SIDECAR};Hash=9f2c0e5a1b;Subject="";URI=${uri}`;

interface Answer {
  status: number;
  body: Buffer;
}

/** GET on the plain channel port from `from` (the sidecar's 127.0.0.6, or any other address). */
function get(port: number, path: string, from: string, xfcc?: string | string[]): Promise<Answer> {
  return new Promise((done, fail) => {
    const req = request({ host: "127.0.0.1", port, path, localAddress: from, headers: xfcc === undefined ? {} : { "x-forwarded-client-cert": xfcc } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => done({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
    });
    req.on("error", fail);
    req.end();
  });
}

describe("the channel behind the feed's Istio sidecar: identity from the sidecar's XFCC element", () => {
  let run: FeedRun;
  let dir: string;
  let port: number;

  const refused = async (reason: string) => {
    const text = await (await fetch(`${run.base}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith(`feed_channel_refused_total{reason="${reason}"} `));
    return line ? Number(line.split(" ")[1]) : 0;
  };
  const asSidecar = (path: string, xfcc?: string | string[]) => get(port, path, "127.0.0.6", xfcc);

  before(async () => {
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    dir = mkdtempSync(join(REPO_ROOT, ".tmp", "channel-istio-"));
    mkdirSync(join(dir, "mesh"));
    writeFileSync(join(dir, "mesh", "pod.yaml"), POD);
    run = await runFeed(
      [{ id: "cluster1", files: join(dir, "mesh") }],
      [
        { name: "mesh", filter: "passthrough_mtls" },
        { name: "other", filter: "passthrough_mtls", readers: [OTHER_PRINCIPAL] },
      ],
      // The harness's TLS fields are not this mode's: undefined drops them from the file.
      { channel: { identityFrom: "istio-sidecar", address: "0.0.0.0", certFile: undefined, keyFile: undefined, caFile: undefined, reloadMs: undefined } },
    );
    port = run.feed.channelPort ?? 0;
    await eventually("the first version", 20_000, async () => ((await asSidecar("/delta/mesh?epoch=0&version=0", sidecarElement(SIDECAR_ID))).status === 200 ? true : undefined), 100);
  });

  after(async () => {
    await run?.feed.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("a reader's identity in the sidecar's element gets its full model and its snapshot, in clear", async () => {
    const a = await asSidecar("/delta/mesh?epoch=0&version=0", sidecarElement(SIDECAR_ID));
    assert.equal(a.status, 200);
    const m = decodeMessage(a.body);
    assert.equal(m.kind, 1);
    assert.ok(m.records.length >= 1, "the pod's workload");
    const snap = await asSidecar("/snapshot/mesh", sidecarElement(SIDECAR_ID));
    assert.equal(snap.status, 200);
    assert.match(snap.body.toString(), /"addresses":\["10\.1\.0\.11"\]/);
  });

  it("a forged element before the sidecar's is never read: the sidecar's identity decides, both ways", async () => {
    const before = await refused("not_reader");
    // The caller claims other-reader; the sidecar verified the demo sidecar: `other` is refused ...
    const forged = await asSidecar("/delta/other?epoch=0&version=0", `URI=spiffe://${OTHER_PRINCIPAL},${sidecarElement(SIDECAR_ID)}`);
    assert.equal(forged.status, 403);
    assert.equal(forged.body.toString(), `refused (not_reader): ${SIDECAR_ID} may not read target "other"\n`);
    // ... and `mesh`, which the forged identity may not read, is served to the verified one.
    const real = await asSidecar("/delta/mesh?epoch=0&version=0", `By=${FEED_SIDECAR};URI=spiffe://${OTHER_PRINCIPAL},${sidecarElement(SIDECAR_ID)}`);
    assert.equal(real.status, 200);
    // The same with the forged element on its own header line (Node joins the lines; Envoy
    // appends to what it received, so its element is still last).
    const twoLines = await asSidecar("/delta/other?epoch=0&version=0", [`URI=spiffe://${OTHER_PRINCIPAL}`, sidecarElement(SIDECAR_ID)]);
    assert.equal(twoLines.status, 403);
    assert.equal(await refused("not_reader"), before + 2);
  });

  it("an open quote in the caller's part, which would swallow the sidecar's element, is refused whole", async () => {
    const before = await refused("bad_forwarded_identity");
    // A parser that split on every comma would take the sidecar's element; one that honoured the
    // quote would read the caller's URI. Neither answer is taken.
    const a = await asSidecar("/delta/other?epoch=0&version=0", `URI=spiffe://${OTHER_PRINCIPAL};Subject="\\",${sidecarElement(SIDECAR_ID)}`);
    assert.equal(a.status, 403);
    assert.match(a.body.toString(), /refused \(bad_forwarded_identity\): x-forwarded-client-cert: a quoted value is never closed/);
    assert.equal(await refused("bad_forwarded_identity"), before + 1);
  });

  it("a request from any address but the sidecar's is refused and counted, whatever header it carries", async () => {
    const before = await refused("not_sidecar");
    const a = await get(port, "/delta/mesh?epoch=0&version=0", "127.0.0.1", sidecarElement(SIDECAR_ID));
    assert.equal(a.status, 403);
    assert.match(a.body.toString(), /refused \(not_sidecar\): connection from 127\.0\.0\.1, not from the sidecar \(127\.0\.0\.6, ::6\)/);
    assert.equal(await refused("not_sidecar"), before + 1);
  });

  it("no header (the sidecar verified no certificate), or an element without exactly one SPIFFE URI, gets nothing", async () => {
    const none = await refused("no_forwarded_identity");
    const noId = await refused("no_spiffe_id");
    assert.equal((await asSidecar("/delta/mesh?epoch=0&version=0")).status, 403);
    assert.equal((await asSidecar("/delta/mesh?epoch=0&version=0", `By=${FEED_SIDECAR};Hash=00;Subject="";DNS=sleep`)).status, 403);
    assert.equal((await asSidecar("/delta/mesh?epoch=0&version=0", `${sidecarElement(SIDECAR_ID)};URI=spiffe://cluster.local/ns/x/sa/y`)).status, 403);
    assert.equal((await asSidecar("/delta/mesh?epoch=0&version=0", sidecarElement("https://example.com/sleep"))).status, 403);
    // The sidecar's element has no URI even though the caller's had one: still nothing.
    assert.equal((await asSidecar("/delta/mesh?epoch=0&version=0", `URI=${SIDECAR_ID},By=${FEED_SIDECAR};Subject=""`)).status, 403);
    assert.equal(await refused("no_forwarded_identity"), none + 1);
    assert.equal(await refused("no_spiffe_id"), noId + 4);
  });
});

describe("x-forwarded-client-cert: Envoy's format, parsed whole", () => {
  it("elements by comma, pairs by semicolon, quoted values keep , ; = and escaped quotes", () => {
    const p = parseXfcc(`By=spiffe://a/ns/x/sa/y;Subject="CN=z,O=\\"q\\";L=w";URI=spiffe://a/ns/b/sa/c, Hash=1;uri=spiffe://d/ns/e/sa/f;DNS=f.e`);
    assert.ok(p.ok);
    assert.equal(p.elements.length, 2);
    assert.deepEqual(valuesOf(p.elements[0], "subject"), [`CN=z,O="q";L=w`]);
    assert.deepEqual(valuesOf(p.elements[0], "URI"), ["spiffe://a/ns/b/sa/c"]);
    assert.deepEqual(valuesOf(p.elements[1], "URI"), ["spiffe://d/ns/e/sa/f"]);
  });

  it("refuses an unclosed quote, a pair without =, an empty key", () => {
    for (const [header, detail] of [
      [`URI="spiffe://a,By=b`, /never closed/],
      [`URI=spiffe://a;junk`, /a pair without "="/],
      [`=spiffe://a`, /a pair without a key/],
    ] as const) {
      const p = parseXfcc(header);
      assert.ok(!p.ok, header);
      assert.match(p.detail, detail);
    }
  });

  it("costs one pass: a 1 MB header of quoted separators and escapes parses", () => {
    const p = parseXfcc(`${'k="a,b;c=\\"d\\"";'.repeat(1 << 16)}URI=x`);
    assert.ok(p.ok);
    assert.equal(p.elements.length, 1);
    assert.equal(p.elements[0].length, (1 << 16) + 1);
    assert.equal(valuesOf(p.elements[0], "k")[0], 'a,b;c="d"');
  });
});

describe("feed: configuration of the istio-sidecar channel", () => {
  const base = { clusters: [{ id: "c1", kubeconfig: "in-cluster" }], targets: [{ name: "t", filter: "passthrough_mtls" }] };
  const parse = (channel: object) => parseFeedConfig(JSON.stringify({ ...base, channel }), "/etc/feed/feed.yaml");

  it("defaults: the sidecar's inbound sources 127.0.0.6 and ::6, 0.0.0.0:9443, no certificate, no cap per caller", () => {
    const c = parse({ identityFrom: "istio-sidecar" }).channel;
    assert.deepEqual(c && { identityFrom: c.identityFrom, sidecarAddresses: c.sidecarAddresses, address: c.address, port: c.port, certFile: c.certFile, perCaller: c.limits.maxConnectionsPerCaller }, {
      identityFrom: "istio-sidecar",
      sidecarAddresses: ["127.0.0.6", "::6"],
      address: "0.0.0.0",
      port: 9443,
      certFile: "",
      perCaller: 0,
    });
    assert.equal(parse({ certFile: "a", keyFile: "b", caFile: "c" }).channel?.identityFrom, "tls");
  });

  for (const [what, channel, message] of [
    ["an unknown identity source", { identityFrom: "header" }, /channel\.identityFrom: expected "tls" or "istio-sidecar", not "header"/],
    ["certificate files behind the sidecar", { identityFrom: "istio-sidecar", certFile: "a" }, /channel\.certFile: unknown field/],
    ["a cap per caller behind the sidecar", { identityFrom: "istio-sidecar", limits: { maxConnectionsPerCaller: 5 } }, /channel\.limits\.maxConnectionsPerCaller: unknown field/],
    ["a sidecar address that is no IP", { identityFrom: "istio-sidecar", sidecarAddresses: ["localhost"] }, /channel\.sidecarAddresses: expected a non-empty list of IP addresses/],
    ["no sidecar address", { identityFrom: "istio-sidecar", sidecarAddresses: [] }, /channel\.sidecarAddresses: expected a non-empty list of IP addresses/],
  ] as const) {
    it(`refuses ${what} with one line naming the field`, () => {
      assert.throws(() => parse(channel), (e: unknown) => message.test((e as Error).message) && !(e as Error).message.includes("\n"));
    });
  }
});

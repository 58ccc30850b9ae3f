// A filter VM (the compiled module in the project's proxy-wasm host) whose feed client polls a
// DeltaChannel directly: each held poll is answered with what the feed's /delta handler would
// send for that request (its query parsed by the handler's own parser), and every byte is
// counted. For protocol tests that need a real VM but not the HTTP server.
import { httpResponse } from "../../host/http_call.js";
import { ProxyWasmHost } from "../../host/index.js";
import type { DeltaAnswer, DeltaChannel } from "../../feed/src/delta/channel.js";
import { clientState } from "../../feed/src/http.js";
import { BUCKET_COUNT } from "../../feed/src/delta/digest.js";
import { renderPluginConfig } from "../../feed/src/render.js";

const CLUSTER = "feed";
const CONTENT_TYPE = "application/x-mesh-delta";

export class ChannelVm {
  readonly host: ProxyWasmHost;
  /** Bytes of every answer this VM was given. */
  bytes = 0;
  /** Bytes the VM sent in POST bodies (its bucket digests). */
  sent = 0;
  /** The method of each poll answered. */
  readonly methods: string[] = [];
  private skipMs = 0;

  constructor(wasm: Uint8Array, readonly name: string) {
    const meshFeed = { cluster: CLUSTER, target: "mesh", waitSeconds: 60 };
    const configuration = renderPluginConfig("passthrough_mtls", "", { meshFeed }, { workloads: [], services: [] } as never).text;
    this.host = ProxyWasmHost.fromBytes(wasm, {
      rootId: "passthrough_mtls",
      vmId: name,
      pluginConfiguration: configuration,
      logLevel: "warn",
      canary: false,
      clusters: { [CLUSTER]: {} },
      clock: () => BigInt(Date.now() + this.skipMs) * 1_000_000n,
    });
    if (!this.host.start()) throw new Error(`${name}: configuration refused: ${this.host.startFailure}`);
    this.host.tick();
  }

  /** The VM's held poll, after letting a waiting client (a backoff, a quick no-change) send it. */
  private pending() {
    if (this.host.pendingHttpCalls.length === 0) {
      this.skipMs += 60_000;
      this.host.tick();
    }
    const calls = this.host.pendingHttpCalls;
    if (calls.length !== 1) throw new Error(`${this.name}: expected one poll in flight, found ${calls.length}`);
    return calls[0];
  }

  /** The query of the VM's next poll (epoch, version, format, digest). */
  nextQuery(): URLSearchParams {
    return new URL(this.pending().path, "http://feed").searchParams;
  }

  /** Answers the VM's next poll from `channel` as GET /delta would; returns the answer. */
  pump(channel: DeltaChannel): DeltaAnswer {
    const call = this.pending();
    const url = new URL(call.path, "http://feed");
    let client = clientState(url.searchParams);
    if (typeof client === "string") throw new Error(`${this.name}: the feed would answer 400: ${client}`);
    this.methods.push(call.method);
    if (call.method === "POST") {
      if (call.body.length !== BUCKET_COUNT * 8 || url.searchParams.get("repair") !== "1") throw new Error(`${this.name}: a POST of ${call.body.length} bytes`);
      this.sent += call.body.length;
      const body = Buffer.from(call.body);
      const buckets = new BigUint64Array(BUCKET_COUNT);
      for (let i = 0; i < BUCKET_COUNT; i++) buckets[i] = body.readBigUInt64LE(i * 8);
      client = { ...client, buckets };
    }
    const a = channel.answer(Number(url.searchParams.get("epoch")), Number(url.searchParams.get("version")), client);
    this.bytes += a.body.length;
    this.host.respondHttpCall(call.token, httpResponse(200, { "content-type": CONTENT_TYPE }, a.body));
    return a;
  }

  /** Answers the VM's next poll with `body` as it is (crafted messages); returns the poll's method. */
  respond(body: Uint8Array): string {
    const call = this.pending();
    this.bytes += body.length;
    this.host.respondHttpCall(call.token, httpResponse(200, { "content-type": CONTENT_TYPE }, body));
    return call.method;
  }

  /** Answers the VM's next poll with an error status (a replica gone: Envoy's 503; a 4xx: the feed refused the request); returns the poll's method. */
  fail(status: number): string {
    const call = this.pending();
    this.host.respondHttpCall(call.token, httpResponse(status, { "content-type": "text/plain" }, Buffer.from("upstream connect error")));
    return call.method;
  }

  metric(name: string): number {
    return this.host.metrics().get(`passthrough_mtls.feed.${name}`) ?? 0;
  }

  /** The refusal lines the VM logged. */
  warnings(): string[] {
    return this.host.logs().filter((l) => l.level === "warn" || l.level === "error").map((l) => l.message);
  }

  dispose(): void {
    this.host.dispose();
  }
}

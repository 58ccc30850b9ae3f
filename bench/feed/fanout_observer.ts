// One more poller, in the driver, that decodes the records of every delta it gets: it names
// the version that first carried each churn write (the write's new pod address, churnIp(w), is
// unique to it). It polls as the fleet's pollers do but retries every 100 ms (not the
// filters' backoff) and, holding no bucket digests, answers an ask-buckets by asking for a full
// model (it is stopped before the restart, so it never is asked). Coalescing can only make it name a later version
// than the first that carried a write, never an earlier one: propagation is never understated.
import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { decodeMessage } from "../../tests/feed/delta_wire_decode.js";
import { FEED_IDENTITY, meshCert, MESH_CA_FILE } from "../../tests/support/feed_tls.js";
import { CONTENT_TYPE, NOTHING, pollPath, readHeader, take, type Position } from "./fanout_protocol.js";
import { now } from "./fanout_poller.js";

export class ChurnObserver {
  at: Position = NOTHING;
  /** churn address → (version that first carried it, when the observer got it). */
  readonly carried = new Map<string, { version: number; at: number }>();
  private stopped = false;
  private readonly agent: Agent;
  private readonly done: Promise<void>;

  constructor(
    private readonly channel: string,
    private readonly target: string,
    private readonly isChurnAddress: (address: string) => boolean,
  ) {
    const id = meshCert("sidecar");
    this.agent = new Agent({
      keepAlive: true,
      maxSockets: 1,
      ca: readFileSync(MESH_CA_FILE),
      cert: id.cert,
      key: id.key,
      checkServerIdentity: (_host, cert) => (cert.subjectaltname?.split(", ").includes(`URI:${FEED_IDENTITY}`) ? undefined : new Error(`not the feed: ${cert.subjectaltname}`)),
    });
    this.done = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.agent.destroy();
    await this.done;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      try {
        const body = await this.get(pollPath(this.target, this.at, 25));
        const header = readHeader(body.subarray(0, 56), body.length);
        if (typeof header === "string") throw new Error(header);
        const next = take(this.at, header);
        // It keeps no bucket digests: asked for them, it asks for a full model instead.
        if (typeof next === "string" || header.kind === "ask-buckets") {
          this.at = NOTHING;
          continue;
        }
        if (header.kind === "delta") {
          const t = now();
          for (const r of decodeMessage(body).records) {
            if (r.type !== "workload") continue;
            for (const a of r.addresses) if (this.isChurnAddress(a) && !this.carried.has(a)) this.carried.set(a, { version: header.version, at: t });
          }
        }
        this.at = next;
      } catch {
        if (!this.stopped) await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  private get(path: string): Promise<Buffer> {
    const url = new URL(this.channel);
    return new Promise((done, fail) => {
      const req = request({ host: url.hostname, port: url.port, path, agent: this.agent, headers: { accept: CONTENT_TYPE } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => (res.statusCode === 200 ? done(Buffer.concat(chunks)) : fail(new Error(`HTTP ${res.statusCode}`))));
        res.on("error", fail);
        res.on("close", () => (res.complete ? undefined : fail(new Error("reset"))));
      });
      req.setTimeout(30_000, () => req.destroy(new Error("timeout")));
      req.on("error", fail);
      req.end();
    });
  }
}

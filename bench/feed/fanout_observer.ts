// More pollers, in the driver, that decode the records of every delta they get: together they
// name the version that first carried each churn write (the write's new pod address,
// churnIp(w), is unique to it). Each polls as the fleet's pollers do, on its own connection and
// from its own position, but retries every 100 ms (not the filters' backoff) and, holding no
// bucket digests, answers an ask-buckets by asking for a full model (they are stopped before the
// restart, so none is asked).
//
// An observer sees only the versions it is answered with: under churn, one answer per round of
// the feed's queue (~2,000 answers), while the feed publishes a version every ~20 ms. The
// version it names for a write is then the one current at its next turn, up to a round later
// than the first that carried the write, and every poller is timed to that later version.
// `count` observers at their own places in the queue see a version each about a round/count
// apart: the earliest sighting is kept, which is closer to the first version carrying the write.
// Started together they would sit side by side in the queue and see the same versions, so each
// but the first waits a random 0-JITTER_MS before every poll: they drift apart within seconds
// and stay spread. The first polls at once after each answer, as the one observer did.
// A sighting can only name that version or a later one, never an earlier one: propagation is
// never understated, with one observer or many (--observers=1 measures as before 2026-12-05 11:00).
import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { decodeMessage } from "../../tests/feed/delta_wire_decode.js";
import { FEED_IDENTITY, meshCert, MESH_CA_FILE } from "../../tests/support/feed_tls.js";
import { NOTHING, CONTENT_TYPE, pollPath, readHeader, take, type Position } from "./fanout_protocol.js";
import { now } from "./fanout_poller.js";

/** The observers a propagation case runs by default (--observers). */
export const OBSERVERS = 8;
/** The longest an observer waits before a poll, drawn anew each time (a few percent of a round). */
const JITTER_MS = 50;

export class ChurnObserver {
  /** churn address → (the least version an observer saw carrying it, when an observer first held it). */
  readonly carried = new Map<string, { version: number; at: number }>();
  private readonly loops: ObserverLoop[];

  constructor(channel: string, target: string, isChurnAddress: (address: string) => boolean, count = OBSERVERS) {
    this.loops = Array.from({ length: count }, (_, i) => new ObserverLoop(channel, target, isChurnAddress, this.carried, i === 0 ? 0 : JITTER_MS));
  }

  /** What the first observer alone saw (as `carried`): the figures of one observer, beside those of all. */
  get carriedByOne(): Map<string, { version: number; at: number }> {
    return this.loops[0].own;
  }

  async stop(): Promise<void> {
    await Promise.all(this.loops.map((l) => l.stop()));
  }
}

/** One observer: its own connection and position in the feed's queue. */
class ObserverLoop {
  at: Position = NOTHING;
  /** What this observer alone saw: churn address → (version, when). */
  readonly own = new Map<string, { version: number; at: number }>();
  private stopped = false;
  private readonly agent: Agent;
  private readonly done: Promise<void>;

  constructor(
    private readonly channel: string,
    private readonly target: string,
    private readonly isChurnAddress: (address: string) => boolean,
    private readonly carried: Map<string, { version: number; at: number }>,
    /** The longest wait before each poll (0: none). */
    private readonly jitterMs: number,
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
        if (this.jitterMs > 0) await new Promise((r) => setTimeout(r, Math.random() * this.jitterMs));
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
            for (const a of r.addresses) {
              if (!this.isChurnAddress(a)) continue;
              // The least version any observer saw carrying it, and the first time one held it.
              const seen = this.carried.get(a);
              if (!seen) this.carried.set(a, { version: header.version, at: t });
              else if (header.version < seen.version) seen.version = header.version;
              // And this observer's own first sighting (one observer alone: the figures before 2026-12-05 11:00).
              if (!this.own.has(a)) this.own.set(a, { version: header.version, at: t });
            }
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

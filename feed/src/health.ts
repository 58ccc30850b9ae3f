// /healthz and /readyz on a port of their own, served by a worker thread: the feed's own event
// loop is busy for seconds at a time when it renders a large mesh (a snapshot's JSON and its
// check in the compiled filter, a full message, thousands of TLS handshakes), and a liveness
// probe that waits behind that restarts a feed that is working (feed/docs/server-limits.md has
// the measurement). The worker never touches the mesh: the main thread writes a heartbeat
// (its clock, every HEARTBEAT_MS) and its readiness into shared memory, and the worker answers
//   GET /healthz  200 while the heartbeat is younger than staleAfterMs; 503 once the main loop
//                 has not turned for that long (a hang, which a render of seconds is not)
//   GET /readyz   200 when the feed is ready (controller.ready()) and alive; 503 with the reason
import { Worker } from "node:worker_threads";
import type { HealthConfig } from "./config.js";

const HEARTBEAT_MS = 200;

/** The worker's code: plain JavaScript, so that it runs without the TypeScript loader. */
const WORKER = `
const { workerData, parentPort } = require("node:worker_threads");
const { createServer } = require("node:http");
const { beat, ready, staleAfterMs, address, port } = workerData;
const clock = new BigInt64Array(beat);
const flag = new Int32Array(ready);
let reason = "starting";
parentPort.on("message", (m) => { if (typeof m === "string") reason = m; });
const server = createServer({ headersTimeout: 5000, requestTimeout: 5000, keepAliveTimeout: 5000 }, (req, res) => {
  const stalled = Date.now() - Number(Atomics.load(clock, 0));
  const alive = stalled < staleAfterMs;
  const path = (req.url || "/").split("?")[0];
  if (path === "/healthz") {
    res.writeHead(alive ? 200 : 503, { "content-type": "text/plain" }).end(alive ? "ok\\n" : "event loop stalled for " + stalled + " ms\\n");
  } else if (path === "/readyz") {
    const ok = alive && Atomics.load(flag, 0) === 1;
    res.writeHead(ok ? 200 : 503, { "content-type": "text/plain" }).end((alive ? reason : "event loop stalled for " + stalled + " ms") + "\\n");
  } else {
    res.writeHead(404, { "content-type": "text/plain" }).end("not found\\n");
  }
});
server.maxConnections = 32;
server.once("error", (e) => parentPort.postMessage({ error: e.message }));
server.listen(port, address, () => parentPort.postMessage({ port: server.address().port }));
`;

export class HealthServer {
  private worker: Worker | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly beat = new SharedArrayBuffer(8);
  private readonly readyFlag = new SharedArrayBuffer(4);
  private lastReason = "";

  constructor(
    private readonly config: HealthConfig,
    private readonly ready: () => { ready: boolean; reason: string },
  ) {}

  private tick(): void {
    Atomics.store(new BigInt64Array(this.beat), 0, BigInt(Date.now()));
    const r = this.ready();
    Atomics.store(new Int32Array(this.readyFlag), 0, r.ready ? 1 : 0);
    if (r.reason !== this.lastReason) {
      this.lastReason = r.reason;
      this.worker?.postMessage(r.reason);
    }
  }

  /** Starts the worker; resolves with the port it listens on. */
  async listen(): Promise<number> {
    this.tick();
    const worker = new Worker(WORKER, {
      eval: true,
      workerData: { beat: this.beat, ready: this.readyFlag, staleAfterMs: this.config.staleAfterMs, address: this.config.address, port: this.config.port },
    });
    this.worker = worker;
    worker.unref();
    const port = await new Promise<number>((done, fail) => {
      worker.once("message", (m: { port?: number; error?: string }) => (m.port !== undefined ? done(m.port) : fail(new Error(`health: ${m.error}`))));
      worker.once("error", fail);
    });
    this.lastReason = "";
    this.tick();
    this.timer = setInterval(() => this.tick(), HEARTBEAT_MS);
    this.timer.unref();
    return port;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.worker?.terminate();
  }
}

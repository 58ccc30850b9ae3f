// The snapshot path's check off the event loop. Configuring a fresh VM of the compiled filter
// with a whole target's JSON is the largest part of a snapshot render (about 0.9 s of ~1.4 s at
// 100k pods unloaded, bench/feed/README.md); on the event loop it held every long poll, delta
// render and operator request behind it. Here it runs in one worker thread: the text goes in,
// the verdict comes out, the event loop keeps serving meanwhile.
//
// The worker is this same module (the feed's esbuild bundle or, under tsx, this file), started
// with `workerData.role`; it keeps one FilterValidator (module bytes read once) and answers
// checks one at a time, in order. It ends itself after `idleMs` without a check, so a feed
// whose targets are all on the channel carries no second V8 heap. A worker that dies fails the
// checks it held (refused: nothing is published, the previous snapshot stays) and the next
// check starts a new one.
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import type { FilterName } from "./render.js";
import { FilterValidator, type Verdict } from "./validate.js";

const ROLE = "mesh-feed-filter-check";

interface CheckRequest {
  id: number;
  filter: FilterName;
  wasmPath: string;
  configuration: string;
}

interface CheckAnswer {
  id: number;
  verdict: Verdict;
}

/** Checks rendered configurations in a worker thread (see the file's comment). */
export class WorkerValidator {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, (v: Verdict) => void>();
  private idleTimer: NodeJS.Timeout | undefined;

  /** `wasmFor(filter)` is the compiled module's path; `idleMs`: the worker ends after that long without a check. */
  constructor(
    private readonly wasmFor: (filter: FilterName) => string,
    private readonly idleMs = 30_000,
  ) {}

  check(filter: FilterName, configuration: string): Promise<Verdict> {
    const started = performance.now();
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const worker = this.started();
    const id = this.nextId++;
    return new Promise<Verdict>((done) => {
      this.pending.set(id, done);
      const request: CheckRequest = { id, filter, wasmPath: this.wasmFor(filter), configuration };
      try {
        worker.postMessage(request);
      } catch (error) {
        this.pending.delete(id);
        done({ ok: false, error: `filter check worker: ${(error as Error).message}`, ms: performance.now() - started });
      }
    });
  }

  /** Ends the worker now (the feed stopping); checks it held are refused. */
  async stop(): Promise<void> {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
    this.failPending("the feed is stopping");
  }

  /** Whether a worker thread runs now (tests). */
  get running(): boolean {
    return this.worker !== undefined;
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const w = workerOfThisModule();
    // The feed never waits on this thread to exit.
    w.unref();
    w.on("message", (a: CheckAnswer) => {
      const done = this.pending.get(a.id);
      if (!done) return;
      this.pending.delete(a.id);
      done(a.verdict);
      if (this.pending.size === 0 && this.worker === w) this.armIdle(w);
    });
    const gone = (why: string) => {
      if (this.worker !== w) return;
      this.worker = undefined;
      this.failPending(why);
    };
    w.on("error", (error) => gone(`filter check worker failed: ${error.message}`));
    w.on("exit", (code) => gone(`filter check worker exited (code ${code})`));
    this.worker = w;
    return w;
  }

  private armIdle(w: Worker): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.worker !== w || this.pending.size > 0) return;
      this.worker = undefined;
      void w.terminate();
    }, this.idleMs);
    this.idleTimer.unref();
  }

  private failPending(why: string): void {
    for (const done of this.pending.values()) done({ ok: false, error: why, ms: 0 });
    this.pending.clear();
  }
}

/**
 * A worker thread running this module. From the feed's bundle (the image), the bundle file
 * itself; from the TypeScript sources (tests, `npm run feed`), through tsx's loader, which a
 * worker does not inherit from its parent's `--import tsx`.
 */
function workerOfThisModule(): Worker {
  const self = import.meta.url;
  const options = { workerData: { role: ROLE } };
  if (!self.endsWith(".ts")) return new Worker(new URL(self), options);
  const tsx = import.meta.resolve("tsx/esm/api");
  const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(self)}); });`;
  return new Worker(boot, { ...options, eval: true });
}

/** The worker's side: one validator, checks answered in arrival order. */
function serveChecks(): void {
  const port = parentPort;
  if (!port) return;
  const paths = new Map<FilterName, string>();
  const validator = new FilterValidator((filter) => paths.get(filter) ?? "");
  port.on("message", (q: CheckRequest) => {
    paths.set(q.filter, q.wasmPath);
    let verdict: Verdict;
    try {
      verdict = validator.check(q.filter, q.configuration);
    } catch (error) {
      verdict = { ok: false, error: `filter check failed: ${(error as Error).message}`, ms: 0 };
    }
    port.postMessage({ id: q.id, verdict } satisfies CheckAnswer);
  });
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === ROLE) serveChecks();

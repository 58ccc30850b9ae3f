// The snapshot path's heavy work off the event loop: configuring a fresh VM of the compiled
// filter with a whole target's JSON (about 0.9 s of ~1.4 s at 100k pods unloaded,
// bench/feed/README.md), and putting that JSON together. On the event loop either held every
// long poll, delta render and operator request behind it. Here they run in one worker thread:
//   - `check`: a rendered text goes in, the verdict comes out;
//   - `render`: the event loop makes each object's JSON in slices (render_slices.ts) and posts
//     them as they are made; the worker sorts them, joins them (render.ts joinConfig), hashes the
//     text and, unless the digest is the one already published, checks it. The text comes back
//     with the verdict.
//
// The worker is this same module (the feed's esbuild bundle or, under tsx, this file), started
// with `workerData.role`; it keeps one FilterValidator (module bytes read once) and answers
// in order. It ends itself after `idleMs` without work, so a feed whose targets are all on the
// channel carries no second V8 heap. A worker that dies fails the work it held (refused:
// nothing is published, the previous snapshot stays) and the next call starts a new one.
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import type { NetworkView } from "./delta/network_view.js";
import { configDigest, joinConfig, pluginHead, type FilterName, type RenderedConfig } from "./render.js";
import { renderViewInSlices, type Section } from "./render_slices.js";
import { FilterValidator, type Verdict } from "./validate.js";
import type { ViewStats } from "./view.js";

const ROLE = "mesh-feed-filter-check";

type Request =
  | { kind: "check"; id: number; filter: FilterName; wasmPath: string; configuration: string }
  | { kind: "begin"; id: number; filter: FilterName; wasmPath: string; head: string; known?: string }
  | { kind: "part"; id: number; section: Section; keys: string[]; texts: string[] }
  | { kind: "end"; id: number };

interface Answer {
  id: number;
  verdict: Verdict;
  /** A render's text (absent when its digest was the `known` one: `unchanged`). */
  rendered?: RenderedConfig;
  unchanged?: boolean;
}

/** A render's outcome: the text and the filter's verdict, or `unchanged` (the digest published already). */
export interface RenderOutcome {
  verdict: Verdict;
  rendered?: RenderedConfig;
  unchanged: boolean;
  stats: ViewStats;
}

/** Checks rendered configurations in a worker thread (see the file's comment). */
export class WorkerValidator {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, (a: Answer) => void>();
  private idleTimer: NodeJS.Timeout | undefined;

  /** `wasmFor(filter)` is the compiled module's path; `idleMs`: the worker ends after that long without a check. */
  constructor(
    private readonly wasmFor: (filter: FilterName) => string,
    private readonly idleMs = 30_000,
  ) {}

  check(filter: FilterName, configuration: string): Promise<Verdict> {
    const started = performance.now();
    const { worker, id, answer } = this.ask();
    this.post(worker, id, { kind: "check", id, filter, wasmPath: this.wasmFor(filter), configuration }, started);
    return answer.then((a) => a.verdict);
  }

  /**
   * A target's snapshot of `view`: `filter`'s configuration with the target's `own` fields,
   * made in slices on the event loop and joined, hashed and checked in the worker. `known`: the
   * digest already published (the same text is not checked again).
   */
  async render(filter: FilterName, network: string, own: Record<string, unknown>, view: NetworkView, known?: string): Promise<RenderOutcome> {
    const started = performance.now();
    const { worker, id, answer } = this.ask();
    const head = JSON.stringify(pluginHead(filter, network, own));
    this.post(worker, id, { kind: "begin", id, filter, wasmPath: this.wasmFor(filter), head, ...(known !== undefined && { known }) }, started);
    const stats = await renderViewInSlices(view, (section, keys, texts) => this.post(worker, id, { kind: "part", id, section, keys, texts }, started));
    this.post(worker, id, { kind: "end", id }, started);
    const a = await answer;
    return { verdict: a.verdict, ...(a.rendered && { rendered: a.rendered }), unchanged: a.unchanged === true, stats };
  }

  /** A new request's id on the running (or a new) worker, and its answer to come. */
  private ask(): { worker: Worker; id: number; answer: Promise<Answer> } {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const worker = this.started();
    const id = this.nextId++;
    const answer = new Promise<Answer>((done) => this.pending.set(id, done));
    return { worker, id, answer };
  }

  /** Posts one message of request `id`; a worker that cannot take it fails the request. */
  private post(worker: Worker, id: number, message: Request, started: number): void {
    try {
      worker.postMessage(message);
    } catch (error) {
      const done = this.pending.get(id);
      this.pending.delete(id);
      done?.({ id, verdict: { ok: false, error: `filter check worker: ${(error as Error).message}`, ms: performance.now() - started } });
    }
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
    w.on("message", (a: Answer) => {
      const done = this.pending.get(a.id);
      if (!done) return;
      this.pending.delete(a.id);
      done(a);
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
    for (const [id, done] of this.pending) done({ id, verdict: { ok: false, error: why, ms: 0 } });
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

/** A render being received: its head and each section's keys and texts, in arrival order. */
interface Receiving {
  filter: FilterName;
  head: string;
  known?: string;
  started: number;
  parts: Record<Section, { keys: string[]; texts: string[] }>;
}

/** The worker's side: one validator, requests answered in arrival order. */
function serveChecks(): void {
  const port = parentPort;
  if (!port) return;
  const paths = new Map<FilterName, string>();
  const validator = new FilterValidator((filter) => paths.get(filter) ?? "");
  const receiving = new Map<number, Receiving>();
  const check = (filter: FilterName, configuration: string): Verdict => {
    try {
      return validator.check(filter, configuration);
    } catch (error) {
      return { ok: false, error: `filter check failed: ${(error as Error).message}`, ms: 0 };
    }
  };
  port.on("message", (q: Request) => {
    if (q.kind === "check") {
      paths.set(q.filter, q.wasmPath);
      port.postMessage({ id: q.id, verdict: check(q.filter, q.configuration) } satisfies Answer);
    } else if (q.kind === "begin") {
      paths.set(q.filter, q.wasmPath);
      receiving.set(q.id, { filter: q.filter, head: q.head, known: q.known, started: performance.now(), parts: { workloads: { keys: [], texts: [] }, services: { keys: [], texts: [] } } });
    } else if (q.kind === "part") {
      const r = receiving.get(q.id);
      if (!r) return;
      const into = r.parts[q.section];
      for (let i = 0; i < q.keys.length; i++) {
        into.keys.push(q.keys[i]);
        into.texts.push(q.texts[i]);
      }
    } else {
      const r = receiving.get(q.id);
      if (!r) return;
      receiving.delete(q.id);
      const text = joinConfig(r.head, inKeyOrder(r.parts.workloads), inKeyOrder(r.parts.services));
      const digest = configDigest(text);
      if (digest === r.known) {
        port.postMessage({ id: q.id, verdict: { ok: true, ms: performance.now() - r.started }, unchanged: true } satisfies Answer);
        return;
      }
      const verdict = check(r.filter, text);
      port.postMessage({ id: q.id, verdict, rendered: { text, bytes: Buffer.byteLength(text), digest } } satisfies Answer);
    }
  });
}

/** The texts ordered by their keys as view.ts orders objects (a plain sort of the uids or hostnames: UTF-16 code units). */
function inKeyOrder(part: { keys: string[]; texts: string[] }): string[] {
  const order = part.keys.map((_, i) => i);
  order.sort((a, b) => (part.keys[a] < part.keys[b] ? -1 : part.keys[a] > part.keys[b] ? 1 : 0));
  return order.map((i) => part.texts[i]);
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === ROLE) serveChecks();

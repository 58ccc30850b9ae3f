// Coalesces bursts of object changes into one render. A render waits until `quietMs` passed
// without a change, but never longer than `maxMs` after the first change of the burst, and
// never runs twice at once (changes during a render schedule the next one).
export interface DebounceOptions {
  quietMs: number;
  maxMs: number;
}

export class Debouncer {
  private firstChange = 0;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private pending = false;
  private stopped = false;

  constructor(
    private readonly options: DebounceOptions,
    private readonly run: () => Promise<void>,
  ) {}

  /** Something changed. */
  poke(): void {
    if (this.stopped) return;
    const now = Date.now();
    if (this.running) {
      this.pending = true;
      return;
    }
    if (this.timer === undefined) this.firstChange = now;
    else clearTimeout(this.timer);
    const deadline = this.firstChange + this.options.maxMs;
    const delay = Math.max(0, Math.min(this.options.quietMs, deadline - now));
    this.timer = setTimeout(() => void this.fire(), delay);
  }

  /** Runs now (start-up, tests), after any render in flight. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.running) await new Promise((r) => setTimeout(r, 5));
    await this.fire();
  }

  private async fire(): Promise<void> {
    this.timer = undefined;
    if (this.stopped) return;
    this.running = true;
    this.pending = false;
    try {
      await this.run();
    } finally {
      this.running = false;
      if (this.pending) this.poke();
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }
}
